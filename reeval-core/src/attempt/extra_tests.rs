//! Extra sandboxes (`Ctx::start_sandbox`) on the in-memory fake backend:
//! their phases recorded under their name, checks in them recorded with it,
//! a copy across, and every one removed whatever ended the attempt.

use crate::settings::Settings;
use std::time::Duration;

use super::tests::scripted;
use crate::environment::Environment;
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::matchers::expect;
use crate::outcome::{FailKind, Outcome};
use crate::record::Record;
use crate::runner::{RunConfig, Runner};
use crate::sandbox::fake::FakeBackend;

async fn run(backend: &FakeBackend, evals: Vec<Eval>) -> Vec<Record> {
    let dir = std::env::temp_dir().join(format!(
        "reeval-extra-{}-{}",
        std::process::id(),
        crate::runner::new_run_id()
    ));
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(super::tests::Script));
    let config =
        RunConfig::from(Settings { record_dir: dir, infra_retries: 0, ..Settings::default() });
    let runner = Runner::new(config, harnesses).with_backend(std::sync::Arc::new(backend.clone()));
    let evals = evals.into_iter().map(|e| e.harness("script")).collect();
    runner.run(evals).await.expect("preflight").records
}

#[tokio::test]
async fn an_extra_sandbox_runs_its_phases_and_checks_under_its_name_and_goes() {
    let backend = scripted();
    let eval = Eval::new("graded_apart", |c| {
        Box::pin(async move {
            c.send("write out.txt the work").await?;
            let env = Environment::new()
                .env("ROLE", "verifier")
                .setup("mkdir -p /logs")
                .mount(crate::environment::Mount::volume("logs", "/logs/shared").read_only());
            let v = c.start_sandbox("verifier", env).await?;
            assert!(c.copy_to_sandbox(&v, "out.txt", &[]).await?, "the file is there");
            assert!(!c.copy_to_sandbox(&v, "missing.txt", &[]).await?, "no such file");
            let copied = c.in_sandbox(&v).read_bytes("/workspace/out.txt").await?;
            expect(String::from_utf8_lossy(&copied).into_owned())
                .to_equal("the work".to_string())?;
            expect(c.in_sandbox(&v).exec("true").await?).to_succeed()?;
            c.stop_sandbox(v.clone()).await?;
            let after = c.in_sandbox(&v).exec("true").await;
            assert!(after.is_err(), "a stopped sandbox takes no calls");
            Ok(())
        })
    });
    let r = run(&backend, vec![eval]).await.remove(0);
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.events);
    let theirs: Vec<(&str, &str)> = r
        .phases
        .iter()
        .filter(|p| p.detail.starts_with("sandbox verifier: "))
        .map(|p| (p.phase.as_str(), p.detail.as_str()))
        .collect();
    let kinds: Vec<&str> = theirs.iter().map(|(k, _)| *k).collect();
    assert_eq!(kinds, ["image", "container", "env", "setup", "check"], "{theirs:?}");
    assert_eq!(r.artifacts.iter().filter(|a| *a == "sandboxes/verifier/setup.log").count(), 1);
    let check = r.checks.iter().find(|c| c.sandbox.is_some()).expect("the check in the verifier");
    assert_eq!(check.sandbox.as_deref(), Some("verifier"));
    // Its own sandbox: created second, with its own variables; both gone.
    let specs = backend.specs();
    assert_eq!(specs.len(), 2);
    assert!(specs[0].mounts.is_empty());
    assert_eq!(
        specs[1].mounts,
        [crate::environment::Mount::volume("logs", "/logs/shared").read_only()],
        "its mounts reach the backend"
    );
    let verifier_exec = backend
        .execs()
        .into_iter()
        .find(|e| e.var("ROLE") == Some("verifier"))
        .expect("a command in the verifier");
    assert_eq!(verifier_exec.sandbox, "fake00000002");
    assert_eq!((backend.created(), backend.live()), (2, 0));
}

#[tokio::test]
async fn extra_sandboxes_go_after_an_error_a_panic_and_a_timeout() {
    let backend = scripted();
    let error = Eval::new("error", |c| {
        Box::pin(async move {
            c.start_sandbox("other", Environment::new()).await?;
            Err(crate::Error::other("mine"))
        })
    });
    let panic = Eval::new("panic", |c| {
        Box::pin(async move {
            c.start_sandbox("other", Environment::new()).await?;
            panic!("boom");
        })
    });
    let timeout = Eval::new("timeout", |c| {
        Box::pin(async move {
            let v = c.start_sandbox("other", Environment::new()).await?;
            c.in_sandbox(&v).exec("sleep 5000").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_millis(300));
    let records = run(&backend, vec![error, panic, timeout]).await;
    let outcome = |n: &str| records.iter().find(|r| r.eval == n).expect("record").outcome;
    assert_eq!(outcome("error"), Outcome::Fail(FailKind::Assertion));
    assert_eq!(outcome("panic"), Outcome::Fail(FailKind::Assertion));
    assert_eq!(outcome("timeout"), Outcome::Fail(FailKind::Timeout));
    assert_eq!((backend.created(), backend.live()), (3, 0), "every extra sandbox was removed");
    for r in &records {
        let said = r.events.iter().any(|e| e.message.contains("sandbox other removed at teardown"));
        assert!(said, "{}: {:?}", r.eval, r.events);
    }
}

#[tokio::test]
async fn an_extra_sandbox_the_attempt_cannot_have_is_refused() {
    let backend = scripted();
    let bad = Eval::new("bad", |c| {
        Box::pin(async move {
            let e = c.start_sandbox("no spaces", Environment::new()).await.unwrap_err();
            assert!(e.to_string().contains("its name must be"), "{e}");
            let e = c.start_sandbox("v", Environment::new().secret("TOKEN")).await.unwrap_err();
            assert!(matches!(e.root(), crate::Error::Config(_)), "{e}");
            assert!(e.to_string().contains("is given no secrets"), "{e}");
            c.start_sandbox("v", Environment::new()).await?;
            let e = c.start_sandbox("v", Environment::new()).await.unwrap_err();
            assert!(e.to_string().contains("new to the attempt"), "{e}");
            Ok(())
        })
    });
    let r = run(&backend, vec![bad]).await.remove(0);
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!((backend.created(), backend.live()), (1, 0));
}
