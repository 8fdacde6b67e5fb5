//! The built-in `openai` agent against a loopback server speaking the chat
//! completions wire format (tool calls included), acting in a real sandbox.

mod common;
mod model_server;

use model_server::{ModelServer, openai};
use reeval::harnesses::openai::OpenAiAgent;
use reeval::prelude::*;
use reeval::settings::Settings;
use reeval::{EditKind, Eval, FailKind, Outcome, Record, RunConfig, Runner, TurnStatus, Usage};
use serde_json::json;

const KEY: &str = "sk-loopback-test-key-0123456789";

/// A runner whose `openai-loopback` harness is the built-in agent pointed at `server`.
fn runner(tag: &str, server: &ModelServer) -> Runner {
    let mut registry = reeval::harness_registry();
    let url = format!("{}/v1", server.url);
    registry.register("openai-loopback", move |model| {
        Box::new(
            OpenAiAgent::with_endpoint(model.unwrap_or("gpt-test"), url.clone(), Some(KEY.into()))
                .retries(0),
        )
    });
    Runner::new(
        RunConfig::from(Settings {
            record_dir: common::temp_dir(tag),
            infra_retries: 0,
            ..Settings::default()
        }),
        registry,
    )
}

async fn run_one(tag: &str, server: &ModelServer, eval: Eval) -> (Record, String) {
    let report = runner(tag, server)
        .run(vec![eval.harness("openai-loopback:gpt-test")])
        .await
        .expect("preflight passes");
    let r = report.records[0].clone();
    // Every attempt that sent a turn leaves a trajectory that Harbor's schema accepts.
    if !r.turns.is_empty() {
        common::atif::check_record(&report.run_dir, &r);
    }
    let text =
        std::fs::read_to_string(report.run_dir.join(r.file_name())).expect("the record file");
    (r, text)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn completes_a_multi_step_task_over_two_turns() {
    require_docker!();
    let server = ModelServer::scripted(vec![
        openai::tool_calls(&[(
            "write_file",
            json!({"path": "hello.py", "content": "print('hello from the agent')\n"}),
        )]),
        openai::tool_calls(&[(
            "bash",
            json!({"command": "python3 hello.py > out.txt && cat out.txt"}),
        )]),
        openai::text("I wrote hello.py and ran it into out.txt."),
        // The second turn continues the conversation.
        openai::tool_calls(&[
            ("list_files", json!({"path": "."})),
            ("read_file", json!({"path": "out.txt"})),
        ]),
        openai::text("hello.py and out.txt are there."),
    ])
    .await;
    let eval = Eval::new("openai_agent_task", |c| {
        Box::pin(async move {
            let first = c
                .send(
                    "Write hello.py that prints a greeting, run it and keep its output in out.txt.",
                )
                .await?;
            expect(first.final_message.clone().unwrap_or_default())
                .to_equal("I wrote hello.py and ran it into out.txt.".to_string())?;
            expect(c.read_file("out.txt").await?).to_contain("hello from the agent")?;
            let second = c.send("Which files are there now?").await?;
            expect(second.final_message.unwrap_or_default()).to_contain("out.txt")?;
            Ok(())
        })
    });
    let (r, text) = run_one("openai-agent", &server, eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);

    // The first turn: two tool calls with their results, the edit, the diff, usage and model.
    let t = &r.turns[0];
    assert_eq!(t.status, TurnStatus::Completed);
    assert_eq!(t.model.as_deref(), Some(openai::MODEL));
    let names: Vec<&str> = t.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["write_file", "bash"]);
    assert_eq!(t.tool_calls[0].input["path"], "hello.py");
    let ran = t.tool_calls[1].result.as_deref().unwrap();
    assert!(ran.starts_with("exit code 0") && ran.contains("hello from the agent"), "{ran}");
    assert_eq!(t.tool_calls[1].error, None);
    assert_eq!(t.file_edits.len(), 1);
    assert_eq!((t.file_edits[0].path.as_str(), t.file_edits[0].kind), ("hello.py", EditKind::Add));
    assert_eq!(t.diff.paths(), ["hello.py", "out.txt"]);
    assert!(t.diff.patch.contains("+print('hello from the agent')"), "{}", t.diff.patch);
    // Three responses of 812 prompt tokens (100 cached), 40 completion (7 reasoning).
    assert_eq!(
        t.usage,
        Usage {
            input: Some(712 * 3),
            output: Some(40 * 3),
            cache_read: Some(300),
            cache_write: None,
            reasoning: Some(21),
            partial: false,
        }
    );

    let t2 = &r.turns[1];
    assert_eq!(t2.tool_calls.len(), 2);
    assert!(
        t2.tool_calls[0].result.as_deref().unwrap().contains("./hello.py"),
        "{:?}",
        t2.tool_calls[0]
    );
    assert!(t2.tool_calls[1].result.as_deref().unwrap().contains("hello from the agent"));
    assert!(t2.diff.is_empty());
    assert_eq!(r.usage.input, Some(712 * 5));
    assert_eq!(r.final_diff.as_ref().unwrap().paths(), ["hello.py", "out.txt"]);
    assert!(!text.contains(KEY));

    // The wire: model, tools, key, and the conversation carried across turns.
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    let first = &requests[0];
    assert_eq!(first.path, "/v1/chat/completions");
    assert_eq!(first.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(first.body["model"], "gpt-test");
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["bash", "read_file", "write_file", "list_files"]);
    let messages = first.body["messages"].as_array().unwrap();
    assert_eq!(
        (messages[0]["role"].as_str(), messages[1]["role"].as_str()),
        (Some("system"), Some("user"))
    );
    assert!(messages[0]["content"].as_str().unwrap().contains("/workspace"));

    let after_bash = requests[2].body["messages"].as_array().unwrap();
    assert_eq!(after_bash.len(), 6, "system, user, then a call and its result twice");
    assert_eq!(after_bash[4]["tool_calls"][0]["function"]["name"], "bash");
    assert_eq!(after_bash[5]["role"], "tool");
    assert_eq!(after_bash[5]["tool_call_id"], "call_0");
    assert!(after_bash[5]["content"].as_str().unwrap().contains("hello from the agent"));

    let second_turn = requests[3].body["messages"].as_array().unwrap();
    assert_eq!(second_turn.len(), 8, "the first turn's 7 messages and the new prompt");
    assert_eq!(
        second_turn[6],
        json!({"role": "assistant", "content": "I wrote hello.py and ran it into out.txt."})
    );
    assert_eq!(second_turn[7], json!({"role": "user", "content": "Which files are there now?"}));
    // Two calls in one response: both results follow, in order.
    let last = requests[4].body["messages"].as_array().unwrap();
    assert_eq!(
        (last[9]["tool_call_id"].as_str(), last[10]["tool_call_id"].as_str()),
        (Some("call_0"), Some("call_1"))
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_rate_limit_is_infra_and_a_rejected_key_is_config() {
    require_docker!();
    let eval = || {
        Eval::new("openai_agent_error", |c| {
            Box::pin(async move { c.send("do something").await.map(|_| ()) })
        })
    };

    let limited = ModelServer::start(|_, _| {
        openai::error(429, "rate_limit_error", "rate_limit_exceeded", "Rate limit reached", &[])
    })
    .await;
    let (r, _) = run_one("openai-429", &limited, eval()).await;
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    assert!(
        r.message.as_deref().unwrap().contains("HTTP 429: Rate limit reached"),
        "{:?}",
        r.message
    );
    assert_eq!(r.turns[0].status, TurnStatus::Failed);

    let rejected = ModelServer::start(|_, _| {
        openai::error(
            401,
            "invalid_request_error",
            "invalid_api_key",
            &format!("Incorrect API key provided: {KEY}"),
            &[],
        )
    })
    .await;
    let (r, text) = run_one("openai-401", &rejected, eval()).await;
    assert_eq!(r.outcome, Outcome::Config, "{:?}", r.message);
    assert!(r.message.as_deref().unwrap().contains("OPENAI_API_KEY"), "{:?}", r.message);
    assert!(!text.contains(KEY));
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_turn_that_never_finishes_fails_at_the_step_limit() {
    require_docker!();
    let server =
        ModelServer::start(|_, _| openai::tool_calls(&[("bash", json!({"command": "true"}))]))
            .await;
    let mut registry = reeval::harness_registry();
    let url = format!("{}/v1", server.url);
    registry.register("openai-limited", move |_| {
        Box::new(OpenAiAgent::with_endpoint("gpt-test", url.clone(), None).max_steps(3))
    });
    let runner = Runner::new(
        RunConfig::from(Settings {
            record_dir: common::temp_dir("openai-steps"),
            infra_retries: 0,
            ..Settings::default()
        }),
        registry,
    );
    let eval = Eval::new("openai_agent_loops", |c| {
        Box::pin(async move { c.send("loop").await.map(|_| ()) })
    })
    .harness("openai-limited");
    let report = runner.run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Agent), "{:?}", r.message);
    assert!(r.message.as_deref().unwrap().contains("within 3 steps"));
    assert_eq!(r.turns[0].tool_calls.len(), 3);
    // No key was given: none is sent.
    assert_eq!(server.requests()[0].header("authorization"), None);
}
