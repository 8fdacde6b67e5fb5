//! What a flag's setter reads: the flag as the parser met it ([`Given`]),
//! and the error a command line that cannot be understood is ([`UsageError`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::opt::Opt;

/// `a, b,,c` → `[a, b, c]`.
pub(crate) fn split_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// A command line that cannot be understood (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse arguments: {0}")]
pub struct UsageError(pub String);

/// A flag as the parser met it: its option, its name (`--trials`, `-Z`)
/// and, for a flag that takes one, its value.
#[derive(Debug)]
pub(crate) struct Given {
    /// The option of the table it sets.
    pub(crate) opt: &'static Opt,
    /// The flag as written in messages.
    pub(crate) flag: String,
    pub(crate) value: Option<OsString>,
}

impl Given {
    fn raw(self) -> OsString {
        // The parser reads a value for every option that declares one.
        self.value.unwrap_or_else(|| panic!("{} takes a value", self.flag))
    }

    /// The value as UTF-8 text; anything else is a usage error rather than a panic.
    pub(crate) fn text(self) -> Result<String, UsageError> {
        let flag = self.flag.clone();
        self.raw()
            .into_string()
            .map_err(|v| UsageError(format!("{flag} expects UTF-8 text, got {v:?}")))
    }

    /// The value as a path (any bytes).
    pub(crate) fn path(self) -> PathBuf {
        PathBuf::from(self.raw())
    }

    /// The value as a number.
    pub(crate) fn number<T: std::str::FromStr>(self) -> Result<T, UsageError> {
        let flag = self.flag.clone();
        let s = self.text()?;
        s.parse().map_err(|_| UsageError(format!("{flag} expects a number, got `{s}`")))
    }

    /// The value as a duration (`10m`, `90s`).
    pub(crate) fn duration(self) -> Result<Duration, UsageError> {
        let s = self.text()?;
        humantime::parse_duration(&s).map_err(|e| {
            UsageError(format!("invalid duration `{s}` ({e}); write it like 10m or 90s"))
        })
    }

    /// The value as a comma-separated list, trimmed, empty entries dropped.
    pub(crate) fn list(self) -> Result<Vec<String>, UsageError> {
        Ok(split_list(&self.text()?))
    }
}
