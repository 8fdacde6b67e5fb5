//! The command line of an eval suite: libtest's flags (so `cargo test` and
//! cargo-nextest drive it) plus reeval's own, each with a `REEVAL_*` twin
//! that [`crate::settings`] reads.
//!
//! Parsed with `lexopt`, so it reads like any getopt-style command line:
//! `--flag value` and `--flag=value`, clustered short flags (`-vq`), and `--`
//! ending the options (what follows is a filter even when it starts with `-`).

use std::ffi::OsString;
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
    /// `--nocapture`: show the evals' own output as it is printed (it is kept in the records either way).
    pub nocapture: bool,
    /// `--regrade RUN`: re-run the checks and judge of RUN's attempts against their recorded work.
    pub regrade: Option<String>,
}

/// A command line that cannot be understood (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to parse arguments: {0}")]
pub struct UsageError(pub String);

/// The help text.
pub const HELP: &str = "Usage: <suite> [OPTIONS] [FILTERS...] [-- FILTERS...]

Runs the reeval evals of this binary. Filters select evals whose name contains any of them;
after `--` every argument is a filter, even one that starts with `-`. Short flags cluster (-vq)
and a value may follow its flag as `--flag value` or `--flag=value`.

libtest options (so cargo test and cargo-nextest can drive the suite):
      --list                 list evals instead of running them (no Docker, no network)
      --format <pretty|terse|json> output format; json: libtest's JSON event stream (with --list: terse)
      --exact                filters match names exactly
      --skip <FILTER>        skip evals whose name contains FILTER (repeatable)
      --ignored              run only evals marked ignore
      --include-ignored      run ignored evals too
      --test-threads <N>     attempts run at once (env RUST_TEST_THREADS)
      --nocapture            show the evals' own output (println!) as it is printed, not only
                             under a failure and in the record; also --no-capture
                             (env RUST_TEST_NOCAPTURE=1)
      --show-output, --test, -q/--quiet,
      --color <WHEN>, --logfile <PATH>, -Z <FLAG>                  accepted
      --bench                runs nothing (evals are not benchmarks)

reeval options (env twins for cargo-nextest):
  -v, --verbose              print every phase of every attempt      (REEVAL_VERBOSE=1)
      --harness <SPEC>       run every eval with this harness, repeatable (REEVAL_HARNESS=a,b)
      --trials <N>           trials per eval × harness                (REEVAL_TRIALS)
      --timeout <DURATION>   budget per attempt, e.g. 10m, 90s        (REEVAL_TIMEOUT)
      --record-dir <DIR>     where runs are recorded                  (REEVAL_RECORD_DIR)
      --tag <NAME>           only evals with this tag, repeatable     (REEVAL_TAGS=a,b)
      --min-pass-rate <R>    a cell passes at this pass rate (0..1)   (REEVAL_MIN_PASS_RATE)
      --rerun-failed         only the cells that failed or had infra errors in the last run
                             of this suite binary
      --resume <RUN_ID>      complete an interrupted run of this suite binary: recorded
                             attempts are kept
      --allow-empty          a run that selects no eval exits 0 (else 2)  (REEVAL_ALLOW_EMPTY=1)
      --junit <PATH>         write JUnit XML, one testcase per attempt (REEVAL_JUNIT)
      --stream               print the agent's events as they arrive  (REEVAL_STREAM=1)
      --no-setup-cache       prepare every sandbox afresh  (REEVAL_SETUP_CACHE=0)
      --prestart <N>         create up to N containers ahead of their slot  (REEVAL_PRESTART)
      --compare <A,B>        compare two arms (`control` and a #[reeval::variant]), paired
                             by eval and trial, and give a verdict     (REEVAL_COMPARE=a,b)
      --vs <SPEC>            with --harness <A>: compare harness A with this one
      --variant <NAME>       run every eval with this variant        (REEVAL_VARIANT)
      --regrade <RUN>        re-run checks and judge on RUN's recorded attempts, no agent:
                             each send is answered from the record (harness replay:RUN)
  -h, --help                 this text

Exit code: 0 all passed, 1 any fail, 3 infra errors (or a record that could not be written)
and no fail, 2 config or usage error (also: no eval selected), 130 interrupted.";

/// lexopt's own errors, in the words of this command line.
fn usage(e: lexopt::Error) -> UsageError {
    UsageError(match e {
        lexopt::Error::MissingValue { option: Some(option) } => format!("{option} needs a value"),
        lexopt::Error::UnexpectedValue { option, .. } => format!("{option} takes no value"),
        lexopt::Error::UnexpectedOption(option) => format!("unknown option `{option}`; see --help"),
        other => other.to_string(),
    })
}

/// The value of the option just read, as UTF-8 text.
fn text(p: &mut lexopt::Parser, flag: &str) -> Result<String, UsageError> {
    p.value()
        .map_err(usage)?
        .into_string()
        .map_err(|v| UsageError(format!("{flag} expects UTF-8 text, got {v:?}")))
}

fn duration(s: &str) -> Result<Duration, UsageError> {
    humantime::parse_duration(s)
        .map_err(|e| UsageError(format!("invalid duration `{s}` ({e}); write it like 10m or 90s")))
}

fn number<T: std::str::FromStr>(flag: &str, s: &str) -> Result<T, UsageError> {
    s.parse().map_err(|_| UsageError(format!("{flag} expects a number, got `{s}`")))
}

impl Args {
    /// Parses `argv` (without the program name): the flags only; their
    /// `REEVAL_*` twins are merged by [`Settings::load`](crate::settings::Settings::load).
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
            match arg {
                Short('h') | Long("help") => {
                    println!("{HELP}");
                    return Ok(None);
                }
                Long("list") => a.list = true,
                Long("format") => {
                    let format = text(&mut p, "--format")?;
                    a.json = format == "json";
                    a.terse = match format.as_str() {
                        "terse" | "json" => true,
                        "pretty" => false,
                        other => {
                            return Err(UsageError(format!(
                                "unknown format `{other}`; expected pretty, terse or json"
                            )));
                        }
                    }
                }
                Long("exact") => a.exact = true,
                Long("skip") => a.skip.push(text(&mut p, "--skip")?),
                Long("ignored") => a.ignored = true,
                Long("include-ignored") => a.include_ignored = true,
                Long("test-threads") => {
                    a.test_threads =
                        Some(number("--test-threads", &text(&mut p, "--test-threads")?)?)
                }
                Long("nocapture" | "no-capture") => a.nocapture = true,
                // Accepted for libtest compatibility; reeval's own output does not change.
                Long("show-output" | "test") => {}
                Long("color") => {
                    text(&mut p, "--color")?;
                }
                Long("logfile") => {
                    text(&mut p, "--logfile")?;
                }
                Short('Z') => {
                    text(&mut p, "-Z")?;
                }
                Long("bench") => a.bench = true,
                Short('q') | Long("quiet") => a.quiet = true,
                Short('v') | Long("verbose") => a.verbose = true,
                Long("harness") => {
                    a.harness.extend(text(&mut p, "--harness")?.split(',').map(str::to_string))
                }
                Long("trials") => a.trials = Some(number("--trials", &text(&mut p, "--trials")?)?),
                Long("timeout") => a.timeout = Some(duration(&text(&mut p, "--timeout")?)?),
                Long("record-dir") => a.record_dir = Some(PathBuf::from(p.value().map_err(usage)?)),
                Long("tag") => a.tags.extend(
                    text(&mut p, "--tag")?
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_string),
                ),
                Long("rerun-failed") => a.rerun_failed = true,
                Long("resume") => a.resume = Some(text(&mut p, "--resume")?),
                Long("min-pass-rate") => {
                    let rate: f64 = number("--min-pass-rate", &text(&mut p, "--min-pass-rate")?)?;
                    if !(0.0..=1.0).contains(&rate) {
                        return Err(UsageError(format!(
                            "--min-pass-rate expects a rate between 0 and 1, got {rate}"
                        )));
                    }
                    a.min_pass_rate = Some(rate);
                }
                Long("junit") => a.junit = Some(PathBuf::from(p.value().map_err(usage)?)),
                Long("stream") => a.stream = true,
                Long("allow-empty") => a.allow_empty = true,
                Long("no-setup-cache") => a.no_setup_cache = true,
                Long("prestart") => {
                    a.prestart = Some(number("--prestart", &text(&mut p, "--prestart")?)?)
                }
                Long("compare") => {
                    a.compare = text(&mut p, "--compare")?
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .collect()
                }
                Long("vs") => a.vs = Some(text(&mut p, "--vs")?),
                Long("variant") => a.variant = Some(text(&mut p, "--variant")?),
                Long("regrade") => a.regrade = Some(text(&mut p, "--regrade")?),
                // Everything after `--` comes here too, even when it starts with `-`.
                Value(filter) => a.filters.push(
                    filter
                        .into_string()
                        .map_err(|v| UsageError(format!("filter {v:?} is not valid UTF-8")))?,
                ),
                Short(c) => return Err(UsageError(format!("unknown option `-{c}`; see --help"))),
                Long(name) => {
                    return Err(UsageError(format!("unknown option `--{name}`; see --help")));
                }
            }
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
