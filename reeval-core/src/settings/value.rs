//! How each type of setting reads from each source: a flag's value, a
//! variable's text and a `reeval.toml` value ([`Value`]), by the kind of
//! value its option takes ([`Kind`]). The table's generated code
//! (`generate.rs`) calls these for every option with a field, so reading a
//! new option of a known type is nothing to write.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::SettingsError;
use super::given::{Given, UsageError, split_list};
use super::opt::{Kind, Opt};

/// Why a `reeval.toml` value does not read.
#[derive(Debug)]
pub(crate) enum FileProblem {
    /// It is not the kind of value the key takes (`trials = "3"`).
    Kind,
    /// It is that kind, but not a value the key takes (`timeout = "soon"`).
    Value(String),
}

/// Where a layer of settings is read from: the variables or `reeval.toml`.
pub(crate) trait Source {
    /// What a value that does not read is.
    type Error;
    /// The value of `opt` here, if this source sets it.
    fn read<T: Value>(&self, opt: &'static Opt) -> Result<Option<T>, Self::Error>;
}

/// A setting's type, read from each source.
pub(crate) trait Value: Sized {
    /// From a flag's value.
    fn from_flag(given: Given) -> Result<Self, UsageError>;
    /// A flag given (again): its value replaces the one before; lists add up.
    fn add(slot: &mut Option<Self>, given: Given) -> Result<(), UsageError> {
        *slot = Some(Self::from_flag(given)?);
        Ok(())
    }
    /// From a variable's text (not empty); `None`: as if unset (an empty list).
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError>;
    /// From `reeval.toml`, whose directory relative paths are taken from.
    fn from_toml(value: &toml::Value, opt: &Opt, dir: &Path) -> Result<Option<Self>, FileProblem>;
}

/// A field of [`Args`](super::Args) that only a flag sets.
pub(crate) trait ArgField {
    /// Sets it from the flag.
    fn set(&mut self, given: Given) -> Result<(), UsageError>;
}

impl ArgField for bool {
    fn set(&mut self, _: Given) -> Result<(), UsageError> {
        *self = true;
        Ok(())
    }
}

impl ArgField for Vec<String> {
    fn set(&mut self, given: Given) -> Result<(), UsageError> {
        self.push(given.text()?);
        Ok(())
    }
}

impl ArgField for Option<String> {
    fn set(&mut self, given: Given) -> Result<(), UsageError> {
        *self = Some(given.text()?);
        Ok(())
    }
}

/// A variable that does not read.
fn bad_var(opt: &Opt, value: &str, expected: impl Into<String>) -> SettingsError {
    SettingsError::Variable {
        name: opt.var().into(),
        value: value.into(),
        expected: expected.into(),
    }
}

/// Runs the option's check on one entry.
fn checked(opt: &Opt, entry: &str) -> Result<(), String> {
    opt.check.map_or(Ok(()), |check| check(entry))
}

impl Value for bool {
    fn from_flag(_: Given) -> Result<Self, UsageError> {
        Ok(true)
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        parse_bool(text)
            .map(Some)
            .ok_or_else(|| bad_var(opt, text, "expected 1/0, true/false, yes/no or on/off"))
    }
    fn from_toml(value: &toml::Value, _: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        value.as_bool().map(Some).ok_or(FileProblem::Kind)
    }
}

/// Whole numbers: `Count` (at least 1), `Whole`, and `Bytes` (with a unit).
macro_rules! whole {
    ($($t:ty),*) => {$(
        impl Value for $t {
            fn from_flag(given: Given) -> Result<Self, UsageError> {
                let (flag, count) = (given.flag.clone(), given.opt.kind == Kind::Count);
                let n: $t = given.number()?;
                if count && n == 0 {
                    return Err(UsageError(format!("{flag} must be at least 1")));
                }
                Ok(n)
            }
            fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
                let t = text.trim();
                match opt.kind {
                    Kind::Count => match t.parse::<$t>() {
                        Ok(n) if n != 0 => Ok(Some(n)),
                        _ => Err(bad_var(opt, text, "expected a whole number of at least 1")),
                    },
                    Kind::Bytes => bytes(t).and_then(|n| <$t>::try_from(n).ok()).map(Some).ok_or_else(
                        || bad_var(opt, text, "expected bytes, or a whole number of KiB, MiB or GiB"),
                    ),
                    _ => t.parse::<$t>().map(Some).map_err(|_| bad_var(opt, text, "expected a whole number")),
                }
            }
            fn from_toml(value: &toml::Value, opt: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
                let n = value.as_integer().ok_or(FileProblem::Kind)?;
                let n = <$t>::try_from(n).map_err(|_| FileProblem::Kind)?;
                if opt.kind == Kind::Count && n == 0 {
                    return Err(FileProblem::Value("must be at least 1".into()));
                }
                Ok(Some(n))
            }
        }
    )*};
}
whole!(u32, usize, u64);

/// Whole bytes, or a whole number of `KiB`, `MiB` or `GiB`.
fn bytes(t: &str) -> Option<u64> {
    let (number, shift) = [("GiB", 30), ("MiB", 20), ("KiB", 10)]
        .iter()
        .find_map(|(unit, shift)| t.strip_suffix(unit).map(|n| (n.trim(), *shift)))
        .unwrap_or((t, 0));
    number.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << shift))
}

/// A rate between 0 and 1.
impl Value for f64 {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        let flag = given.flag.clone();
        let rate: f64 = given.number()?;
        if !(0.0..=1.0).contains(&rate) {
            return Err(UsageError(format!("{flag} expects a rate between 0 and 1, got {rate}")));
        }
        Ok(rate)
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        match text.trim().parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => Ok(Some(r)),
            _ => Err(bad_var(opt, text, "expected a rate between 0 and 1, like 0.66")),
        }
    }
    fn from_toml(value: &toml::Value, _: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        let rate = match value {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(n) => *n as f64,
            _ => return Err(FileProblem::Kind),
        };
        if !(0.0..=1.0).contains(&rate) {
            return Err(FileProblem::Value(format!("{rate} is not between 0 and 1")));
        }
        Ok(Some(rate))
    }
}

impl Value for Duration {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        given.duration()
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        humantime::parse_duration(text.trim())
            .map(Some)
            .map_err(|e| bad_var(opt, text, format!("expected a duration like 10m or 90s ({e})")))
    }
    fn from_toml(value: &toml::Value, _: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        let t = value.as_str().ok_or(FileProblem::Kind)?;
        humantime::parse_duration(t).map(Some).map_err(|e| {
            FileProblem::Value(format!("`{t}` is not a duration like 10m or 90s ({e})"))
        })
    }
}

/// A path; in `reeval.toml`, relative to the file.
impl Value for PathBuf {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        Ok(given.path())
    }
    fn from_var(text: &str, _: &Opt) -> Result<Option<Self>, SettingsError> {
        Ok(Some(PathBuf::from(text)))
    }
    fn from_toml(value: &toml::Value, _: &Opt, dir: &Path) -> Result<Option<Self>, FileProblem> {
        let path = PathBuf::from(value.as_str().ok_or(FileProblem::Kind)?);
        Ok(Some(if path.is_relative() { dir.join(path) } else { path }))
    }
}

/// A word or a name, as written (a [`Kind::Word`] must be one of its words).
impl Value for String {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        given.text()
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        if !is_word(text, opt) {
            return Err(bad_var(opt, text, opt.kind.words()));
        }
        checked(opt, text).map_err(|e| bad_var(opt, text, e))?;
        Ok(Some(text.to_string()))
    }
    fn from_toml(value: &toml::Value, opt: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        let text = value.as_str().ok_or(FileProblem::Kind)?;
        if !is_word(text, opt) {
            return Err(FileProblem::Value(format!("`{text}` is not {}", opt.kind.words())));
        }
        checked(opt, text).map_err(FileProblem::Value)?;
        Ok(Some(text.to_string()))
    }
}

/// Whether `text` is one of the words of a [`Kind::Word`] (any text is, for another kind).
fn is_word(text: &str, opt: &Opt) -> bool {
    !matches!(opt.kind, Kind::Word(words) if !words.contains(&text.trim()))
}

/// A comma-separated list (in `reeval.toml`, a list; for [`Kind::OneOrList`],
/// one string or a list). Empty: as if unset.
impl Value for Vec<String> {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        given.list()
    }
    fn add(slot: &mut Option<Self>, given: Given) -> Result<(), UsageError> {
        let more = given.list()?;
        let list = slot.get_or_insert_default();
        list.extend(more);
        if list.is_empty() {
            *slot = None;
        }
        Ok(())
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        let list = split_list(text);
        for entry in &list {
            checked(opt, entry).map_err(|e| bad_var(opt, entry, e))?;
        }
        Ok(Some(list).filter(|l| !l.is_empty()))
    }
    fn from_toml(value: &toml::Value, opt: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        let list: Vec<String> = match value {
            toml::Value::String(one) if matches!(opt.kind, Kind::OneOrList(..)) => {
                vec![one.clone()]
            }
            toml::Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map(str::to_string).ok_or(FileProblem::Kind))
                .collect::<Result<_, _>>()?,
            _ => return Err(FileProblem::Kind),
        };
        for entry in &list {
            checked(opt, entry).map_err(FileProblem::Value)?;
        }
        Ok(Some(list).filter(|l| !l.is_empty()))
    }
}

/// `none`, or an `http://` proxy. A flag's value is checked with the rest of
/// the settings ([`Settings::load`](super::Settings::load)), so that a bad one
/// is a settings error like the variable's.
impl Value for crate::egress::UpstreamProxySetting {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        Ok(Self::parse(&given.text()?))
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        let proxy = Self::parse(text);
        proxy.resolve(|_| None).map_err(|e| bad_var(opt, text, e))?;
        Ok(Some(proxy))
    }
    fn from_toml(value: &toml::Value, _: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        let proxy = Self::parse(value.as_str().ok_or(FileProblem::Kind)?);
        proxy.resolve(|_| None).map_err(FileProblem::Value)?;
        Ok(Some(proxy))
    }
}

/// A table of `reeval.toml` read by serde (a backend's settings, `[kubernetes]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table<T>(pub T);

/// A table has no flag and no variable (the table's test holds every flag to a setter of its own).
impl<T: serde::de::DeserializeOwned> Value for Table<T> {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        Err(UsageError(format!("{} sets a table of reeval.toml", given.flag)))
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        Err(bad_var(opt, text, "a table of reeval.toml, not a variable"))
    }
    fn from_toml(value: &toml::Value, _: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        if !value.is_table() {
            return Err(FileProblem::Kind);
        }
        T::deserialize(value.clone())
            .map(|t| Some(Table(t)))
            .map_err(|e| FileProblem::Value(e.message().trim().replace('\n', "; ")))
    }
}

/// `hash:K/N` or `count:K/N`.
impl Value for crate::partition::Partition {
    fn from_flag(given: Given) -> Result<Self, UsageError> {
        let flag = given.flag.clone();
        given.text()?.parse().map_err(|e| UsageError(format!("{flag} {e}")))
    }
    fn from_var(text: &str, opt: &Opt) -> Result<Option<Self>, SettingsError> {
        text.parse()
            .map(Some)
            .map_err(|e: crate::partition::PartitionError| bad_var(opt, text, e.to_string()))
    }
    fn from_toml(value: &toml::Value, _: &Opt, _: &Path) -> Result<Option<Self>, FileProblem> {
        let text = value.as_str().ok_or(FileProblem::Kind)?;
        text.parse()
            .map(Some)
            .map_err(|e: crate::partition::PartitionError| FileProblem::Value(e.to_string()))
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
