//! The lifecycle on the in-memory fake backend: no kernel, milliseconds each.

use crate::settings::Settings;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::environment::Environment;
use crate::eval::Eval;
use crate::exec::Command;
use crate::harness::{Harness, HarnessError, HarnessRegistry, TurnContext};
use crate::matchers::expect;
use crate::outcome::{FailKind, Outcome};
use crate::record::Record;
use crate::runner::{RunConfig, Runner};
use crate::sandbox::SandboxHandle;
use crate::sandbox::archive::Entry;
use crate::sandbox::fake::{FakeBackend, FakeFailure, FakeReply};
use crate::turn::{TurnReport, TurnStatus};

/// A harness whose turn runs the prompt as a command (like `shell`), answered by the fake.
#[derive(Debug)]
pub(crate) struct Script;

#[async_trait]
impl Harness for Script {
    fn name(&self) -> &str {
        "script"
    }

    fn reads_context_summary(&self) -> bool {
        false
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        _turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let out = sandbox.exec_turn(Command::new("bash").arg("-c").arg(prompt), tx).await?;
        let status = if out.success() { TurnStatus::Completed } else { TurnStatus::Failed };
        Ok(TurnReport {
            status,
            events: 1,
            error: (!out.success()).then(|| out.stderr.clone()),
            ..TurnReport::default()
        })
    }
}

/// Turns and checks the fake understands: `sleep <ms>`, `write <path> <text>`, `exit <code>`.
pub(crate) fn scripted() -> FakeBackend {
    FakeBackend::new().on_exec(|exec, files| {
        let script = exec.argv.last().cloned().unwrap_or_default();
        let words: Vec<&str> = script.split_whitespace().collect();
        match words.as_slice() {
            ["sleep", ms] => FakeReply::Sleep(Duration::from_millis(ms.parse().unwrap_or(0))),
            ["write", path, text @ ..] => {
                files.insert(
                    format!("/workspace/{path}"),
                    Entry::File { mode: 0o644, bytes: text.join(" ").into_bytes() },
                );
                FakeReply::ok("")
            }
            ["exit", code] => FakeReply::fail(code.parse().unwrap_or(1), "failed on purpose"),
            _ => FakeReply::ok(""),
        }
    })
}

pub(crate) fn runner(backend: &FakeBackend) -> Runner {
    runner_with_retries(backend, 0)
}

fn runner_with_retries(backend: &FakeBackend, infra_retries: u32) -> Runner {
    let dir = std::env::temp_dir().join(format!(
        "reeval-fake-{}-{}",
        std::process::id(),
        crate::runner::new_run_id()
    ));
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    let config =
        RunConfig::from(Settings { record_dir: dir, infra_retries, ..Settings::default() });
    Runner::new(config, harnesses).with_backend(Arc::new(backend.clone()))
}

fn phases(r: &Record) -> Vec<&str> {
    r.phases.iter().map(|p| p.phase.as_str()).collect()
}

pub(crate) async fn run_one(backend: &FakeBackend, eval: Eval) -> Record {
    let report = runner(backend).run(vec![eval.harness("script")]).await.expect("preflight");
    report.records.into_iter().next_back().expect("a record")
}

#[tokio::test]
async fn every_phase_runs_in_order_and_the_sandbox_is_destroyed() {
    let backend = scripted();
    let eval = Eval::new("ordered", |c| {
        Box::pin(async move {
            let turn = c.send("write hello.txt hi").await?;
            expect(turn.diff.paths().join(",")).to_equal("hello.txt")?;
            expect(c.exec("true").await?).to_succeed()?;
            Ok(())
        })
    })
    .environment(|| Environment::new().file("a.txt", "a").setup("true"));
    let r = run_one(&backend, eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(
        phases(&r),
        [
            "preflight",
            "image",
            "container",
            "env",
            "files",
            "setup",
            "snapshot",
            "harness",
            "turn",
            "check",
            "teardown"
        ]
    );
    assert!(r.workspace_collected);
    assert_eq!(r.final_diff.as_ref().map(|d| d.paths().join(",")), Some("hello.txt".into()));
    assert_eq!((backend.created(), backend.live()), (1, 0));
    // The agent's turn runs unprivileged and killable; the check as root.
    let execs = backend.execs();
    let turn = execs.iter().find(|e| e.line().contains("write hello.txt")).expect("the turn ran");
    assert!(turn.killable && turn.user.as_deref() == Some("1000:1000"), "{turn:?}");
    let check = execs
        .iter()
        .find(|e| e.argv.last().is_some_and(|a| a == "true") && e.user.is_none())
        .expect("the check ran");
    assert!(!check.killable);
}

#[tokio::test]
async fn the_sandbox_starts_only_when_needed() {
    let backend = scripted();
    let r = run_one(&backend, Eval::new("untouched", |_| Box::pin(async { Ok(()) }))).await;
    assert_eq!(r.outcome, Outcome::Pass);
    assert_eq!(phases(&r), ["preflight", "teardown"]);
    assert_eq!(backend.created(), 0);
    // Checks only: a sandbox, but no harness session.
    let r = run_one(
        &backend,
        Eval::new("checks_only", |c| {
            Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
        }),
    )
    .await;
    assert!(!phases(&r).contains(&"harness"), "{:?}", phases(&r));
    assert_eq!((backend.created(), backend.live()), (1, 0));
}

#[tokio::test]
async fn teardown_runs_after_an_error_a_panic_and_a_timeout() {
    let backend = scripted();
    let error = Eval::new("error", |c| {
        Box::pin(async move {
            c.exec("true").await?;
            Err(crate::Error::other("mine"))
        })
    });
    let panic = Eval::new("panic", |c| {
        Box::pin(async move {
            c.exec("true").await?;
            panic!("boom");
        })
    });
    let timeout =
        Eval::new("timeout", |c| Box::pin(async move { c.send("sleep 5000").await.map(|_| ()) }))
            .timeout(Duration::from_millis(200));
    let report = runner(&backend)
        .run(vec![error.harness("script"), panic.harness("script"), timeout.harness("script")])
        .await
        .expect("preflight");
    let find = |n: &str| report.records.iter().find(|r| r.eval == n).expect("record");
    assert_eq!(find("error").outcome, Outcome::Fail(FailKind::Assertion));
    assert_eq!(find("panic").outcome, Outcome::Fail(FailKind::Assertion));
    assert!(find("panic").message.as_deref().unwrap_or_default().contains("boom"));
    assert_eq!(
        find("timeout").outcome,
        Outcome::Fail(FailKind::Timeout),
        "{:?}",
        find("timeout").message
    );
    assert_eq!(
        find("timeout").turns.first().map(|t| t.status),
        Some(TurnStatus::Aborted),
        "the stopped turn is in the record"
    );
    for r in &report.records {
        assert_eq!(phases(r).last(), Some(&"teardown"), "{}", r.eval);
    }
    assert_eq!((backend.created(), backend.live()), (3, 0));
    assert!(
        backend.kills().contains(&crate::sandbox::Signal::Term),
        "the aborted turn was asked to stop"
    );
}

#[tokio::test]
async fn a_send_the_eval_drops_keeps_its_place_in_the_record() {
    let backend = scripted();
    // Dropped, then another turn: both turns, in order, the dropped one as it started.
    let went_on = Eval::new("went_on", |c| {
        Box::pin(async move {
            let dropped = tokio::time::timeout(Duration::from_millis(100), c.send("sleep 5000"));
            expect(dropped.await.is_err()).to_equal(true)?;
            c.send("write b.txt b").await?;
            expect(c.record().turns.len()).to_equal(2)?;
            Ok(())
        })
    });
    // Dropped, and the eval ends: the turn is concluded as stopped.
    let ended = Eval::new("ended", |c| {
        Box::pin(async move {
            let dropped = tokio::time::timeout(Duration::from_millis(100), c.send("sleep 5000"));
            expect(dropped.await.is_err()).to_equal(true)?;
            Ok(())
        })
    });
    let report = runner(&backend)
        .run(vec![went_on.harness("script"), ended.harness("script")])
        .await
        .expect("preflight");
    let find = |n: &str| report.records.iter().find(|r| r.eval == n).expect("record");
    let turns = |n: &str| -> Vec<(String, TurnStatus, bool)> {
        find(n).turns.iter().map(|t| (t.prompt.clone(), t.status, t.duration_ms > 0)).collect()
    };
    assert_eq!(find("went_on").outcome, Outcome::Pass, "{:?}", find("went_on").message);
    assert_eq!(
        turns("went_on"),
        [
            ("sleep 5000".to_string(), TurnStatus::Aborted, false),
            // The fake answers at once: a turn of 0 ms.
            ("write b.txt b".to_string(), TurnStatus::Completed, false)
        ]
    );
    assert_eq!(turns("ended"), [("sleep 5000".to_string(), TurnStatus::Aborted, true)]);
}

#[tokio::test]
async fn setup_does_not_spend_the_budget_and_turns_do() {
    let backend = scripted();
    // A setup step longer than the whole budget, then quick work: a pass.
    let slow_setup = Eval::new("slow_setup", |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    })
    .environment(|| Environment::new().setup("sleep 400"))
    .timeout(Duration::from_millis(200));
    let r = run_one(&backend, slow_setup).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let setup = r.phases.iter().find(|p| p.phase == "setup").expect("setup phase");
    assert!(setup.duration_ms >= 400, "{setup:?}");
    assert!(r.timings.setup_ms >= 400);
    // A turn longer than the budget: a timeout.
    let slow_turn =
        Eval::new("slow_turn", |c| Box::pin(async move { c.send("sleep 600").await.map(|_| ()) }))
            .timeout(Duration::from_millis(200));
    let r = run_one(&backend, slow_turn).await;
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout), "{:?}", r.message);
}

#[tokio::test]
async fn an_archive_error_while_preparing_the_workspace_is_the_platforms() {
    // Before the fix this was `fail/assertion`: the agent was blamed for an upload that broke.
    let backend = scripted().failing(FakeFailure::Upload);
    let eval =
        Eval::new("files", |c| Box::pin(async move { expect(c.exec("true").await?).to_succeed() }))
            .environment(|| Environment::new().file("a.txt", "a"));
    let r = run_one(&backend, eval).await;
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    assert_eq!(
        r.phases
            .iter()
            .find(|p| p.phase == "files")
            .map(|p| p.detail.contains("failed to read an archive")),
        Some(true),
        "{:?}",
        r.phases
    );
    assert_eq!(backend.live(), 0);
}

#[tokio::test]
async fn infra_errors_are_retried_with_a_fresh_sandbox_and_fails_never() {
    let backend = scripted().failing(FakeFailure::Start);
    let eval = Eval::new("flaky_engine", |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    })
    .harness("script");
    let report = runner_with_retries(&backend, 2).run(vec![eval]).await.expect("preflight");
    let tries: Vec<u32> = report.records.iter().map(|r| r.try_).collect();
    assert_eq!(tries, [1, 2, 3], "two retries, each a fresh sandbox");
    assert!(report.records.iter().all(|r| r.outcome == Outcome::InfraError));
    assert_eq!((backend.created(), backend.live()), (3, 0));

    let backend = scripted();
    let fails = Eval::new("fails", |c| {
        Box::pin(async move { expect(c.exec("exit 3").await?).to_succeed() })
    });
    let r = run_one(&backend, fails).await;
    assert_eq!(
        (r.outcome, r.try_),
        (Outcome::Fail(FailKind::Assertion), 1),
        "a fail is a sample, never retried"
    );
}

/// Keeps every event it is sent, in order.
#[derive(Clone, Default)]
struct Collect(Arc<std::sync::Mutex<Vec<String>>>);

impl crate::report::Reporter for Collect {
    fn event(&mut self, event: &crate::report::events::RunEvent) -> std::io::Result<()> {
        use crate::report::events::RunEvent;
        let line = match event {
            RunEvent::Planned { evals, attempts, .. } => {
                format!("planned {} evals, {attempts} attempts", evals.len())
            }
            RunEvent::AttemptStarted(id) => format!("started {}#{}.{}", id.eval, id.trial, id.try_),
            RunEvent::PhaseStarted { attempt, phase } => {
                format!("began {}#{} {phase}", attempt.eval, attempt.trial)
            }
            RunEvent::PhaseEnded { attempt, phase } => {
                format!("phase {}#{} {}", attempt.eval, attempt.trial, phase.phase)
            }
            RunEvent::AttemptNote { attempt, event } => {
                format!("note {} {}", attempt.eval, event.message)
            }
            RunEvent::AttemptEnded { record, retry } => format!(
                "ended {}#{}.{} {} {retry:?}",
                record.eval,
                record.trial,
                record.try_,
                record.outcome.as_str()
            ),
            RunEvent::EvalEnded { eval, finals } => format!("eval {eval} {}", finals.len()),
            RunEvent::TurnStarted { attempt, index, prompt } => {
                format!("turn {}#{} {index} {prompt}", attempt.eval, attempt.trial)
            }
            RunEvent::AgentActed { attempt, .. } => format!("acted {}", attempt.eval),
            // The clock's ticks depend on timing, not on what happened.
            RunEvent::Tick => return Ok(()),
        };
        self.0.lock().unwrap().push(line);
        Ok(())
    }

    fn finish(&mut self, report: &crate::report::RunReport) -> std::io::Result<()> {
        self.0.lock().unwrap().push(format!("finished exit {}", report.exit_code()));
        Ok(())
    }
}

#[tokio::test]
async fn a_run_emits_its_events_in_order() {
    let backend = scripted();
    let eval = Eval::new("evented", |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    })
    .harness("script");
    let collect = Collect::default();
    let report = runner(&backend)
        .run_with(vec![eval], vec![Box::new(collect.clone())])
        .await
        .expect("preflight");
    assert_eq!(report.exit_code(), 0);
    let events = collect.0.lock().unwrap().clone();
    assert_eq!(
        events,
        [
            "planned 1 evals, 1 attempts",
            "started evented#1.1",
            "phase evented#1 preflight",
            "began evented#1 image",
            "phase evented#1 image",
            "began evented#1 container",
            "phase evented#1 container",
            "began evented#1 env",
            "phase evented#1 env",
            "began evented#1 snapshot",
            "phase evented#1 snapshot",
            "began evented#1 check",
            "phase evented#1 check",
            "began evented#1 teardown",
            "phase evented#1 teardown",
            "ended evented#1.1 pass Final",
            "eval evented 1",
            "finished exit 0",
        ]
    );
}

#[tokio::test]
async fn a_judge_named_only_by_reeval_judge_needs_its_key_in_preflight() {
    // Before the fix the missing key was found when the eval called the judge, after the agent had worked.
    let args = crate::settings::Args::default();
    let env = |name: &str| (name == "REEVAL_JUDGE").then(|| "openai:gpt-test".to_string());
    let settings = crate::settings::Settings::load(&args, env).expect("settings");
    let config = RunConfig::from(Settings {
        record_dir: std::env::temp_dir().join("reeval-fake-judge"),
        ..settings.run_config().settings
    });
    let backend = scripted();
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    let eval =
        Eval::new("judged", |c| Box::pin(async move { c.judge("it works").await.map(|_| ()) }))
            .harness("script");
    let runner = Runner::new(config, harnesses).with_backend(Arc::new(backend.clone()));
    match runner.run(vec![eval]).await {
        Err(e) => assert!(
            e.missing.iter().any(|m| m.contains("OPENAI_API_KEY") && m.contains("openai:gpt-test")),
            "{e}"
        ),
        Ok(_) if std::env::var_os("OPENAI_API_KEY").is_some() => {} // this host has the key: nothing to find
        Ok(r) => panic!(
            "preflight passed without the judge's key: {:?}",
            r.records.first().map(|r| &r.message)
        ),
    }
    assert_eq!(backend.created(), 0, "nothing started");
}

#[tokio::test]
async fn the_workspace_lives_where_the_environment_says_the_images_workdir_by_its_backend() {
    use crate::environment::{Image, WorkspaceDir};
    async fn workspace_of(backend: &FakeBackend, env: fn() -> Environment) -> (String, String) {
        let seen = Arc::new(std::sync::Mutex::new(String::new()));
        let into = seen.clone();
        let eval = Eval::new("where", move |c| {
            let into = into.clone();
            Box::pin(async move {
                *into.lock().unwrap() = c.sandbox_handle().await?.workspace().to_string();
                Ok(())
            })
        })
        .environment(env);
        let r = run_one(backend, eval).await;
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
        let spec = backend.specs().pop().expect("a sandbox was made");
        let handle = seen.lock().unwrap().clone();
        (spec.workdir, handle)
    }
    let backend = scripted().image_workdir("task/img:1", "/app/");
    // The image's WORKDIR, as the backend that runs the attempt reports it.
    let at = workspace_of(&backend, || {
        Environment::new()
            .image(Image::from("task/img:1"))
            .workspace_dir(WorkspaceDir::ImageWorkdir)
    })
    .await;
    assert_eq!(at, ("/app".into(), "/app".into()));
    // An image without a WORKDIR (or `/`): the default workspace.
    let at = workspace_of(&backend, || {
        Environment::new()
            .image(Image::from("other/img:1"))
            .workspace_dir(WorkspaceDir::ImageWorkdir)
    })
    .await;
    assert_eq!(at, ("/workspace".into(), "/workspace".into()));
    // A path of the eval's own.
    let at = workspace_of(&backend, || Environment::new().workspace_dir("/srv/work")).await;
    assert_eq!(at, ("/srv/work".into(), "/srv/work".into()));
    assert_eq!(WorkspaceDir::ImageWorkdir.resolve(Some("/")), "/workspace");
    assert_eq!(WorkspaceDir::ImageWorkdir.resolve(Some("rel")), "/workspace");
    let problems = Environment::new().workspace_dir("rel/dir").problems().join("\n");
    assert!(problems.contains("workspace_dir `rel/dir` must be an absolute path"), "{problems}");
}

/// An image whose own `USER` is not root: the sandbox is made knowing it
/// (commands that name no user, the checks, run as it), and the agent user's
/// preparation names root, which the backend starts the sandbox as.
#[tokio::test]
async fn an_images_own_user_reaches_the_sandbox_and_roots_work_names_root() {
    use crate::environment::Image;
    let backend = scripted().image_user("task/img:1", "nobody");
    let eval = Eval::new("image_user", |c| {
        Box::pin(async move {
            c.send("write hello.txt hi").await?;
            expect(c.exec("true").await?).to_succeed()
        })
    })
    .environment(|| Environment::new().image(Image::from("task/img:1")));
    let r = run_one(&backend, eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let spec = backend.specs().pop().expect("a sandbox was made");
    assert_eq!(spec.user.as_deref(), Some("nobody"));
    let execs = backend.execs();
    let prepare = execs
        .iter()
        .find(|e| e.line().contains("chown -h 1000:1000"))
        .expect("the agent user was prepared");
    assert_eq!(prepare.user.as_deref(), Some("0"), "{prepare:?}");
    let check = execs.iter().find(|e| e.argv.last().is_some_and(|a| a == "true"));
    assert_eq!(check.expect("the check ran").user, None, "as the image's user");
}

/// While only checks ran, a check's listing waits: an eval of checks alone
/// reads the workspace once (teardown's read), and what its checks wrote is
/// theirs, never in the final diff. A later call that may act (a turn, a
/// write, a diff) lists first, so the check's writes never reach the agent's.
#[tokio::test]
async fn a_checks_writes_stay_its_own_when_its_listing_waits() {
    let backend = scripted();
    let eval = Eval::new("checks_alone", |c| {
        Box::pin(async move {
            expect(c.exec("write by-check.txt one").await?).to_succeed()?;
            expect(c.exec("write by-second-check.txt two").await?).to_succeed()?;
            Ok(())
        })
    });
    let r = run_one(&backend, eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(backend.downloads(), ["/workspace"; 2], "one read per check, the last teardown's");
    let changed = |i: usize| r.checks[i].changes.as_ref().map(|d| d.paths().join(","));
    assert_eq!(changed(0).as_deref(), Some("by-check.txt"));
    assert_eq!(changed(1).as_deref(), Some("by-second-check.txt"));
    assert!(r.workspace_collected);
    assert_eq!(r.final_diff.as_ref().map(|d| d.files.len()), Some(0), "{:?}", r.final_diff);

    let backend = scripted();
    let eval = Eval::new("check_then_agent", |c| {
        Box::pin(async move {
            expect(c.exec("write by-check.txt one").await?).to_succeed()?;
            let turn = c.send("write by-agent.txt hi").await?;
            expect(turn.diff.paths().join(",")).to_equal("by-agent.txt")?;
            // After a turn, each check is listed at once (the agent's processes may still run).
            expect(c.exec("write by-check-after.txt two").await?).to_succeed()?;
            expect(c.diff().await?.paths().join(",")).to_equal("by-agent.txt")?;
            Ok(())
        })
    });
    let r = run_one(&backend, eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let changed = |i: usize| r.checks[i].changes.as_ref().map(|d| d.paths().join(","));
    assert_eq!(changed(0).as_deref(), Some("by-check.txt"));
    assert_eq!(changed(1).as_deref(), Some("by-check-after.txt"));
    assert_eq!(r.final_diff.as_ref().map(|d| d.paths().join(",")), Some("by-agent.txt".into()));

    // The eval's own writes and diffs wait for nothing either.
    let backend = scripted();
    let eval = Eval::new("check_then_eval", |c| {
        Box::pin(async move {
            expect(c.exec("write by-check.txt one").await?).to_succeed()?;
            expect(c.diff().await?.files.len()).to_equal(0)?;
            expect(c.exec("write by-check-2.txt two").await?).to_succeed()?;
            c.write_file("by-eval.txt", "given").await?;
            expect(c.diff().await?.paths().join(",")).to_equal("by-eval.txt")?;
            Ok(())
        })
    });
    let r = run_one(&backend, eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let changed = |i: usize| r.checks[i].changes.as_ref().map(|d| d.paths().join(","));
    assert_eq!(changed(0).as_deref(), Some("by-check.txt"));
    assert_eq!(changed(1).as_deref(), Some("by-check-2.txt"));
}
