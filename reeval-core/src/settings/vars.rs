//! The environment's layer of the settings: each option's variable (named in
//! [`super::table`]) read by its type ([`Value`]). An empty variable counts
//! as unset; one that is set but does not read is an error naming it and its
//! value. Also the defaults that describe where the process runs.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use super::SettingsError;
use super::given::split_list;
use super::opt::Opt;
use super::value::{Source, Value};

/// The process environment, as [`Settings::load`](super::Settings::load) takes it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The variables of one lookup; an empty value counts as unset.
pub(super) struct Vars<'a>(pub(super) &'a dyn Fn(&str) -> Option<String>);

impl Vars<'_> {
    /// The variable `name`, unless unset or empty.
    pub(super) fn named(&self, name: &str) -> Option<String> {
        (self.0)(name).filter(|v| !v.trim().is_empty())
    }

    /// The variable of `opt`, as text.
    pub(super) fn get(&self, opt: &Opt) -> Option<String> {
        self.named(opt.var())
    }

    /// A comma-separated list (empty when unset).
    pub(super) fn list(&self, opt: &Opt) -> Vec<String> {
        self.get(opt).map(|v| split_list(&v)).unwrap_or_default()
    }

    /// A path.
    pub(super) fn path(&self, opt: &Opt) -> Option<PathBuf> {
        self.get(opt).map(PathBuf::from)
    }
}

impl Source for Vars<'_> {
    type Error = SettingsError;

    /// The variable of `opt`, read by its type; unset, empty or no variable: `None`.
    fn read<T: Value>(&self, opt: &'static Opt) -> Result<Option<T>, SettingsError> {
        match opt.env.and_then(|name| self.named(name)) {
            Some(text) => T::from_var(&text, opt),
            None => Ok(None),
        }
    }
}

/// The git workspace cache `REEVAL_CACHE_DIR` names, else `<temp>/reeval-cache`.
pub(super) fn cache_dir_or_default(named: Option<PathBuf>) -> PathBuf {
    named.unwrap_or_else(|| std::env::temp_dir().join("reeval-cache"))
}

/// The run id `NEXTEST_RUN_ID` names, else `<utc date>T<time>-<pid>-<nonce>`.
pub(super) fn run_id_or_new(named: Option<String>) -> String {
    if let Some(id) = named {
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
        .named("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("reeval")
        .join("runs")
}
