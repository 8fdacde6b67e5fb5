//! Values an environment asks to have redacted (`Environment::redact`): the
//! sandbox gets them as they are, no record or message shows them.

use super::tests::runner;
use crate::environment::Environment;
use crate::eval::Eval;
use crate::matchers::expect;
use crate::sandbox::fake::{FakeBackend, FakeReply};

#[tokio::test]
async fn a_value_the_environment_redacts_reaches_the_sandbox_and_no_record() {
    const VALUE: &str = "sk-host-credential-0123456789";
    // The check prints the value and fails naming it, as a careless verifier would.
    let backend = FakeBackend::new().on_exec(|exec, _| match exec.var("JUDGE") {
        Some(v) if exec.line().contains("leak") => FakeReply::fail(1, format!("bad key {v}")),
        _ => FakeReply::ok(""),
    });
    let eval =
        Eval::new("leaky", |c| Box::pin(async move { expect(c.exec("leak").await?).to_succeed() }))
            .harness("script")
            .environment(|| Environment::new().env("JUDGE", VALUE).redact(VALUE));
    let report = runner(&backend).run(vec![eval]).await.expect("preflight");
    // The sandbox got the value itself.
    let seen = backend.execs().iter().any(|e| e.var("JUDGE") == Some(VALUE));
    assert!(seen, "the check's env has the real value");
    let r = &report.records[0];
    assert!(r.outcome.is_fail(), "{:?}", r.outcome);
    let written = std::fs::read_to_string(report.run_dir.join(r.file_name())).unwrap();
    assert!(!written.contains(VALUE), "{written}");
    assert!(written.contains("bad key [redacted]"), "{written}");
}
