//! Every setting of a run, read in one place: the command line, the
//! environment and `reeval.toml`, merged once into [`Settings`] by
//! [`Settings::load`] so that preflight (and `-v`) sees all of them.
//!
//! Each option is declared once, in [`table`]: its flag, its variable, its
//! `reeval.toml` key, the kind of value it takes, its default and its help.
//! From that table come the flag parser ([`args`]), the variables' reading
//! (`vars.rs`), `reeval.toml`'s schema ([`file`](mod@file)), `--help` and the tables of
//! docs/options.md ([`render`], whose test keeps the page in step).
//!
//! Precedence is flags > environment > `reeval.toml` > defaults, except for
//! the judge and the env file, which keep the order they have always had: the
//! suite's own file names them first.
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
//! of it; the runner turns [`Settings`] into its `RunConfig`.

pub mod args;
mod env_files;
pub mod file;
mod parse;
pub mod render;
pub mod table;
#[cfg(test)]
mod tests;
mod variants;
mod vars;

use std::path::{Path, PathBuf};
use std::time::Duration;

pub use args::{Args, UsageError};
// A pool's engines are the Docker backend's data (reeval-sandbox/src/docker/engines.rs).
pub use crate::sandbox::docker::EngineSpec;
pub use env_files::{EnvFileError, SecretLookup};
pub use file::{ConfigFileError, FILE_NAME, OneOrMore, SuiteConfig};
// A partition is read here, and used by the runner and by reports of recorded runs.
pub use crate::partition::{Partition, PartitionError, PartitionKind, cell_hash};
// The Kubernetes backend's settings are the backend's data (reeval-sandbox/src/kubernetes/config.rs).
pub use crate::sandbox::{GatewayAddress, KubernetesConfig};
pub use variants::DeclaredVariant;
pub use vars::{cache_dir, parse_bool, process_env};
pub(crate) use vars::{default_record_dir_from, run_id_from};

use table::{
    ALLOW_EMPTY, ALLOW_INTERNAL, BACKEND, COMPARE, CONFIG, ENGINES, ENV_FILE, HARNESS, JUDGE,
    JUNIT, KUBE_NAMESPACE, MIN_PASS_RATE, PARTITION, PRESTART, RECORD_DIR, RETRIES, SETUP_CACHE,
    SETUP_CACHE_MAX, SLOW_AFTER, STREAM, TAGS, TEST_THREADS, TIMEOUT, TRIALS, UNDER_NEXTEST,
    UPSTREAM_PROXY, VARIANT, VERBOSE,
};
use vars::{Vars, cache_dir_from};

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

/// Every setting of a run, merged once. See the module docs for where each comes from.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Print every phase.
    pub verbose: bool,
    /// Harnesses replacing every eval's own (empty: the evals' own).
    pub harnesses: Vec<String>,
    /// Trials replacing every eval's own.
    pub trials: Option<u32>,
    /// Budget replacing every eval's own.
    pub timeout: Option<Duration>,
    /// Runs are recorded under `<record_dir>/<run_id>/`.
    pub record_dir: PathBuf,
    /// Attempts at once.
    pub test_threads: usize,
    /// The suite-wide judge of evals that name none: `reeval.toml`'s `judge`, else `REEVAL_JUDGE`.
    pub judge: Option<String>,
    /// `reeval.toml`'s `env_file`: secrets and credentials for preflight.
    pub env_file: Option<PathBuf>,
    /// `REEVAL_ENV_FILE`: read for names that neither the host nor `env_file` sets.
    pub fallback_env_file: Option<PathBuf>,
    /// Where git workspaces are cached.
    pub cache_dir: PathBuf,
    /// The run id (`NEXTEST_RUN_ID` under nextest, so its processes share a run).
    pub run_id: String,
    /// Whether cargo-nextest runs this process (one eval per process).
    pub under_nextest: bool,
    /// Engines to spread attempts over (`REEVAL_ENGINES`, `engines` in `reeval.toml`); empty: the one of `DOCKER_HOST`.
    pub engines: Vec<EngineSpec>,
    /// The Kubernetes backend instead of Docker (`REEVAL_BACKEND=kubernetes`,
    /// or `backend = "kubernetes"` in `reeval.toml`), with its settings.
    pub kubernetes: Option<KubernetesConfig>,
    /// Image names mapped to others (`[images]` in `reeval.toml`).
    pub images: crate::image_map::ImageMap,
    /// Variants declared in `reeval.toml` (`[variants.NAME]`), their paths resolved.
    pub variants: std::collections::BTreeMap<String, DeclaredVariant>,
    /// The config file that was read, if any.
    pub config_file: Option<PathBuf>,
    /// Retries of an infra error.
    pub infra_retries: u32,
    /// The pass rate at which a cell passes, replacing the evals' own.
    pub min_pass_rate: Option<f64>,
    /// Only evals with one of these tags.
    pub tags: Vec<String>,
    /// Where to write JUnit XML.
    pub junit: Option<PathBuf>,
    /// Print the agent's events as they arrive.
    pub stream: bool,
    /// A run that selects no eval exits 0 (else 2, saying why nothing was selected).
    pub allow_empty: bool,
    /// Whether prepared sandboxes are cached (see `crate::setup_cache`).
    pub setup_cache: bool,
    /// The setup cache's size cap in bytes.
    pub setup_cache_max_bytes: u64,
    /// Containers created ahead of their slot.
    pub prestart: usize,
    /// After how long a running attempt is announced (and again after each further period).
    pub slow_after: Duration,
    /// Prices per model.
    pub prices: crate::prices::PriceTable,
    /// The two arms of a comparison (`--compare`, `REEVAL_COMPARE`, or `--harness a --vs b`).
    pub compare: Option<Comparing>,
    /// A variant every eval runs with (`--variant`, `REEVAL_VARIANT`).
    pub variant: Option<String>,
    /// The part of a partitioned run (`--partition`, `REEVAL_PARTITION`): only its cells run.
    pub partition: Option<Partition>,
    /// Private or reserved addresses every eval's allowed hosts may resolve
    /// to (`--allow-internal`, `REEVAL_ALLOW_INTERNAL`, `allow_internal`).
    pub allow_internal: Vec<String>,
    /// How the egress gateway reaches its upstreams (`--upstream-proxy`,
    /// `REEVAL_UPSTREAM_PROXY`, `upstream_proxy`; default: the runner's proxy variables).
    pub upstream_proxy: crate::egress::UpstreamProxySetting,
}

/// What a run compares, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparing {
    /// Two variants (`control` is the one that changes nothing).
    Variants(String, String),
    /// Two harnesses.
    Harnesses(String, String),
}

impl Settings {
    /// What an embedding gets from `RunConfig::default`: the defaults and the
    /// variables that describe where the process runs (`NEXTEST_RUN_ID`,
    /// `NEXTEST`, `CARGO_TARGET_DIR`, `REEVAL_CACHE_DIR`, `REEVAL_ENV_FILE`),
    /// but neither flags, their environment twins nor `reeval.toml`.
    pub fn base(env: impl Fn(&str) -> Option<String>) -> Settings {
        let vars = Vars(&env);
        Settings {
            verbose: false,
            harnesses: Vec::new(),
            trials: None,
            timeout: None,
            record_dir: default_record_dir_from(&env),
            test_threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2),
            judge: None,
            env_file: None,
            fallback_env_file: vars.path(&ENV_FILE),
            cache_dir: cache_dir_from(&env),
            run_id: run_id_from(&env),
            under_nextest: (env)(UNDER_NEXTEST.var()).is_some(),
            engines: Vec::new(),
            kubernetes: None,
            images: Default::default(),
            variants: Default::default(),
            config_file: None,
            infra_retries: 2,
            min_pass_rate: None,
            tags: Vec::new(),
            junit: None,
            stream: false,
            allow_empty: false,
            setup_cache: true,
            setup_cache_max_bytes: crate::setup_cache::DEFAULT_MAX_BYTES,
            prestart: 0,
            slow_after: Duration::from_secs(60),
            prices: crate::prices::PriceTable::default(),
            compare: None,
            variant: None,
            partition: None,
            allow_internal: Vec::new(),
            upstream_proxy: Default::default(),
        }
    }

    /// The tags that select evals: `--tag`, else `REEVAL_TAGS`. Read on its own
    /// because `--list` selects by tag too and reads no other setting.
    pub fn tags(args: &Args, env: impl Fn(&str) -> Option<String>) -> Vec<String> {
        if !args.tags.is_empty() {
            return args.tags.clone();
        }
        Vars(&env).list(&TAGS)
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
        let vars = Vars(&env);
        let from_var = match vars.get(&PARTITION) {
            Some(spec) => Some(
                spec.parse::<Partition>()
                    .map_err(|e| Vars::fail(PARTITION.var(), &spec, e.to_string()))?,
            ),
            None => None,
        };
        let partition = args.partition.or(from_var);
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
        let verbose = vars.flag(&VERBOSE)?;
        let harnesses = vars.list(&HARNESS);
        let retries = vars.whole::<u32>(&RETRIES)?;
        let min_pass_rate = vars.rate(&MIN_PASS_RATE)?;
        let junit = vars.path(&JUNIT);
        let stream = vars.flag(&STREAM)?;
        let allow_empty = vars.flag(&ALLOW_EMPTY)?;
        let setup_cache = vars.flag(&SETUP_CACHE)?;
        let setup_cache_max = vars.bytes(&SETUP_CACHE_MAX)?;
        let prestart = vars.whole::<usize>(&PRESTART)?;
        let slow_after = vars.duration(&SLOW_AFTER)?;
        let trials = vars.count::<u32>(&TRIALS)?;
        let timeout = vars.duration(&TIMEOUT)?;
        let record_dir = vars.path(&RECORD_DIR);
        let threads = vars.count::<usize>(&TEST_THREADS)?;
        let judge = vars.get(&JUDGE).map(|j| j.trim().to_string());
        if let Some(spec) = &judge {
            crate::llm::chat::key_env(spec)
                .map_err(|problem| Vars::fail(JUDGE.var(), spec, problem))?;
        }

        let compare = match &args.compare {
            list if !list.is_empty() => list.clone(),
            _ => vars.list(&COMPARE),
        };
        let variant = args.variant.clone().or_else(|| vars.get(&VARIANT));
        let allow_internal = vars.list(&ALLOW_INTERNAL);
        for entry in &allow_internal {
            crate::egress::check_internal(entry)
                .map_err(|e| Vars::fail(ALLOW_INTERNAL.var(), entry, e))?;
        }
        let upstream_proxy = vars.get(&UPSTREAM_PROXY);
        if let Some(url) = &upstream_proxy {
            file::check_proxy(url).map_err(|e| Vars::fail(UPSTREAM_PROXY.var(), url, e))?;
        }
        for entry in &args.allow_internal {
            crate::egress::check_internal(entry)
                .map_err(|e| SettingsError::Usage(format!("--allow-internal {entry}: {e}")))?;
        }
        if let Some(url) = &args.upstream_proxy {
            file::check_proxy(url)
                .map_err(|e| SettingsError::Usage(format!("--upstream-proxy: {e}")))?;
        }

        s.verbose = args.verbose || verbose.unwrap_or(false);
        s.harnesses = if !args.harness.is_empty() {
            args.harness.clone()
        } else if !harnesses.is_empty() {
            harnesses
        } else {
            suite.harness.as_ref().map(|h| h.values()).unwrap_or_default()
        };
        s.trials = args.trials.or(trials).or(suite.trials);
        let suite_timeout =
            suite.timeout.as_deref().and_then(|t| humantime::parse_duration(t).ok());
        s.timeout = args.timeout.or(timeout).or(suite_timeout);
        if let Some(n) = args.retries.or(retries).or(suite.retries) {
            s.infra_retries = n;
        }
        s.min_pass_rate = args.min_pass_rate.or(min_pass_rate).or(suite.min_pass_rate);
        s.tags = Settings::tags(args, env);
        s.partition = Settings::partition(args, env)?;
        s.junit = args.junit.clone().or(junit);
        s.stream = args.stream || stream.unwrap_or(false);
        s.allow_empty = args.allow_empty || allow_empty.unwrap_or(false);
        s.setup_cache = !args.no_setup_cache && setup_cache.unwrap_or(true);
        if let Some(max) = setup_cache_max {
            s.setup_cache_max_bytes = max;
        }
        s.prestart = args.prestart.or(prestart).or(suite.prestart).unwrap_or(0);
        if let Some(d) = slow_after {
            s.slow_after = d;
        }
        s.prices = crate::prices::PriceTable::with(&suite.prices);
        // Checked when the file was read.
        s.images = crate::image_map::ImageMap::new(&suite.images).unwrap_or_default();
        s.variants = suite.variants.clone();
        if let Some(dir) = args.record_dir.clone().or(record_dir).or(suite.record_dir) {
            s.record_dir = dir;
        }
        if let Some(n) = args.test_threads.or(threads).or(suite.concurrency) {
            s.test_threads = n;
        }
        s.variant = variant;
        s.allow_internal = if !args.allow_internal.is_empty() {
            args.allow_internal.clone()
        } else if !allow_internal.is_empty() {
            allow_internal
        } else {
            suite.allow_internal.clone()
        };
        if let Some(proxy) =
            args.upstream_proxy.clone().or(upstream_proxy).or(suite.upstream_proxy.clone())
        {
            s.upstream_proxy = crate::egress::UpstreamProxySetting::parse(&proxy);
        }
        s.compare = match (&args.vs, compare.as_slice()) {
            (Some(_), [_, ..]) => {
                return Err(SettingsError::Usage("use --compare or --vs, not both".into()));
            }
            (Some(b), []) => match s.harnesses.as_slice() {
                [a] => {
                    let pair = Comparing::Harnesses(a.clone(), b.clone());
                    s.harnesses = vec![a.clone(), b.clone()];
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
        };
        if s.compare.is_some() && s.variant.is_some() {
            return Err(SettingsError::Usage("use --compare or --variant, not both".into()));
        }
        // The suite's file names the judge and env file first, as it always has.
        s.judge = suite.judge.or(judge);
        s.env_file = suite.env_file;
        // `--env-file` over `REEVAL_ENV_FILE`: read after the file's.
        if let Some(path) = &args.env_file {
            s.fallback_env_file = Some(path.clone());
        }
        // A pool of engines: the variable over the file.
        s.engines = match vars.get(&ENGINES) {
            Some(list) => {
                EngineSpec::parse_list(&list).map_err(|e| Vars::fail(ENGINES.var(), &list, e))?
            }
            None => suite
                .engines
                .iter()
                .map(|e| EngineSpec::parse(e))
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    SettingsError::Config(ConfigFileError {
                        path: s.config_file.clone().unwrap_or_default(),
                        message: format!("key `{}`: {e}", ENGINES.file_key()),
                    })
                })?,
        };
        // The backend: the variable over the file.
        let backend =
            vars.get(&BACKEND).map(|b| (b, true)).or(suite.backend.clone().map(|b| (b, false)));
        s.kubernetes = match backend {
            None => None,
            Some((b, _)) if b.trim() == "docker" => None,
            Some((b, _)) if b.trim() == "kubernetes" => {
                let mut k = suite.kubernetes.clone();
                k.namespace = vars.get(&KUBE_NAMESPACE).or(suite.namespace.clone());
                Some(k)
            }
            Some((b, from_var)) => {
                let expected = BACKEND.kind.words();
                return Err(if from_var {
                    Vars::fail(BACKEND.var(), &b, &expected)
                } else {
                    SettingsError::Config(ConfigFileError {
                        path: s.config_file.clone().unwrap_or_default(),
                        message: format!("key `{}`: `{b}` is not {expected}", BACKEND.file_key()),
                    })
                });
            }
        };
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
