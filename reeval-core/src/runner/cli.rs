//! The command line of an eval suite: libtest's flags (so `cargo test` and
//! cargo-nextest drive it) plus reeval's own, each with a `REEVAL_*` twin.

use std::path::PathBuf;
use std::time::Duration;

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
}

/// A command line that cannot be understood (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse arguments: {0}")]
pub struct UsageError(pub String);

/// The help text.
pub const HELP: &str = "Usage: <suite> [OPTIONS] [FILTERS...]

Runs the reeval evals of this binary. Filters select evals whose name contains any of them.

libtest options (so cargo test and cargo-nextest can drive the suite):
      --list                 list evals instead of running them (no Docker, no network)
      --format <pretty|terse> output format of --list
      --exact                filters match names exactly
      --skip <FILTER>        skip evals whose name contains FILTER (repeatable)
      --ignored              run only evals marked ignore
      --include-ignored      run ignored evals too
      --test-threads <N>     attempts run at once (env RUST_TEST_THREADS)
      --nocapture, --no-capture, --show-output, -q/--quiet, --color <WHEN>   accepted

reeval options (env twins for cargo-nextest):
  -v, --verbose              print every phase of every attempt      (REEVAL_VERBOSE=1)
      --harness <SPEC>       run every eval with this harness, repeatable (REEVAL_HARNESS=a,b)
      --trials <N>           trials per eval × harness                (REEVAL_TRIALS)
      --timeout <DURATION>   budget per attempt, e.g. 10m, 90s        (REEVAL_TIMEOUT)
      --record-dir <DIR>     where runs are recorded                  (REEVAL_RECORD_DIR)
  -h, --help                 this text

Exit code: 0 all passed, 1 any fail, 3 infra errors and no fail, 2 config or usage error.";

fn duration(s: &str) -> Result<Duration, UsageError> {
    humantime::parse_duration(s).map_err(|e| UsageError(format!("invalid duration `{s}` ({e}); write it like 10m or 90s")))
}

fn number<T: std::str::FromStr>(flag: &str, s: &str) -> Result<T, UsageError> {
    s.parse().map_err(|_| UsageError(format!("{flag} expects a number, got `{s}`")))
}

impl Args {
    /// Parses `argv` (without the program name) and the `REEVAL_*` environment.
    ///
    /// # Errors
    /// A [`UsageError`] for an unknown flag or a bad value; `Ok(None)` means `--help` was printed.
    pub fn parse(argv: impl IntoIterator<Item = String>, env: impl Fn(&str) -> Option<String>) -> Result<Option<Args>, UsageError> {
        let mut a = Args::default();
        let mut it = argv.into_iter().peekable();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| -> Result<String, UsageError> {
                match &inline {
                    Some(v) => Ok(v.clone()),
                    None => it.next().ok_or_else(|| UsageError(format!("{name} needs a value"))),
                }
            };
            match flag.as_str() {
                "-h" | "--help" => {
                    println!("{HELP}");
                    return Ok(None);
                }
                "--list" => a.list = true,
                "--format" => {
                    a.terse = match value("--format")?.as_str() {
                        "terse" | "json" => true,
                        "pretty" => false,
                        other => return Err(UsageError(format!("unknown format `{other}`; expected pretty or terse"))),
                    }
                }
                "--exact" => a.exact = true,
                "--skip" => a.skip.push(value("--skip")?),
                "--ignored" => a.ignored = true,
                "--include-ignored" => a.include_ignored = true,
                "--test-threads" => a.test_threads = Some(number("--test-threads", &value("--test-threads")?)?),
                "--nocapture" | "--no-capture" | "--show-output" | "--test" => {}
                "--color" | "--logfile" | "-Z" => {
                    value(&flag)?;
                }
                "--bench" => a.bench = true,
                "-q" | "--quiet" => a.quiet = true,
                "-v" | "--verbose" => a.verbose = true,
                "--harness" => a.harness.extend(value("--harness")?.split(',').map(str::to_string)),
                "--trials" => a.trials = Some(number("--trials", &value("--trials")?)?),
                "--timeout" => a.timeout = Some(duration(&value("--timeout")?)?),
                "--record-dir" => a.record_dir = Some(PathBuf::from(value("--record-dir")?)),
                f if f.starts_with('-') => return Err(UsageError(format!("unknown option `{f}`; see --help"))),
                _ => a.filters.push(arg),
            }
        }
        if !a.verbose && env("REEVAL_VERBOSE").is_some_and(|v| v == "1" || v == "true") {
            a.verbose = true;
        }
        if a.harness.is_empty()
            && let Some(h) = env("REEVAL_HARNESS").filter(|h| !h.is_empty())
        {
            a.harness = h.split(',').map(str::to_string).collect();
        }
        if a.trials.is_none()
            && let Some(t) = env("REEVAL_TRIALS")
        {
            a.trials = Some(number("REEVAL_TRIALS", &t)?);
        }
        if a.timeout.is_none()
            && let Some(t) = env("REEVAL_TIMEOUT")
        {
            a.timeout = Some(duration(&t)?);
        }
        if a.record_dir.is_none() {
            a.record_dir = env("REEVAL_RECORD_DIR").map(PathBuf::from);
        }
        if a.test_threads.is_none()
            && let Some(t) = env("RUST_TEST_THREADS")
        {
            a.test_threads = Some(number("RUST_TEST_THREADS", &t)?);
        }
        if a.trials == Some(0) {
            return Err(UsageError("--trials must be at least 1".into()));
        }
        if a.test_threads == Some(0) {
            return Err(UsageError("--test-threads must be at least 1".into()));
        }
        Ok(Some(a))
    }

    /// Whether an eval named `name` with `ignore` is selected.
    pub fn selects(&self, name: &str, ignore: bool) -> bool {
        if self.ignored && !ignore {
            return false;
        }
        if self.skip.iter().any(|s| if self.exact { name == s } else { name.contains(s.as_str()) }) {
            return false;
        }
        self.filters.is_empty() || self.filters.iter().any(|f| if self.exact { name == f } else { name.contains(f.as_str()) })
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
        Args::parse(args.iter().map(|s| s.to_string()), |_| None)
    }

    #[test]
    fn nextest_invocations_parse() {
        let a = parse(&["--list", "--format", "terse"]).unwrap().unwrap();
        assert!(a.list && a.terse);
        let a = parse(&["--exact", "greet", "--nocapture", "--ignored", "--test-threads=1"]).unwrap().unwrap();
        assert!(a.exact && a.ignored);
        assert_eq!(a.filters, vec!["greet"]);
        assert_eq!(a.test_threads, Some(1));
        let a = parse(&["a", "b", "--no-capture", "--skip", "c", "-v", "--timeout", "90s", "--harness=shell"]).unwrap().unwrap();
        assert_eq!(a.filters, vec!["a", "b"]);
        assert_eq!(a.skip, vec!["c"]);
        assert_eq!(a.timeout, Some(Duration::from_secs(90)));
        assert_eq!(a.harness, vec!["shell"]);
        assert!(a.verbose);
    }

    #[test]
    fn bad_input_is_a_usage_error() {
        assert!(parse(&["--frobnicate"]).unwrap_err().0.contains("unknown option `--frobnicate`"));
        assert!(parse(&["--timeout", "soon"]).unwrap_err().0.contains("invalid duration"));
        assert!(parse(&["--trials", "0"]).is_err());
        assert!(parse(&["--skip"]).is_err());
    }

    #[test]
    fn env_twins() {
        let a = Args::parse(Vec::new(), |k| match k {
            "REEVAL_VERBOSE" => Some("1".into()),
            "REEVAL_HARNESS" => Some("shell,other".into()),
            "REEVAL_TRIALS" => Some("3".into()),
            _ => None,
        })
        .unwrap()
        .unwrap();
        assert!(a.verbose);
        assert_eq!(a.harness, vec!["shell", "other"]);
        assert_eq!(a.trials, Some(3));
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
