//! The environment's half of the settings: each option's variable (named in
//! [`super::table`]) read by the kind of value it takes. An empty variable
//! counts as unset; one that is set but does not read is an error naming it
//! and its value.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::SettingsError;
use super::args::split_list;
use super::table::{self, Opt};

/// The process environment, as [`Settings::load`](super::Settings::load) takes it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The git workspace cache of this process (`REEVAL_CACHE_DIR`, read once).
pub fn cache_dir() -> &'static Path {
    static DIR: LazyLock<PathBuf> = LazyLock::new(|| cache_dir_from(&process_env));
    &DIR
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

    pub(super) fn fail(name: &str, value: &str, expected: impl Into<String>) -> SettingsError {
        SettingsError::Variable {
            name: name.into(),
            value: value.into(),
            expected: expected.into(),
        }
    }

    /// A yes/no word.
    pub(super) fn flag(&self, opt: &Opt) -> Result<Option<bool>, SettingsError> {
        self.get(opt)
            .map(|v| {
                parse_bool(&v).ok_or_else(|| {
                    Self::fail(opt.var(), &v, "expected 1/0, true/false, yes/no or on/off")
                })
            })
            .transpose()
    }

    /// A whole number of at least 1.
    pub(super) fn count<T: std::str::FromStr + PartialEq + From<u8>>(
        &self,
        opt: &Opt,
    ) -> Result<Option<T>, SettingsError> {
        let Some(v) = self.get(opt) else { return Ok(None) };
        match v.trim().parse::<T>() {
            Ok(n) if n != T::from(0) => Ok(Some(n)),
            _ => Err(Self::fail(opt.var(), &v, "expected a whole number of at least 1")),
        }
    }

    /// A whole number, 0 included.
    pub(super) fn whole<T: std::str::FromStr>(
        &self,
        opt: &Opt,
    ) -> Result<Option<T>, SettingsError> {
        let Some(v) = self.get(opt) else { return Ok(None) };
        v.trim()
            .parse::<T>()
            .map(Some)
            .map_err(|_| Self::fail(opt.var(), &v, "expected a whole number"))
    }

    /// A size: whole bytes, or a whole number of `KiB`, `MiB` or `GiB`.
    pub(super) fn bytes(&self, opt: &Opt) -> Result<Option<u64>, SettingsError> {
        let Some(v) = self.get(opt) else { return Ok(None) };
        let t = v.trim();
        let (number, shift) = [("GiB", 30), ("MiB", 20), ("KiB", 10)]
            .iter()
            .find_map(|(unit, shift)| t.strip_suffix(unit).map(|n| (n.trim(), *shift)))
            .unwrap_or((t, 0));
        number.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << shift)).map(Some).ok_or_else(
            || Self::fail(opt.var(), &v, "expected bytes, or a whole number of KiB, MiB or GiB"),
        )
    }

    /// A rate between 0 and 1.
    pub(super) fn rate(&self, opt: &Opt) -> Result<Option<f64>, SettingsError> {
        let Some(v) = self.get(opt) else { return Ok(None) };
        match v.trim().parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(Some(r)),
            _ => Err(Self::fail(opt.var(), &v, "expected a rate between 0 and 1, like 0.66")),
        }
    }

    /// A duration like `10m` or `90s`.
    pub(super) fn duration(&self, opt: &Opt) -> Result<Option<Duration>, SettingsError> {
        let Some(v) = self.get(opt) else { return Ok(None) };
        humantime::parse_duration(v.trim()).map(Some).map_err(|e| {
            Self::fail(opt.var(), &v, format!("expected a duration like 10m or 90s ({e})"))
        })
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

/// The usual yes/no words, case-insensitive: 1/0, true/false, yes/no, on/off.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

pub(super) fn cache_dir_from(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    Vars(env).path(&table::CACHE_DIR).unwrap_or_else(|| std::env::temp_dir().join("reeval-cache"))
}

/// `NEXTEST_RUN_ID`, or `<utc date>T<time>-<pid>-<nonce>`.
pub(crate) fn run_id_from(env: &dyn Fn(&str) -> Option<String>) -> String {
    if let Some(id) = Vars(env).get(&table::RUN_ID) {
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
