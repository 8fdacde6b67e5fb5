//! The command line of an eval suite: libtest's flags (so `cargo test` and
//! cargo-nextest drive it) plus reeval's own, each with a `REEVAL_*` twin
//! that [`crate::settings`] reads. Which flags exist, what they take and what
//! they set is [`super::table`]; `parse.rs` walks the command line; this
//! module holds what it fills ([`Args`]) and what the table's setters read (`Given`).
//!
//! Parsed with `lexopt`, so it reads like any getopt-style command line:
//! `--flag value` and `--flag=value`, clustered short flags (`-vq`), and `--`
//! ending the options (what follows is a filter even when it starts with `-`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// `a, b,,c` → `[a, b, c]`.
pub(crate) fn split_list(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// What the command line asked for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Args {
    /// Substring filters, OR-ed (exact names with `--exact`).
    pub filters: Vec<String>,
    /// Match filters exactly.
    pub exact: bool,
    /// Substrings to skip.
    pub skip: Vec<String>,
    /// List instead of run.
    pub list: bool,
    /// `--format terse` (or `json`, which lists like terse).
    pub terse: bool,
    /// `--format json`: libtest's JSON event stream on stdout instead of its lines.
    pub json: bool,
    /// Only ignored evals.
    pub ignored: bool,
    /// Ignored evals too.
    pub include_ignored: bool,
    /// Concurrent attempts.
    pub test_threads: Option<usize>,
    /// Print every phase.
    pub verbose: bool,
    /// Less output.
    pub quiet: bool,
    /// Harnesses to run every eval against, replacing the evals' own.
    pub harness: Vec<String>,
    /// Trials per cell, replacing the evals' own.
    pub trials: Option<u32>,
    /// Budget per attempt, replacing the evals' own.
    pub timeout: Option<Duration>,
    /// Where records go.
    pub record_dir: Option<PathBuf>,
    /// `--bench`: run nothing (evals are not benchmarks).
    pub bench: bool,
    /// `--tag`: only evals with one of these tags.
    pub tags: Vec<String>,
    /// `--rerun-failed`: only the cells that failed or had infra errors in the last run.
    pub rerun_failed: bool,
    /// `--resume RUN_ID`: complete that run, keeping the attempts it recorded.
    pub resume: Option<String>,
    /// `--min-pass-rate`: the pass rate at which a cell passes, replacing the evals' own.
    pub min_pass_rate: Option<f64>,
    /// `--junit PATH`: write JUnit XML there.
    pub junit: Option<PathBuf>,
    /// `--stream`: print the agent's events as they arrive.
    pub stream: bool,
    /// `--allow-empty`: a run that selects no eval exits 0 rather than 2.
    pub allow_empty: bool,
    /// `--no-setup-cache`: prepare every sandbox afresh.
    pub no_setup_cache: bool,
    /// `--prestart N`: create up to N containers ahead of their slot.
    pub prestart: Option<usize>,
    /// `--compare control,with_skill`: the two arms of a comparison.
    pub compare: Vec<String>,
    /// `--vs b`: compare the harness of `--harness a` with `b`.
    pub vs: Option<String>,
    /// `--variant NAME`: run every eval with this variant.
    pub variant: Option<String>,
    /// `--regrade RUN`: re-run the checks and judge of RUN's attempts against their recorded work.
    pub regrade: Option<String>,
    /// `--allow-internal`: private or reserved addresses allowed hosts may resolve to.
    pub allow_internal: Vec<String>,
    /// `--upstream-proxy URL`: the proxy the egress gateway reaches upstreams through (`none`: directly).
    pub upstream_proxy: Option<String>,
    /// `--nocapture`: show the evals' own output as it is printed (it is kept in the records either way).
    pub nocapture: bool,
    /// `--retries N`: retries of an infra error.
    pub retries: Option<u32>,
    /// `--env-file PATH`: secrets and credentials for preflight (as `REEVAL_ENV_FILE`).
    pub env_file: Option<PathBuf>,
    /// `--partition hash:K/N` or `count:K/N`: only this part's cells run.
    pub partition: Option<super::Partition>,
}

/// A command line that cannot be understood (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse arguments: {0}")]
pub struct UsageError(pub String);

/// A flag as the parser met it: its name (`--trials`, `-Z`) and, for a flag
/// that takes one, its value. The setters of [`super::table`] read it.
#[derive(Debug)]
pub(crate) struct Given {
    /// The flag as written in messages.
    pub(crate) flag: String,
    pub(super) value: Option<OsString>,
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

impl Args {
    /// Whether an eval named `name` with `ignore` is selected.
    pub fn selects(&self, name: &str, ignore: bool) -> bool {
        if self.ignored && !ignore {
            return false;
        }
        if self.skip.iter().any(|s| if self.exact { name == s } else { name.contains(s.as_str()) })
        {
            return false;
        }
        self.filters.is_empty()
            || self
                .filters
                .iter()
                .any(|f| if self.exact { name == f } else { name.contains(f.as_str()) })
    }

    /// Whether an eval with `tags` has one of the `wanted` tags (any eval when none are wanted).
    pub fn tagged(wanted: &[String], tags: &[String]) -> bool {
        wanted.is_empty() || tags.iter().any(|t| wanted.contains(t))
    }

    /// Whether a selected eval runs (rather than being reported ignored).
    pub fn runs(&self, ignore: bool) -> bool {
        !ignore || self.ignored || self.include_ignored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Option<Args>, UsageError> {
        Args::parse(args.iter().copied())
    }

    #[test]
    fn nextest_invocations_parse() {
        let a = parse(&["--list", "--format", "terse"]).unwrap().unwrap();
        assert!(a.list && a.terse);
        let a = parse(&["--exact", "greet", "--nocapture", "--ignored", "--test-threads=1"])
            .unwrap()
            .unwrap();
        assert!(a.exact && a.ignored && a.nocapture);
        assert_eq!(a.filters, vec!["greet"]);
        assert_eq!(a.test_threads, Some(1));
        let a = parse(&[
            "a",
            "b",
            "--no-capture",
            "--skip",
            "c",
            "-v",
            "--timeout",
            "90s",
            "--harness=shell",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(a.filters, vec!["a", "b"]);
        assert_eq!(a.skip, vec!["c"]);
        assert_eq!(a.timeout, Some(Duration::from_secs(90)));
        assert_eq!(a.harness, vec!["shell"]);
        assert!(a.verbose);
    }

    #[test]
    fn every_libtest_flag_is_accepted() {
        let argv = [
            "--list",
            "--format=json",
            "--exact",
            "--skip",
            "x",
            "--ignored",
            "--include-ignored",
            "--test-threads",
            "2",
            "--nocapture",
            "--no-capture",
            "--show-output",
            "--test",
            "--bench",
            "--color",
            "never",
            "--logfile=/dev/null",
            "-Z",
            "unstable-options",
            "-Zunstable-options",
            "-q",
            "--quiet",
        ];
        let a = parse(&argv).unwrap().unwrap();
        assert!(
            a.list && a.terse && a.exact && a.ignored && a.include_ignored && a.bench && a.quiet
        );
        assert_eq!((a.skip, a.test_threads), (vec!["x".to_string()], Some(2)));
        assert!(!parse(&["--format", "pretty"]).unwrap().unwrap().terse);
    }

    #[test]
    fn double_dash_ends_the_options() {
        let a = parse(&["-v", "--", "-odd", "--list", "x"]).unwrap().unwrap();
        assert_eq!(a.filters, vec!["-odd", "--list", "x"]);
        assert!(a.verbose && !a.list);
    }

    #[test]
    fn short_flags_cluster_and_values_attach_either_way() {
        let a = parse(&["-vq"]).unwrap().unwrap();
        assert!(a.verbose && a.quiet);
        let a = parse(&["-qvZunstable-options", "--trials=2", "--record-dir", "runs"])
            .unwrap()
            .unwrap();
        assert!(a.verbose && a.quiet);
        assert_eq!((a.trials, a.record_dir), (Some(2), Some(PathBuf::from("runs"))));
        // A value is taken even when it looks like a flag, as getopt does.
        assert_eq!(parse(&["--skip", "-weird"]).unwrap().unwrap().skip, vec!["-weird"]);
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        assert!(parse(&["--frobnicate"]).unwrap_err().0.contains("unknown option `--frobnicate`"));
        assert!(
            parse(&["--frobnicate=1"]).unwrap_err().0.contains("unknown option `--frobnicate`")
        );
        assert!(parse(&["-vx"]).unwrap_err().0.contains("unknown option `-x`"));
        assert!(parse(&["--timeout", "soon"]).unwrap_err().0.contains("invalid duration"));
        assert!(parse(&["--trials", "0"]).is_err());
        assert!(parse(&["--skip"]).unwrap_err().0.contains("--skip needs a value"));
        assert!(parse(&["--list=yes"]).unwrap_err().0.contains("--list takes no value"));
        assert!(parse(&["--format", "xml"]).unwrap_err().0.contains("unknown format `xml`"));
    }

    #[test]
    fn reeval_flags_parse() {
        let a = parse(&[
            "--tag",
            "smoke,slow",
            "--tag=py",
            "--rerun-failed",
            "--resume",
            "run-1",
            "--min-pass-rate",
            "0.66",
            "--junit",
            "out.xml",
            "--stream",
            "--format",
            "json",
            "--allow-empty",
        ])
        .unwrap()
        .unwrap();
        assert!(a.allow_empty);
        assert_eq!(a.tags, vec!["smoke", "slow", "py"]);
        assert!(a.rerun_failed && a.stream && a.json);
        assert_eq!(a.resume.as_deref(), Some("run-1"));
        assert_eq!(a.min_pass_rate, Some(0.66));
        assert_eq!(a.junit, Some(PathBuf::from("out.xml")));
        assert!(parse(&["--min-pass-rate", "1.5"]).unwrap_err().0.contains("between 0 and 1"));
        assert!(Args::tagged(&[], &[]));
        assert!(Args::tagged(&["a".into()], &["b".into(), "a".into()]));
        assert!(!Args::tagged(&["a".into()], &["b".into()]));
    }

    #[test]
    fn selection() {
        let a = parse(&["greet", "--skip", "slow"]).unwrap().unwrap();
        assert!(a.selects("mod::greet", false));
        assert!(!a.selects("mod::greet_slow", false));
        assert!(!a.selects("other", false));
        let a = parse(&["--exact", "mod::greet"]).unwrap().unwrap();
        assert!(a.selects("mod::greet", false));
        assert!(!a.selects("mod::greet2", false));
    }
}
