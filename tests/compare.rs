//! Comparisons and the oracle with a real suite binary
//! (`examples/compare_suite.rs`) in real containers with the `shell` harness:
//! a variant that helps one eval and leaves another alone, with the figures
//! checked against values computed here independently; infra errors in one
//! arm left out and counted; `reeval compare` on two recorded runs giving the
//! live comparison's figures; the oracle passing a solvable eval and flagging
//! an impossible one.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn suite() -> Command {
    let mut cmd = Command::new(common::example_bin("compare_suite"));
    cmd.env_remove("NEXTEST_RUN_ID")
        .env_remove("NEXTEST")
        .env_remove("REEVAL_TAGS")
        .env_remove("REEVAL_COMPARE")
        .env_remove("REEVAL_VARIANT")
        .env("REEVAL_RETRIES", "0");
    cmd
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run the suite");
    eprintln!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The one run directory under `dir`.
fn the_run(dir: &Path) -> PathBuf {
    let runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs[0].clone()
}

/// The row of `eval` in a comparison.
fn row<'a>(comparison: &'a Value, eval: &str) -> &'a Value {
    comparison["evals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["eval"] == eval)
        .unwrap_or_else(|| panic!("no row for {eval} in {comparison:#}"))
}

/// `qnorm(1 − 0.04 / 2)`: the first look spends α = 0.04 (R: `qnorm(0.98)` = 2.053749).
const Z_96: f64 = 2.053_749;
/// `qnorm(0.975)`.
const Z_95: f64 = 1.959_964;

/// The Wilson score interval, as in the textbook (Wilson 1927; Newcombe 1998, method 3).
fn wilson(passed: f64, n: f64, z: f64) -> [f64; 2] {
    let p = passed / n;
    let center = (p + z * z / (2.0 * n)) / (1.0 + z * z / n);
    let half = z / (1.0 + z * z / n) * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    [(center - half).max(0.0), (center + half).min(1.0)]
}

/// Equal, numbers to 1e-12 (a figure read back from a file may differ in its last bit).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (x.as_f64().unwrap() - y.as_f64().unwrap()).abs() < 1e-12
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn interval(v: &Value) -> [f64; 2] {
    [v[0].as_f64().unwrap(), v[1].as_f64().unwrap()]
}

fn assert_close(actual: [f64; 2], expected: [f64; 2], what: &str) {
    assert!(
        (actual[0] - expected[0]).abs() < 1e-5 && (actual[1] - expected[1]).abs() < 1e-5,
        "{what}: {actual:?}, expected {expected:?}"
    );
}

/// The live comparison of `--compare control,with_skill` over the `compare` evals.
fn live_comparison(dir: &Path) -> (Output, PathBuf) {
    let out = run(suite()
        .args(["--compare", "control,with_skill", "--tag", "compare", "--test-threads", "1"])
        .arg("--record-dir")
        .arg(dir));
    let run = the_run(dir);
    (out, run)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_variant_that_adds_the_file_helps_one_eval_and_leaves_the_other_undecided() {
    require_docker!();
    let dir = common::temp_dir("compare-live");
    let (out, run) = live_comparison(&dir);
    // The control arm fails needs_the_skill: a failing cell, as in any run.
    assert_eq!(out.status.code(), Some(1));
    let summary = common::json(&run.join("summary.json"));
    let c = &summary["comparison"];
    assert_eq!(
        (c["control"].as_str(), c["treatment"].as_str()),
        (Some("control"), Some("with_skill"))
    );
    assert_eq!(c["look"], 1);

    // needs_the_skill: 0/5 without the file, 5/5 with it; every pair discordant in favour.
    let helped = row(c, "needs_the_skill");
    assert_eq!(helped["verdict"], "helped", "{helped:#}");
    assert_eq!(helped["pairs"], 5);
    assert_eq!(helped["table"]["onlyTreatment"], 5);
    assert_eq!(helped["difference"], 1.0);
    // The arms' 95 % Wilson intervals: 0/5 is [0, 0.4345], 5/5 is [0.5655, 1].
    assert_close(interval(&helped["control"]["passRateInterval"]), [0.0, 0.434_482], "0/5");
    assert_close(interval(&helped["treatment"]["passRateInterval"]), [0.565_518, 1.0], "5/5");
    assert_close(interval(&helped["control"]["passRateInterval"]), wilson(0.0, 5.0, Z_95), "0/5");
    // Newcombe's method 10 with p1 = 1, p2 = 0 and no concordant pairs (φ = 0):
    // L = 1 − √((1 − l1)² + u2²), U = 1, with the 96 % Wilson limits of 5/5 and 0/5.
    let [l1, _] = wilson(5.0, 5.0, Z_96);
    let [_, u2] = wilson(0.0, 5.0, Z_96);
    let expected = [1.0 - ((1.0 - l1).powi(2) + u2.powi(2)).sqrt(), 1.0];
    assert_close(interval(&helped["interval"]), expected, "needs_the_skill's difference");
    assert!(helped["method"].as_str().unwrap().starts_with("Newcombe"));
    assert!((helped["confidence"].as_f64().unwrap() - 0.96).abs() < 1e-9);

    // unchanged: 5/5 in both arms; no difference seen, so no verdict and no trial estimate.
    let same = row(c, "unchanged");
    assert_eq!(same["verdict"], "cant_tell_yet", "{same:#}");
    assert_eq!(same["difference"], 0.0);
    assert!(same.get("moreTrialsPerEval").is_none());
    // p1 = p2 = 1, φ = 0: L = −(1 − l), U = 1 − l with l the 96 % Wilson lower limit of 5/5.
    assert_close(interval(&same["interval"]), [-(1.0 - l1), 1.0 - l1], "unchanged's difference");

    // Overall: 10 pairs, 5 discordant in favour, 5 both passed.
    let overall = &c["overall"];
    assert_eq!(overall["pairs"], 10);
    assert_eq!(overall["table"]["bothPassed"], 5);
    assert_eq!(overall["verdict"], "helped");

    // Records and cells name their arm; the arms take turns in time.
    let records = common::records(&run);
    assert_eq!(records.len(), 20);
    for r in &records {
        assert!(r["arm"] == "control" || r["arm"] == "with_skill", "{}", r["arm"]);
    }
    assert!(summary["cells"].as_array().unwrap().iter().all(|c| c["arm"].is_string()));
    for eval in ["needs_the_skill", "unchanged"] {
        let mut of_eval: Vec<&Value> = records.iter().filter(|r| r["eval"] == eval).collect();
        of_eval.sort_by_key(|r| r["startedAt"].as_str().unwrap().to_string());
        let arms: Vec<&str> = of_eval.iter().map(|r| r["arm"].as_str().unwrap()).collect();
        let expected: Vec<&str> =
            (0..10).map(|i| if i % 2 == 0 { "control" } else { "with_skill" }).collect();
        assert_eq!(arms, expected, "{eval}: arms in start order");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("comparison: with_skill vs control"), "{stdout}");
    assert!(stdout.contains("can't tell yet (no difference seen)"), "{stdout}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn infra_errors_in_one_arm_leave_their_pairs_out_and_are_counted() {
    require_docker!();
    let dir = common::temp_dir("compare-infra");
    let out = run(suite()
        .args(["--compare", "control,flaky_platform", "--tag", "infra", "--test-threads", "2"])
        .arg("--record-dir")
        .arg(&dir));
    assert_eq!(out.status.code(), Some(3), "infra errors and no fail");
    let summary = common::json(&the_run(&dir).join("summary.json"));
    let r = row(&summary["comparison"], "infra_in_one_arm");
    // Trials 2 and 4 of flaky_platform are infra errors: 2 pairs left, 2 left out.
    assert_eq!(r["excluded"]["pairs"], 2, "{r:#}");
    assert_eq!(r["excluded"]["control"], 0);
    assert_eq!(r["excluded"]["treatment"], 2);
    assert_eq!(r["pairs"], 2);
    assert_eq!(r["table"]["bothPassed"], 2);
    assert_eq!(
        (r["control"]["infra"].as_u64(), r["treatment"]["infra"].as_u64()),
        (Some(0), Some(2))
    );
    // The pass rates count graded trials only: 4/4 and 2/2.
    assert_eq!(
        (r["control"]["passed"].as_u64(), r["treatment"]["passed"].as_u64()),
        (Some(4), Some(2))
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("2 pairs left out for infra errors (0 control, 2 flaky_platform)"),
        "{stdout}"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn comparing_two_recorded_runs_gives_the_live_comparisons_figures() {
    require_docker!();
    let live_dir = common::temp_dir("compare-live2");
    let (_, live_run) = live_comparison(&live_dir);
    let live = common::json(&live_run.join("summary.json"))["comparison"].clone();

    // The same two arms as two runs of their own.
    let a_dir = common::temp_dir("compare-a");
    run(suite().args(["--tag", "compare"]).arg("--record-dir").arg(&a_dir));
    let b_dir = common::temp_dir("compare-b");
    run(suite()
        .args(["--variant", "with_skill", "--tag", "compare"])
        .arg("--record-dir")
        .arg(&b_dir));
    let (a, b) = (the_run(&a_dir), the_run(&b_dir));
    let compared = reeval::compare::recorded::compare_runs(
        std::slice::from_ref(&a),
        std::slice::from_ref(&b),
        &reeval::prices::PriceTable::default(),
    )
    .unwrap();
    let recorded = serde_json::to_value(&compared.comparison).unwrap();
    // The arms are named by their runs; every figure but time is the live one's.
    for eval in ["needs_the_skill", "unchanged"] {
        let (l, r) = (row(&live, eval), row(&recorded, eval));
        for key in ["table", "pairs", "excluded", "difference", "interval", "method", "verdict"] {
            assert!(same(&l[key], &r[key]), "{eval}: {key}: {} vs {}", l[key], r[key]);
        }
        for arm in ["control", "treatment"] {
            for key in ["passed", "failed", "infra", "passRate", "passRateInterval", "tokens"] {
                assert!(same(&l[arm][key], &r[arm][key]), "{eval}: {arm}.{key}");
            }
        }
    }
    for key in ["table", "pairs", "difference", "interval", "verdict"] {
        assert!(same(&live["overall"][key], &recorded["overall"][key]), "overall: {key}");
    }

    // The page: both arms' outcomes side by side, linking to both runs' records.
    let html = reeval::report::compare::html(&compared).unwrap();
    for needle in ["needs_the_skill", "unchanged", "helped", "fail (assertion)"] {
        assert!(html.contains(needle), "{needle} in the page");
    }
    let record = std::fs::canonicalize(a.join("needs_the_skill.shell.t1.try1.json")).unwrap();
    assert!(html.contains(&format!("file://{}", record.display())), "a link to run A's record");
    let record =
        std::fs::canonicalize(b.join("needs_the_skill.shell.with_skill.t1.try1.json")).unwrap();
    assert!(html.contains(&format!("file://{}", record.display())), "a link to run B's record");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_oracle_passes_a_solvable_eval_and_flags_an_impossible_one() {
    require_docker!();
    let dir = common::temp_dir("oracle");
    let out =
        run(suite().args(["--harness", "oracle", "--tag", "oracle"]).arg("--record-dir").arg(&dir));
    assert_eq!(out.status.code(), Some(1));
    let run = the_run(&dir);
    let summary = common::json(&run.join("summary.json"));
    let outcome = |eval: &str| common::json(&run.join(format!("{eval}.oracle.t1.try1.json")));
    let solved = outcome("writes_a_greeting");
    assert_eq!(solved["outcome"], "pass", "{solved:#}");
    // The solution's work is the first turn's diff, as an agent's would be.
    assert_eq!(solved["turns"][0]["diff"]["files"][0]["path"], "greeting.txt");
    assert_eq!(outcome("impossible_check")["outcome"], "fail");
    assert_eq!(summary["brokenEvals"], serde_json::json!(["impossible_check"]));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("BROKEN EVAL impossible_check"), "{stdout}");
    assert!(!stdout.contains("BROKEN EVAL writes_a_greeting"), "{stdout}");
}

/// A run of `two_turns` recorded in a fresh directory: its run directory and record.
fn recorded_two_turns(tag: &str) -> (PathBuf, Value) {
    let dir = common::temp_dir(tag);
    let out = run(suite().args(["--tag", "replay"]).arg("--record-dir").arg(&dir));
    assert_eq!(out.status.code(), Some(0));
    let run = the_run(&dir);
    let record = common::json(&run.join("two_turns.shell.t1.try1.json"));
    assert_eq!(record["outcome"], "pass");
    (run, record)
}

/// The one record of `two_turns` in the run under `dir`.
fn replayed_record(dir: &Path) -> Value {
    let records = common::records(&the_run(dir));
    assert_eq!(records.len(), 1);
    records.into_iter().next().unwrap()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_replay_runs_in_the_recorded_harness_image() {
    require_docker!();
    let dir = common::temp_dir("replay-image-recorded");
    let out = run(suite().args(["--tag", "replay-image"]).arg("--record-dir").arg(&dir));
    assert_eq!(out.status.code(), Some(0));
    let recorded_run = the_run(&dir);
    let recorded =
        common::json(&recorded_run.join("in_the_harness_image.shell-own-image.t1.try1.json"));
    assert_ne!(recorded["image"], "reeval/base:latest", "{recorded:#}");

    let dir = common::temp_dir("replay-image");
    let out = run(suite().arg("--regrade").arg(&recorded_run).arg("--record-dir").arg(&dir));
    assert_eq!(out.status.code(), Some(0), "the check passes only in the harness's image");
    let replayed = replayed_record(&dir);
    assert_eq!(replayed["outcome"], "pass", "{replayed:#}");
    assert_eq!(replayed["image"], recorded["image"]);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_regrade_with_a_changed_check_flips_a_pass_to_a_fail_without_the_agent() {
    require_docker!();
    let (recorded_run, recorded) = recorded_two_turns("regrade-recorded");
    let dir = common::temp_dir("regrade");
    let out = run(suite()
        .env("FIXTURE_STRICT", "1")
        .arg("--regrade")
        .arg(&recorded_run)
        .arg("--record-dir")
        .arg(&dir));
    assert_eq!(out.status.code(), Some(1), "the stricter check fails");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 verdicts changed, 0 up (to pass), 1 down (from pass); 0 unchanged"),
        "{stderr}"
    );
    assert!(stderr.contains("two_turns #1 [shell]: pass → fail"), "{stderr}");
    let new = replayed_record(&dir);
    assert_eq!(new["outcome"], "fail");
    assert_eq!(new["regradeOf"]["run"], recorded["runId"]);
    assert_eq!(new["regradeOf"]["attempt"], "two_turns.shell.t1.try1.json");
    assert!(new["harness"].as_str().unwrap().starts_with("replay:"));
    // No agent ran: the session is the replay's, and the first turn's script,
    // which wrote the time in nanoseconds to stamp.txt, did not run again: the
    // check hashing it prints what the recorded one printed.
    let harness_phase = new["phases"].as_array().unwrap().iter().find(|p| p["phase"] == "harness");
    assert_eq!(harness_phase.unwrap()["detail"], "replay ready");
    assert_eq!(new["checks"][0]["stdoutTail"], recorded["checks"][0]["stdoutTail"]);
    assert!(new["checks"][0]["stdoutTail"].as_str().unwrap().contains("stamp.txt"));
    // The agent's usage is the recorded one, copied.
    assert_eq!(new["usage"], recorded["usage"]);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_replay_of_two_turns_reproduces_both_diffs_byte_for_byte_and_refuses_an_incomplete_one() {
    require_docker!();
    let (recorded_run, recorded) = recorded_two_turns("replay-recorded");
    let dir = common::temp_dir("replay");
    let harness = format!("replay:{}", recorded_run.display());
    let out =
        run(suite().args(["--tag", "replay", "--harness", &harness]).arg("--record-dir").arg(&dir));
    assert_eq!(out.status.code(), Some(0));
    let new = replayed_record(&dir);
    assert_eq!(new["outcome"], "pass");
    let (old_turns, new_turns) =
        (recorded["turns"].as_array().unwrap(), new["turns"].as_array().unwrap());
    assert_eq!(new_turns.len(), 2);
    for (i, (old, new)) in old_turns.iter().zip(new_turns).enumerate() {
        // Files, kinds of change (a deletion in turn 2), binary flags and the patch, byte for byte.
        assert_eq!(old["diff"], new["diff"], "turn {}", i + 1);
        assert_eq!(old["finalMessage"], new["finalMessage"], "turn {}", i + 1);
    }
    assert_eq!(old_turns[0]["diff"]["files"][0]["binary"], true, "blob.bin is binary");
    // The binary file's bytes, the script's mode, the symlink: the check's
    // hashes and `stat` print the same.
    let stdout = new["checks"][0]["stdoutTail"].as_str().unwrap();
    assert!(stdout.starts_with("ran\n755 run.sh\n"), "{stdout}");
    assert_eq!(new["checks"][0]["stdoutTail"], recorded["checks"][0]["stdoutTail"]);

    // Without turn 2's changes the recorded workspace is incomplete: the replay refuses.
    std::fs::remove_file(recorded_run.join("two_turns.shell.t1.try1/workspace/turn-2.tar"))
        .unwrap();
    let dir = common::temp_dir("replay-incomplete");
    let out = run(suite().arg("--regrade").arg(&recorded_run).arg("--record-dir").arg(&dir));
    assert_eq!(out.status.code(), Some(2), "a config error");
    let refused = replayed_record(&dir);
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("the recorded workspace is incomplete"), "{message}");
    assert!(message.contains("turn-2.tar is missing"), "{message}");
    assert!(refused["turns"].as_array().unwrap().is_empty(), "no turn was answered");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn adding_trials_to_a_comparison_looks_again_with_the_confidence_sequence() {
    require_docker!();
    let dir = common::temp_dir("compare-resume");
    let compare = ["--compare", "control,with_skill", "--tag", "compare"];
    run(suite().args(compare).args(["--trials", "2"]).arg("--record-dir").arg(&dir));
    let run_dir = the_run(&dir);
    let first = common::json(&run_dir.join("summary.json"))["comparison"].clone();
    assert_eq!(first["look"], 1);
    assert_eq!(row(&first, "needs_the_skill")["pairs"], 2);

    let run_id = run_dir.file_name().unwrap().to_str().unwrap().to_string();
    // Resumed without naming the arms again: the run's own arms.
    run(suite()
        .args(["--tag", "compare"])
        .args(["--trials", "4", "--resume", &run_id])
        .arg("--record-dir")
        .arg(&dir));
    let second = common::json(&run_dir.join("summary.json"))["comparison"].clone();
    assert_eq!(second["look"], 2);
    assert_eq!(
        common::records(&run_dir).len(),
        16,
        "2 evals × 2 arms × 4 trials, the first 2 kept"
    );
    let r = row(&second, "needs_the_skill");
    assert_eq!(r["pairs"], 4);
    assert!(r["method"].as_str().unwrap().contains("confidence sequence"), "{r:#}");
    // Tuned where the first look was (2 pairs), at α = 0.01: Howard et al.'s
    // two-sided normal mixture with ρ = V / (2 ln(1/α) + ln(1 + 2 ln(1/α))),
    // here with S = 4 (every pair favours the skill) and V = t = 4.
    assert_eq!(r["plannedPairs"], 2);
    let l = 2.0 * (1.0f64 / 0.01).ln();
    let rho = 2.0 / (l + (1.0 + l).ln());
    let half = ((4.0 + rho) * (((4.0 + rho) / rho).ln() + l)).sqrt() / 4.0;
    assert_close(interval(&r["interval"]), [1.0 - half, 1.0], "the sequence at the second look");
    assert!((r["confidence"].as_f64().unwrap() - 0.99).abs() < 1e-9);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn harness_a_vs_b_makes_each_harness_an_arm() {
    require_docker!();
    let dir = common::temp_dir("compare-vs");
    run(suite()
        .args(["--harness", "shell", "--vs", "shell:alt", "--tag", "compare", "--trials", "1"])
        .arg("--record-dir")
        .arg(&dir));
    let run = the_run(&dir);
    let c = common::json(&run.join("summary.json"))["comparison"].clone();
    assert_eq!(
        (c["control"].as_str(), c["treatment"].as_str()),
        (Some("shell"), Some("shell:alt"))
    );
    // Pairs across the two harnesses: one per eval, no harness in the row.
    let r = row(&c, "needs_the_skill");
    assert_eq!(r["pairs"], 1);
    assert!(r.get("harness").is_none());
    // Each record's arm is its harness, and its file name is the plain one.
    let record = common::json(&run.join("unchanged.shell_alt.t1.try1.json"));
    assert_eq!(record["arm"], "shell:alt");
}
