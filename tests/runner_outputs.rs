//! A real suite binary (`examples/matrix_suite.rs`) in real containers with
//! the `shell` harness: the cell statistics against figures computed by hand,
//! `min_pass_rate` and the exit code, `--tag`, `--rerun-failed`, `--resume`
//! after a SIGTERM, libtest's JSON event stream read line by line, the JUnit
//! file read by a real consumer (Python's junitparser), the HTML report in
//! headless Chromium, and a stdout closed early.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn suite() -> Command {
    let mut cmd = Command::new(common::example_bin("matrix_suite"));
    cmd.env_remove("NEXTEST_RUN_ID")
        .env_remove("NEXTEST")
        .env_remove("REEVAL_FIXTURE_QUICK")
        .env_remove("REEVAL_TAGS")
        .env("REEVAL_RETRIES", "0");
    cmd
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run the suite");
    eprintln!("stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    out
}

/// The run directories under `dir`, oldest first.
fn runs(dir: &Path) -> Vec<PathBuf> {
    let mut runs: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    runs.sort();
    runs.into_iter().map(|(_, p)| p).collect()
}

/// Whether a tool a test needs is here; missing, it fails the test under
/// `REEVAL_REQUIRE_DOCKER=1` (CI installs it in `.ci/run`) and skips it otherwise.
fn tool_ready(what: &str, ok: bool) -> bool {
    if !ok {
        assert!(!common::docker_required(), "{what} is not installed (.ci/run installs it)");
        eprintln!("skipping: {what} is not installed");
    }
    ok
}

const Z: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson interval, written out as in the textbook.
fn wilson(passed: f64, n: f64) -> [f64; 2] {
    let p = passed / n;
    let center = (p + Z * Z / (2.0 * n)) / (1.0 + Z * Z / n);
    let half = Z / (1.0 + Z * Z / n) * (p * (1.0 - p) / n + Z * Z / (4.0 * n * n)).sqrt();
    [(center - half).max(0.0), (center + half).min(1.0)]
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-6)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_matrix_of_3_evals_2_harnesses_3_trials_and_its_outputs() {
    require_docker!();
    let dir = common::temp_dir("matrix");
    let junit = common::temp_dir("matrix-junit").join("junit.xml");
    let out = run(suite()
        .args(["--tag", "matrix", "--test-threads", "4", "--format", "json", "--junit"])
        .arg(&junit)
        .arg("--record-dir")
        .arg(&dir));
    assert_eq!(out.status.code(), Some(1), "cells failed");
    let run_dir = runs(&dir).pop().expect("a run");
    let summary = common::json(&run_dir.join("summary.json"));

    // Figures computed by hand: (eval, harness, passed, failed, infra, pass@k, pass^k, ok).
    let third = 1.0 / 3.0;
    type Cell = (&'static str, &'static str, u32, u32, u32, Vec<f64>, Vec<f64>, bool);
    let cells: [Cell; 6] = [
        ("all_pass", "shell", 3, 0, 0, vec![1.0, 1.0, 1.0], vec![1.0, 1.0, 1.0], true),
        ("all_pass", "shell:alt", 3, 0, 0, vec![1.0, 1.0, 1.0], vec![1.0, 1.0, 1.0], true),
        // 2 of 3: pass@1 = 2/3; pass@2 = 1 - C(1,2)/C(3,2) = 1; pass^2 = C(2,2)/C(3,2) = 1/3.
        (
            "two_of_three",
            "shell",
            2,
            1,
            0,
            vec![2.0 * third, 1.0, 1.0],
            vec![2.0 * third, third, 0.0],
            false,
        ),
        // 1 of 3: pass@2 = 1 - C(2,2)/C(3,2) = 2/3; pass^2 = C(1,2)/C(3,2) = 0.
        (
            "two_of_three",
            "shell:alt",
            1,
            2,
            0,
            vec![third, 2.0 * third, 1.0],
            vec![third, 0.0, 0.0],
            false,
        ),
        ("never", "shell", 0, 3, 0, vec![0.0, 0.0, 0.0], vec![0.0, 0.0, 0.0], false),
        // The infra error is left out: 2 graded trials.
        ("never", "shell:alt", 0, 2, 1, vec![0.0, 0.0], vec![0.0, 0.0], false),
    ];
    let got = summary["cells"].as_array().unwrap();
    assert_eq!(got.len(), 6, "{summary:#}");
    for (eval, harness, passed, failed, infra, at_k, pow_k, ok) in cells {
        let c = got
            .iter()
            .find(|c| c["eval"] == eval && c["harness"] == harness)
            .unwrap_or_else(|| panic!("no cell {eval} {harness}"));
        let n = f64::from(passed + failed);
        assert_eq!(
            (c["passed"].as_u64(), c["failed"].as_u64(), c["infra"].as_u64()),
            (Some(passed.into()), Some(failed.into()), Some(infra.into())),
            "{c}"
        );
        assert!(close(&c["passRate"], f64::from(passed) / n), "{c}");
        let [lo, hi] = wilson(f64::from(passed), n);
        assert!(
            close(&c["passRateInterval"][0], lo) && close(&c["passRateInterval"][1], hi),
            "{eval} {harness}: {c} vs [{lo}, {hi}]"
        );
        let by_k = c["byK"].as_array().unwrap();
        assert_eq!(by_k.len(), at_k.len(), "{c}");
        for (i, (at, pow)) in at_k.iter().zip(&pow_k).enumerate() {
            assert_eq!(by_k[i]["k"], i + 1);
            assert!(close(&by_k[i]["passAtK"], *at), "{eval} {harness} pass@{}: {c}", i + 1);
            assert!(close(&by_k[i]["passPowK"], *pow), "{eval} {harness} pass^{}: {c}", i + 1);
        }
        assert_eq!(c["ok"], ok, "{c}");
    }
    // Sanity of the hand formula itself against two published values.
    let [lo, hi] = wilson(2.0, 3.0);
    assert!((lo - 0.2077).abs() < 1e-4 && (hi - 0.9385).abs() < 1e-4);
    assert_eq!(summary["exitCode"], 1);
    assert!(summary["exitReason"].as_str().unwrap().contains("4 cells failed"), "{summary}");
    // Provenance.
    assert!(summary["startedAt"].is_string() && summary["endedAt"].is_string());
    assert!(summary["durationMs"].as_u64().is_some());
    assert!(summary["command"][0].as_str().unwrap().ends_with("matrix_suite"));
    assert!(summary["reevalVersion"].is_string());
    assert!(summary["engine"].as_str().unwrap().contains("API"), "{summary}");
    assert!(summary["git"]["commit"].as_str().is_some_and(|c| c.len() == 40), "{summary}");

    // libtest's JSON event stream: every line is an object of the libtest shape.
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect();
    assert_eq!(lines[0], serde_json::json!({"type": "suite", "event": "started", "test_count": 3}));
    let last = lines.last().unwrap();
    assert_eq!((last["type"].as_str(), last["event"].as_str()), (Some("suite"), Some("failed")));
    assert_eq!((last["passed"].as_u64(), last["failed"].as_u64()), (Some(1), Some(2)));
    for eval in ["all_pass", "two_of_three", "never"] {
        assert!(
            lines
                .iter()
                .any(|l| l["type"] == "test" && l["event"] == "started" && l["name"] == eval)
        );
        let result = lines
            .iter()
            .find(|l| l["type"] == "test" && l["name"] == eval && l["event"] != "started")
            .unwrap();
        assert!(result["exec_time"].as_f64().is_some());
        assert_eq!(result["attempts"].as_array().unwrap().len(), 6, "{result}");
        let record = PathBuf::from(result["record"].as_str().unwrap());
        assert!(record.is_file(), "{result}");
        if eval == "all_pass" {
            assert_eq!(
                (result["event"].as_str(), result["outcome"].as_str()),
                (Some("ok"), Some("pass"))
            );
        } else {
            assert_eq!(
                (result["event"].as_str(), result["outcome"].as_str()),
                (Some("failed"), Some("fail"))
            );
            assert_eq!(result["kind"], "assertion");
            assert!(result["stdout"].as_str().unwrap().contains("assertion"), "{result}");
        }
    }

    // JUnit, read by a real consumer: junitparser (Debian's python3-junitparser, or from PyPI).
    let python = ["/usr/bin/python3", "python3"].into_iter().find(|p| {
        Command::new(p).args(["-c", "import junitparser"]).status().is_ok_and(|s| s.success())
    });
    if tool_ready("python3 with junitparser", python.is_some()) {
        let python = python.unwrap();
        let script = r#"
import sys, junitparser
xml = junitparser.JUnitXml.fromfile(sys.argv[1])
cases = [c for suite in xml for c in suite]
print("cases", len(cases))
for c in cases:
    for r in c.result:
        kind = "failure" if isinstance(r, junitparser.Failure) else "error" if isinstance(r, junitparser.Error) else "other"
        print(kind, r.type, c.classname, "|", c.name, "|", (r.text or "").replace("\n", " "))
"#;
        let out = Command::new(python).arg("-c").arg(script).arg(&junit).output().unwrap();
        let parsed = text(&out.stdout);
        assert!(out.status.success(), "{parsed}{}", text(&out.stderr));
        assert!(parsed.starts_with("cases 18\n"), "one testcase per attempt: {parsed}");
        let failures: Vec<&str> = parsed.lines().filter(|l| l.starts_with("failure ")).collect();
        assert_eq!(failures.len(), 8, "{parsed}");
        assert!(failures.iter().all(|l| l.starts_with("failure assertion ")), "{parsed}");
        let errors: Vec<&str> = parsed.lines().filter(|l| l.starts_with("error ")).collect();
        assert_eq!(errors.len(), 1, "{parsed}");
        assert!(
            errors[0].starts_with("error infra never | never [shell:alt] #1 try 1 |"),
            "{parsed}"
        );
        assert!(
            errors[0].contains("it is down on purpose") && errors[0].contains("record: "),
            "{parsed}"
        );
        assert!(
            failures.iter().all(|l| l.contains(&run_dir.display().to_string())),
            "each names its record"
        );
    }

    // The HTML report, in a real browser: failures first, phases labelled, a turn's diff, a check's output.
    let report = run_dir.join("report.html");
    let chromium = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    if tool_ready("chromium", chromium.is_some()) {
        let chromium = chromium.unwrap();
        let browser = |args: &[&str]| {
            Command::new(chromium)
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--allow-file-access-from-files",
                ])
                .args(args)
                .arg(format!("file://{}", report.display()))
                .output()
                .unwrap()
        };
        let shot = run_dir.join("report.png");
        let out =
            browser(&[&format!("--screenshot={}", shot.display()), "--window-size=1280,2000"]);
        assert!(
            shot.is_file() && std::fs::metadata(&shot).unwrap().len() > 10_000,
            "{}",
            text(&out.stderr)
        );
        let dom = text(&browser(&["--dump-dom"]).stdout);
        let first_attempt = dom.find("class=\"attempt\"").expect("attempts in the DOM");
        let first_title = &dom[first_attempt..first_attempt + 400];
        assert!(first_title.contains(">fail"), "the first attempt is a failing one: {first_title}");
        let fail_at = dom.find("two_of_three #3 [shell]").unwrap();
        let pass_at = dom.find("all_pass #1 [shell]").unwrap();
        assert!(fail_at < pass_at, "failures come first");
        assert!(
            dom.contains(">turn</div>") && dom.contains(">check</div>"),
            "phase labels on the timeline"
        );
        assert!(dom.contains("class=\"legend\"") && dom.contains("class=\"axis\""));
        assert!(
            dom.contains("<span class=\"d-add\">+hello</span>"),
            "the turn's diff, rendered as a diff"
        );
        assert!(dom.contains("checked greeting.txt"), "the check's output");
    }

    // --rerun-failed: only the cells that failed or had an infra error, in a new run.
    let out =
        run(suite().args(["--rerun-failed", "--test-threads", "4", "--record-dir"]).arg(&dir));
    assert_eq!(out.status.code(), Some(1));
    let rerun = runs(&dir).pop().unwrap();
    assert_ne!(rerun, run_dir);
    let mut cells: Vec<(String, String)> = common::records(&rerun)
        .iter()
        .map(|r| {
            (r["eval"].as_str().unwrap().to_string(), r["harness"].as_str().unwrap().to_string())
        })
        .collect();
    cells.dedup();
    assert_eq!(
        cells,
        [
            ("never".to_string(), "shell".to_string()),
            ("never".to_string(), "shell:alt".to_string()),
            ("two_of_three".to_string(), "shell".to_string()),
            ("two_of_three".to_string(), "shell:alt".to_string()),
        ]
    );
    assert!(
        text(&out.stdout).contains("4 filtered out"),
        "all_pass was left out, with the other tags (threshold, resume, output)"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_min_pass_rate_and_tags_decide_what_runs_and_the_exit_code() {
    require_docker!();
    let dir = common::temp_dir("threshold");
    // Only the tagged eval runs; 2 of 3 with min_pass_rate = 0.66 is green.
    let out = run(suite().args(["--tag", "threshold", "--record-dir"]).arg(&dir));
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("running 1 test\n") && stdout.contains("test flaky_but_ok ... ok"),
        "{stdout}"
    );
    assert!(stdout.contains("5 filtered out"), "{stdout}");
    assert!(stdout.contains("min 66%: met"), "{stdout}");
    let summary = common::json(&runs(&dir).pop().unwrap().join("summary.json"));
    assert!(
        summary["exitReason"].as_str().unwrap().contains("by reaching its min pass rate"),
        "{summary}"
    );
    // The flag's threshold replaces the eval's: 2 of 3 is not 90 %.
    let out = run(suite()
        .args(["--tag", "threshold", "--min-pass-rate", "0.9", "--record-dir"])
        .arg(&dir));
    assert_eq!(out.status.code(), Some(1));
    // REEVAL_TAGS is --tag's twin.
    let out = run(suite().args(["--list"]).env("REEVAL_TAGS", "threshold,resume"));
    assert_eq!(text(&out.stdout), "flaky_but_ok: test\nresumable: test\n\n2 tests, 0 benchmarks\n");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn resume_completes_a_run_stopped_by_sigterm_and_keeps_the_interrupted_turn() {
    require_docker!();
    stop_and_resume("TERM").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn resume_completes_a_run_stopped_by_sighup() {
    // Before the fix: exit 129, no run directory, the sandbox left up.
    require_docker!();
    stop_and_resume("HUP").await;
}

/// Runs the `resume` evals, stops the run with `signal` while trial 3's turn
/// runs, and completes it with `--resume`.
async fn stop_and_resume(signal: &str) {
    common::assert_signal_not_ignored(signal);
    let dir = common::temp_dir("resume");
    let run_id = format!("resume-{}-{}", signal.to_lowercase(), std::process::id());
    let run_dir = dir.join(&run_id);
    let child = suite()
        .args(["--tag", "resume", "--test-threads", "3", "--record-dir"])
        .arg(&dir)
        .env("NEXTEST_RUN_ID", &run_id)
        .env("REEVAL_SLOW_AFTER", "2s")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Trials 1 and 2 recorded, trial 3's turn running.
    let began = Instant::now();
    while !(run_dir.join("resumable.shell.t1.try1.json").is_file()
        && run_dir.join("resumable.shell.t2.try1.json").is_file()
        && common::containers_of_run(&run_id).await == 1)
    {
        assert!(began.elapsed() < Duration::from_secs(120), "trial 3 never started");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "SIG{signal}: {}", text(&out.stderr));
    assert!(text(&out.stderr).contains(&format!("--resume {run_id}")), "{}", text(&out.stderr));
    assert_eq!(common::containers_of_run(&run_id).await, 0, "torn down");
    let cut = common::json(&run_dir.join("resumable.shell.t3.try1.json"));
    assert_eq!(cut["interrupted"], true);
    assert_eq!(cut["turns"].as_array().unwrap().len(), 1, "the turn in flight is kept: {cut}");
    assert_eq!(cut["turns"][0]["status"], "interrupted");
    assert!(
        cut["turns"][0]["finalMessage"].as_str().unwrap_or("").contains("working on it"),
        "its output so far: {cut}"
    );
    assert!(cut["finalDiff"]["files"].to_string().contains("started.txt"), "{cut}");

    // --resume: trials 1 and 2 are kept, trial 3 runs again (as try 2), the summary covers all three.
    let out = run(suite()
        .args(["--tag", "resume", "--resume", &run_id, "--record-dir"])
        .arg(&dir)
        .env("REEVAL_FIXTURE_QUICK", "1"));
    assert_eq!(out.status.code(), Some(0));
    let summary = common::json(&run_dir.join("summary.json"));
    assert_eq!(summary["passed"], 3, "{summary}");
    assert_eq!(summary["runId"], run_id.as_str());
    let files: Vec<String> = common::records(&run_dir)
        .iter()
        .map(|r| format!("t{}.try{}", r["trial"], r["try"]))
        .collect();
    assert_eq!(
        files,
        ["t1.try1", "t2.try1", "t3.try1", "t3.try2"],
        "nothing overwritten, nothing rerun"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_stdout_closed_early_neither_aborts_nor_leaves_a_sandbox() {
    require_docker!();
    // Before the fix: exit 0 (or an abort), with "failed to report an event" for every line.
    let dir = common::temp_dir("pipe");
    let run_id = format!("pipe-{}", std::process::id());
    let mut child = suite()
        .args(["--tag", "threshold", "--record-dir"])
        .arg(&dir)
        .env("NEXTEST_RUN_ID", &run_id)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, as `| head -1` does, and close the pipe.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "non-zero, as a SIGPIPE would be: {stderr}");
    assert!(!stderr.contains("failed to report"), "{stderr}");
    assert_eq!(common::containers_of_run(&run_id).await, 0);
    assert_eq!(common::records(&dir.join(&run_id)).len(), 3, "every attempt recorded");
}

#[cfg_attr(
    reeval_no_nextest,
    ignore = "cargo-nextest is not installed (REEVAL_REQUIRE_DOCKER=1 fails instead)"
)]
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[test]
fn a_nextest_run_with_a_retry_has_one_summary_and_report_and_keeps_both_tries() {
    let nextest = Command::new("cargo").args(["nextest", "--version"]).output();
    if !tool_ready("cargo-nextest", nextest.is_ok_and(|o| o.status.success())) {
        return;
    }
    if !tokio::runtime::Runtime::new().unwrap().block_on(common::docker_ready()) {
        return;
    }
    let dir = common::temp_dir("nextest-retry");
    let state = common::temp_dir("nextest-state");
    let out = Command::new("cargo")
        .args(["nextest", "run", "--no-fail-fast", "--retries", "1", "--example", "nextest_suite"])
        .env("REEVAL_RECORD_DIR", &dir)
        .env("REEVAL_FIXTURE_STATE", &state)
        .env_remove("REEVAL_TAGS")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{}{stderr}", text(&out.stdout));
    assert!(stderr.contains("5 tests run: 5 passed (1 flaky)"), "{stderr}");
    let runs = runs(&dir);
    assert_eq!(runs.len(), 1, "one run directory: {runs:?}");
    let run = &runs[0];
    let tries: Vec<String> = common::records(run)
        .iter()
        .map(|r| {
            format!(
                "{} t{} try{} {}",
                r["eval"].as_str().unwrap(),
                r["trial"],
                r["try"],
                r["outcome"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        tries,
        [
            "flaky_once t1 try1 fail",
            "flaky_once t1 try2 pass",
            "four t1 try1 pass",
            "one t1 try1 pass",
            "three t1 try1 pass",
            "two t1 try1 pass",
        ],
        "both tries of the retried eval are kept"
    );
    let summary = common::json(&run.join("summary.json"));
    assert_eq!(summary["cells"].as_array().unwrap().len(), 5, "{summary}");
    assert_eq!(
        (summary["passed"].as_u64(), summary["exitCode"].as_i64()),
        (Some(5), Some(0)),
        "{summary}"
    );
    assert_eq!(summary["records"].as_array().unwrap().len(), 6, "{summary}");
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    for eval in ["one", "two", "three", "four", "flaky_once"] {
        assert!(html.contains(&format!("{eval} #1 [shell]")), "{eval} in the report");
    }
    assert!(html.contains("try 1") && html.contains("try 2"));
    let per_process = std::fs::read_dir(run)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("summary."))
        .count();
    assert_eq!(per_process, 7, "one summary per process (6) and the run's own: {run:?}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_image_that_is_not_there_is_a_config_error_in_preflight() {
    require_docker!();
    // Before the fix: three tries, each an infra error after starting the attempt.
    let eval = reeval::Eval::new("missing_image", |c| {
        Box::pin(async move { reeval::expect(c.exec("true").await?).to_succeed() })
    })
    .environment(|| {
        reeval::Environment::new().image(reeval::Image::from("reeval/not-built-here:1"))
    });
    let run_id = format!("image-missing-{}", std::process::id());
    let runner = common::runner_with("image-missing", |c| {
        c.settings.infra_retries = 2;
        c.settings.run_id = run_id.clone();
    });
    let e = runner.run(vec![eval]).await.expect_err("preflight stops the run").to_string();
    assert!(
        e.contains(
            "environment of eval missing_image: failed to find image reeval/not-built-here:1"
        ) && e.contains("build or load it first"),
        "{e}"
    );
    assert_eq!(common::containers_of_run(&run_id).await, 0, "no sandbox started");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn capturing_the_workspace_keeps_its_top_level_files_and_an_empty_match_fails() {
    require_docker!();
    // Before the fix `Artifact::dir(".")` dropped top-level files and stripped a directory level.
    let eval = reeval::Eval::new("capture_dot", |c| {
        Box::pin(async move {
            c.send("echo top > top.txt && mkdir -p sub/deeper && echo low > sub/deeper/low.txt && mkdir empty").await?;
            let all = c.capture("workspace", reeval::Artifact::dir(".")).await?;
            reeval::expect(all.text.as_str()).to_contain("top.txt (4 bytes)")?;
            reeval::expect(all.text.as_str()).to_contain("sub/deeper/low.txt (4 bytes)")?;
            let nothing = c.capture("empty", reeval::Artifact::dir("empty")).await;
            reeval::expect(nothing.is_err()).to_equal(true)?;
            reeval::expect(nothing.unwrap_err().to_string()).to_contain("holds no file")
        })
    });
    let report = common::runner("capture-dot").run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, reeval::Outcome::Pass, "{:?}", r.message);
    let tar =
        std::fs::read(report.run_dir.join(r.artifacts_dir_name()).join("captures/workspace.tar"))
            .unwrap();
    let mut names: Vec<String> = tar::Archive::new(tar.as_slice())
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .filter(|p| p.ends_with(".txt"))
        .collect();
    names.sort();
    assert_eq!(names, ["workspace/sub/deeper/low.txt", "workspace/top.txt"]);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_image_build_error_reaches_the_record_without_colour_codes() {
    require_docker!();
    let dir = common::temp_dir("ansi-build");
    std::fs::write(
        dir.join("Dockerfile"),
        "FROM reeval/base:latest\nRUN printf '\\033[1;31mcannot install\\033[0m\\n'; exit 3\n",
    )
    .unwrap();
    let dockerfile = dir.join("Dockerfile");
    let eval = reeval::Eval::new("coloured_build", |c| {
        Box::pin(async move { reeval::expect(c.exec("true").await?).to_succeed() })
    })
    .environment(move || {
        reeval::Environment::new().image(reeval::Image::dockerfile(dockerfile.clone()))
    });
    let report = common::runner("ansi").run(vec![eval]).await.expect("preflight");
    let message = report.records[0].message.clone().unwrap_or_default();
    assert!(message.contains("cannot install"), "{message}");
    assert!(!message.contains('\u{1b}'), "no escape codes: {message:?}");
}

#[test]
fn skipped_evals_are_left_out_of_preflight() {
    // An eval whose secret is missing stops the run; `--skip` leaves it out of preflight too.
    let suite = || {
        let mut cmd = Command::new(common::example_bin("fixture_suite"));
        cmd.env_remove("REEVAL_FIXTURE_MISSING_A")
            .env_remove("REEVAL_FIXTURE_MISSING_B")
            .env_remove("NEXTEST_RUN_ID")
            .env_remove("NEXTEST");
        cmd
    };
    let dir = common::temp_dir("skip-preflight");
    let out = run(suite().args(["nested::no_sandbox", "needs_secrets", "--record-dir"]).arg(&dir));
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("REEVAL_ENV_FILE") && err.contains("--skip needs_secrets"), "{err}");
    let out = run(suite()
        .args(["nested::no_sandbox", "needs_secrets", "--skip", "needs_secrets", "--record-dir"])
        .arg(&dir));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // A configured env file that does not exist is named.
    let out = run(suite()
        .args(["nested::no_sandbox", "--record-dir"])
        .arg(&dir)
        .env("REEVAL_ENV_FILE", "/nonexistent/suite.env"));
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("failed to read the env file /nonexistent/suite.env (--env-file or REEVAL_ENV_FILE): it does not exist"), "{}", text(&out.stderr));
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[test]
fn verbose_and_stream_show_each_turn_and_the_agents_output_as_it_arrives() {
    if !tokio::runtime::Runtime::new().unwrap().block_on(common::docker_ready()) {
        return;
    }
    let dir = common::temp_dir("stream");
    let out = run(suite()
        .args(["two_of_three", "--exact", "--harness", "shell", "--trials", "1", "-v", "--stream"])
        .arg("--record-dir")
        .arg(&dir));
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(r#" turn 1 started: "printf 'hello\\n' > greeting.txt && echo wrote it""#),
        "{stderr}"
    );
    let said = stderr
        .lines()
        .position(|l| l.starts_with("[two_of_three#1 shell]") && l.ends_with(" says wrote it"));
    let ended = stderr.lines().position(|l| l.contains(" turn 1 completed in "));
    assert!(
        said.is_some() && said < ended,
        "the agent's output comes as it arrives, before its turn ends: {stderr}"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[test]
fn a_terminal_gets_a_progress_display_that_never_garbles_the_lines() {
    // `script` runs the suite on a pseudo-terminal, as a person at a terminal would.
    let has_script =
        Command::new("script").arg("--version").output().is_ok_and(|o| o.status.success());
    if !tool_ready("script (util-linux)", has_script) {
        return;
    }
    if !tokio::runtime::Runtime::new().unwrap().block_on(common::docker_ready()) {
        return;
    }
    let dir = common::temp_dir("pty");
    let suite = common::example_bin("matrix_suite");
    let line = format!("{} --tag threshold --record-dir {}", suite.display(), dir.display());
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("REEVAL_RETRIES", "0")
        .env_remove("NEXTEST")
        .env_remove("NEXTEST_RUN_ID")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let screen = text(&out.stdout);
    assert!(
        screen.contains(
            "1 cells · 3/3 attempts · 0 running · 0 queued · 2 passed, 1 failed, 0 infra"
        ),
        "{screen}"
    );
    // What each line of the terminal shows once the escapes have done their work.
    let escapes = regex::Regex::new("\u{1b}\\[[0-9;]*[A-Za-z]").unwrap();
    let shown: Vec<String> = screen
        .split('\n')
        .map(|l| {
            escapes
                .replace_all(l.trim_end_matches('\r'), "")
                .rsplit('\r')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    // The running attempts under it, each with its trial, harness, phase and time.
    let running =
        regex::Regex::new(r"  flaky_but_ok#[123] shell +(image|container|check) +[0-9]+s").unwrap();
    assert!(running.is_match(&screen), "a running attempt named: {screen}");
    for expected in ["running 1 test", "test flaky_but_ok ... ok"] {
        assert!(shown.iter().any(|l| l == expected), "`{expected}` whole on its line: {shown:#?}");
    }
    assert!(
        shown.iter().any(|l| l.starts_with("test result: ok. 1 passed; 0 failed;")),
        "{shown:#?}"
    );
    // Without a terminal (every other test here) there is no progress display at all.
    let out = run(&mut suite_cmd_threshold(&dir));
    assert!(!text(&out.stderr).contains("attempts ·") && !text(&out.stdout).contains("attempts ·"));
}

fn suite_cmd_threshold(dir: &Path) -> Command {
    let mut cmd = suite();
    cmd.args(["--tag", "threshold", "--record-dir"]).arg(dir);
    cmd
}
