//! What a run does when its records cannot be written (a full disk, a
//! record directory removed mid-run), the exit code of an interrupted run,
//! and cells with no graded attempt: on the fake backend, with the record
//! directory on a real small filesystem (tmpfs; needs root to mount).

use crate::settings::Settings;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::attempt::tests::{Script, scripted};
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::matchers::expect;
use crate::record::CellStatus;
use crate::report::Reporter;
use crate::report::events::RunEvent;
use crate::runner::{RunConfig, Runner};
use crate::sandbox::fake::{FakeBackend, FakeFailure};

fn runner(backend: &FakeBackend, record_dir: PathBuf) -> Runner {
    let config = RunConfig::from(Settings {
        record_dir,
        infra_retries: 0,
        test_threads: 1,
        ..Settings::default()
    });
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    Runner::new(config, harnesses).with_backend(Arc::new(backend.clone()))
}

fn passes(trials: u32) -> Eval {
    Eval::new("passes", |c| Box::pin(async move { expect(c.exec("true").await?).to_succeed() }))
        .harness("script")
        .trials(trials)
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped (also on a panic).
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// `None` (the test is skipped, saying so) where this process may not mount.
    fn mount(name: &str, size: &str) -> Option<Tmpfs> {
        let dir = std::env::temp_dir().join(format!(
            "reeval-tmpfs-{}-{name}-{}",
            std::process::id(),
            crate::runner::new_run_id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status();
        if !status.is_ok_and(|s| s.success()) {
            let required = std::env::var("REEVAL_REQUIRE_DOCKER").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "cannot mount a tmpfs here (needs root); REEVAL_REQUIRE_DOCKER=1: nothing may skip"
            );
            eprintln!("SKIPPED, NOT TESTED: cannot mount a tmpfs here (needs root)");
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Fills the disk of `dir` after the first record is written (it runs after the record files).
struct FillAfterFirst {
    dir: PathBuf,
    done: bool,
}

impl Reporter for FillAfterFirst {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if matches!(event, RunEvent::AttemptEnded { .. }) && !self.done {
            self.done = true;
            use std::io::Write;
            let mut f = std::fs::File::create(self.dir.join("filler")).unwrap();
            while f.write_all(&[0u8; 16 * 1024]).is_ok() {}
        }
        Ok(())
    }
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.path().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[tokio::test]
async fn a_record_disk_that_fills_up_fails_the_run_naming_the_path_and_the_attempt() {
    // Before the fix: exit 0, "every cell passed", empty `*.json.tmp` files, and
    // "failed to report an event: No space left on device" naming nothing.
    let Some(fs) = Tmpfs::mount("full", "1100k") else { return };
    let backend = scripted();
    let runner = runner(&backend, fs.0.clone());
    let filler = FillAfterFirst { dir: fs.0.clone(), done: false };
    let report = runner.run_with(vec![passes(4)], vec![Box::new(filler)]).await.expect("preflight");
    assert!(report.records.iter().all(|r| r.outcome == crate::outcome::Outcome::Pass));
    let s = &report.summary;
    assert_eq!(s.exit_code, 3, "{}", s.exit_reason);
    assert!(
        s.exit_reason.starts_with(
            "5 files of the run could not be written, the first: failed to write the record"
        ),
        "{}",
        s.exit_reason
    );
    let second = report.run_dir.join("passes.script.t2.try1.json");
    assert!(
        s.write_errors.iter().any(|e| e.contains(&second.display().to_string())
            && e.contains("passes#2 [script] try 1")
            && e.contains("No space left")),
        "{:?}",
        s.write_errors
    );
    assert!(
        s.write_errors.iter().any(|e| e.contains("summary.json")),
        "the summary could not be written either: {:?}",
        s.write_errors
    );
    assert_eq!(s.records, ["passes.script.t1.try1.json"], "only the record that is there");
    let left = files(&fs.0);
    assert!(!left.iter().any(|p| p.to_string_lossy().ends_with(".tmp")), "{left:?}");
    let json: Vec<&PathBuf> =
        left.iter().filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    assert!(json.iter().any(|p| p.ends_with("passes.script.t1.try1.json")), "{left:?}");
    for p in json {
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(p).unwrap())
            .unwrap_or_else(|e| panic!("{} does not parse: {e}", p.display()));
    }
}

#[tokio::test]
async fn too_little_free_space_for_records_stops_the_run_in_preflight() {
    let Some(fs) = Tmpfs::mount("small", "200k") else { return };
    let backend = scripted();
    let e = runner(&backend, fs.0.clone()).run(vec![passes(1)]).await.unwrap_err().to_string();
    assert!(e.contains("free under") && e.contains("needs at least 1024 KiB"), "{e}");
    assert_eq!(backend.created(), 0, "nothing started");
}

/// Removes the run directory after the first record.
struct RemoveRunDir(Option<PathBuf>);

impl Reporter for RemoveRunDir {
    fn event(&mut self, event: &RunEvent) -> std::io::Result<()> {
        if let RunEvent::AttemptEnded { .. } = event
            && let Some(dir) = self.0.take()
        {
            std::fs::remove_dir_all(dir).unwrap();
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_record_dir_removed_mid_run_is_made_again_and_the_lost_record_is_said() {
    let dir = std::env::temp_dir().join(format!("reeval-removed-{}", crate::runner::new_run_id()));
    let backend = scripted();
    let runner = runner(&backend, dir.clone());
    let run_dir = dir.join(&runner.config.settings.run_id);
    let report = runner
        .run_with(vec![passes(3)], vec![Box::new(RemoveRunDir(Some(run_dir.clone())))])
        .await
        .unwrap();
    // The later records and the summary are written; the first is gone, and the run
    // is no success (it exited 0 with the summary listing the lost record before).
    for t in [2, 3] {
        assert!(run_dir.join(format!("passes.script.t{t}.try1.json")).is_file());
    }
    assert!(run_dir.join("summary.json").is_file());
    let s = &report.summary;
    assert_eq!(report.exit_code(), 3, "{}", s.exit_reason);
    let lost = run_dir.join("passes.script.t1.try1.json");
    assert_eq!(
        s.write_errors,
        [format!(
            "failed to keep the record {} of attempt passes#1 [script] try 1: it was removed during the run",
            lost.display()
        )]
    );
    assert!(!s.records.iter().any(|f| f.contains("t1.try1")), "{:?}", s.records);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_cell_of_infra_errors_only_is_neither_passed_nor_failed() {
    // Before the fix: `"ok": true` and "passes" in the report.
    let dir = std::env::temp_dir().join(format!("reeval-ungraded-{}", crate::runner::new_run_id()));
    let backend = FakeBackend::new().failing(FakeFailure::Create);
    let report = runner(&backend, dir.clone()).run(vec![passes(2)]).await.unwrap();
    let cell = &report.summary.cells[0];
    assert_eq!((cell.ok, cell.status), (None, CellStatus::NoGradedAttempts));
    assert_eq!(report.exit_code(), 3, "{}", report.summary.exit_reason);
    assert!(report.summary.exit_reason.contains("1 cell with no graded attempt"));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert!(summary["cells"][0]["ok"].is_null(), "{summary}");
    assert_eq!(summary["cells"][0]["status"], "no_graded_attempts");
    let html = std::fs::read_to_string(report.run_dir.join("report.html")).unwrap();
    assert!(html.contains("no graded attempt") && !html.contains("class=\"pass\">passes<"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn an_interrupted_run_says_in_its_summary_the_exit_code_it_exits_with() {
    // Before the fix the summary said 3 (an infra error) while the process exited 130.
    let dir = std::env::temp_dir().join(format!("reeval-stopped-{}", crate::runner::new_run_id()));
    let backend =
        FakeBackend::new().on_exec(|exec, _| match exec.argv.last().map(String::as_str) {
            Some("sleep") => crate::sandbox::fake::FakeReply::Sleep(Duration::from_secs(5)),
            _ => crate::sandbox::fake::FakeReply::ok(""),
        });
    let eval = Eval::new("stopped", |c| Box::pin(async move { c.exec("sleep").await.map(|_| ()) }))
        .harness("script");
    let runner = runner(&backend, dir.clone());
    let shutdown = runner.shutdown_token();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        shutdown.cancel();
    });
    let report = runner.run(vec![eval]).await.unwrap();
    assert_eq!(report.exit_code(), crate::report::EXIT_INTERRUPTED);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(report.run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["exitCode"], 130, "{summary}");
    assert!(summary["exitReason"].as_str().unwrap().contains("--resume"), "{summary}");
    let _ = std::fs::remove_dir_all(&dir);
}
