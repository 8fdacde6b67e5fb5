//! What an option of the table ([`super::table`]) is: [`Opt`], where
//! `--help` lists it ([`Group`]) and the kind of value it takes ([`Kind`]).
//! A leaf: the table, the readers and the renderer all read these.

/// Where `--help` lists an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// libtest's flags, so `cargo test` and cargo-nextest can drive a suite.
    Libtest,
    /// libtest's flags that are accepted and change nothing.
    Accepted,
    /// reeval's own flags.
    Reeval,
    /// Settings with no flag: a variable, a `reeval.toml` key, or both.
    NoFlag,
}

/// The kind of value an option takes: how its variable reads, what its
/// `reeval.toml` key must hold, and how the documentation writes both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// On or off: a flag without a value, a yes/no word in the environment.
    YesNo,
    /// A whole number of at least 1.
    Count,
    /// A whole number, 0 included.
    Whole,
    /// A rate between 0 and 1.
    Rate,
    /// A duration like `10m` or `90s`.
    Duration,
    /// A path.
    Path,
    /// A word or a name.
    Text,
    /// A comma-separated list (in `reeval.toml`, a list of the given things).
    List(&'static str),
    /// One spec or a list of them (in `reeval.toml`): the thing, and an example.
    OneOrList(&'static str, &'static str),
    /// Bytes, or a whole number of `KiB`, `MiB` or `GiB`.
    Bytes,
    /// One of these words.
    Word(&'static [&'static str]),
    /// A table of `reeval.toml`, written as shown (`[prices.<model>]`).
    Table(&'static str),
    /// Whether the variable is set at all.
    Presence,
}

impl Kind {
    /// `` `docker` or `kubernetes` ``.
    pub fn words(self) -> String {
        match self {
            Kind::Word(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
                match quoted.split_last() {
                    Some((last, [])) => last.clone(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                }
            }
            _ => String::new(),
        }
    }
}

/// What an entry of an option's value must be: `Err` says why it is not.
pub(crate) type Check = fn(&str) -> Result<(), String>;

/// One option of a run.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// What it sets, as the documentation names it.
    pub name: &'static str,
    /// Where `--help` lists it.
    pub group: Group,
    /// Its long flag, without the dashes.
    pub long: Option<&'static str>,
    /// Its short flag.
    pub short: Option<char>,
    /// What its flag takes (`N`, `SPEC`); `None`: a switch.
    pub value: Option<&'static str>,
    /// Its environment variable.
    pub env: Option<&'static str>,
    /// How the variable's precedence differs, for the documentation (`, when the file names none`).
    pub env_note: &'static str,
    /// Its top-level key in `reeval.toml`.
    pub key: Option<&'static str>,
    /// The kind of value it takes.
    pub kind: Kind,
    /// Its default, in the documentation's words.
    pub default: &'static str,
    /// What it does, in `--help` and the documentation.
    pub help: &'static str,
    /// More for the documentation's table of flags (a link, a caveat).
    pub more: &'static str,
    /// What each entry of its value must be, checked wherever the value
    /// comes from (an engine address, an internal-address rule, a judge).
    pub(crate) check: Option<Check>,
}

impl Opt {
    pub(crate) const fn new(name: &'static str, group: Group) -> Opt {
        Opt {
            name,
            group,
            long: None,
            short: None,
            value: None,
            env: None,
            env_note: "",
            key: None,
            kind: Kind::Text,
            default: "",
            help: "",
            more: "",
            check: None,
        }
    }
    pub(crate) const fn long(self, long: &'static str) -> Opt {
        Opt { long: Some(long), ..self }
    }
    pub(crate) const fn short(self, short: char) -> Opt {
        Opt { short: Some(short), ..self }
    }
    pub(crate) const fn checks(self, check: Check) -> Opt {
        Opt { check: Some(check), ..self }
    }
    pub(crate) const fn takes(self, value: &'static str) -> Opt {
        Opt { value: Some(value), ..self }
    }
    pub(crate) const fn env(self, env: &'static str) -> Opt {
        Opt { env: Some(env), ..self }
    }
    pub(crate) const fn env_note(self, env_note: &'static str) -> Opt {
        Opt { env_note, ..self }
    }
    pub(crate) const fn key(self, key: &'static str) -> Opt {
        Opt { key: Some(key), ..self }
    }
    pub(crate) const fn kind(self, kind: Kind) -> Opt {
        Opt { kind, ..self }
    }
    pub(crate) const fn defaults_to(self, default: &'static str) -> Opt {
        Opt { default, ..self }
    }
    pub(crate) const fn help(self, help: &'static str) -> Opt {
        Opt { help, ..self }
    }
    pub(crate) const fn more(self, more: &'static str) -> Opt {
        Opt { more, ..self }
    }

    /// The variable, for an option that has one.
    pub(crate) fn var(&self) -> &'static str {
        self.env.unwrap_or_else(|| panic!("the option `{}` has no variable", self.name))
    }

    /// The key, for an option that has one.
    pub(crate) fn file_key(&self) -> &'static str {
        self.key.unwrap_or_else(|| panic!("the option `{}` has no reeval.toml key", self.name))
    }

    /// Whether it has a flag.
    pub fn has_flag(&self) -> bool {
        self.long.is_some() || self.short.is_some()
    }

    /// `--trials`, or `-Z` for a flag with only a short form.
    pub fn flag_name(&self) -> Option<String> {
        match (self.long, self.short) {
            (Some(long), _) => Some(format!("--{long}")),
            (None, Some(short)) => Some(format!("-{short}")),
            (None, None) => None,
        }
    }
}
