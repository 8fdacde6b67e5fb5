//! A real suite binary (`examples/fixture_suite.rs`) driven the way `cargo
//! test` and cargo-nextest drive it: exit codes, listing without Docker, the
//! custom-harness protocol, signals and leftovers.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn suite() -> Command {
    let mut cmd = Command::new(common::example_bin("fixture_suite"));
    cmd.env_remove("REEVAL_FIXTURE_MISSING_A")
        .env_remove("REEVAL_FIXTURE_MISSING_B")
        .env_remove("NEXTEST_RUN_ID")
        .env_remove("NEXTEST");
    cmd
}

fn run(args: &[&str], record_dir: &Path) -> Output {
    suite().args(args).arg("--record-dir").arg(record_dir).output().expect("run the suite")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Every record file under `dir` (any run).
fn records_in(dir: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for run in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        for f in std::fs::read_dir(run.path()).into_iter().flatten().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.ends_with(".json") && !name.starts_with("summary") {
                out.push(serde_json::from_slice(&std::fs::read(f.path()).unwrap()).unwrap());
            }
        }
    }
    out
}

#[test]
fn list_needs_no_docker_and_follows_the_nextest_format() {
    let out = suite()
        .args(["--list", "--format", "terse"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        text(&out.stdout),
        "fails: test\nhangs: test\nignored_one: test\ninfra: test\nneeds_secrets: test\nnested::no_sandbox: test\npasses: test\n"
    );
    let out = suite()
        .args(["--list", "--format", "terse", "--ignored"])
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "hangs: test\nignored_one: test\n");
    let out = suite().args(["--list"]).output().unwrap();
    assert!(text(&out.stdout).ends_with("\n7 tests, 0 benchmarks\n"), "{}", text(&out.stdout));
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn exit_codes_follow_the_outcomes() {
    require_docker!();
    let dir = common::temp_dir("exit");
    let cases = [("passes", 0), ("fails", 1), ("infra", 3), ("needs_secrets", 2)];
    for (name, code) in cases {
        let out = run(&[name, "--exact"], &dir.join(name));
        assert_eq!(
            out.status.code(),
            Some(code),
            "{name}:\n{}\n{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    // Records are written in every case that started an attempt.
    for (name, outcome, kind) in [
        ("passes", "pass", None),
        ("fails", "fail", Some("assertion")),
        ("infra", "infra_error", Some("infra")),
    ] {
        let recs = records_in(&dir.join(name));
        // The infra error is retried twice with a fresh sandbox: three tries, each recorded.
        let expected = if name == "infra" { 3 } else { 1 };
        assert_eq!(recs.len(), expected, "{name}");
        for r in &recs {
            assert_eq!(r["outcome"], outcome, "{name}");
            assert_eq!(r["kind"].as_str(), kind, "{name}");
        }
    }
    let infra = &records_in(&dir.join("infra"))[0];
    assert!(infra["message"].as_str().unwrap().contains("failed to run setup step 1"), "{infra}");
    let setup_log = std::fs::read_dir(dir.join("infra")).unwrap().flatten().next().unwrap().path();
    let logs: Vec<String> = std::fs::read_dir(&setup_log)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| std::fs::read_to_string(e.path().join("setup.log")).unwrap())
        .collect();
    assert!(logs.iter().all(|l| l.contains("cannot install") && l.contains("[exit 7")), "{logs:?}");
    // Preflight lists every missing secret at once and starts nothing.
    let out = run(&["needs_secrets", "--exact"], &dir.join("again"));
    let err = text(&out.stderr);
    assert!(
        err.contains("REEVAL_FIXTURE_MISSING_A") && err.contains("REEVAL_FIXTURE_MISSING_B"),
        "{err}"
    );
    assert!(records_in(&dir.join("needs_secrets")).is_empty(), "no attempt started");
    // Usage errors are exit code 2 too.
    let out = run(&["--no-such-flag"], &dir.join("usage"));
    assert_eq!(out.status.code(), Some(2));
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn driven_like_nextest_drives_a_custom_harness() {
    require_docker!();
    let dir = common::temp_dir("nextest-protocol");
    // 1. list, 2. run each test alone with `--exact NAME --nocapture` (+ `--ignored` for ignored ones).
    let listed = text(&suite().args(["--list", "--format", "terse"]).output().unwrap().stdout);
    let ignored =
        text(&suite().args(["--list", "--format", "terse", "--ignored"]).output().unwrap().stdout);
    let summary = regex::Regex::new(r"(?m)^test result: ok\. 1 passed; 0 failed; 0 ignored; 0 measured; \d+ filtered out; finished in \d+\.\d\ds$").unwrap();
    for name in ["passes", "nested::no_sandbox", "ignored_one"] {
        assert!(listed.contains(&format!("{name}: test\n")));
        let mut args = vec!["--exact", name, "--nocapture"];
        if ignored.contains(&format!("{name}: test\n")) {
            args.push("--ignored");
        }
        args.push("--test-threads=1");
        let out = run(&args, &dir);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {stdout}{}", text(&out.stderr));
        assert!(stdout.contains("running 1 test\n"), "exactly one eval runs: {stdout}");
        assert!(stdout.contains(&format!("test {name} ... ok")), "{stdout}");
        assert!(summary.is_match(&stdout), "{stdout}");
    }
    // libtest's other spellings are accepted: --no-capture, several filters, --skip.
    let out = run(
        &["passes", "no_sandbox", "--no-capture", "--skip", "passes", "--test-threads", "1"],
        &dir,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("test nested::no_sandbox ... ok") && !stdout.contains("test passes"),
        "{stdout}"
    );
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
fn cargo_nextest_runs_the_suite() {
    if Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        assert!(!common::docker_required(), "cargo-nextest is not installed");
        return;
    }
    let docker_ok = tokio::runtime::Runtime::new().unwrap().block_on(common::docker_ready());
    if !docker_ok {
        return;
    }
    let dir = common::temp_dir("nextest");
    let nextest = |filter: &str| {
        Command::new("cargo")
            .args(["nextest", "run", "--no-fail-fast", "--example", "fixture_suite", "-E", filter])
            .env("REEVAL_RECORD_DIR", &dir)
            .env_remove("REEVAL_FIXTURE_MISSING_A")
            .output()
            .unwrap()
    };
    let out = nextest("test(=passes) | test(=nested::no_sandbox)");
    assert!(out.status.success(), "{}{}", text(&out.stdout), text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("2 tests run: 2 passed"), "{err}");
    let out = nextest("test(=fails)");
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("1 failed"), "{}", text(&out.stderr));
    // nextest's run id is the reeval run id, so all its processes record into one run.
    let runs: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(runs.len(), 2, "one run directory per nextest run");
}

fn wait_for_container(run_id: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let began = Instant::now();
    while rt.block_on(common::containers_of_run(run_id)) == 0 {
        assert!(began.elapsed() < Duration::from_secs(60), "the suite never started its sandbox");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[test]
fn sigterm_tears_down_and_sigkill_leftovers_are_removed_by_the_next_run() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    if !rt.block_on(common::docker_ready()) {
        return;
    }
    let dir = common::temp_dir("signals");

    // SIGTERM (what nextest sends on its timeout): teardown runs, the record is written.
    let run_id = format!("sigterm-{}", std::process::id());
    let child = suite()
        .args(["--ignored", "hangs", "--exact", "--record-dir"])
        .arg(&dir)
        .env("NEXTEST_RUN_ID", &run_id)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_container(&run_id);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success()
    );
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stdout));
    assert_eq!(rt.block_on(common::containers_of_run(&run_id)), 0, "SIGTERM leaves nothing behind");
    let rec: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join(&run_id).join("hangs.shell.t1.try1.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["outcome"], "infra_error");
    assert!(rec["message"].as_str().unwrap().contains("interrupted"));
    assert_eq!(rec["workspaceCollected"], true);

    // SIGKILL: nothing can run, so labelled leftovers stay until the next run removes them.
    let run_id = format!("sigkill-{}", std::process::id());
    let mut child = suite()
        .args(["--ignored", "hangs", "--exact", "--record-dir"])
        .arg(&dir)
        .env("NEXTEST_RUN_ID", &run_id)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_container(&run_id);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        rt.block_on(common::containers_of_run(&run_id)),
        1,
        "a SIGKILLed runner leaves its sandbox"
    );
    let out = run(&["nested::no_sandbox", "--exact"], &dir);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        rt.block_on(common::containers_of_run(&run_id)),
        0,
        "the next run removed the leftover"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_run_that_selects_no_eval_is_a_usage_error_unless_allowed() {
    // Before the fix: "running 0 tests", exit 0.
    let dir = common::temp_dir("empty");
    let out = run(&["--tag", "nosuch"], &dir);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no eval selected: no eval has the tag nosuch (tags of this suite: fast)")
    );
    assert!(err.contains("--allow-empty"), "{err}");
    let out = run(&["nomatch"], &dir);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the filter `nomatch` matched none of the 7 evals"), "{err}");
    // Selected but marked ignore: reported as ignored, as libtest does, not as a run of nothing.
    let out = run(&["ignored_one", "--exact"], &dir);
    let (stdout, err) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(stdout.contains("test ignored_one ... ignored"), "{stdout}");
    assert!(stdout.contains("1 ignored"), "{stdout}");
    require_docker!();
    let out = run(&["--tag", "nosuch", "--allow-empty"], &dir);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = suite()
        .args(["--tag", "nosuch", "--record-dir"])
        .arg(&dir)
        .env("REEVAL_ALLOW_EMPTY", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "the flag's twin: {}", text(&out.stderr));
}

/// The run directories under `dir`, oldest first.
fn run_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut runs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| (e.metadata().unwrap().modified().unwrap(), e.path()))
        .collect();
    runs.sort();
    runs.into_iter().map(|(_, p)| p).collect()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn rerun_failed_and_resume_take_only_runs_of_the_same_suite_binary() {
    // Before the fix: --rerun-failed took the newest run in the directory, another
    // binary's, ran 0 tests and exited 0.
    require_docker!();
    let dir = common::temp_dir("rerun-binary");
    let out = run(&["fails", "--exact"], &dir);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let ours = run_dirs(&dir).pop().unwrap();
    let ours_id = ours.file_name().unwrap().to_string_lossy().into_owned();
    let mut summary = common::json(&ours.join("summary.json"));
    assert_eq!(summary["suite"]["binary"], "fixture_suite", "{summary}");
    assert!(summary["suite"]["evals"].as_array().unwrap().len() == 7, "{summary}");
    // A newer run of another suite binary, in the same record directory, with a failure of its own.
    std::thread::sleep(Duration::from_millis(50));
    let theirs = dir.join("zz-other-binary");
    std::fs::create_dir_all(&theirs).unwrap();
    let mut record = common::records(&ours).pop().unwrap();
    record["eval"] = "other_eval".into();
    std::fs::write(theirs.join("other_eval.shell.t1.try1.json"), record.to_string()).unwrap();
    summary["suite"]["binary"] = "other_suite".into();
    summary["suite"]["evals"] = serde_json::json!(["other_eval"]);
    std::fs::write(theirs.join("summary.json"), summary.to_string()).unwrap();
    assert_eq!(run_dirs(&dir).pop().unwrap(), theirs, "the other binary's run is the newest");

    let out = run(&["--rerun-failed"], &dir);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "`fails` ran again and failed: {err}");
    assert!(
        err.contains(&format!(
            "the failed cells of run {ours_id} of the suite binary `fixture_suite`: fails [shell]"
        )),
        "{err}"
    );
    let rerun = run_dirs(&dir).pop().unwrap();
    let evals: Vec<String> =
        common::records(&rerun).iter().map(|r| r["eval"].as_str().unwrap().to_string()).collect();
    assert_eq!(evals, ["fails"]);

    let out = run(&["--resume", "zz-other-binary"], &dir);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("it is a run of the suite binary `other_suite`"), "{err}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[test]
fn sighup_and_sigquit_tear_down_and_record_as_sigterm_does() {
    // Before the fix: SIGHUP ended the runner at once (exit 129), with no record and
    // the sandbox left running until the next run swept it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    if !rt.block_on(common::docker_ready()) {
        return;
    }
    let dir = common::temp_dir("hangup");
    // A hung-up terminal takes stderr with it: the runner's own messages then fail to
    // write, which must not stop the teardown (`eprintln!` panicked there).
    for (signal, stderr_closed) in [("HUP", true), ("QUIT", false)] {
        let run_id = format!("sig{}-{}", signal.to_lowercase(), std::process::id());
        let mut child = suite()
            .args(["--ignored", "hangs", "--exact", "--record-dir"])
            .arg(&dir)
            .env("NEXTEST_RUN_ID", &run_id)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if stderr_closed {
            drop(child.stderr.take());
        }
        wait_for_container(&run_id);
        std::thread::sleep(Duration::from_millis(1500));
        let pid = child.id().to_string();
        assert!(
            Command::new("kill").args([&format!("-{signal}"), &pid]).status().unwrap().success()
        );
        let began = Instant::now();
        while child.try_wait().unwrap().is_none() {
            if began.elapsed() > Duration::from_secs(90) {
                let _ = child.kill();
                panic!("SIG{signal} (stderr closed: {stderr_closed}) did not end the run");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let out = child.wait_with_output().unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "SIG{signal}, as SIGTERM: {err}");
        if !stderr_closed {
            assert!(err.contains(&format!("--resume {run_id}")), "{err}");
        }
        assert_eq!(
            rt.block_on(common::containers_of_run(&run_id)),
            0,
            "SIG{signal} leaves nothing"
        );
        let run_dir = dir.join(&run_id);
        let rec = common::json(&run_dir.join("hangs.shell.t1.try1.json"));
        assert_eq!(rec["interrupted"], true, "{rec}");
        assert_eq!(rec["workspaceCollected"], true);
        let summary = common::json(&run_dir.join("summary.json"));
        assert_eq!(summary["exitCode"], 130, "the summary says what the process exits with");
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[test]
fn under_nohup_a_hang_up_is_still_ignored() {
    // Handling SIGHUP must not override `nohup`, which starts the run ignoring it.
    let rt = tokio::runtime::Runtime::new().unwrap();
    if !rt.block_on(common::docker_ready()) {
        return;
    }
    let dir = common::temp_dir("nohup");
    let run_id = format!("nohup-{}", std::process::id());
    let mut child = Command::new("nohup")
        .arg(common::example_bin("fixture_suite"))
        .args(["--ignored", "hangs", "--exact", "--record-dir"])
        .arg(&dir)
        .env_remove("NEXTEST")
        .env("NEXTEST_RUN_ID", &run_id)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_container(&run_id);
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-HUP", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_secs(2));
    assert!(child.try_wait().unwrap().is_none(), "the hang-up was ignored");
    assert_eq!(rt.block_on(common::containers_of_run(&run_id)), 1, "the attempt runs on");
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert_eq!(rt.block_on(common::containers_of_run(&run_id)), 0);
}

/// A tmpfs of `size` on a fresh directory, unmounted when dropped (also on a panic).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = common::temp_dir("tmpfs");
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(mounted, "mount a tmpfs on {} (needs root)", dir.display());
        Tmpfs(dir)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_record_disk_that_fills_up_mid_run_is_no_green() {
    // Before the fix: "every cell passed (exit 0)", empty `*.json.tmp` files, no
    // summary, and "failed to report an event: No space left on device".
    require_docker!();
    let fs = Tmpfs::mount("1100k");
    let run_id = format!("fulldisk-{}", std::process::id());
    let run_dir = fs.0.join(&run_id);
    let child = suite()
        .args(["passes", "--exact", "--trials", "4", "--test-threads", "1", "--record-dir"])
        .arg(&fs.0)
        .env("NEXTEST_RUN_ID", &run_id)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Fill the disk once the first record is there.
    let began = Instant::now();
    while !run_dir.join("passes.shell.t1.try1.json").is_file() {
        assert!(began.elapsed() < Duration::from_secs(120), "no first record");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    {
        use std::io::Write;
        let mut f = std::fs::File::create(fs.0.join("filler")).unwrap();
        while f.write_all(&[0u8; 16 * 1024]).is_ok() {}
    }
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{stdout}{stderr}");
    assert!(!stdout.contains("every cell passed"), "{stdout}");
    assert!(stdout.contains("could not be written") && stdout.contains("(exit 3)"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "failed to write the record {}",
            run_dir.join("passes.shell.t4.try1.json").display()
        )) && stderr.contains("of attempt passes#4 [shell] try 1: No space left on device"),
        "{stderr}"
    );
    for f in std::fs::read_dir(&run_dir).unwrap().flatten() {
        let name = f.file_name().to_string_lossy().into_owned();
        assert!(!name.ends_with(".tmp"), "{name} left behind");
        if name.ends_with(".json") {
            let bytes = std::fs::read(f.path()).unwrap();
            assert!(serde_json::from_slice::<serde_json::Value>(&bytes).is_ok(), "{name} is cut");
        }
    }
    assert_eq!(common::containers_of_run(&run_id).await, 0);
}
