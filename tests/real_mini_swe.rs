//! The real mini-swe-agent (2.4.6, litellm 1.110.2) under reeval, in a real
//! container, through reeval's real gateway, against a scripted model server
//! speaking OpenAI Chat Completions.
//!
//! `scripts/fetch-real-clis.sh` downloads the mini-swe-agent wheel and its
//! dependencies on the host (once per version) and installs them offline
//! into an image on the base image. The model server listens with TLS for
//! `api.openai.com` on loopback; the gateway reaches it through its test-only
//! `resolve` mapping and trusts the test CA, so litellm in the sandbox
//! reaches the "provider" by TLS interception, the key brokered on the way,
//! exactly as it would the real one.

mod common;
mod model_server;
mod real_cli;

use std::sync::atomic::{AtomicUsize, Ordering};

use model_server::streams::{Billed, chat};
use model_server::{Answer, Recorded};
use real_cli::{
    ANTHROPIC_KEY, OPENAI_KEY, Provider, anthropic_usage, images, openai_usage, run_one, sends,
    show, writes_then_runs_hello,
};
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record, TurnStatus, Usage};
use serde_json::{Value, json};

const HARNESS: &str = "mini-swe-agent:openai/gpt-4.1";
const SUBMIT: &str = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT";

fn mini_env() -> Environment {
    Environment::new().image(Image::from(images().mini_swe.as_str()))
}

const WRITE: Billed =
    Billed { input: 1210, output: 64, cache_read: 0, cache_write: 0, reasoning: 16 };
const WROTE: Billed =
    Billed { input: 95, output: 21, cache_read: 1200, cache_write: 0, reasoning: 5 };
const RUN: Billed =
    Billed { input: 330, output: 48, cache_read: 1024, cache_write: 0, reasoning: 9 };
const RAN: Billed =
    Billed { input: 77, output: 19, cache_read: 1350, cache_write: 0, reasoning: 3 };

const WRITE_CMD: &str = "printf \"print('hello')\\n\" > hello.py";
const RUN_CMD: &str = "python3 hello.py > out.txt";

/// The last message of a chat request.
fn last_message(body: &Value) -> &Value {
    body["messages"].as_array().and_then(|m| m.last()).unwrap_or(&Value::Null)
}

/// A model that writes hello.py, or runs it when the task says so, then
/// submits once the command's output came back.
fn mini_model(_: usize, req: &Recorded) -> Answer {
    let last = last_message(&req.body);
    match (last["role"].as_str(), last["tool_call_id"].as_str()) {
        (Some("tool"), Some("call_w")) => chat::completion(
            "chatcmpl-wrote",
            Some("Created hello.py."),
            &[("call_s1", "bash", json!({"command": SUBMIT}))],
            WROTE,
        ),
        (Some("tool"), _) => chat::completion(
            "chatcmpl-ran",
            Some("Ran it."),
            &[("call_s2", "bash", json!({"command": SUBMIT}))],
            RAN,
        ),
        _ if last["content"].to_string().contains("Run hello.py") => chat::completion(
            "chatcmpl-run",
            Some("Running it."),
            &[("call_r", "bash", json!({"command": RUN_CMD}))],
            RUN,
        ),
        _ => chat::completion(
            "chatcmpl-write",
            Some("Writing it."),
            &[("call_w", "bash", json!({"command": WRITE_CMD}))],
            WRITE,
        ),
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mini_swe_agent_writes_a_file_then_runs_it_with_each_turns_own_usage() {
    require_docker!();
    let provider = Provider::without_websocket(mini_model).await;
    let eval = writes_then_runs_hello("mini_real_two_turns", "OPENAI_API_KEY")
        .harness(HARNESS)
        .environment(mini_env);
    let (r, report) = run_one(&provider, "real-mini-turns", eval).await;
    common::atif::check_record(&report.run_dir, &r);
    assert_eq!(r.outcome, Outcome::Pass, "{}", show(&r));
    let (first, second) = (&r.turns[0], &r.turns[1]);
    assert_eq!(first.status, TurnStatus::Completed, "{}", show(&r));
    assert_eq!(first.model.as_deref(), Some(chat::MODEL), "{}", show(&r));
    assert_eq!(first.usage, openai_usage(Billed::sum(&[WRITE, WROTE])), "{}", show(&r));
    assert_eq!(second.usage, openai_usage(Billed::sum(&[RUN, RAN])), "{}", show(&r));
    let commands: Vec<(&str, &Value)> =
        first.tool_calls.iter().map(|c| (c.name.as_str(), &c.input["command"])).collect();
    assert_eq!(
        commands,
        vec![("bash", &json!(WRITE_CMD)), ("bash", &json!(SUBMIT))],
        "{}",
        show(&r)
    );
    assert!(first.tool_calls.iter().all(|c| c.error.is_none()), "{}", show(&r));
    assert_eq!(first.tool_calls[0].result.as_deref(), Some(""));
    assert!(first.diff.patch.contains("+print('hello')"), "{}", first.diff.patch);
    assert_eq!(first.diff.paths(), vec!["hello.py"]);
    assert_eq!(first.final_message.as_deref(), Some("Created hello.py."));
    assert_eq!(second.tool_calls[0].input["command"], RUN_CMD);
    assert_eq!(second.diff.paths(), vec!["out.txt"]);
    assert_eq!(second.final_message.as_deref(), Some("Ran it."));

    // The normal run's only egress is the model API, allowed; no key in the record.
    let refused: Vec<_> = r.egress.iter().filter(|e| !e.allowed).collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    assert!(r.egress.iter().all(|e| e.host == "api.openai.com"), "{:?}", r.egress);
    assert!(!r.egress.is_empty(), "the model API was reached through the gateway");
    assert!(!show(&r).contains(OPENAI_KEY), "a key in the record");

    let requests = provider.requests();
    assert_eq!(requests.len(), 4, "two requests per turn: {requests:?}");
    let bearer = format!("Bearer {OPENAI_KEY}");
    for req in &requests {
        assert_eq!(req.path, "/v1/chat/completions");
        assert_eq!(
            req.header("authorization"),
            Some(bearer.as_str()),
            "the upstream gets the real key"
        );
        assert_eq!(req.body["model"], "gpt-4.1");
    }
    // mini-swe-agent cannot resume: the second run starts anew, with the earlier task in its task.
    let resumed = requests[2].body["messages"].to_string();
    assert!(resumed.contains("Create hello.py") && resumed.contains("Run hello.py"), "{resumed}");
    assert!(!resumed.contains("call_w"), "a new conversation: {resumed}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mini_swe_agent_overload_is_infra_and_a_rejected_key_is_config_in_seconds() {
    require_docker!();
    let overloads = AtomicUsize::new(0);
    let provider = Provider::without_websocket(move |_, req| {
        if req.body["messages"].to_string().contains("OVERLOAD") {
            match overloads.fetch_add(1, Ordering::SeqCst) {
                0 => chat::error(429, "rate_limit_error", "rate_limit_exceeded"),
                _ => chat::error(529, "overloaded_error", "overloaded"),
            }
        } else {
            chat::error(401, "invalid_request_error", "invalid_api_key")
        }
    })
    .await;
    // The first run meets a 429, the second a 529: neither is retried inside the sandbox.
    for (n, tag) in ["real-mini-429", "real-mini-529"].into_iter().enumerate() {
        let eval =
            sends("mini_real_overload", "OVERLOAD please").harness(HARNESS).environment(mini_env);
        let (r, _) = run_one(&provider, tag, eval).await;
        assert_eq!(r.outcome, Outcome::InfraError, "{}", show(&r));
        assert_eq!(provider.requests().len(), n + 1, "one request per run: not retried");
        let after = ms_from_first_error_to_turn_end(&r);
        assert!(after < 30_000, "{after} ms after the error: {}", show(&r));
        eprintln!(
            "mini-swe-agent {tag}: turn {} ms, {after} ms after the error",
            r.turns[0].duration_ms
        );
    }
    let eval = sends("mini_real_401", "hello").harness(HARNESS).environment(mini_env);
    let (r, _) = run_one(&provider, "real-mini-401", eval).await;
    assert_eq!(r.outcome, Outcome::Config, "{}", show(&r));
    let after = ms_from_first_error_to_turn_end(&r);
    assert!(after < 30_000, "{after} ms after the error: {}", show(&r));
    let rejected = provider
        .requests()
        .iter()
        .filter(|q| !q.body["messages"].to_string().contains("OVERLOAD"))
        .count();
    assert_eq!(rejected, 1, "a rejected key is not retried");
    eprintln!("mini-swe-agent 401: turn {} ms, {after} ms after the error", r.turns[0].duration_ms);
}

/// From the first refused or failed model request to the end of the (only)
/// turn: the turn's time also holds Python importing litellm, seconds on a
/// loaded machine, before any request.
fn ms_from_first_error_to_turn_end(r: &Record) -> u64 {
    let error = r.egress.iter().find(|e| e.status >= 400).expect("an error from the provider");
    let record = serde_json::to_value(r).expect("a record as JSON");
    let turn = record["phases"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["phase"] == "turn"))
        .expect("a turn phase");
    let end = turn["startMs"].as_u64().unwrap_or(0) + turn["durationMs"].as_u64().unwrap_or(0);
    end.saturating_sub(error.at_ms)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mini_swe_agent_cut_short_keeps_the_saved_steps_usage_as_partial() {
    require_docker!();
    // The first step is answered; the model hangs on the second.
    let provider =
        Provider::without_websocket(|_, req| match last_message(&req.body)["role"].as_str() {
            Some("tool") => Answer::Hang(std::time::Duration::from_secs(300)),
            _ => mini_model(0, req),
        })
        .await;
    let eval = Eval::new("mini_real_hang", |c| {
        Box::pin(async move {
            // Long enough for Python to import litellm on a loaded machine.
            let options = TurnOptions {
                timeout: Some(std::time::Duration::from_secs(90)),
                ..Default::default()
            };
            let t = c.send_with("Create hello.py that prints hello.", options).await?;
            expect(t.status).to_equal(TurnStatus::TimedOut)?;
            Ok(())
        })
    })
    .harness(HARNESS)
    .environment(mini_env);
    let (r, _) = run_one(&provider, "real-mini-hang", eval).await;
    let t = &r.turns[0];
    assert_eq!(t.status, TurnStatus::TimedOut, "{}", show(&r));
    // The trajectory saved after the first step: its usage, said to be partial.
    assert_eq!(t.usage, Usage { partial: true, ..openai_usage(WRITE) }, "{}", show(&r));
    assert_eq!(t.tool_calls.len(), 1, "{}", show(&r));
    assert_eq!(t.diff.paths(), vec!["hello.py"]);
}

// ---------------------------------------------------------------- Anthropic

const CLAUDE_MODEL: &str = "claude-sonnet-4-5-20250929";
const CLAUDE_WRITE: Billed =
    Billed { input: 40, output: 23, cache_read: 0, cache_write: 1500, reasoning: 0 };
const CLAUDE_WROTE: Billed =
    Billed { input: 9, output: 11, cache_read: 1500, cache_write: 60, reasoning: 0 };

/// A non-streamed Anthropic Messages answer: a text block and one `bash` tool_use.
fn anthropic_message(id: &str, text: &str, call: (&str, &str), billed: Billed) -> Answer {
    Answer::ok(json!({
        "id": id, "type": "message", "role": "assistant", "model": CLAUDE_MODEL,
        "content": [{"type": "text", "text": text},
                    {"type": "tool_use", "id": call.0, "name": "bash", "input": {"command": call.1}}],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": billed.input, "output_tokens": billed.output,
                  "cache_creation_input_tokens": billed.cache_write,
                  "cache_read_input_tokens": billed.cache_read}
    }))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mini_swe_agent_on_anthropic_records_cache_writes_apart() {
    require_docker!();
    let provider = Provider::without_websocket(|_, req| {
        let last = &last_message(&req.body)["content"];
        let after_tool =
            last.as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"));
        if after_tool {
            anthropic_message("msg_wrote", "Created hello.py.", ("toolu_s", SUBMIT), CLAUDE_WROTE)
        } else {
            anthropic_message("msg_write", "Writing it.", ("toolu_w", WRITE_CMD), CLAUDE_WRITE)
        }
    })
    .await;
    let eval = Eval::new("mini_real_anthropic", |c| {
        Box::pin(async move {
            let env = c.exec("printenv ANTHROPIC_API_KEY").await?;
            expect(env.stdout.contains("placeholder")).to_equal(true)?;
            c.send("Create hello.py that prints hello.").await?;
            Ok(())
        })
    })
    .harness(format!("mini-swe-agent:anthropic/{CLAUDE_MODEL}"))
    .environment(mini_env);
    let (r, _) = run_one(&provider, "real-mini-anthropic", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{}", show(&r));
    let t = &r.turns[0];
    let b = Billed::sum(&[CLAUDE_WRITE, CLAUDE_WROTE]);
    assert_eq!(t.usage, anthropic_usage(b), "{}", show(&r));
    assert_eq!(t.model.as_deref(), Some(CLAUDE_MODEL), "{}", show(&r));
    assert_eq!(t.tool_calls[0].input["command"], WRITE_CMD, "{}", show(&r));
    assert!(t.diff.patch.contains("+print('hello')"), "{}", t.diff.patch);
    assert!(r.egress.iter().all(|e| e.allowed && e.host == "api.anthropic.com"), "{:?}", r.egress);
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for req in &requests {
        assert_eq!(req.path, "/v1/messages");
        assert_eq!(req.header("x-api-key"), Some(ANTHROPIC_KEY), "the upstream gets the real key");
    }
}
