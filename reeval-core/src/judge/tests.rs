use serde_json::{Value, json};

use super::*;
use crate::llm::chat::key_env;
use crate::llm::conversation::Call;

fn reply(input: Value) -> Reply {
    Reply {
        calls: vec![Call { id: "1".into(), name: SUBMIT_VERDICT.into(), input }],
        ..Reply::default()
    }
}

#[test]
fn specs_name_a_provider_and_a_model() {
    assert_eq!(
        parse_spec("anthropic:claude-sonnet-4-5").unwrap(),
        (Provider::Anthropic, "claude-sonnet-4-5".into())
    );
    assert_eq!(parse_spec("openai:gpt-4.1").unwrap(), (Provider::OpenAi, "gpt-4.1".into()));
    assert!(parse_spec("gpt-4.1").unwrap_err().contains("names no provider"));
    assert!(parse_spec("google:gemini").unwrap_err().contains("not known"));
    assert!(parse_spec("openai:").unwrap_err().contains("no model"));
}

#[test]
fn verdicts_are_validated() {
    assert_eq!(
        parse_verdict(&reply(json!({"reasoning": "ok", "score": 0.8, "passed": true}))).unwrap(),
        Sample { score: 0.8, passed: true, reasoning: "ok".into() }
    );
    let malformed = |r: &Reply, needle: &str| matches!(parse_verdict(r), Err(LlmError::Malformed { message, .. }) if message.contains(needle));
    assert!(malformed(
        &reply(json!({"reasoning": "ok", "score": 1.5, "passed": true})),
        "outside 0..1"
    ));
    assert!(malformed(
        &reply(json!({"reasoning": "ok", "score": "high", "passed": true})),
        "`score`"
    ));
    assert!(malformed(&reply(json!({"score": 0.5, "passed": true})), "`reasoning`"));
    assert!(malformed(&Reply { text: Some("PASS".into()), ..Reply::default() }, "only text"));
}

#[test]
fn the_judge_backs_off_from_half_a_second_to_eight() {
    let policy = RetryPolicy { retries: 3, ..BACKOFF };
    assert_eq!(
        (policy.ceiling(0), policy.ceiling(2), policy.ceiling(9)),
        (Duration::from_millis(500), Duration::from_secs(2), Duration::from_secs(8))
    );
    assert_eq!(policy.delay(0, Some(Duration::from_secs(2))), Duration::from_secs(2));
}

#[test]
fn the_verdict_tool_takes_a_range_where_the_provider_does() {
    let tool = verdict_tool();
    assert!(tool.schema["properties"]["score"].get("maximum").is_none());
    assert_eq!(tool.schema_with_extra_keywords()["properties"]["score"]["maximum"], 1);
    assert_eq!(tool.schema_with_extra_keywords()["properties"]["score"]["minimum"], 0);
}

#[test]
fn criteria_convert_into_a_judge() {
    assert_eq!(Judge::from("a").criteria(), ["a"]);
    assert_eq!(Judge::from(["a", "b"]).criteria(), ["a", "b"]);
    assert_eq!(Judge::from(vec!["c".to_string()]).criteria(), ["c"]);
    let j = Judge::agentic().threshold(0.7).samples(0).max_steps(0);
    assert!(j.agentic && j.threshold == 0.7 && j.samples == 1 && j.max_steps == 1);
}

#[test]
fn key_variables_follow_the_provider() {
    assert_eq!(key_env("anthropic:claude-sonnet-4-5"), Ok("ANTHROPIC_API_KEY"));
    assert_eq!(key_env("openai:gpt-4.1"), Ok("OPENAI_API_KEY"));
    assert!(key_env("nope").is_err());
}

#[test]
fn failures_read_as_the_record_keeps_them() {
    let v = Verdict {
        criterion: "c".into(),
        score: 0.0,
        pass: false,
        reasoning: String::new(),
        threshold: 0.5,
        model: Some("m".into()),
        usage: Usage::default(),
        error: Some(LlmError::Truncated.to_string()),
        tool_calls: Vec::new(),
    };
    assert_eq!(
        failure_message(&v),
        "failed to get a verdict on \"c\" from m: failed to get an answer: it was cut at the token limit"
    );
}
