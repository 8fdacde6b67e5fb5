//! The judge's API failing: 429 every time, 500 every time, no answer within
//! the judge's timeout, a body that is not JSON, a verdict outside its schema.
//! A loopback server speaks the Anthropic wire format (`tests/model_server`);
//! the judge's key comes from the run's env file, and must be in no file.

use std::time::Duration;

use crate::model_server::{Answer, ModelServer, anthropic};
use crate::require_docker;
use crate::{SECRET, common};
use reeval::prelude::*;
use reeval::{Eval, FailKind, Outcome, RunReport};

/// The judge's key: sent to the server, never written.
const JUDGE_KEY: &str = "sk-ant-fault-run-judge-key-3f81c0";

/// A run of one attempt whose agent writes a file, then is judged by the
/// server `answers`, then runs a check that reads the checks-only secret.
async fn judged(tag: &str, server: &ModelServer, judge: impl FnOnce(Judge) -> Judge) -> RunReport {
    let judge = judge(
        Judge::new()
            .criterion("notes.txt says hello")
            .threshold(0.7)
            .model("anthropic:claude-sonnet-4-5")
            .base_url(&server.url)
            .retries(2),
    );
    let eval = Eval::new("judged", move |c| {
        let judge = judge.clone();
        Box::pin(async move {
            c.send("echo hello > notes.txt").await?;
            let result = c.judge(judge).await?;
            expect(c.exec("cat notes.txt; echo $REEVAL_T_FAULT_SECRET >/dev/null").await?)
                .to_succeed()?;
            expect(result).to_pass()
        })
    })
    // Named on the eval too: preflight then reads the judge's key from the env file.
    .judge("anthropic:claude-sonnet-4-5")
    .environment(|| Environment::new().secret_for_checks("REEVAL_T_FAULT_SECRET"));
    let env = common::env_file(
        tag,
        &[("ANTHROPIC_API_KEY", JUDGE_KEY), ("REEVAL_T_FAULT_SECRET", SECRET)],
    );
    common::runner_with(tag, |c| c.settings.env_file = Some(env))
        .run(vec![eval])
        .await
        .expect("preflight passes")
}

/// The row of a judge that never gave a verdict: fail/judge, the verdict says why.
async fn judge_row(report: &RunReport, id: &str, fault: &str, says: &str) {
    let r = crate::faults::only(report);
    let v = r.verdicts.first().expect("the verdict is recorded");
    let error =
        v.error.as_deref().unwrap_or_else(|| panic!("the verdict carries its cause: {v:?}"));
    assert!(error.contains(says), "the verdict's error says {says:?}: {error}");
    assert_eq!(r.checks.len(), 1, "the eval went on to its check: {:?}", r.checks);
    let outcome = (Outcome::Fail(FailKind::Judge), says);
    crate::row(report, id, fault, "judge", outcome, &[JUDGE_KEY]).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_judges_api_rate_limits_every_call() {
    require_docker!();
    let server = ModelServer::start(|_, _| {
        anthropic::error(429, "rate_limit_error", "Rate limited", &[("retry-after", "1")])
    })
    .await;
    let report = judged("fr-judge-429", &server, |j| j.retries(1)).await;
    assert_eq!(server.requests().len(), 2, "one try and one retry");
    let what = "the judge's API answers 429 (retry-after 1) to every call";
    judge_row(&report, "judge-1-rate-limited", what, "failed to get an answer: HTTP 429").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_judges_api_fails_every_call() {
    require_docker!();
    let server =
        ModelServer::start(|_, _| anthropic::error(500, "api_error", "Internal server error", &[]))
            .await;
    let report = judged("fr-judge-500", &server, |j| j).await;
    assert_eq!(server.requests().len(), 3, "one try and two retries");
    let what = "the judge's API answers 500 to every call";
    judge_row(&report, "judge-2-server-error", what, "failed to get an answer: HTTP 500").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_judges_api_never_answers_in_time() {
    require_docker!();
    let server = ModelServer::start(|_, _| Answer::Hang(Duration::from_secs(20))).await;
    let report =
        judged("fr-judge-timeout", &server, |j| j.timeout(Duration::from_millis(500)).retries(1))
            .await;
    assert_eq!(server.requests().len(), 2, "one try and one retry");
    let what = "the judge's API does not answer within the judge's timeout (0.5 s)";
    judge_row(&report, "judge-3-timeout", what, "failed to get an answer within 0.5s").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_judges_api_answers_malformed_json() {
    require_docker!();
    let server = ModelServer::start(|_, _| Answer::Raw {
        status: 200,
        body: r#"{"id": "msg_01", "type": "message", "content": [{"type": "tool_use""#.into(),
    })
    .await;
    let report = judged("fr-judge-malformed", &server, |j| j).await;
    let what = "the judge's API answers 200 with a body cut mid-JSON";
    judge_row(
        &report,
        "judge-4-malformed-json",
        what,
        "failed to read the answer: the answer is not JSON",
    )
    .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_judges_verdict_is_outside_its_schema() {
    require_docker!();
    let server =
        ModelServer::start(|_, _| anthropic::verdict(1.7, true, "more than perfect")).await;
    let report = judged("fr-judge-schema", &server, |j| j).await;
    let what = "the judge's verdict is outside its schema (score 1.7)";
    judge_row(
        &report,
        "judge-5-out-of-schema",
        what,
        "failed to read the answer: `score` 1.7 is outside 0..1",
    )
    .await;
}
