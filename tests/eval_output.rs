//! The eval's own output (`println!`, `eprintln!`, a host subprocess) under a
//! real suite binary (`examples/matrix_suite.rs`, the `prints` eval, two
//! trials run at once, trial 2 failing): captured per attempt into its record,
//! shown under the failure, echoed with `--nocapture`, and never in
//! `--format json`'s stream.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn suite(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(common::example_bin("matrix_suite"))
        .env_remove("NEXTEST_RUN_ID")
        .env_remove("NEXTEST")
        .env_remove("REEVAL_TAGS")
        .env_remove("RUST_TEST_NOCAPTURE")
        .env("REEVAL_RETRIES", "0")
        .args(["--tag", "output", "--test-threads", "2", "--record-dir"])
        .arg(dir)
        .args(args)
        .output()
        .expect("run the suite");
    eprintln!("stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What trial `t` of `prints` writes, piece by piece (the order of the
/// unflushed `print!` and the subprocess's line is the OS's), with its 200
/// lines printed one a poll while the other trial prints its own.
fn printed_by(t: u32) -> Vec<String> {
    let mut pieces = vec![
        format!("stdout of trial {t}: before the check\n"),
        format!("stderr of trial {t}: the check said in the sandbox\n"),
    ];
    pieces.extend((0..200).map(|i| format!("line {i} of trial {t}\n")));
    pieces.push(format!("no newline from trial {t}"));
    pieces.push(format!("subprocess of trial {t}\n"));
    pieces
}

fn only_run(dir: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// Each record holds its own trial's output, and nothing of the other trial's.
fn assert_records_hold_their_own_output(dir: &Path) {
    let records = common::records(&only_run(dir));
    assert_eq!(records.len(), 2);
    for r in &records {
        let t = r["trial"].as_u64().unwrap() as u32;
        let output = r["output"].as_str().unwrap_or_else(|| panic!("no output in {r}"));
        for piece in printed_by(t) {
            assert!(output.contains(&piece), "trial {t} lacks {piece:?}: {output:?}");
        }
        let other = 3 - t;
        assert!(
            !output.contains(&format!("trial {other}")),
            "trial {t} holds {other}'s: {output:?}"
        );
        let len: usize = printed_by(t).iter().map(String::len).sum();
        assert_eq!(output.len(), len, "trial {t} holds only its own: {output:?}");
        let numbered: Vec<&str> = output.lines().filter(|l| l.starts_with("line ")).collect();
        let expected: Vec<String> = (0..200).map(|i| format!("line {i} of trial {t}")).collect();
        assert_eq!(numbered, expected, "in order");
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_evals_println_stays_out_of_the_json_stream_and_lands_in_its_record() {
    require_docker!();
    let dir = common::temp_dir("eval-output-json");
    let out = suite(&dir, &["--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "trial 2 fails");
    // Before the capture: the eval's lines were among the JSON objects.
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    assert!(lines.len() >= 4, "{lines:?}");
    assert!(!text(&out.stderr).contains("of trial"), "captured, not on stderr either");
    assert_records_hold_their_own_output(&dir);
    // The failed test's event carries the failing trial's output, as libtest's `stdout` does.
    let failed = lines.iter().find(|l| l["type"] == "test" && l["event"] == "failed").unwrap();
    let shown = failed["stdout"].as_str().unwrap();
    assert!(shown.contains("---- #2 output ----\n"), "{shown}");
    for piece in printed_by(2) {
        assert!(shown.contains(&piece), "{shown}");
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_output_is_shown_under_the_failure_and_live_with_nocapture() {
    require_docker!();
    let dir = common::temp_dir("eval-output-pretty");
    let out = suite(&dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    // Only the failing attempt's output is shown, under its failure.
    let (_, failure) = stdout.split_once("---- prints #2 output ----\n").expect(&stdout);
    for piece in printed_by(2) {
        assert!(failure.contains(&piece), "{stdout}");
    }
    assert!(!stdout.contains("trial 1"), "a passing attempt's output is not shown: {stdout}");
    assert_records_hold_their_own_output(&dir);

    // --nocapture: every attempt's output as it is printed, and still in the records.
    let dir = common::temp_dir("eval-output-nocapture");
    let out = suite(&dir, &["--nocapture"]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let live = stdout.split("\nfailures:\n").next().unwrap();
    for t in [1, 2] {
        for piece in printed_by(t) {
            assert!(live.contains(&piece), "{piece:?} not echoed before the summary: {stdout}");
        }
    }
    // The two trials printed at the same time (so the records above were told apart).
    let at = |line: &str| live.find(line).unwrap();
    assert!(
        at("line 0 of trial 2") < at("line 199 of trial 1")
            && at("line 0 of trial 1") < at("line 199 of trial 2"),
        "{live}"
    );
    assert_records_hold_their_own_output(&dir);
}
