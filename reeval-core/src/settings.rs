//! Every setting of a run, read in one place: the command line, the
//! environment and `reeval.toml`, merged once into [`Settings`] by
//! [`Settings::load`] so that preflight (and `-v`) sees all of them.
//!
//! Precedence is flags > environment > `reeval.toml` > defaults, except where
//! the table says otherwise (the judge and the env file keep the order they
//! have always had: the suite's own file names them first).
//!
//! | setting | flag | environment | `reeval.toml` | default |
//! |---|---|---|---|---|
//! | verbose | `-v` | `REEVAL_VERBOSE` (a yes/no word) | | off |
//! | harnesses | `--harness` | `REEVAL_HARNESS=a,b` | `harness` | the evals' own |
//! | trials | `--trials` | `REEVAL_TRIALS` | `trials` | the evals' own |
//! | timeout | `--timeout` | `REEVAL_TIMEOUT` | `timeout` | the evals' own |
//! | record dir | `--record-dir` | `REEVAL_RECORD_DIR` | `record_dir` | `$CARGO_TARGET_DIR/reeval/runs`, else `target/reeval/runs` |
//! | test threads | `--test-threads` | `RUST_TEST_THREADS` | `concurrency` | the cores |
//! | infra retries | | `REEVAL_RETRIES` | `retries` | 2 |
//! | min pass rate | `--min-pass-rate` | `REEVAL_MIN_PASS_RATE` | `min_pass_rate` | the evals' own, else every trial must pass |
//! | tags | `--tag` | `REEVAL_TAGS=a,b` | | every eval |
//! | JUnit file | `--junit` | `REEVAL_JUNIT` | | none |
//! | stream agent events | `--stream` | `REEVAL_STREAM` (a yes/no word) | | off |
//! | a run that selects no eval succeeds | `--allow-empty` | `REEVAL_ALLOW_EMPTY` (a yes/no word) | | off: exit 2 |
//! | setup cache | `--no-setup-cache` | `REEVAL_SETUP_CACHE` (a yes/no word) | | on |
//! | setup cache's size cap | | `REEVAL_SETUP_CACHE_MAX` (bytes, or with `KiB`, `MiB`, `GiB`) | | 20 GiB |
//! | start ahead | `--prestart N` | `REEVAL_PRESTART` | `prestart` | 0 |
//! | slow-attempt notice | | `REEVAL_SLOW_AFTER` | | 60s, repeated |
//! | prices | | | `[prices.<model>]` | built-in list prices |
//! | judge | | `REEVAL_JUDGE`, when the file names none | `judge` | none |
//! | env files | | `REEVAL_ENV_FILE`, after the file's | `env_file` | none |
//! | config file | | `REEVAL_CONFIG` | | `./reeval.toml` if present |
//! | backend | | `REEVAL_BACKEND` (`docker`, `kubernetes`) | `backend`, `[kubernetes]` | docker |
//! | Kubernetes namespace | | `REEVAL_KUBE_NAMESPACE` | `namespace` | the kubeconfig's |
//! | git cache | | `REEVAL_CACHE_DIR` | | `<temp>/reeval-cache` |
//! | run id | | `NEXTEST_RUN_ID` | | `<utc time>-<pid>-<nonce>` |
//! | under nextest | | `NEXTEST` set | | no |
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
//! - Harnesses read their own variables (`OPENAI_MODEL`, `OPENAI_BASE_URL`, …).
//!
//! Secrets and credentials are not settings: preflight looks each name up in
//! a [`SecretLookup`] (the host environment, then the env files, read with
//! `dotenvy` without touching the process environment).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::runner::RunConfig;
use crate::runner::cli::Args;
use crate::runner::config::{ConfigFileError, FILE_NAME, SuiteConfig};

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

/// An env file that cannot be read (exit code 2, through preflight).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to read the env file {} ({source_name}): {problem}", path.display())]
pub struct EnvFileError {
    /// The file.
    pub path: PathBuf,
    /// What named it: `env_file` (of `reeval.toml` or [`RunConfig`]) or `REEVAL_ENV_FILE`.
    pub source_name: String,
    /// What is wrong; never a value from the file, which may be a secret.
    pub problem: String,
}

/// Where preflight finds secrets and credentials: the host environment first,
/// then the env files in order (`reeval.toml`'s `env_file`, then
/// `REEVAL_ENV_FILE`). An empty value counts as unset. Values stay in this
/// map: the process environment is never changed.
#[derive(Clone)]
pub struct SecretLookup {
    host: fn(&str) -> Option<String>,
    files: BTreeMap<String, String>,
}

impl std::fmt::Debug for SecretLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the values are secrets.
        f.debug_struct("SecretLookup")
            .field("from_files", &self.files.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Default for SecretLookup {
    fn default() -> Self {
        Self { host: process_env, files: BTreeMap::new() }
    }
}

impl SecretLookup {
    /// Reads `env_file`, then `fallback` for names it does not set.
    ///
    /// # Errors
    /// An [`EnvFileError`] naming the file for one that does not exist or
    /// cannot be read, and also the line for one that does not parse.
    pub fn load(env_file: Option<&Path>, fallback: Option<&Path>) -> Result<Self, EnvFileError> {
        let mut files = match fallback {
            Some(path) => read_env_file(path, "REEVAL_ENV_FILE")?,
            None => BTreeMap::new(),
        };
        if let Some(path) = env_file {
            files.extend(read_env_file(path, "env_file")?);
        }
        Ok(Self { files, ..Self::default() })
    }

    /// The same files, with `host` standing in for the host environment (tests).
    pub fn with_host(self, host: fn(&str) -> Option<String>) -> Self {
        Self { host, ..self }
    }

    /// The value of `name`: the host's, else the first file's that sets it.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.host)(name)
            .filter(|v| !v.is_empty())
            .or_else(|| self.files.get(name).filter(|v| !v.is_empty()).cloned())
    }

    /// Every name → value the env files set (the host environment not included).
    pub fn from_files(&self) -> &BTreeMap<String, String> {
        &self.files
    }
}

/// One `.env` file through dotenvy's parser (quotes, `export`, comments,
/// `${VAR}` expansion); a name set twice takes its last value.
fn read_env_file(path: &Path, source_name: &str) -> Result<BTreeMap<String, String>, EnvFileError> {
    let fail = |problem: String| EnvFileError {
        path: path.to_path_buf(),
        source_name: source_name.to_string(),
        problem,
    };
    let io_problem = |e: &std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".to_string(),
        _ => e.to_string(),
    };
    let iter = dotenvy::from_path_iter(path).map_err(|e| match e {
        dotenvy::Error::Io(e) => fail(io_problem(&e)),
        other => fail(other.to_string()),
    })?;
    let mut vars = BTreeMap::new();
    for item in iter {
        match item {
            Ok((name, value)) => {
                vars.insert(name, value);
            }
            Err(dotenvy::Error::LineParse(..)) => return Err(fail(line_problem(path))),
            Err(dotenvy::Error::Io(e)) => return Err(fail(io_problem(&e))),
            Err(other) => return Err(fail(other.to_string())),
        }
    }
    Ok(vars)
}

/// Where the line dotenvy rejected is, and its name: never the line itself,
/// whose value may be a secret.
fn line_problem(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let line_no = failing_line(&text);
    let name = line_no
        .and_then(|n| text.lines().nth(n - 1))
        .and_then(|l| l.trim_start().trim_start_matches("export ").split_once('='))
        .map(|(name, _)| name.trim())
        .filter(|name| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
        .map(|name| format!(" (`{name}`)"))
        .unwrap_or_default();
    let at = line_no.map(|n| format!("line {n}")).unwrap_or_else(|| "a line".into());
    format!(
        "{at}{name} does not parse; quote a value that holds spaces, quotes or `#` (in single quotes `$` stays literal)"
    )
}

/// The 1-based line of `text` where dotenvy's parse fails. dotenvy reports
/// the failing text but not its line, so this parses ever longer prefixes:
/// the first that fails on a complete line is the answer; a quote left open
/// to the end of the file fails every prefix from the line that opened it.
fn failing_line(text: &str) -> Option<usize> {
    // Some(true): a complete line fails; Some(false): only the end came too early.
    let fails = |prefix: &str| {
        dotenvy::from_read_iter(prefix.as_bytes()).find_map(|item| match item {
            Err(dotenvy::Error::LineParse(line, at)) => {
                Some(at < line.len().saturating_sub(1) || !prefix.ends_with(line.as_str()))
            }
            _ => None,
        })
    };
    let mut ends = Vec::new();
    let mut end = 0;
    for line in text.split_inclusive('\n') {
        end += line.len();
        ends.push(end);
    }
    let outcomes: Vec<Option<bool>> = ends.iter().map(|&end| fails(&text[..end])).collect();
    if let Some(i) = outcomes.iter().position(|o| *o == Some(true)) {
        return Some(i + 1);
    }
    // Open to the end: the first line from which every prefix fails.
    let open_from = outcomes.iter().rposition(Option::is_none).map_or(0, |i| i + 1);
    (open_from < outcomes.len()).then_some(open_from + 1)
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
    pub engines: Vec<crate::runner::pool::EngineSpec>,
    /// The Kubernetes backend instead of Docker (`REEVAL_BACKEND=kubernetes`,
    /// or `backend = "kubernetes"` in `reeval.toml`), with its settings.
    pub kubernetes: Option<crate::runner::config::KubernetesConfig>,
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
}

/// What a run compares, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparing {
    /// Two variants (`control` is the one that changes nothing).
    Variants(String, String),
    /// Two harnesses.
    Harnesses(String, String),
}

/// The process environment, as [`Settings::load`] takes it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The git workspace cache of this process (`REEVAL_CACHE_DIR`, read once).
pub fn cache_dir() -> &'static Path {
    static DIR: LazyLock<PathBuf> = LazyLock::new(|| cache_dir_from(&process_env));
    &DIR
}

/// The variables of one lookup; an empty value counts as unset.
struct Vars<'a>(&'a dyn Fn(&str) -> Option<String>);

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.trim().is_empty())
    }

    fn fail(name: &str, value: &str, expected: impl Into<String>) -> SettingsError {
        SettingsError::Variable {
            name: name.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    fn flag(&self, name: &str) -> Result<Option<bool>, SettingsError> {
        self.get(name)
            .map(|v| {
                parse_bool(&v).ok_or_else(|| {
                    Self::fail(name, &v, "expected 1/0, true/false, yes/no or on/off")
                })
            })
            .transpose()
    }

    fn count<T: std::str::FromStr + PartialEq + From<u8>>(
        &self,
        name: &str,
    ) -> Result<Option<T>, SettingsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        match v.trim().parse::<T>() {
            Ok(n) if n != T::from(0) => Ok(Some(n)),
            _ => Err(Self::fail(name, &v, "expected a whole number of at least 1")),
        }
    }

    /// A whole number, 0 included.
    fn whole<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, SettingsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        v.trim().parse::<T>().map(Some).map_err(|_| Self::fail(name, &v, "expected a whole number"))
    }

    /// A size: whole bytes, or a whole number of `KiB`, `MiB` or `GiB`.
    fn bytes(&self, name: &str) -> Result<Option<u64>, SettingsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let t = v.trim();
        let (number, shift) = [("GiB", 30), ("MiB", 20), ("KiB", 10)]
            .iter()
            .find_map(|(unit, shift)| t.strip_suffix(unit).map(|n| (n.trim(), *shift)))
            .unwrap_or((t, 0));
        number.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << shift)).map(Some).ok_or_else(
            || Self::fail(name, &v, "expected bytes, or a whole number of KiB, MiB or GiB"),
        )
    }

    /// A rate between 0 and 1.
    fn rate(&self, name: &str) -> Result<Option<f64>, SettingsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        match v.trim().parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(Some(r)),
            _ => Err(Self::fail(name, &v, "expected a rate between 0 and 1, like 0.66")),
        }
    }

    fn duration(&self, name: &str) -> Result<Option<Duration>, SettingsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        humantime::parse_duration(v.trim())
            .map(Some)
            .map_err(|e| Self::fail(name, &v, format!("expected a duration like 10m or 90s ({e})")))
    }
}

/// `a, b,,c` → `[a, b, c]`.
fn split_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// The usual yes/no words, case-insensitive: 1/0, true/false, yes/no, on/off.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn cache_dir_from(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    Vars(env)
        .get("REEVAL_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("reeval-cache"))
}

/// `NEXTEST_RUN_ID`, or `<utc date>T<time>-<pid>-<nonce>`.
pub(crate) fn run_id_from(env: &dyn Fn(&str) -> Option<String>) -> String {
    if let Some(id) = Vars(env).get("NEXTEST_RUN_ID") {
        return id;
    }
    let stamp =
        humantime::format_rfc3339_seconds(SystemTime::now()).to_string().replace([':', '-'], "");
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("{}-{}-{:04x}", stamp.trim_end_matches('Z'), std::process::id(), nanos & 0xffff)
}

/// `$CARGO_TARGET_DIR/reeval/runs`, or `target/reeval/runs`.
pub(crate) fn default_record_dir_from(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    Vars(env)
        .get("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("reeval")
        .join("runs")
}

impl Settings {
    /// What an embedding gets from [`RunConfig::default`]: the defaults and the
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
            fallback_env_file: vars.get("REEVAL_ENV_FILE").map(PathBuf::from),
            cache_dir: cache_dir_from(&env),
            run_id: run_id_from(&env),
            under_nextest: (env)("NEXTEST").is_some(),
            engines: Vec::new(),
            kubernetes: None,
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
        }
    }

    /// The tags that select evals: `--tag`, else `REEVAL_TAGS`. Read on its own
    /// because `--list` selects by tag too and reads no other setting.
    pub fn tags(args: &Args, env: impl Fn(&str) -> Option<String>) -> Vec<String> {
        if !args.tags.is_empty() {
            return args.tags.clone();
        }
        Vars(&env).get("REEVAL_TAGS").map(|t| split_list(&t)).unwrap_or_default()
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

        let config_file = match vars.get("REEVAL_CONFIG") {
            Some(path) => Some(PathBuf::from(path)),
            None => default_config.is_file().then(|| default_config.to_path_buf()),
        };
        let suite = match &config_file {
            Some(path) => SuiteConfig::load(path)?,
            None => SuiteConfig::default(),
        };
        s.config_file = config_file;

        // Every variable is read (and so checked) whether or not a flag overrides it.
        let verbose = vars.flag("REEVAL_VERBOSE")?;
        let harnesses: Vec<String> =
            vars.get("REEVAL_HARNESS").map(|h| split_list(&h)).unwrap_or_default();
        let retries = vars.whole::<u32>("REEVAL_RETRIES")?;
        let min_pass_rate = vars.rate("REEVAL_MIN_PASS_RATE")?;
        let junit = vars.get("REEVAL_JUNIT").map(PathBuf::from);
        let stream = vars.flag("REEVAL_STREAM")?;
        let allow_empty = vars.flag("REEVAL_ALLOW_EMPTY")?;
        let setup_cache = vars.flag("REEVAL_SETUP_CACHE")?;
        let setup_cache_max = vars.bytes("REEVAL_SETUP_CACHE_MAX")?;
        let prestart = vars.whole::<usize>("REEVAL_PRESTART")?;
        let slow_after = vars.duration("REEVAL_SLOW_AFTER")?;
        let trials = vars.count::<u32>("REEVAL_TRIALS")?;
        let timeout = vars.duration("REEVAL_TIMEOUT")?;
        let record_dir = vars.get("REEVAL_RECORD_DIR").map(PathBuf::from);
        let threads = vars.count::<usize>("RUST_TEST_THREADS")?;
        let judge = vars.get("REEVAL_JUDGE").map(|j| j.trim().to_string());
        if let Some(spec) = &judge {
            crate::judge::key_env(spec)
                .map_err(|problem| Vars::fail("REEVAL_JUDGE", spec, problem))?;
        }

        let compare = match &args.compare {
            list if !list.is_empty() => list.clone(),
            _ => vars.get("REEVAL_COMPARE").map(|c| split_list(&c)).unwrap_or_default(),
        };
        let variant = args.variant.clone().or_else(|| vars.get("REEVAL_VARIANT"));

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
        if let Some(n) = retries.or(suite.retries) {
            s.infra_retries = n;
        }
        s.min_pass_rate = args.min_pass_rate.or(min_pass_rate).or(suite.min_pass_rate);
        s.tags = Settings::tags(args, env);
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
        if let Some(dir) = args.record_dir.clone().or(record_dir).or(suite.record_dir) {
            s.record_dir = dir;
        }
        if let Some(n) = args.test_threads.or(threads).or(suite.concurrency) {
            s.test_threads = n;
        }
        s.variant = variant;
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
        // A pool of engines: the variable over the file.
        s.engines = match vars.get("REEVAL_ENGINES") {
            Some(list) => crate::runner::pool::EngineSpec::parse_list(&list)
                .map_err(|e| Vars::fail("REEVAL_ENGINES", &list, e))?,
            None => suite
                .engines
                .iter()
                .map(|e| crate::runner::pool::EngineSpec::parse(e))
                .collect::<Result<_, _>>()
                .map_err(|e| {
                    SettingsError::Config(ConfigFileError {
                        path: s.config_file.clone().unwrap_or_default(),
                        message: format!("key `engines`: {e}"),
                    })
                })?,
        };
        // The backend: the variable over the file.
        let backend = vars
            .get("REEVAL_BACKEND")
            .map(|b| (b, true))
            .or(suite.backend.clone().map(|b| (b, false)));
        s.kubernetes = match backend {
            None => None,
            Some((b, _)) if b.trim() == "docker" => None,
            Some((b, _)) if b.trim() == "kubernetes" => {
                let mut k = suite.kubernetes.clone();
                k.namespace = vars.get("REEVAL_KUBE_NAMESPACE").or(suite.namespace.clone());
                Some(k)
            }
            Some((b, from_var)) => {
                let expected = "`docker` or `kubernetes`";
                return Err(if from_var {
                    Vars::fail("REEVAL_BACKEND", &b, expected)
                } else {
                    SettingsError::Config(ConfigFileError {
                        path: s.config_file.clone().unwrap_or_default(),
                        message: format!("key `backend`: `{b}` is not {expected}"),
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

    /// The [`RunConfig`] of these settings (`print` off: printing is the caller's choice).
    pub fn run_config(&self) -> RunConfig {
        RunConfig {
            run_id: self.run_id.clone(),
            record_dir: self.record_dir.clone(),
            verbose: self.verbose,
            print: false,
            harnesses: self.harnesses.clone(),
            trials: self.trials,
            timeout: self.timeout,
            threads: self.test_threads,
            infra_retries: self.infra_retries,
            min_pass_rate: self.min_pass_rate,
            prices: self.prices.clone(),
            judge: self.judge.clone(),
            env_file: self.env_file.clone(),
            fallback_env_file: self.fallback_env_file.clone(),
            under_nextest: self.under_nextest,
            egress: Default::default(),
            engines: self.engines.clone(),
            setup_cache: self.setup_cache,
            setup_cache_max_bytes: self.setup_cache_max_bytes,
            prestart: self.prestart,
            kubernetes: self.kubernetes.clone(),
            compare: None,
            variant: None,
            suite: None,
        }
    }

    /// The arms of [`Settings::compare`] and the [`Settings::variant`], with
    /// variant names resolved among `known` (the `#[reeval::variant]`s of the suite).
    ///
    /// # Errors
    /// A message naming a variant that `known` lacks.
    pub fn arms(
        &self,
        known: &[crate::compare::Variant],
    ) -> Result<(Option<crate::compare::Arms>, Option<crate::compare::Variant>), String> {
        use crate::compare::{Arms, find_variant};
        let arms = match &self.compare {
            None => None,
            Some(Comparing::Harnesses(a, b)) => Some(Arms::Harnesses(a.clone(), b.clone())),
            Some(Comparing::Variants(a, b)) => {
                if a == b {
                    return Err(format!("failed to compare `{a}` with itself: name two arms"));
                }
                Some(Arms::Variants(find_variant(known, a)?, find_variant(known, b)?))
            }
        };
        let variant = self.variant.as_deref().map(|v| find_variant(known, v)).transpose()?;
        Ok((arms, variant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string())
    }

    fn args(argv: &[&str]) -> Args {
        Args::parse(argv.iter().copied()).unwrap().unwrap()
    }

    /// Loads with no `reeval.toml` in play unless `REEVAL_CONFIG` names one.
    fn load(argv: &[&str], vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
        Settings::load_with_default_config(
            &args(argv),
            &env(vars),
            Path::new("/nonexistent/reeval.toml"),
        )
    }

    fn config_file(name: &str, text: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("reeval-settings-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn environment_twins_apply_when_no_flag_is_given() {
        let s = load(
            &[],
            &[
                ("REEVAL_VERBOSE", "1"),
                ("REEVAL_HARNESS", "shell,other"),
                ("REEVAL_TRIALS", "3"),
                ("REEVAL_TIMEOUT", "90s"),
                ("REEVAL_RECORD_DIR", "/runs"),
                ("RUST_TEST_THREADS", "5"),
                ("NEXTEST_RUN_ID", "nextest-run"),
                ("NEXTEST", "1"),
                ("REEVAL_CACHE_DIR", "/cache"),
            ],
        )
        .unwrap();
        assert!(s.verbose);
        assert_eq!(s.harnesses, vec!["shell", "other"]);
        assert_eq!(
            (s.trials, s.timeout, s.test_threads),
            (Some(3), Some(Duration::from_secs(90)), 5)
        );
        assert_eq!(s.record_dir, PathBuf::from("/runs"));
        assert_eq!((s.run_id.as_str(), s.under_nextest), ("nextest-run", true));
        assert_eq!(s.cache_dir, PathBuf::from("/cache"));
        let c = s.run_config();
        assert_eq!(
            (c.run_id.as_str(), c.threads, c.trials, c.under_nextest, c.print),
            ("nextest-run", 5, Some(3), true, false)
        );
    }

    #[test]
    fn the_backend_is_chosen_by_the_variable_over_the_file() {
        assert_eq!(load(&[], &[]).unwrap().kubernetes, None);
        let s = load(&[], &[("REEVAL_BACKEND", "kubernetes"), ("REEVAL_KUBE_NAMESPACE", "evals")])
            .unwrap();
        assert_eq!(s.kubernetes.as_ref().and_then(|k| k.namespace.as_deref()), Some("evals"));
        assert_eq!(s.run_config().kubernetes, s.kubernetes);
        let e = load(&[], &[("REEVAL_BACKEND", "k8s")]).unwrap_err().to_string();
        assert!(e.contains("REEVAL_BACKEND") && e.contains("`docker` or `kubernetes`"), "{e}");

        let path = config_file(
            "kube",
            "backend = \"kubernetes\"\nnamespace = \"from-file\"\n[kubernetes]\nruntime_class = \"gvisor\"\nnode_selector = { pool = \"evals\" }\n",
        );
        let config = path.to_str().unwrap();
        let k = load(&[], &[("REEVAL_CONFIG", config)]).unwrap().kubernetes.expect("kubernetes");
        assert_eq!(k.namespace.as_deref(), Some("from-file"));
        assert_eq!(k.runtime_class.as_deref(), Some("gvisor"));
        assert_eq!(k.node_selector.get("pool").map(String::as_str), Some("evals"));
        // The variable wins: Docker after all.
        let s = load(&[], &[("REEVAL_CONFIG", config), ("REEVAL_BACKEND", "docker")]).unwrap();
        assert_eq!(s.kubernetes, None);
        let bad = config_file("kube-typo", "[kubernetes]\nruntime_klass = \"x\"\n");
        let e = load(&[], &[("REEVAL_CONFIG", bad.to_str().unwrap())]).unwrap_err().to_string();
        assert!(e.contains("runtime_klass"), "{e}");
    }

    #[test]
    fn flags_win_over_the_environment_and_the_file() {
        let path = config_file("flags", "record_dir = \"from-file\"\n");
        let config = path.to_str().unwrap();
        let vars = [
            ("REEVAL_CONFIG", config),
            ("REEVAL_TRIALS", "3"),
            ("REEVAL_HARNESS", "env"),
            ("REEVAL_RECORD_DIR", "/env"),
            ("RUST_TEST_THREADS", "5"),
        ];
        let s = load(
            &["--trials", "2", "--harness", "flag", "--record-dir", "/flag", "--test-threads", "1"],
            &vars,
        )
        .unwrap();
        assert_eq!(
            (s.trials, s.harnesses, s.record_dir, s.test_threads),
            (Some(2), vec!["flag".to_string()], PathBuf::from("/flag"), 1)
        );
        // The environment wins over the file; the file over the default.
        assert_eq!(load(&[], &vars).unwrap().record_dir, PathBuf::from("/env"));
        assert_eq!(
            load(&[], &[("REEVAL_CONFIG", config)]).unwrap().record_dir,
            path.parent().unwrap().join("from-file")
        );
        assert_eq!(
            load(&[], &[("CARGO_TARGET_DIR", "/t")]).unwrap().record_dir,
            PathBuf::from("/t/reeval/runs")
        );
        assert_eq!(load(&[], &[]).unwrap().config_file, None);
    }

    #[test]
    fn compare_reads_arms_from_the_flag_or_the_environment_and_vs_pairs_harnesses() {
        let s = load(&["--compare", "control,with_skill"], &[]).unwrap();
        assert_eq!(s.compare, Some(Comparing::Variants("control".into(), "with_skill".into())));
        let s = load(&[], &[("REEVAL_COMPARE", "control, b")]).unwrap();
        assert_eq!(s.compare, Some(Comparing::Variants("control".into(), "b".into())));
        let s = load(&["--harness", "codex", "--vs", "claude-code"], &[]).unwrap();
        assert_eq!(s.compare, Some(Comparing::Harnesses("codex".into(), "claude-code".into())));
        assert_eq!(s.harnesses, ["codex", "claude-code"]);
        for bad in [
            &["--compare", "a,b,c"][..],
            &["--vs", "b"],
            &["--harness", "a", "--vs", "b", "--compare", "c,d"],
            &["--compare", "control,b", "--variant", "b"],
        ] {
            assert!(matches!(load(bad, &[]), Err(SettingsError::Usage(_))), "{bad:?}");
        }
        // Variant names resolve among the suite's, and an unknown one is named.
        let known = [crate::compare::Variant::new("with_skill", |env| env)];
        let s = load(&["--compare", "control,with_skil"], &[]).unwrap();
        let e = s.arms(&known).unwrap_err();
        assert!(e.contains("`with_skil`") && e.contains("control, with_skill"), "{e}");
        let s = load(&["--compare", "control,with_skill"], &[]).unwrap();
        let (arms, _) = s.arms(&known).unwrap();
        assert_eq!(arms.unwrap().names(), ["control".to_string(), "with_skill".to_string()]);
    }

    #[test]
    fn verbose_reads_the_usual_words() {
        // `yes` used to be silently off.
        for (word, on) in [
            ("1", true),
            ("true", true),
            ("yes", true),
            ("YES", true),
            ("On", true),
            ("0", false),
            ("false", false),
            ("no", false),
            ("OFF", false),
            ("", false),
        ] {
            assert_eq!(
                load(&[], &[("REEVAL_VERBOSE", word)]).unwrap().verbose,
                on,
                "REEVAL_VERBOSE={word}"
            );
        }
        // The flag wins over a falsy variable.
        assert!(load(&["-v"], &[("REEVAL_VERBOSE", "0")]).unwrap().verbose);
    }

    #[test]
    fn the_setup_caches_cap_reads_bytes_or_a_unit() {
        let cap =
            |v: &str| load(&[], &[("REEVAL_SETUP_CACHE_MAX", v)]).map(|s| s.setup_cache_max_bytes);
        assert_eq!(load(&[], &[]).unwrap().setup_cache_max_bytes, 20 << 30);
        assert_eq!(cap("1048576").unwrap(), 1 << 20);
        assert_eq!(cap("500 MiB").unwrap(), 500 << 20);
        assert_eq!(cap("2GiB").unwrap(), 2 << 30);
        let e = cap("lots").unwrap_err().to_string();
        assert!(e.contains("REEVAL_SETUP_CACHE_MAX") && e.contains("lots"), "{e}");
    }

    #[test]
    fn a_variable_that_does_not_read_is_an_error_naming_it() {
        let e = load(&[], &[("REEVAL_VERBOSE", "maybe")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to read REEVAL_VERBOSE=`maybe`: expected 1/0, true/false, yes/no or on/off"
        );
        // Even when the flag would override it.
        assert!(load(&["-v"], &[("REEVAL_VERBOSE", "maybe")]).is_err());
        for (name, value) in [
            ("REEVAL_TRIALS", "three"),
            ("REEVAL_TRIALS", "0"),
            ("RUST_TEST_THREADS", "0"),
            ("REEVAL_TIMEOUT", "soon"),
            ("REEVAL_JUDGE", "nope"),
        ] {
            let e = load(&[], &[(name, value)]).unwrap_err().to_string();
            assert!(e.starts_with(&format!("failed to read {name}=`{value}`: ")), "{e}");
        }
    }

    #[test]
    fn the_judge_comes_from_the_file_else_the_environment() {
        let s = load(&[], &[("REEVAL_JUDGE", "openai:gpt-4.1")]).unwrap();
        assert_eq!(s.judge.as_deref(), Some("openai:gpt-4.1"));
        assert_eq!(s.run_config().judge.as_deref(), Some("openai:gpt-4.1"));
        let path = config_file("judge", "judge = \"anthropic:claude-sonnet-4-5\"\n");
        let s = load(
            &[],
            &[("REEVAL_JUDGE", "openai:gpt-4.1"), ("REEVAL_CONFIG", path.to_str().unwrap())],
        )
        .unwrap();
        assert_eq!(s.judge.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    }

    #[test]
    fn env_files_come_from_the_file_then_the_environment() {
        let path = config_file("envfile", "env_file = \"keys.env\"\n");
        let s = load(
            &[],
            &[("REEVAL_ENV_FILE", "/other.env"), ("REEVAL_CONFIG", path.to_str().unwrap())],
        )
        .unwrap();
        assert_eq!(s.env_file, Some(path.parent().unwrap().join("keys.env")));
        assert_eq!(s.fallback_env_file, Some(PathBuf::from("/other.env")));
        let c = s.run_config();
        assert_eq!((c.env_file, c.fallback_env_file), (s.env_file, s.fallback_env_file));
    }

    fn env_file(name: &str, text: &str) -> PathBuf {
        let path = config_file(name, "").with_file_name(format!("{name}.env"));
        std::fs::write(&path, text).unwrap();
        path
    }

    fn no_host(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn env_files_are_read_with_dotenv_syntax_and_in_order() {
        let first = env_file(
            "first",
            "# keys\nexport A=from-first\nB=\"two words\"\nC='${NOT_EXPANDED}'\nD=\nA=first-again\n",
        );
        let fallback = env_file("fallback", "A=from-fallback\nE=only-in-fallback\n");
        let s = SecretLookup::load(Some(&first), Some(&fallback)).unwrap().with_host(no_host);
        assert_eq!(
            s.get("A").as_deref(),
            Some("first-again"),
            "the configured file wins; within it the last value"
        );
        assert_eq!(s.get("B").as_deref(), Some("two words"));
        assert_eq!(s.get("C").as_deref(), Some("${NOT_EXPANDED}"));
        assert_eq!(s.get("D"), None, "empty counts as unset");
        assert_eq!(s.get("E").as_deref(), Some("only-in-fallback"));
        // The host environment wins over every file.
        let s = s.with_host(|k| (k == "A").then(|| "from-host".to_string()));
        assert_eq!(s.get("A").as_deref(), Some("from-host"));
        assert!(!format!("{s:?}").contains("first-again"), "debug output holds no value");
    }

    #[test]
    fn a_missing_env_file_is_an_error_naming_it() {
        let e = SecretLookup::load(None, Some(Path::new("/nonexistent/keys.env"))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to read the env file /nonexistent/keys.env (REEVAL_ENV_FILE): it does not exist"
        );
        let e = SecretLookup::load(Some(Path::new("/nonexistent/suite.env")), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/suite.env (env_file)"), "{e}");
    }

    #[test]
    fn a_malformed_line_is_an_error_naming_file_and_line_but_not_the_value() {
        let path = env_file("malformed", "GOOD=1\n\nAPI_KEY=sk-secret value\n");
        let e = SecretLookup::load(Some(&path), None).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string())
                && e.contains("line 3 (`API_KEY`) does not parse"),
            "{e}"
        );
        assert!(!e.contains("sk-secret"), "the value stays out of the message: {e}");
        assert_eq!(failing_line("A=1\nB='open\nC=2\n"), Some(2), "a quote left open");
        assert_eq!(
            failing_line("A=\"multi\nline\"\nB=x y\n"),
            Some(3),
            "after a value over two lines"
        );
        assert_eq!(failing_line("# only = a comment\nA=1\n"), None);
    }

    #[tokio::test]
    async fn preflight_names_an_env_file_that_does_not_exist() {
        let config = RunConfig {
            env_file: Some(PathBuf::from("/nonexistent/suite.env")),
            ..RunConfig::default()
        };
        let runner = crate::runner::Runner::new(config, crate::harness::HarnessRegistry::new());
        let e = runner.run(Vec::new()).await.unwrap_err();
        assert!(
            e.missing
                .iter()
                .any(|m| m.starts_with("failed to read the env file /nonexistent/suite.env")),
            "{e}"
        );
    }

    #[test]
    fn a_missing_or_malformed_config_file_is_an_error_naming_it() {
        let e = load(&[], &[("REEVAL_CONFIG", "/nonexistent/suite.toml")]).unwrap_err().to_string();
        assert!(e.starts_with("failed to read the suite config /nonexistent/suite.toml"), "{e}");
        let path = config_file("malformed", "judge = \"openai:gpt-4.1\"\nrecord_dir = 3\n");
        let e = load(&[], &[("REEVAL_CONFIG", path.to_str().unwrap())]).unwrap_err().to_string();
        assert!(
            e.contains(&path.display().to_string())
                && e.contains("line 2")
                && e.contains("`record_dir`"),
            "{e}"
        );
    }
}
