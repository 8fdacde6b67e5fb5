//! The command line of an eval suite: libtest's flags (so `cargo test` and
//! cargo-nextest drive it) plus reeval's own, each with a `REEVAL_*` twin
//! that [`crate::settings`] reads. Which flags exist, what they take and what
//! they set is [`super::table`], which makes [`Args`] too; `parse.rs` walks
//! the command line; this module holds what a run asks of [`Args`]: which
//! evals it selects.
//!
//! Parsed with `lexopt`, so it reads like any getopt-style command line:
//! `--flag value` and `--flag=value`, clustered short flags (`-vq`), and `--`
//! ending the options (what follows is a filter even when it starts with `-`).

use super::table::Args;

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
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::settings::UsageError;

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
        assert_eq!(a.set.test_threads, Some(1));
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
        assert_eq!(a.set.timeout, Some(Duration::from_secs(90)));
        assert_eq!(a.set.harnesses, Some(vec!["shell".to_string()]));
        assert!(a.set.verbose == Some(true));
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
        assert_eq!((a.skip, a.set.test_threads), (vec!["x".to_string()], Some(2)));
        assert!(!parse(&["--format", "pretty"]).unwrap().unwrap().terse);
    }

    #[test]
    fn double_dash_ends_the_options() {
        let a = parse(&["-v", "--", "-odd", "--list", "x"]).unwrap().unwrap();
        assert_eq!(a.filters, vec!["-odd", "--list", "x"]);
        assert!(a.set.verbose == Some(true) && !a.list);
    }

    #[test]
    fn short_flags_cluster_and_values_attach_either_way() {
        let a = parse(&["-vq"]).unwrap().unwrap();
        assert!(a.set.verbose == Some(true) && a.quiet);
        let a = parse(&["-qvZunstable-options", "--trials=2", "--record-dir", "runs"])
            .unwrap()
            .unwrap();
        assert!(a.set.verbose == Some(true) && a.quiet);
        assert_eq!((a.set.trials, a.set.record_dir), (Some(2), Some(PathBuf::from("runs"))));
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
        assert!(a.set.allow_empty == Some(true));
        assert_eq!(a.set.tags.unwrap(), vec!["smoke", "slow", "py"]);
        assert!(a.rerun_failed && a.set.stream == Some(true) && a.json);
        assert_eq!(a.resume.as_deref(), Some("run-1"));
        assert_eq!(a.set.min_pass_rate, Some(0.66));
        assert_eq!(a.set.junit, Some(PathBuf::from("out.xml")));
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
