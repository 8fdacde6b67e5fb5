//! `reeval harbor run` as a Harbor user types it: Harbor's flags beside the
//! suite's, registry datasets by name from local git repositories, and
//! Harbor's job directory read back by Harbor 0.26's own models (from the
//! venv of `scripts/harbor-venv.sh`; required under `REEVAL_REQUIRE_DOCKER=1`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `reeval ARGS`, its task cache under `dir`.
fn reeval(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reeval"))
        .args(args)
        .env("REEVAL_CACHE_DIR", dir.join("cache"))
        .env_remove("REEVAL_HARNESS")
        .env_remove("REEVAL_PRESTART")
        .output()
        .expect("run reeval")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reeval-harbor-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn tasks_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/harbor/tasks").display().to_string()
}

/// Whether the engine answers; under `REEVAL_REQUIRE_DOCKER=1` it must.
fn docker() -> bool {
    let ok = Command::new("docker").args(["version"]).output().is_ok_and(|o| o.status.success());
    assert!(
        ok || std::env::var("REEVAL_REQUIRE_DOCKER").as_deref() != Ok("1"),
        "REEVAL_REQUIRE_DOCKER=1 but the Docker engine does not answer"
    );
    ok
}

/// Harbor 0.26.0's Python, from `scripts/harbor-venv.sh`'s cache.
fn harbor_python() -> Option<PathBuf> {
    let cache = std::env::var_os("REEVAL_HARBOR_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/reeval-harbor"));
    let python = cache.join("venv-0.26.0/bin/python");
    if python.is_file() {
        return Some(python);
    }
    assert!(
        std::env::var("REEVAL_REQUIRE_DOCKER").as_deref() != Ok("1"),
        "Harbor 0.26.0 is not installed at {}: run scripts/harbor-venv.sh",
        python.display()
    );
    None
}

/// The job directory read by Harbor's own models (`harbor_check_job.py`): what they read.
fn harbor_reads(jobs: &Path, job: &str) -> Option<serde_json::Value> {
    let python = harbor_python()?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/harbor_check_job.py");
    let out = Command::new(python).arg(script).arg(jobs).arg(job).output().expect("run python");
    assert!(out.status.success(), "Harbor cannot read the job directory:\n{}", text(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).expect("the check prints JSON"))
}

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
    out.sort_by_key(|r| r["eval"].as_str().unwrap_or_default().to_string());
    out
}

#[test]
fn help_lists_every_flag_of_harbor_and_of_the_suite() {
    let dir = scratch("help");
    let out = reeval(&["harbor", "run", "--help"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let harbor = [
        "-p, --path",
        "-d, --dataset",
        "--registry-path",
        "--registry-url",
        "-t, --task",
        "-i, --include-task-name",
        "-x, --exclude-task-name",
        "-l, --n-tasks",
        "-a, --agent",
        "-m, --model",
        "-n, --n-concurrent",
        "-k, --n-attempts",
        "-r, --max-retries",
        "-o, --jobs-dir",
        "--job-name",
        "--timeout-multiplier",
        "--agent-timeout-multiplier",
        "--verifier-timeout-multiplier",
        "--agent-env",
        "--ae",
        "--verifier-env",
        "--ve",
        "--force-build",
        "--disable-verification",
        "--dry-run",
        "-y, --yes",
        "--reward-threshold",
    ];
    for flag in harbor {
        assert!(help.contains(flag), "harbor run --help lacks {flag}:\n{help}");
    }
    // Every flag of the suite's option table, and the record dir.
    for o in reeval_core::settings::table::OPTIONS {
        let flag = match (o.long, o.short) {
            (Some(long), _) => format!("--{long}"),
            (None, Some(short)) => format!("-{short}"),
            (None, None) => continue,
        };
        assert!(help.contains(&flag), "harbor run --help lacks the suite's {flag}");
    }
    let via_help = reeval(&["help", "harbor", "run"], &dir);
    assert!(via_help.status.success());
    assert_eq!(text(&via_help.stdout), help, "`reeval help harbor run` is `--help`'s text");
    for cmd in [
        &["harbor"][..],
        &["report"],
        &["runs"],
        &["images"],
        &["images", "prune"],
        &["clean"],
        &["compare"],
        &["regrade"],
    ] {
        let out = reeval(&[cmd, &["--help"]].concat(), &dir);
        assert!(
            out.status.success() && text(&out.stdout).contains("Usage: reeval"),
            "{cmd:?} --help"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_mistyped_flag_or_command_gets_the_nearest() {
    let dir = scratch("typo");
    let tasks = tasks_dir();
    for (args, says) in [
        (
            vec!["harbor", "run", &tasks, "--n-concurent", "4"],
            "a similar argument exists: '--n-concurrent'",
        ),
        (vec!["harbor", "run", &tasks, "--trails", "2"], "a similar argument exists: '--trials'"),
        (vec!["harbor", "rum"], "a similar subcommand exists: 'run'"),
        (vec!["reprot"], "a similar subcommand exists: 'report'"),
    ] {
        let out = reeval(&args, &dir);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(text(&out.stderr).contains(says), "{args:?}: {}", text(&out.stderr));
    }
    // One setting, one flag: Harbor's and the suite's spelling together are refused.
    let out = reeval(&["harbor", "run", &tasks, "-k", "2", "--trials", "3"], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("'--n-attempts <N>' cannot be used with '--trials <N>'"),
        "{}",
        text(&out.stderr)
    );
    let out = reeval(&["harbor", "run", "-p", &tasks, "--registry-path", &tasks], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--registry-path and --registry-url go with -d"),
        "{}",
        text(&out.stderr)
    );
    let out = reeval(&["harbor", "run", &tasks, "-a", "terminus-2"], &dir);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("reeval has no harness for Harbor's agent `terminus-2`")
            && err.contains("claude-code"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn filters_pick_tasks_before_they_are_read() {
    let dir = scratch("filters");
    let tasks = tasks_dir();
    let out = reeval(
        &[
            "harbor",
            "run",
            "-p",
            &tasks,
            "-i",
            "multi-*",
            "-i",
            "hello-*",
            "-x",
            "multi-step",
            "--dry-run",
        ],
        &dir,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains("hello-shell: test\nmulti-key-json: test\n\n2 tests"), "{listed}");
    let out = reeval(&["harbor", "run", "-l", "1", "--list", &tasks], &dir);
    assert!(text(&out.stdout).contains("agent-timeout: test\n\n1 tests"), "{}", text(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-a oracle -n 4 -p DIR -o JOBS`: four tasks at once, and Harbor's job
/// directory that Harbor's models and `harbor view`'s reader take.
#[test]
fn an_oracle_run_writes_the_job_directory_harbor_reads() {
    if !docker() {
        return;
    }
    let dir = scratch("oracle");
    let tasks = tasks_dir();
    let (runs, jobs) = (dir.join("runs"), dir.join("jobs"));
    let out = reeval(
        &[
            "harbor",
            "run",
            "-a",
            "oracle",
            "-n",
            "4",
            "-p",
            &tasks,
            "-i",
            "hello-shell",
            "-i",
            "multi-*",
            "-i",
            "no-reward",
            "--record-dir",
            runs.to_str().unwrap(),
            "-o",
            jobs.to_str().unwrap(),
            "--job-name",
            "oracle-job",
        ],
        &dir,
    );
    let stdout = text(&out.stdout);
    // no-reward's test.sh writes none: the task's config fault, so exit 2; the rest pass.
    assert_eq!(out.status.code(), Some(2), "{stdout}\n{}", text(&out.stderr));
    for task in ["hello-shell", "multi-key-json", "multi-step"] {
        assert!(stdout.contains(&format!("test {task} ... ok")), "{stdout}");
    }
    let records = records(&runs);
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r["harness"] == "oracle"));

    let job = jobs.join("oracle-job");
    let trial = std::fs::read_dir(&job)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("hello-shell__"))
        .expect("hello-shell's trial directory");
    for file in [
        "config.json",
        "lock.json",
        "result.json",
        "agent/oracle.txt",
        "agent/trajectory.json",
        "verifier/test-stdout.txt",
        "verifier/reward.txt",
        "artifacts/manifest.json",
    ] {
        assert!(trial.join(file).is_file(), "{file} in {}", trial.display());
    }
    assert_eq!(
        std::fs::read_to_string(trial.join("verifier/test-stdout.txt")).unwrap(),
        "checked greeting\n"
    );

    let Some(read) = harbor_reads(&jobs, "oracle-job") else { return };
    assert_eq!(read["n_total_trials"], 4, "{read:#}");
    assert_eq!(read["viewer_trials"], 4, "harbor view's reader lists every trial: {read:#}");
    assert_eq!(read["lock_trials"], 4, "the job's lock lists every trial's: {read:#}");
    assert_eq!(read["indexed_jobs"], 1, "harbor view's folder index reads the job: {read:#}");
    assert_eq!(read["indexed_trials"], 4, "and every trial, by its lock: {read:#}");
    let stats = &read["evals"]["oracle__tasks"];
    assert_eq!(stats["n_trials"], 3, "{read:#}");
    assert_eq!(stats["exceptions"], serde_json::json!(["RewardFileNotFoundError"]), "{read:#}");
    let trials = read["trials"].as_object().unwrap();
    let hello = trials.iter().find(|(name, _)| name.starts_with("hello-shell__")).unwrap().1;
    assert_eq!(hello["rewards"], serde_json::json!({"reward": 1.0}));
    assert_eq!(
        (hello["reward_valid"].as_bool(), hello["source"].as_str()),
        (Some(true), Some("tasks"))
    );
    assert!(
        hello["trajectory_steps"].as_u64().unwrap() >= 1,
        "the ATIF trajectory reads as Harbor's Trajectory"
    );
    let steps = trials.iter().find(|(name, _)| name.starts_with("multi-step__")).unwrap().1;
    assert!(
        steps["files"].as_array().unwrap().iter().any(|f| f == "steps/write/verifier/reward.txt"),
        "{steps:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// With no `--prestart`, `reeval harbor run` starts the trials next in line
/// ahead, one per slot, with their egress gateway (Harbor's default network
/// is `public`): at `-n 1`, the second task's record says so, and its gateway
/// phase checked the sandbox's isolation as any other.
#[test]
fn harbor_run_starts_the_next_trial_ahead_with_its_gateway() {
    if !docker() {
        return;
    }
    let dir = scratch("ahead");
    let tasks = dir.join("tasks");
    let hello = Path::new(&tasks_dir()).join("hello-shell");
    for name in ["ahead-a", "ahead-b"] {
        let task = tasks.join(name);
        for sub in ["environment", "solution", "tests"] {
            std::fs::create_dir_all(task.join(sub)).unwrap();
        }
        for file in
            ["instruction.md", "environment/Dockerfile", "solution/solve.sh", "tests/test.sh"]
        {
            std::fs::copy(hello.join(file), task.join(file)).unwrap();
        }
        // hello-shell's own, less its `no-network`: the default, `public`.
        let toml = std::fs::read_to_string(hello.join("task.toml")).unwrap();
        let toml: String = toml
            .lines()
            .filter(|l| !l.starts_with("network_mode"))
            .map(|l| l.replace("reeval-tests/hello-shell", &format!("reeval-tests/{name}")) + "\n")
            .collect();
        std::fs::write(task.join("task.toml"), toml).unwrap();
    }
    let runs = dir.join("runs");
    let out = reeval(
        &[
            "harbor",
            "run",
            "-n",
            "1",
            "-p",
            tasks.to_str().unwrap(),
            "--record-dir",
            runs.to_str().unwrap(),
        ],
        &dir,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let records = records(&runs);
    assert_eq!(records.len(), 2);
    let detail = |r: &serde_json::Value, phase: &str| {
        r["phases"].as_array().unwrap().iter().find(|p| p["phase"] == phase).unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let ahead: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| detail(r, "container").ends_with("started ahead of its slot"))
        .collect();
    assert_eq!(ahead.len(), 1, "the trial that waited started ahead: {records:#?}");
    assert!(detail(ahead[0], "container").contains("gateway"), "{}", detail(ahead[0], "container"));
    assert!(
        detail(ahead[0], "gateway").contains("isolation verified"),
        "{}",
        detail(ahead[0], "gateway")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// A task whose verifier's reward says which `version` of it ran, and what
/// the oracle and verifier saw of `--ae` and `--ve`.
fn greet_task(dir: &Path, version: u32) {
    let write = |path: &str, body: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    };
    write(
        "task.toml",
        "[task]\nname = \"org/greet\"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = \"no-network\"\n",
    );
    write("instruction.md", "echo hello > greeting.txt\n");
    write("environment/Dockerfile", "FROM reeval/base:latest\nWORKDIR /app\n");
    write(
        "solution/solve.sh",
        "#!/bin/bash\necho hello > greeting.txt\necho \"$AE_CHECK\" > /logs/agent/ae.txt\n",
    );
    write(
        "tests/test.sh",
        &format!(
            "#!/bin/bash\necho \"$VE_CHECK\" > /logs/verifier/ve.txt\n\
             echo \"${{AE_CHECK:-unset}}\" > /logs/verifier/ae-seen.txt\n\
             if [ \"$(cat /app/greeting.txt 2>/dev/null)\" = hello ]; then r=1; else r=0; fi\n\
             echo \"{{\\\"reward\\\": $r, \\\"version\\\": {version}}}\" > /logs/verifier/reward.json\n"
        ),
    );
}

/// `-d NAME[@VERSION]` from a local registry.json: two versions of one
/// dataset at two commits of a local repository, and a task pinned to a
/// commit that does not exist, which alone cannot run.
#[test]
fn registry_datasets_run_by_name_and_version() {
    if !docker() {
        return;
    }
    let dir = scratch("registry");
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet"]);
    greet_task(&repo.join("tasks/greet"), 1);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "v1"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    greet_task(&repo.join("tasks/greet"), 2);
    git(&repo, &["commit", "--quiet", "-am", "v2"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    let url = repo.display();
    let registry = format!(
        r#"[
  {{"name": "bench", "version": "1.0", "description": "", "tasks": [
    {{"name": "org/greet", "git_url": "{url}", "git_commit_id": "{first}", "path": "tasks/greet"}}]}},
  {{"name": "bench", "version": "2.0", "description": "", "tasks": [
    {{"name": "org/greet", "git_url": "{url}", "git_commit_id": "{second}", "path": "tasks/greet"}},
    {{"name": "org/broken", "git_url": "{url}", "git_commit_id": "{bad}", "path": "tasks/broken"}}]}}
]"#,
        bad = "0000000000000000000000000000000000000001",
    );
    std::fs::write(dir.join("registry.json"), registry).unwrap();
    let registry_path = dir.display().to_string();
    let run = |version: &str, extra: &[&str]| {
        let runs = dir.join(format!("runs-{version}"));
        let dataset = format!("bench{version}");
        let mut args = vec![
            "harbor",
            "run",
            "-d",
            &dataset,
            "--registry-path",
            &registry_path,
            "-a",
            "oracle",
        ];
        args.extend_from_slice(extra);
        let runs_arg = runs.display().to_string();
        args.extend_from_slice(&["--record-dir", &runs_arg]);
        (reeval(&args, &dir), runs)
    };

    // bench@1.0: greet at the first commit.
    let (out, runs) = run("@1.0", &[]);
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(records(&runs)[0]["reward"], serde_json::json!({"reward": 1.0, "version": 1.0}));

    // bench alone: 2.0, the highest version; the task at a wrong commit is listed when
    // the run starts and is its own config outcome (exit 2), and the rest ran.
    let (out, runs) = run("", &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}\n{err}", text(&out.stdout));
    assert!(
        err.contains("1 eval cannot run")
            && err.contains("  broken: failed to fetch Harbor task org/broken"),
        "{err}"
    );
    let records_2 = records(&runs);
    assert_eq!(records_2.len(), 2, "{records_2:?}");
    assert_eq!(
        (&records_2[0]["eval"], &records_2[0]["kind"]),
        (&"broken".into(), &"config".into())
    );
    assert_eq!(records_2[1]["reward"], serde_json::json!({"reward": 1.0, "version": 2.0}));

    // -t picks one task of it, with --ae/--ve and Harbor's job directory; offline
    // now: the pinned commit comes from the cache.
    std::fs::rename(&repo, dir.join("repo-gone")).unwrap();
    let jobs = dir.join("jobs").display().to_string();
    let (out, _) = run(
        "@2.0",
        &[
            "-t",
            "greet",
            "--ae",
            "AE_CHECK=from-ae",
            "--ve",
            "VE_CHECK=from-ve",
            "-o",
            &jobs,
            "--job-name",
            "reg",
        ],
    );
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    let trial = std::fs::read_dir(dir.join("jobs/reg"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    assert_eq!(std::fs::read_to_string(trial.join("agent/ae.txt")).unwrap(), "from-ae\n");
    assert_eq!(std::fs::read_to_string(trial.join("verifier/ve.txt")).unwrap(), "from-ve\n");
    // --ae is the agent's alone, as in Harbor: the verifier never sees it.
    let seen = std::fs::read_to_string(trial.join("verifier/ae-seen.txt")).unwrap();
    assert_eq!(seen, "unset\n", "the verifier saw --ae");
    if let Some(read) = harbor_reads(&dir.join("jobs"), "reg") {
        let (_, greet) = read["trials"].as_object().unwrap().iter().next().unwrap();
        assert_eq!(greet["source"], "bench", "{read:#}");
        assert!(read["evals"].get("oracle__bench").is_some(), "{read:#}");
    }

    // nop: the verifier runs on the untouched workdir.
    let mut args =
        vec!["harbor", "run", "-d", "bench@1.0", "--registry-path", &registry_path, "-a", "nop"];
    let runs = dir.join("runs-nop").display().to_string();
    args.extend_from_slice(&["--record-dir", &runs]);
    let out = reeval(&args, &dir);
    assert_eq!(
        out.status.code(),
        Some(1),
        "nothing was done, so the reward is 0: {}",
        text(&out.stdout)
    );
    let nop = records(Path::new(&runs));
    assert_eq!(
        (nop[0]["harness"].as_str(), &nop[0]["reward"]),
        (Some("nop"), &serde_json::json!({"reward": 0.0, "version": 1.0}))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
