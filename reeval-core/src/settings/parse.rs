//! Walking the command line of an eval suite into [`Args`]: the flags of
//! [`super::table`] only, each set by its entry's setter. Parsed with
//! `lexopt`, so it reads like any getopt-style command line.

use std::ffi::OsString;

use super::given::{Given, UsageError};
use super::table::{self, Args};

/// lexopt's own errors, in the words of this command line.
fn usage(e: lexopt::Error) -> UsageError {
    UsageError(match e {
        lexopt::Error::MissingValue { option: Some(option) } => format!("{option} needs a value"),
        lexopt::Error::UnexpectedValue { option, .. } => format!("{option} takes no value"),
        lexopt::Error::UnexpectedOption(option) => format!("unknown option `{option}`; see --help"),
        other => other.to_string(),
    })
}

impl Args {
    /// Parses `argv` (without the program name): the flags of
    /// [`OPTIONS`](super::table::OPTIONS) only; their `REEVAL_*` twins are
    /// merged by [`Settings::load`](crate::settings::Settings::load).
    /// A value that is not UTF-8 is a usage error rather than a panic.
    ///
    /// # Errors
    /// A [`UsageError`] for an unknown flag or a bad value; `Ok(None)` means `--help` was printed.
    pub fn parse<I>(argv: I) -> Result<Option<Args>, UsageError>
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        use lexopt::prelude::*;

        let mut a = Args::default();
        let mut p = lexopt::Parser::from_args(argv);
        while let Some(arg) = p.next().map_err(usage)? {
            let (opt, set, flag) = match arg {
                Short('h') | Long("help") => {
                    println!("{}", super::render::help());
                    return Ok(None);
                }
                // Everything after `--` comes here too, even when it starts with `-`.
                Value(filter) => {
                    a.filters.push(
                        filter
                            .into_string()
                            .map_err(|v| UsageError(format!("filter {v:?} is not valid UTF-8")))?,
                    );
                    continue;
                }
                Short(c) => match table::flag(None, Some(c)) {
                    Some((opt, set)) => (opt, set, format!("-{c}")),
                    None => return Err(UsageError(format!("unknown option `-{c}`; see --help"))),
                },
                Long(name) => match table::flag(Some(name), None) {
                    Some((opt, set)) => (opt, set, format!("--{name}")),
                    None => {
                        return Err(UsageError(format!("unknown option `--{name}`; see --help")));
                    }
                },
            };
            let value = match opt.value {
                Some(_) => Some(p.value().map_err(usage)?),
                None => None,
            };
            set(&mut a, Given { opt, flag, value })?;
        }
        Ok(Some(a))
    }
}
