//! The run's configuration: [`RunConfig`], which the runner builds from
//! [`Settings`] (settings sit below the runner and name nothing of it; their
//! data types are theirs: [`crate::settings::SuiteConfig`], …).

use std::path::PathBuf;
use std::time::Duration;

use crate::settings::{self, EngineSpec, KubernetesConfig, Settings};

/// How a run is configured.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The run id (`NEXTEST_RUN_ID` when under nextest, so its processes share a run).
    pub run_id: String,
    /// Runs are recorded under `<record_dir>/<run_id>/`.
    pub record_dir: PathBuf,
    /// Print every phase.
    pub verbose: bool,
    /// libtest-style per-eval lines and the summary on stdout.
    pub print: bool,
    /// Harnesses replacing every eval's own.
    pub harnesses: Vec<String>,
    /// Trials replacing every eval's own.
    pub trials: Option<u32>,
    /// Budget replacing every eval's own.
    pub timeout: Option<Duration>,
    /// Attempts at once.
    pub threads: usize,
    /// Retries of an infra error, each with a fresh sandbox.
    pub infra_retries: u32,
    /// The pass rate at which a cell passes, replacing every eval's own `min_pass_rate`.
    pub min_pass_rate: Option<f64>,
    /// Prices per model, for the summary's costs.
    pub prices: crate::prices::PriceTable,
    /// The suite's judge model, for evals that name none (`judge` in `reeval.toml`).
    pub judge: Option<String>,
    /// A `.env` file of secrets and credentials read by preflight, before
    /// `fallback_env_file`; the host environment still wins over both.
    pub env_file: Option<PathBuf>,
    /// `REEVAL_ENV_FILE`: read for names that neither the host environment nor `env_file` sets.
    pub fallback_env_file: Option<PathBuf>,
    /// cargo-nextest runs this process: each process writes its own `summary.<pid>.json`.
    pub under_nextest: bool,
    /// The egress gateway's settings (test roots and host mappings; see [`crate::egress::EgressSettings`]).
    pub egress: crate::egress::EgressSettings,
    /// Engines to spread attempts over; empty: the one `DOCKER_HOST` names (or the backend given).
    pub engines: Vec<EngineSpec>,
    /// Whether prepared sandboxes are cached as images (`--no-setup-cache` turns it off).
    pub setup_cache: bool,
    /// The setup cache's size cap in bytes (`REEVAL_SETUP_CACHE_MAX`): past it, the least
    /// recently used cached setups are removed after each commit.
    pub setup_cache_max_bytes: u64,
    /// Containers created ahead of their slot (`--prestart N`): fresh, never reused.
    pub prestart: usize,
    /// The Kubernetes backend instead of Docker, with its settings (needs the feature `kubernetes`).
    pub kubernetes: Option<KubernetesConfig>,
    /// Compare two arms (`--compare control,with_skill`, `--harness a --vs b`).
    pub compare: Option<crate::compare::Arms>,
    /// Run every eval with this variant (`--variant`); its records name it as their arm.
    pub variant: Option<crate::compare::Variant>,
    /// The suite binary running, recorded in the summary (set by [`main`](crate::runner::main)).
    pub suite: Option<crate::record::SuiteIdentity>,
    /// Image names mapped to others (`[images]` in `reeval.toml`), applied to
    /// every eval's environment when the run starts.
    pub images: crate::image_map::ImageMap,
    /// The part of a partitioned run this is, recorded in the summary (the
    /// cells are chosen by [`main`](crate::runner::main); see [`crate::partition`]).
    pub partition: Option<crate::settings::Partition>,
}

impl RunConfig {
    /// The backend these settings choose: Kubernetes with its settings, else
    /// the Docker engines (a pool, or the one of `DOCKER_HOST`).
    pub fn backend(&self) -> crate::sandbox::BackendConfig {
        use crate::sandbox::BackendConfig;
        match &self.kubernetes {
            Some(config) => BackendConfig::Kubernetes(Box::new(config.clone())),
            None => BackendConfig::Docker { engines: self.engines.clone() },
        }
    }
}

impl Default for RunConfig {
    /// The defaults and where this process runs ([`Settings::base`]); no flags, twins or `reeval.toml`.
    fn default() -> Self {
        Settings::base(settings::process_env).run_config()
    }
}

impl Settings {
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
            egress: crate::egress::EgressSettings {
                allow_internal: self.allow_internal.clone(),
                upstream_proxy: self.upstream_proxy.clone(),
                ..Default::default()
            },
            engines: self.engines.clone(),
            setup_cache: self.setup_cache,
            setup_cache_max_bytes: self.setup_cache_max_bytes,
            prestart: self.prestart,
            kubernetes: self.kubernetes.clone(),
            compare: None,
            variant: None,
            suite: None,
            images: self.images.clone(),
            partition: self.partition,
        }
    }
}

/// `NEXTEST_RUN_ID`, or `<utc date>T<time>-<pid>`.
pub fn new_run_id() -> String {
    settings::run_id_from(&settings::process_env)
}

/// `$CARGO_TARGET_DIR/reeval/runs`, or `target/reeval/runs`.
pub fn default_record_dir() -> PathBuf {
    settings::default_record_dir_from(&settings::process_env)
}
