//! The run's configuration: [`RunConfig`], the run's [`Settings`] (settings
//! sit below the runner and name nothing of it) and what the run adds.

use std::path::PathBuf;

use crate::settings::{self, Settings};

/// How a run is configured: every setting ([`Settings`], which holds the
/// backend) and what the run adds to them: whether it prints, the arms and
/// variant resolved among the suite's, the suite binary, the egress
/// gateway's settings.
///
/// Built from settings with [`RunConfig::from`]; to change a setting of the
/// defaults: `RunConfig::from(Settings { trials: Some(2), ..Settings::default() })`.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// Every setting of the run (flags, variables, `reeval.toml`, defaults).
    pub settings: Settings,
    /// libtest-style per-eval lines and the summary on stdout.
    pub print: bool,
    /// The egress gateway's settings: [`Settings::allow_internal`] and
    /// [`Settings::upstream_proxy`], and what only tests set (test roots and
    /// host mappings; see [`crate::egress::EgressSettings`]).
    pub egress: crate::egress::EgressSettings,
    /// Compare two arms (`--compare control,with_skill`, `--harness a --vs b`).
    pub compare: Option<crate::compare::Arms>,
    /// Run every eval with this variant (`--variant`); its records name it as their arm.
    pub variant: Option<crate::compare::Variant>,
    /// The suite binary running, recorded in the summary (set by [`main`](crate::runner::main)).
    pub suite: Option<crate::record::SuiteIdentity>,
}

impl From<Settings> for RunConfig {
    /// The run of these settings (`print` off: printing is the caller's choice;
    /// no arms, variant or suite yet: `main` resolves them).
    fn from(settings: Settings) -> Self {
        let egress = crate::egress::EgressSettings {
            allow_internal: settings.allow_internal.clone(),
            upstream_proxy: settings.upstream_proxy.clone(),
            ..Default::default()
        };
        RunConfig { settings, print: false, egress, compare: None, variant: None, suite: None }
    }
}

impl Default for RunConfig {
    /// The defaults and where this process runs ([`Settings::base`]); no flags, twins or `reeval.toml`.
    fn default() -> Self {
        Settings::default().into()
    }
}

impl Settings {
    /// The [`RunConfig`] of these settings (`print` off: printing is the caller's choice).
    pub fn run_config(&self) -> RunConfig {
        self.clone().into()
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
