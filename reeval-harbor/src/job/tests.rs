//! The job directory from records and captures made here (the real engine's
//! run, read by Harbor's own models, is reeval-cli's `tests/harbor_cli.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reeval_core::phase::Phase;
use reeval_core::record::{PhaseRecord, Record};
use reeval_core::{Outcome, RunReport};

use super::*;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reeval-job-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn task(root: &Path) -> HarborTask {
    let dir = root.join("tasks/hello-world-with-a-rather-long-name");
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        "artifacts = [{ source = \"/srv/side.txt\", service = \"side\" }, { source = \"/nowhere\", service = \"side\" }, \"/srv/log/requests.ndjson\", { source = \"out\", destination = \"kept\" }, \"/nowhere\"]\n[environment]\nworkdir = \"/app\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("instruction.md"), "hi").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM reeval/base:latest\n").unwrap();
    // A sidecar whose artifacts come after main's.
    std::fs::write(
        dir.join("environment/docker-compose.yaml"),
        "services:\n  side:\n    image: reeval/base:latest\n",
    )
    .unwrap();
    std::fs::write(dir.join("tests/test.sh"), "true").unwrap();
    HarborTask::read(&dir, &|_| None).unwrap()
}

/// A tar of `files` under `top/`, as a directory capture is kept.
fn capture(path: &Path, top: &str, files: &[(&str, &str)]) {
    let mut b = tar::Builder::new(Vec::new());
    for (name, text) in files {
        let mut h = tar::Header::new_gnu();
        h.set_size(text.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append_data(&mut h, format!("{top}/{name}"), text.as_bytes()).unwrap();
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, b.into_inner().unwrap()).unwrap();
}

fn record(eval: &str, trial: u32, try_: u32, outcome: Outcome, reward: Option<f64>) -> Record {
    let mut r = Record::new("run-1", eval, "oracle", trial, try_);
    r.outcome = outcome;
    r.started_at = "2026-01-02T03:04:05.000Z".into();
    r.timings.total_ms = 9000;
    r.reward = reward.map(|x| BTreeMap::from([("reward".to_string(), x)]));
    r.phases = vec![
        PhaseRecord { phase: Phase::Image, start_ms: 0, duration_ms: 1000, detail: String::new() },
        PhaseRecord {
            phase: Phase::Setup,
            start_ms: 1000,
            duration_ms: 500,
            detail: String::new(),
        },
        PhaseRecord {
            phase: Phase::Turn,
            start_ms: 2000,
            duration_ms: 3000,
            detail: String::new(),
        },
        PhaseRecord {
            phase: Phase::Check,
            start_ms: 6000,
            duration_ms: 2000,
            detail: String::new(),
        },
    ];
    r
}

#[test]
fn records_and_captures_become_harbor_trials() {
    let root = scratch("write");
    let task = task(&root);
    let run_dir = root.join("runs/run-1");
    let eval = eval_name(&task.name);
    let mut passed = record(&eval, 1, 1, Outcome::Pass, Some(1.0));
    // The task's workdir was the attempt's workspace: relative artifacts are there.
    passed.workspace_dir = Some("/app".into());
    let retried = record(&eval, 2, 1, Outcome::InfraError, None);
    let mut failed = record(&eval, 2, 2, Outcome::Config, None);
    failed.message =
        Some("failed to grade Harbor task x: its tests/test.sh must write a reward".into());
    let attempt = run_dir.join(passed.artifacts_dir_name()).join("captures");
    capture(&attempt.join("logs-agent.tar"), "agent", &[("oracle.txt", "solved\n")]);
    capture(
        &attempt.join("logs-verifier.tar"),
        "verifier",
        &[("reward.txt", "1"), ("test-stdout.txt", "ok\n")],
    );
    capture(&attempt.join("logs-artifacts.tar"), "artifacts", &[("note.txt", "n")]);
    capture(&attempt.join("artifact-app-out.tar"), "out", &[("a/b.txt", "deep")]);
    std::fs::write(attempt.join("artifact-srv-log-requests_ndjson.ndjson"), "{}\n").unwrap();
    std::fs::write(attempt.join("artifact-srv-side_txt.txt"), "from the sidecar\n").unwrap();
    std::fs::create_dir_all(run_dir.join("atif")).unwrap();
    std::fs::write(
        run_dir.join("atif").join(passed.file_name()),
        "{\"schema_version\": \"ATIF-v1.7\"}",
    )
    .unwrap();
    let records = vec![passed.clone(), retried, failed];
    let report = RunReport {
        run_id: "run-1".into(),
        run_dir: run_dir.clone(),
        summary: reeval_core::report::summarize("run-1", &records),
        records,
    };
    let settings = JobSettings {
        source: JobSource::Dir(root.join("tasks")),
        include: vec!["hello*".into()],
        exclude: vec![],
        n_tasks: None,
        n_attempts: 2,
        n_concurrent: 4,
        max_retries: 2,
        timeout_multiplier: 1.0,
        agent_timeout_multiplier: None,
        verifier_timeout_multiplier: None,
        force_build: false,
        disable_verification: false,
        agents: vec![JobAgent::of_spec("oracle")],
    };
    let tasks =
        vec![JobTask { id: TaskId::Local(task.dir.clone()), task, source: Some("tasks".into()) }];
    let out = JobOutput::new(&root.join("jobs"), "job-a", settings, tasks);
    out.write(&report).unwrap();

    let job = root.join("jobs/job-a");
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    let config = read(&job.join("config.json"));
    assert_eq!(config["datasets"][0]["task_names"], serde_json::json!(["hello*"]));
    assert_eq!(config["n_attempts"], 2);
    let mut trials: Vec<PathBuf> = std::fs::read_dir(&job)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    trials.sort();
    assert_eq!(trials.len(), 2, "one directory per final try: {trials:?}");
    let names: Vec<String> =
        trials.iter().map(|t| t.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for name in &names {
        let (cut, id) = name.split_once("__").unwrap();
        assert_eq!(
            cut, "hello-world-with-a-rather-long-n",
            "32 characters of the directory's name"
        );
        assert_eq!(id.len(), 7);
    }
    let passed_dir =
        trials.iter().find(|t| t.join("verifier/reward.txt").is_file()).expect("the passed trial");
    assert_eq!(std::fs::read_to_string(passed_dir.join("agent/oracle.txt")).unwrap(), "solved\n");
    assert_eq!(
        std::fs::read_to_string(passed_dir.join("verifier/test-stdout.txt")).unwrap(),
        "ok\n"
    );
    assert!(passed_dir.join("agent/trajectory.json").is_file());
    assert_eq!(
        std::fs::read_to_string(passed_dir.join("artifacts/logs/artifacts/note.txt")).unwrap(),
        "n"
    );
    assert_eq!(std::fs::read_to_string(passed_dir.join("artifacts/kept/a/b.txt")).unwrap(), "deep");
    assert_eq!(
        std::fs::read_to_string(passed_dir.join("artifacts/srv/log/requests.ndjson")).unwrap(),
        "{}\n"
    );
    let manifest = read(&passed_dir.join("artifacts/manifest.json"));
    let statuses: Vec<(&str, &str)> = manifest
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["source"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    // main's first, then the sidecar's; its /nowhere was claimed by main's.
    assert_eq!(
        statuses,
        [
            ("/logs/artifacts", "ok"),
            ("/srv/log/requests.ndjson", "ok"),
            ("out", "ok"),
            ("/nowhere", "failed"),
            ("/srv/side.txt", "ok"),
            ("/nowhere", "skipped"),
        ]
    );
    let services: Vec<&serde_json::Value> =
        manifest.as_array().unwrap().iter().map(|e| &e["service"]).collect();
    assert_eq!(services[3], &serde_json::Value::Null);
    assert_eq!(services[4], "side");
    assert_eq!(
        std::fs::read_to_string(passed_dir.join("artifacts/srv/side.txt")).unwrap(),
        "from the sidecar\n"
    );
    // The locks: the trial's, by its task's content digest, and the job's listing it.
    let lock = read(&passed_dir.join("lock.json"));
    assert_eq!(lock["task"]["name"], "hello-world-with-a-rather-long-name");
    assert_eq!(lock["task"]["type"], "local");
    let digest = lock["task"]["digest"].as_str().unwrap();
    assert!(digest.starts_with("sha256:") && digest.len() == 71, "{digest}");
    assert_eq!(lock["verifier"]["environment_mode"], "shared");
    assert_eq!(lock["agent"], read(&passed_dir.join("config.json"))["agent"]);
    let job_lock = read(&job.join("lock.json"));
    assert!(job_lock["trials"].as_array().unwrap().contains(&lock), "{job_lock}");
    let log = std::fs::read_to_string(job.join("job.log")).unwrap();
    assert!(log.contains("run run-1") && log.contains("{\"reward\":1.0}"), "{log}");
    let result = read(&passed_dir.join("result.json"));
    assert_eq!(result["verifier_result"]["rewards"]["reward"], 1.0);
    assert_eq!(result["verifier_environment_mode"], "shared", "the task's mode");
    assert_eq!(result["exception_info"], serde_json::Value::Null);
    assert_eq!(result["agent_execution"]["started_at"], "2026-01-02T03:04:07.000Z");
    assert_eq!(result["verifier"]["finished_at"], "2026-01-02T03:04:13.000Z");
    assert_eq!(result["source"], "tasks");

    let failed_dir = trials.iter().find(|t| *t != passed_dir).unwrap();
    let result = read(&failed_dir.join("result.json"));
    assert_eq!(result["exception_info"]["exception_type"], "RewardFileNotFoundError");
    assert!(
        std::fs::read_to_string(failed_dir.join("exception.txt"))
            .unwrap()
            .contains("must write a reward")
    );

    let job_result = read(&job.join("result.json"));
    assert_eq!(job_result["n_total_trials"], 2);
    assert_eq!(job_result["stats"]["n_retries"], 1);
    assert_eq!(job_result["stats"]["n_errored_trials"], 1);
    let stats = &job_result["stats"]["evals"]["oracle__tasks"];
    assert_eq!(
        stats["metrics"],
        serde_json::json!([{"mean": 1.0}]),
        "only trials with a reward count"
    );
    assert_eq!(stats["exception_stats"]["RewardFileNotFoundError"].as_array().unwrap().len(), 1);
    assert_eq!(stats["reward_stats"]["reward"]["1.0"].as_array().unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn pass_at_k_follows_harbor() {
    let t = |task: &str, r: f64, n: usize| super::trial::TrialOutcome {
        trial_name: format!("{task}-{n}"),
        task_name: task.into(),
        evals_key: "a__d".into(),
        rewards: Some(BTreeMap::from([("reward".to_string(), r)])),
        exception: None,
        reward_valid: true,
        finished_at: std::time::SystemTime::UNIX_EPOCH,
        lock: serde_json::Value::Null,
    };
    // Task x: 1 of 4 passed; task y: 4 of 4. pass@2 = (1 - (3/4)(2/3) + 1) / 2 = 0.75.
    let trials = [
        t("x", 1.0, 1),
        t("x", 0.0, 2),
        t("x", 0.0, 3),
        t("x", 0.0, 4),
        t("y", 1.0, 1),
        t("y", 1.0, 2),
        t("y", 1.0, 3),
        t("y", 1.0, 4),
    ];
    let v = super::stats::job_result("id", std::time::SystemTime::UNIX_EPOCH, &trials, 0);
    let k = &v["stats"]["evals"]["a__d"]["pass_at_k"];
    assert_eq!(k["2"], 0.75);
    assert_eq!(k["4"], 1.0);
    assert!(k.get("5").is_none(), "k up to the fewest trials of a task: {k}");
    assert_eq!(v["stats"]["evals"]["a__d"]["metrics"][0]["mean"], 0.625);
}
