use super::*;
use crate::turn::ToolCall as RecordedCall;

fn record_with(turns: Vec<Turn>) -> Record {
    let mut r = Record::new("run-1", "greets", "claude-code", 1, 1);
    r.started_at = "2026-12-04T08:00:00.000Z".into();
    for (i, _) in turns.iter().enumerate() {
        r.phases.push(crate::record::PhaseRecord {
            phase: crate::phase::Phase::Turn,
            start_ms: 1000 * (i as u64 + 1),
            duration_ms: 500,
            detail: String::new(),
        });
    }
    r.turns = turns;
    r
}

fn turn(prompt: &str, usage: Usage, calls: Vec<RecordedCall>) -> Turn {
    Turn {
        prompt: prompt.into(),
        status: crate::turn::TurnStatus::Completed,
        final_message: Some("done".into()),
        model: Some("claude-sonnet-4-5".into()),
        usage,
        tool_calls: calls,
        file_edits: Vec::new(),
        error: None,
        duration_ms: 500,
        diff: Default::default(),
    }
}

#[test]
fn each_turn_is_a_user_step_and_an_agent_step_with_its_calls_and_usage() {
    let usage = Usage {
        input: Some(10),
        output: Some(23),
        cache_read: Some(100),
        cache_write: Some(5),
        ..Default::default()
    };
    let calls = vec![
        RecordedCall {
            name: "Write".into(),
            input: json!({"file_path": "a.txt"}),
            result: Some("ok".into()),
            error: None,
        },
        RecordedCall {
            name: "Bash".into(),
            input: json!("ls"),
            result: None,
            error: Some("denied".into()),
        },
    ];
    let r = record_with(vec![
        turn("write a.txt", usage, calls),
        turn("again", Usage::default(), vec![]),
    ]);
    let t = trajectory(&r, Some("2.1.332"), Some(&PriceTable::default())).unwrap();
    assert_eq!(t.schema_version, "ATIF-v1.7");
    assert_eq!(t.agent.version, "2.1.332");
    assert_eq!(t.agent.model_name.as_deref(), Some("claude-sonnet-4-5"));
    let ids: Vec<u32> = t.steps.iter().map(|s| s.step_id).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
    let sources: Vec<&str> = t.steps.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(sources, ["user", "agent", "user", "agent"]);
    assert_eq!(t.steps[0].message, "write a.txt");
    assert_eq!(t.steps[0].timestamp.as_deref(), Some("2026-12-04T08:00:01.000Z"));
    let agent = &t.steps[1];
    let calls = agent.tool_calls.as_ref().unwrap();
    assert_eq!(calls[0].tool_call_id, "call_1_1");
    assert_eq!(calls[1].arguments, json!({"input": "ls"}));
    let results = &agent.observation.as_ref().unwrap().results;
    assert_eq!(results[1].source_call_id, "call_1_2");
    assert_eq!(results[1].content.as_deref(), Some("denied"));
    assert_eq!(results[1].extra, Some(json!({"error": true})));
    let m = agent.metrics.as_ref().unwrap();
    assert_eq!(
        (m.prompt_tokens, m.completion_tokens, m.cached_tokens),
        (Some(115), Some(23), Some(100))
    );
    assert!(m.cost_usd.is_some_and(|c| c > 0.0), "claude-sonnet-4-5 has a list price");
    // A turn whose harness reported no usage has no metrics, not zeros.
    assert_eq!(t.steps[3].metrics, None);
    let f = t.final_metrics.unwrap();
    assert_eq!(
        (f.total_prompt_tokens, f.total_completion_tokens, f.total_steps),
        (Some(115), Some(23), 4)
    );
}

#[test]
fn an_attempt_without_turns_has_no_trajectory_and_partial_usage_is_said() {
    assert!(trajectory(&record_with(vec![]), None, None).is_none());
    let usage = Usage { output: Some(2), partial: true, ..Default::default() };
    let t = trajectory(&record_with(vec![turn("p", usage, vec![])]), None, None).unwrap();
    assert_eq!(t.agent.version, "unknown");
    assert_eq!(t.steps[1].extra.as_ref().unwrap()["partialUsage"], json!(true));
    assert_eq!(t.steps[1].metrics.as_ref().unwrap().prompt_tokens, None);
}
