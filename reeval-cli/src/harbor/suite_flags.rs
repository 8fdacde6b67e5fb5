//! The eval suite's flags on `reeval harbor run`, made from the option table
//! (`reeval_core::settings::table::OPTIONS`), the one place each is spelled:
//! clap lists them in `--help`, matches them beside Harbor's flags in any
//! order and suggests the nearest for a typo; what was given is handed back
//! as the suite's own command line, which the suite's parser reads as it
//! reads any suite's.

use std::ffi::OsString;

use clap::{Arg, ArgAction, ArgMatches};
use reeval_core::settings::table::{Group, OPTIONS, Opt};

/// The heading the suite's flags are listed under.
pub const HEADING: &str =
    "Suite options (an eval suite's, as `cargo test --test evals -- …` takes them)";

/// The options that have a flag, `--record-dir` aside (every command's: [`record_dir_arg`]).
fn flagged() -> impl Iterator<Item = &'static Opt> {
    OPTIONS
        .iter()
        .filter(|o| (o.long.is_some() || o.short.is_some()) && o.long != Some("record-dir"))
}

/// clap's id of an option's flag: its long name, else its short letter
/// (leaked once per call: clap's ids are `'static`, and a short-only flag,
/// `-Z`, has no static name of its own).
pub fn id(o: &Opt) -> &'static str {
    match (o.long, o.short) {
        (Some(long), _) => long,
        (None, Some(short)) => Box::leak(short.to_string().into_boxed_str()),
        (None, None) => "",
    }
}

/// The flag of `o` for clap: a value taken as given (repeatable; the
/// suite's parser checks it), or a switch.
fn arg(o: &'static Opt) -> Arg {
    let mut help = if o.group == Group::Accepted {
        "accepted for libtest's sake; changes nothing".to_string()
    } else {
        o.help.to_string()
    };
    if let Some(env) = o.env {
        help.push_str(&format!(" [env: {env}]"));
    }
    let mut a = Arg::new(id(o)).help(help).help_heading(HEADING);
    if let Some(long) = o.long {
        a = a.long(long);
    }
    if let Some(short) = o.short {
        a = a.short(short);
    }
    match o.value {
        Some(value) => a
            .value_name(value)
            .action(ArgAction::Append)
            .value_parser(clap::builder::ValueParser::os_string())
            .allow_hyphen_values(true),
        // A switch given twice is as given once, as the suite's parser takes it.
        None => a.action(ArgAction::SetTrue).overrides_with(id(o)),
    }
}

/// `--record-dir DIR`, from the table: a flag of every command.
pub fn record_dir_arg() -> Arg {
    let o =
        OPTIONS.iter().find(|o| o.long == Some("record-dir")).expect("the table has --record-dir");
    Arg::new("record-dir")
        .long("record-dir")
        .value_name(o.value.unwrap_or("DIR"))
        .value_parser(clap::builder::ValueParser::os_string())
        .help(format!(
            "{} [env: {}; default {}]",
            o.help,
            o.env.unwrap_or(""),
            o.default.replace('`', "")
        ))
}

/// `harbor run` with the suite's flags.
pub fn add(cmd: clap::Command) -> clap::Command {
    cmd.args(flagged().map(arg))
}

/// The suite flags given, as the suite's command line (`--trials=3`, `-v`),
/// `--record-dir` included.
pub fn argv(m: &ArgMatches) -> Vec<OsString> {
    let mut out = Vec::new();
    for o in flagged().chain(OPTIONS.iter().filter(|o| o.long == Some("record-dir"))) {
        let id = id(o);
        let name = match (o.long, o.short) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => continue,
        };
        if o.value.is_some() {
            for value in m.get_raw(id).into_iter().flatten() {
                out.push(OsString::from(&name));
                out.push(value.to_os_string());
            }
        } else if m.get_flag(id) {
            out.push(OsString::from(&name));
        }
    }
    out
}

/// Whether the suite flag `long` was given.
pub fn given(m: &ArgMatches, long: &str) -> bool {
    m.contains_id(long)
        && m.value_source(long).is_some_and(|s| s == clap::parser::ValueSource::CommandLine)
}

/// The last value of the suite flag `long`, parsed.
pub fn value<T: std::str::FromStr>(m: &ArgMatches, long: &str) -> Option<T> {
    m.get_raw(long)?.next_back()?.to_str()?.parse().ok()
}
