//! A Harbor dataset runs even when some of its tasks cannot: each task that
//! cannot load or run is listed when the run starts and is a config outcome
//! of its own cell (not retried, exit code 2); every other task runs. The
//! `reeval` binary, run as a user runs it, against the real engine.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn reeval(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reeval")).args(args).output().expect("run reeval")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reeval-dataset-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A task in `root/name` whose oracle writes `/app/done.txt`, which its verifier rewards.
fn task(root: &Path, name: &str, toml: &str, dockerfile: &str) {
    let t = root.join(name);
    for (path, text) in [
        ("task.toml", toml),
        ("instruction.md", "Write done.txt."),
        ("environment/Dockerfile", dockerfile),
        ("solution/solve.sh", "#!/bin/bash\necho done > /app/done.txt\n"),
        (
            "tests/test.sh",
            "#!/bin/bash\nif [ -f /app/done.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
        ),
    ] {
        std::fs::create_dir_all(t.join(path).parent().unwrap()).unwrap();
        std::fs::write(t.join(path), text).unwrap();
    }
}

const IMAGE: &str = "FROM reeval/base:latest\nWORKDIR /app\n";

/// The records of the one run under `record_dir`.
fn records(record_dir: &Path) -> Vec<serde_json::Value> {
    let run =
        std::fs::read_dir(record_dir).unwrap().flatten().map(|e| e.path()).find(|p| p.is_dir());
    let run = run.expect("a run directory");
    let mut out: Vec<serde_json::Value> = std::fs::read_dir(&run)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("summary"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    out.sort_by_key(|r| format!("{}#{}#{}", r["eval"], r["trial"], r["try"]));
    out
}

fn outcome(r: &serde_json::Value) -> String {
    match r["kind"].as_str() {
        Some(kind) => format!("{}/{kind}", r["outcome"].as_str().unwrap_or_default()),
        None => r["outcome"].as_str().unwrap_or_default().to_string(),
    }
}

#[test]
fn a_dataset_runs_past_the_tasks_that_cannot() {
    let root = temp("five");
    let tasks = root.join("tasks");
    task(&tasks, "good-a", "[task]\nname = \"org/good-a\"\n[agent]\ntimeout_secs = 5\n", IMAGE);
    task(&tasks, "good-b", "[task]\nname = \"org/good-b\"\n", IMAGE);
    task(&tasks, "good-c", "", IMAGE);
    task(&tasks, "bad-toml", "[task\nname = \"org/bad\"\n", IMAGE);
    task(&tasks, "gpu", "[task]\nname = \"org/gpu\"\n[environment]\ngpus = 1\n", IMAGE);
    let runs = root.join("runs");
    let (tasks_arg, runs_arg) = (tasks.display().to_string(), runs.display().to_string());

    let out = reeval(&[
        "harbor",
        "run",
        "-p",
        &tasks_arg,
        "-a",
        "oracle",
        "-n",
        "4",
        "--record-dir",
        &runs_arg,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "a config outcome: exit 2\n{stdout}\n{stderr}");
    // Listed when the run starts, each with why.
    assert!(stderr.contains("2 evals cannot run (config outcomes, not retried"), "{stderr}");
    assert!(
        stderr.contains("  bad-toml: failed to parse task.toml of Harbor task bad-toml"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  gpu: failed to load Harbor task org/gpu: a task that asks for GPUs"),
        "{stderr}"
    );
    // A key Harbor does not know is said, with the nearest it knows.
    assert!(
        stderr.contains(
            "Harbor task org/good-a: task.toml `[agent].timeout_secs` is not a key Harbor knows; it is ignored (did you mean `timeout_sec`?)"
        ),
        "{stderr}"
    );
    for good in ["good-a", "good-b", "good-c"] {
        assert!(stdout.contains(&format!("test {good} ... ok")), "{stdout}");
    }
    let found: Vec<(String, String)> = records(&runs)
        .iter()
        .map(|r| (r["eval"].as_str().unwrap().to_string(), outcome(r)))
        .collect();
    assert_eq!(
        found,
        [
            ("bad-toml".into(), "infra_error/config".into()),
            ("good-a".into(), "pass".into()),
            ("good-b".into(), "pass".into()),
            ("good-c".into(), "pass".into()),
            ("gpu".into(), "infra_error/config".into()),
        ],
        "one record each, none retried"
    );
    let bad = records(&runs).into_iter().find(|r| r["eval"] == "bad-toml").unwrap();
    assert_eq!(bad["phases"].as_array().map(Vec::len), Some(0), "nothing started: {bad}");

    // Harbor's filters apply to directory names before any task is read: the rest pass.
    let runs2 = root.join("runs2").display().to_string();
    let out = reeval(&[
        "harbor",
        "run",
        "-p",
        &tasks_arg,
        "-a",
        "oracle",
        "-x",
        "bad-*",
        "-x",
        "gpu",
        "--record-dir",
        &runs2,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert!(!text(&out.stderr).contains("cannot run"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_tasks_own_faults_are_its_config_named_once() {
    let root = temp("faults");
    let tasks = root.join("tasks");
    // More CPUs than any engine here has; a Dockerfile that cannot build.
    task(&tasks, "cpu-hog", "[task]\nname = \"org/cpu-hog\"\n[environment]\ncpus = 512\n", IMAGE);
    task(
        &tasks,
        "bad-build",
        "[task]\nname = \"org/bad-build\"\n",
        "FROM reeval/base:latest\nRUN echo building-step-marker && exit 7\n",
    );
    let runs = root.join("runs");
    let (tasks_arg, runs_arg) = (tasks.display().to_string(), runs.display().to_string());
    let out = reeval(&[
        "harbor",
        "run",
        "-p",
        &tasks_arg,
        "-a",
        "oracle",
        "-k",
        "2",
        "--record-dir",
        &runs_arg,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "config, not infra (3)\n{stdout}\n{stderr}");
    assert!(
        stderr.contains("  cpu-hog: failed to run eval cpu-hog: eval cpu-hog asks for 512 CPUs"),
        "listed when the run starts, naming the resource: {stderr}"
    );
    let all = records(&runs);
    // Not retried: one try per trial.
    assert!(all.iter().all(|r| r["try"] == 1), "{all:?}");
    let of = |eval: &str| -> Vec<serde_json::Value> {
        all.iter().filter(|r| r["eval"] == eval).cloned().collect()
    };
    let hog = of("cpu-hog");
    assert_eq!(hog.len(), 2);
    assert!(hog.iter().all(|r| outcome(r) == "infra_error/config"), "{hog:?}");
    let build = of("bad-build");
    assert_eq!(build.len(), 2, "{build:?}");
    assert!(build.iter().all(|r| outcome(r) == "infra_error/config"), "{build:?}");
    let message = build[0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("failed to build the image of eval bad-build")
            && message.contains("building-step-marker"),
        "the build's last lines: {message}"
    );
    // The second trial was stopped by the first's config error, or (started
    // beside it) met the same build failure: never an infra retry.
    let second = build[1]["message"].as_str().unwrap_or_default();
    assert!(
        second.starts_with("not run: an earlier attempt of this cell found a config error")
            || second.contains("failed to build the image of eval bad-build"),
        "{second}"
    );
    let _ = std::fs::remove_dir_all(&root);
}

/// A failed attempt explains itself: the end of the verifier's output and of
/// the oracle's, and the requests the egress gateway refused, are in the
/// failure, in the console and in the HTML report; the run's own preparation
/// shows as named steps, not as checks.
#[test]
fn a_failing_verifier_shows_its_output_where_the_failure_is_read() {
    let root = temp("explains");
    let tasks = root.join("tasks");
    task(&tasks, "off-by-one", "[task]\nname = \"org/off-by-one\"\n", IMAGE);
    let t = tasks.join("off-by-one");
    std::fs::write(
        t.join("tests/test.sh"),
        "#!/bin/bash\ncurl -s -m 10 http://10.255.255.1/ >/dev/null 2>&1\necho 'collected 3 items'\necho 'FAILED test_answer: expected 42, got 41'\necho 0 > /logs/verifier/reward.txt\n",
    )
    .unwrap();
    std::fs::write(t.join("solution/solve.sh"), "#!/bin/bash\necho 'computing the answer: 41'\n")
        .unwrap();
    let runs = root.join("runs");
    let (tasks_arg, runs_arg) = (tasks.display().to_string(), runs.display().to_string());
    let out = reeval(&[
        "harbor",
        "run",
        "-p",
        &tasks_arg,
        "-a",
        "oracle",
        "-v",
        "--record-dir",
        &runs_arg,
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "a fail\n{stdout}\n{stderr}");
    let console = format!("{stdout}\n{stderr}");
    for said in [
        "reward {\"reward\":0.0} is below 1",
        "the verifier's output (/logs/verifier/test-stdout.txt) ends:",
        "  | FAILED test_answer: expected 42, got 41",
        "the oracle's output (/logs/agent/oracle.txt) ends:",
        "  | computing the answer: 41",
        // The verifier's request the gateway refused (Harbor's default network is public).
        "the egress gateway refused 1 request: 10.255.255.1:80",
    ] {
        assert!(console.contains(said), "the console says {said:?}:\n{console}");
    }
    // -v: the copies and listings are steps by name, not checks of their command lines.
    let step = "check step copy tests/ into /tests, run tests/test.sh, list what it left: exited 0";
    assert!(console.contains(step), "{console}");
    assert!(!console.contains("check rm -f /logs/verifier/reward.txt"), "{console}");
    let run = std::fs::read_dir(&runs).unwrap().flatten().map(|e| e.path()).find(|p| p.is_dir());
    let html = std::fs::read_to_string(run.expect("a run").join("report.html")).unwrap();
    assert!(html.contains("FAILED test_answer: expected 42, got 41"), "the report shows it");
    assert!(
        html.contains("the egress gateway refused 1 request: 10.255.255.1:80"),
        "and the refusal"
    );
    assert!(
        html.contains(
            "step copy tests/ into /tests, run tests/test.sh, list what it left: exited 0"
        ),
        "and its steps by name"
    );
    let _ = std::fs::remove_dir_all(&root);
}
