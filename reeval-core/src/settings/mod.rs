//! Every setting of a run, read in one place: the command line, the
//! environment and `reeval.toml`, merged once into [`Settings`] by
//! [`Settings::load`] so that preflight (and `-v`) sees all of them.
//!
//! Each option is spelled once, in one row of [`table`]: its field, its
//! flag, its variable, its `reeval.toml` key, the kind of value it takes, its
//! default and its help. The rows are written in a macro (`generate.rs`),
//! which makes from them the fields of [`Args`] (the command line),
//! [`Layer`] (what one source sets) and [`Settings`], what each flag sets,
//! and the merge. Each source is read into a [`Layer`] by the type of each
//! field (`value.rs`): the flags by the parser (`parse.rs`), the variables
//! (`vars.rs`) and `reeval.toml` ([`file`](mod@file)); `--help` and the
//! tables of docs/options.md ([`render`], whose test keeps the page in
//! step) read the same rows. Files: `opt.rs` (what an option is), `given.rs`
//! (what a flag's setter reads), [`args`] (what a run asks of the command
//! line).
//!
//! Precedence is flags > environment > `reeval.toml` > defaults, except for
//! the judge and the env file, which keep the order they have always had: the
//! suite's own file names them first. Those, and the options that become
//! something else (the comparison, the partition, the backend from its
//! name and settings, prices, images and variants), are merged by hand in
//! [`Settings::load`], each step marked; their `Settings` fields and
//! defaults are the table's `by_hand` block.
//!
//! An empty variable counts as unset. A variable that is set but does not
//! read (`REEVAL_VERBOSE=maybe`, `REEVAL_TRIALS=three`) is an error naming it
//! and its value, even when a flag overrides it, so a typo is never ignored.
//!
//! Read elsewhere, on purpose:
//! - `judge/mod.rs` still reads `REEVAL_JUDGE` itself for a judge asked for
//!   outside a run's settings (an eval run by hand), and `ANTHROPIC_BASE_URL` /
//!   `OPENAI_BASE_URL` and the judge's key when preflight did not resolve it.
//! - The git workspace cache is process-wide: [`cache_dir`] resolves
//!   `REEVAL_CACHE_DIR` once from the process environment, the same way
//!   [`Settings::load`] does.
//! - The gateway's binary (`REEVAL_GATEWAY_BIN`) is found where the gateway starts.
//! - Harnesses read their own variables (`OPENAI_MODEL`, `OPENAI_BASE_URL`, …).
//!
//! Secrets and credentials are not settings: preflight looks each name up in
//! a [`SecretLookup`] (`env_files.rs`).
//!
//! What may depend on what: settings sit below the runner and name nothing
//! of it; the runner's `RunConfig` holds the [`Settings`] and adds the run's own.

pub mod args;
mod env_files;
pub mod file;
mod generate;
mod given;
mod opt;
mod parse;
pub mod render;
pub mod table;
#[cfg(test)]
mod tests;
mod value;
mod variants;
mod vars;

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

pub use given::UsageError;
pub use table::{Args, Layer, Settings};
// A pool's engines are the Docker backend's data (reeval-sandbox/src/docker/engines.rs).
pub use crate::sandbox::docker::EngineSpec;
pub use env_files::{EnvFileError, SecretLookup};
pub use file::{ConfigFileError, FILE_NAME, SuiteConfig};
// A partition is read here, and used by the runner and by reports of recorded runs.
pub use crate::partition::{Partition, PartitionError, PartitionKind, cell_hash};
// The Kubernetes backend's settings are the backend's data (reeval-sandbox/src/kubernetes/config.rs).
pub use crate::sandbox::{BackendConfig, GatewayAddress, KubernetesConfig};
pub use value::{Table, parse_bool};
pub use variants::DeclaredVariant;
pub(crate) use vars::default_record_dir_from;
pub use vars::process_env;

use table::{CACHE_DIR, CONFIG, PARTITION, RUN_ID, TAGS, UNDER_NEXTEST};
use value::Source;
use vars::Vars;

/// The git workspace cache of this process (`REEVAL_CACHE_DIR`, read once).
pub fn cache_dir() -> &'static Path {
    static DIR: LazyLock<PathBuf> =
        LazyLock::new(|| vars::cache_dir_or_default(Vars(&process_env).path(&CACHE_DIR)));
    &DIR
}

/// `NEXTEST_RUN_ID`, or a new run id.
pub(crate) fn run_id_from(env: &dyn Fn(&str) -> Option<String>) -> String {
    vars::run_id_or_new(Vars(env).get(&RUN_ID))
}

/// Settings that cannot be used (exit code 2): a variable that does not read,
/// or a config file that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A variable is set to something that does not read.
    #[error("failed to read {name}=`{value}`: {expected}")]
    Variable {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// What it should be.
        expected: String,
    },
    /// `reeval.toml` (or `REEVAL_CONFIG`'s file) cannot be read.
    #[error(transparent)]
    Config(#[from] ConfigFileError),
    /// Flags that do not go together.
    #[error("failed to read the command line: {0}")]
    Usage(String),
}

/// What a run compares, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparing {
    /// Two variants (`control` is the one that changes nothing).
    Variants(String, String),
    /// Two harnesses.
    Harnesses(String, String),
}

impl Default for Settings {
    /// [`Settings::base`] of the process environment.
    fn default() -> Self {
        Settings::base(process_env)
    }
}

impl Settings {
    /// What an embedding gets from `RunConfig::default`: the defaults and the
    /// variables that describe where the process runs (`NEXTEST_RUN_ID`,
    /// `NEXTEST`, `CARGO_TARGET_DIR`, `REEVAL_CACHE_DIR`, `REEVAL_ENV_FILE`),
    /// but neither flags, their environment twins nor `reeval.toml`.
    pub fn base(env: impl Fn(&str) -> Option<String>) -> Settings {
        Settings::defaults(&env)
    }

    /// The tags that select evals: `--tag`, else `REEVAL_TAGS`. Read on its own
    /// because `--list` selects by tag too and reads no other setting.
    pub fn tags(args: &Args, env: impl Fn(&str) -> Option<String>) -> Vec<String> {
        args.set.tags.clone().unwrap_or_else(|| Vars(&env).list(&TAGS))
    }

    /// The part of a partitioned run: `--partition`, else `REEVAL_PARTITION`.
    /// Read on its own, as [`Settings::tags`] is, because `--list` shows the part too.
    ///
    /// # Errors
    /// [`SettingsError::Variable`] when `REEVAL_PARTITION` does not read (even with the flag given).
    pub fn partition(
        args: &Args,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<Partition>, SettingsError> {
        let from_var = Vars(&env).read::<Partition>(&PARTITION)?;
        let partition = args.set.partition.or(from_var);
        if partition.is_some() && env(UNDER_NEXTEST.var()).is_some() {
            // Each of nextest's processes runs one eval: `count:` would deal each its own list.
            return Err(SettingsError::Usage(
                "--partition (REEVAL_PARTITION) splits a run of the suite binary itself; under \
                 cargo-nextest, which runs each eval in a process of its own, use nextest's \
                 --partition"
                    .into(),
            ));
        }
        Ok(partition)
    }

    /// Merges the command line, the environment (`env`) and the suite's
    /// config file: `REEVAL_CONFIG`, else `reeval.toml` in the current
    /// directory (cargo runs test binaries in the package's directory).
    ///
    /// # Errors
    /// [`SettingsError::Variable`] for a variable that does not read,
    /// [`SettingsError::Config`] for a config file that does not parse, or a
    /// `REEVAL_CONFIG` naming a file that does not exist.
    pub fn load(
        args: &Args,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, SettingsError> {
        Self::load_with_default_config(args, &env, Path::new(FILE_NAME))
    }

    fn load_with_default_config(
        args: &Args,
        env: &dyn Fn(&str) -> Option<String>,
        default_config: &Path,
    ) -> Result<Settings, SettingsError> {
        let vars = Vars(env);
        let mut s = Settings::base(env);

        let config_file = match vars.get(&CONFIG) {
            Some(path) => Some(PathBuf::from(path)),
            None => default_config.is_file().then(|| default_config.to_path_buf()),
        };
        let suite = match &config_file {
            Some(path) => SuiteConfig::load(path)?,
            None => SuiteConfig::default(),
        };
        s.config_file = config_file;

        // Every variable is read (and so checked) whether or not a flag overrides it.
        let from_vars = Layer::read(&vars)?;
        check_flags(&args.set)?;
        // Flags > environment > `reeval.toml` > defaults, for every setting of the table.
        let merged = args.set.clone().or(from_vars.clone()).or(suite.set.clone());
        s.apply(merged.clone());

        // By hand, each for its reason: (1) `--list` reads these two alone.
        s.tags = Settings::tags(args, env);
        s.partition = Settings::partition(args, env)?;
        // (2) Tables of the file only.
        s.prices = crate::prices::PriceTable::with(&suite.prices);
        // Checked when the file was read.
        s.images = crate::image_map::ImageMap::new(&suite.images).unwrap_or_default();
        s.variants = suite.variants.clone();
        // (3) Names that become a pair.
        s.compare = comparing(args, merged.compare.clone().unwrap_or_default(), &mut s.harnesses)?;
        if s.compare.is_some() && s.variant.is_some() {
            return Err(SettingsError::Usage("use --compare or --variant, not both".into()));
        }
        // (4) The suite's file names the judge and env file first, as it always has.
        s.judge = suite.set.judge.clone().or(from_vars.judge.map(|j| j.trim().to_string()));
        s.env_file = suite.set.env_file.clone();
        // `--env-file` over `REEVAL_ENV_FILE`: read after the file's.
        s.fallback_env_file = args.set.env_file.clone().or(from_vars.env_file);
        // (5) The backend, from its settings (the variable over the file).
        s.backend = backend(&merged)?;
        Ok(s)
    }
    /// Secrets and credentials for preflight: the host environment, then
    /// [`Settings::env_file`], then [`Settings::fallback_env_file`].
    ///
    /// # Errors
    /// An [`EnvFileError`] for an env file that does not exist, cannot be
    /// read or does not parse.
    pub fn secret_lookup(&self) -> Result<SecretLookup, EnvFileError> {
        SecretLookup::load(self.env_file.as_deref(), self.fallback_env_file.as_deref())
    }
}

/// The flags' values that are checked with the settings rather than when
/// parsed, so that a bad one is a settings error, as a bad variable is.
fn check_flags(flags: &Layer) -> Result<(), SettingsError> {
    for entry in flags.allow_internal.iter().flatten() {
        crate::egress::check_internal(entry)
            .map_err(|e| SettingsError::Usage(format!("--allow-internal {entry}: {e}")))?;
    }
    if let Some(proxy) = &flags.upstream_proxy {
        proxy
            .resolve(|_| None)
            .map_err(|e| SettingsError::Usage(format!("--upstream-proxy: {e}")))?;
    }
    Ok(())
}

/// What a run compares: `--compare a,b` (or `REEVAL_COMPARE`), or `--harness
/// a --vs b`, which runs both harnesses.
fn comparing(
    args: &Args,
    compare: Vec<String>,
    harnesses: &mut Vec<String>,
) -> Result<Option<Comparing>, SettingsError> {
    Ok(match (&args.vs, compare.as_slice()) {
        (Some(_), [_, ..]) => {
            return Err(SettingsError::Usage("use --compare or --vs, not both".into()));
        }
        (Some(b), []) => match harnesses.as_slice() {
            [a] => {
                let pair = Comparing::Harnesses(a.clone(), b.clone());
                *harnesses = vec![a.clone(), b.clone()];
                Some(pair)
            }
            _ => {
                return Err(SettingsError::Usage(
                    "--vs <B> needs exactly one --harness <A> to compare with".into(),
                ));
            }
        },
        (None, [a, b]) => Some(Comparing::Variants(a.clone(), b.clone())),
        (None, []) => None,
        (None, other) => {
            return Err(SettingsError::Usage(format!(
                "--compare takes two arms, like control,with_skill; got {}",
                other.join(",")
            )));
        }
    })
}

/// The backend `backend` names (checked to be one of `BACKEND`'s words
/// where it was read), with its settings: the Docker engines of `engines`, or
/// Kubernetes with `[kubernetes]` and `namespace`.
fn backend(merged: &Layer) -> Result<BackendConfig, SettingsError> {
    Ok(match merged.backend.as_deref().map(str::trim) {
        Some("kubernetes") => {
            let mut k = merged.kubernetes.clone().map(|t| t.0).unwrap_or_default();
            k.namespace = merged.namespace.clone();
            BackendConfig::Kubernetes(Box::new(k))
        }
        None | Some(_) => {
            let engines = merged.engines.iter().flatten().map(|e| EngineSpec::parse(e));
            // Each was checked where it was read ([`ENGINES`]'s check).
            let engines = engines.collect::<Result<_, _>>().map_err(SettingsError::Usage)?;
            BackendConfig::Docker { engines }
        }
    })
}
