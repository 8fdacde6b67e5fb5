//! The real Claude Code (2.1.332) and Codex (0.163.0) under reeval, in real
//! containers, through reeval's real gateway, against a scripted model server.
//!
//! The binaries come from their PyPI wheels (`scripts/fetch-real-clis.sh`
//! fetches them once per version and builds one image per CLI on the base
//! image). The model server listens with TLS for `api.anthropic.com` and
//! `api.openai.com` on loopback; the gateway reaches it through its test-only
//! `resolve` mapping and trusts the test CA, so the sandbox reaches the
//! "provider" exactly as it would the real one: Claude Code by its base URL,
//! Codex by interception, the key brokered on the way. Each test scripts the
//! model's side from what each request holds, and checks the record against
//! what the server billed.

mod common;
mod model_server;
mod real_cli;

use std::time::Instant;

use model_server::streams::{Billed, anthropic, responses};
use model_server::{Answer, Recorded};
use real_cli::{
    ANTHROPIC_KEY, OPENAI_KEY, Provider, anthropic_usage, images, openai_usage, run_one, sends,
    show, writes_then_runs_hello,
};
use reeval::prelude::*;
use reeval::{EditKind, Eval, Outcome, Record, TurnStatus};
use serde_json::{Value, json};

/// What every normal real-CLI run shows: no refused request, no key in the record.
fn egress_is_the_model_api_only(r: &Record, host: &str) {
    let refused: Vec<_> = r.egress.iter().filter(|e| !e.allowed).collect();
    assert!(refused.is_empty(), "refused: {refused:?}");
    assert!(r.egress.iter().all(|e| e.host == host), "{:?}", r.egress);
    assert!(!r.egress.is_empty(), "the model API was reached through the gateway");
    let text = show(r);
    assert!(!text.contains(ANTHROPIC_KEY) && !text.contains(OPENAI_KEY), "a key in the record");
}

// ---------------------------------------------------------------- Claude Code

/// The last user message's content of a Messages request.
fn last_user(body: &Value) -> &Value {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| &m["content"])
        .unwrap_or(&Value::Null)
}

fn has_tool_result(content: &Value) -> bool {
    content.as_array().is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
}

const CLAUDE_WRITE: Billed =
    Billed { input: 40, output: 23, cache_read: 0, cache_write: 1500, reasoning: 0 };
const CLAUDE_WROTE: Billed =
    Billed { input: 9, output: 11, cache_read: 1500, cache_write: 60, reasoning: 0 };
const CLAUDE_RUN: Billed =
    Billed { input: 7, output: 31, cache_read: 1560, cache_write: 80, reasoning: 0 };
const CLAUDE_RAN: Billed =
    Billed { input: 5, output: 13, cache_read: 1640, cache_write: 40, reasoning: 0 };

/// A model that writes hello.py on "create", runs it on "run", and says it is done after a tool result.
fn claude_model(_: usize, req: &Recorded) -> Answer {
    let content = last_user(&req.body);
    let prompt = content.to_string();
    if has_tool_result(content) {
        if prompt.contains("hello.py") && !prompt.contains("out.txt") {
            anthropic::message("msg_wrote", &[anthropic::text("Created hello.py.")], CLAUDE_WROTE)
        } else {
            anthropic::message("msg_ran", &[anthropic::text("Ran it.")], CLAUDE_RAN)
        }
    } else if prompt.contains("Run hello.py") {
        let run = json!({"command": "python3 hello.py > out.txt", "description": "Run hello.py"});
        anthropic::message("msg_run", &[anthropic::tool_use("toolu_run", "Bash", run)], CLAUDE_RUN)
    } else {
        let write = json!({"file_path": "/workspace/hello.py", "content": "print('hello')\n"});
        anthropic::message(
            "msg_write",
            &[anthropic::text("Writing it."), anthropic::tool_use("toolu_w", "Write", write)],
            CLAUDE_WRITE,
        )
    }
}

fn claude_env() -> Environment {
    Environment::new().image(Image::from(images().claude.as_str()))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_writes_a_file_then_resumes_with_each_turns_own_usage() {
    require_docker!();
    let provider = Provider::start(claude_model).await;
    let eval = writes_then_runs_hello("claude_real_two_turns", "ANTHROPIC_API_KEY")
        .harness("claude-code:sonnet")
        .environment(claude_env);
    let (r, report) = run_one(&provider, "real-claude-turns", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{}", show(&r));
    let atif = common::atif::check_record(&report.run_dir, &r);
    assert_eq!(atif["agent"]["name"], "claude-code");
    let (first, second) = (&r.turns[0], &r.turns[1]);
    assert_eq!(first.status, TurnStatus::Completed);
    assert_eq!(first.model.as_deref(), Some(anthropic::MODEL), "{}", show(&r));
    assert_eq!(
        first.usage,
        anthropic_usage(Billed::sum(&[CLAUDE_WRITE, CLAUDE_WROTE])),
        "{}",
        show(&r)
    );
    assert_eq!(
        second.usage,
        anthropic_usage(Billed::sum(&[CLAUDE_RUN, CLAUDE_RAN])),
        "{}",
        show(&r)
    );
    assert_eq!(first.tool_calls.len(), 1, "{}", show(&r));
    assert_eq!(first.tool_calls[0].name, "Write");
    assert!(first.tool_calls[0].error.is_none(), "{}", show(&r));
    assert_eq!(
        first.file_edits,
        vec![reeval::FileEdit { path: "hello.py".into(), kind: EditKind::Add }]
    );
    assert!(first.diff.patch.contains("+print('hello')"), "{}", first.diff.patch);
    assert_eq!(first.final_message.as_deref(), Some("Created hello.py."));
    assert_eq!(second.tool_calls[0].name, "Bash");
    assert_eq!(second.diff.paths(), vec!["out.txt"]);
    egress_is_the_model_api_only(&r, "api.anthropic.com");

    let requests = provider.model_requests();
    assert_eq!(requests.len(), 4, "two requests per turn: {requests:?}");
    for req in &requests {
        assert_eq!(req.header("x-api-key"), Some(ANTHROPIC_KEY), "the upstream gets the real key");
    }
    // The resumed turn's first request carries the first turn's conversation.
    let resumed = requests[2].body["messages"].to_string();
    assert!(resumed.contains("Create hello.py") && resumed.contains("toolu_w"), "{resumed}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_overload_is_infra_and_a_rejected_key_is_config_in_seconds() {
    require_docker!();
    let provider = Provider::start(|n, req| {
        let overloaded = req.body.to_string().contains("OVERLOAD");
        match (overloaded, n) {
            (true, 0) => anthropic_error(429, "rate_limit_error"),
            (true, _) => anthropic_error(529, "overloaded_error"),
            (false, _) => anthropic_error(401, "authentication_error"),
        }
    })
    .await;
    let started = Instant::now();
    let (r, _) = run_one(
        &provider,
        "real-claude-overload",
        sends("claude_real_overload", "OVERLOAD please")
            .harness("claude-code:sonnet")
            .environment(claude_env),
    )
    .await;
    assert_eq!(r.outcome, Outcome::InfraError, "{}", show(&r));
    assert!(r.turns[0].duration_ms < 30_000, "{} ms", r.turns[0].duration_ms);
    assert_ne!(r.turns[0].model.as_deref(), Some("<synthetic>"));
    let (r, _) = run_one(
        &provider,
        "real-claude-401",
        sends("claude_real_401", "hello").harness("claude-code:sonnet").environment(claude_env),
    )
    .await;
    assert_eq!(r.outcome, Outcome::Config, "{}", show(&r));
    assert!(r.turns[0].duration_ms < 30_000, "{} ms", r.turns[0].duration_ms);
    let rejected = provider
        .model_requests()
        .iter()
        .filter(|q| !q.body.to_string().contains("OVERLOAD"))
        .count();
    assert_eq!(rejected, 1, "a rejected key is not retried");
    eprintln!("claude-code errors: both runs in {:.1}s", started.elapsed().as_secs_f64());
}

fn anthropic_error(status: u16, kind: &str) -> Answer {
    Answer::Json {
        status,
        headers: Vec::new(),
        body: json!({"type": "error", "error": {"type": kind, "message": format!("scripted {status}")}}),
    }
}

/// The README's first eval, verbatim: `build.rs` copies its code block out of
/// README.md, so this is the eval a reader copies, not a look-alike.
#[allow(dead_code, reason = "its `reeval::main!()` is the README's; the test runs the eval itself")]
mod readme_first_eval {
    include!(concat!(env!("OUT_DIR"), "/readme_first_eval.rs"));
}

/// The model for the README's first eval: reads app.py, adds `sub` with an
/// edit, writes the test, then says it is done; each step follows the
/// tool result of the one before (any trial, any order of requests).
fn readme_model(_: usize, req: &Recorded) -> Answer {
    let content = last_user(&req.body);
    let answered = content
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["tool_use_id"].as_str())
        .next_back()
        .unwrap_or("");
    let (id, block) = match answered {
        "" => (
            "msg_read",
            anthropic::tool_use("toolu_read", "Read", json!({"file_path": "/workspace/app.py"})),
        ),
        "toolu_read" => (
            "msg_edit",
            anthropic::tool_use(
                "toolu_edit",
                "Edit",
                json!({
                    "file_path": "/workspace/app.py",
                    "old_string": "    return a + b\n",
                    "new_string": "    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
                }),
            ),
        ),
        "toolu_edit" => (
            "msg_test",
            anthropic::tool_use(
                "toolu_test",
                "Write",
                json!({
                    "file_path": "/workspace/test_app.py",
                    "content": "from app import add, sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n    assert add(sub(1, 1), 2) == 2\n",
                }),
            ),
        ),
        _ => {
            return anthropic::message(
                "msg_done",
                &[anthropic::text("Added sub and its test.")],
                CLAUDE_RAN,
            );
        }
    };
    anthropic::message(id, &[block], CLAUDE_RUN)
}

/// The harness's own image for `claude-code`, as a machine with npm would
/// build it: here the same pinned CLI from its PyPI wheel (`images().claude`),
/// tagged as reeval names the harness's install image, so the README's eval
/// (which names no image) runs the real Claude Code unchanged.
async fn provide_the_claude_code_harness_image() -> String {
    let harness = reeval::harness_registry().make("claude-code:sonnet").expect("claude-code");
    let spec = harness.image().expect("the harness has its own image");
    let reeval::ImageSpec::Install { base, .. } = &spec else { panic!("{spec:?}") };
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    let base_id = docker.inspect_image(base).await.unwrap().id.unwrap();
    let full = spec.install_tag(&base_id, harness.image_key()).unwrap();
    let (repo, tag) = full.split_once(':').unwrap();
    let options =
        bollard::query_parameters::TagImageOptionsBuilder::default().repo(repo).tag(tag).build();
    docker.tag_image(&images().claude, Some(options)).await.expect("tag the harness image");
    full
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_first_eval_passes_unchanged_with_the_real_claude_code() {
    require_docker!();
    let harness_image = provide_the_claude_code_harness_image().await;
    let provider = Provider::start(readme_model).await;
    let evals = reeval::__private::registered_evals();
    let names: Vec<&str> = evals.iter().map(|e| e.name()).collect();
    assert_eq!(names, ["readme_first_eval::adds_a_tested_sub_function"], "the README's eval");
    let report = provider.runner("readme-first-eval").run(evals).await.expect("preflight passes");
    // Its own trials (3) and harness, each a pass.
    assert_eq!(report.records.len(), 3, "three trials, no retries");
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}", show(r));
        assert_eq!(r.harness, "claude-code:sonnet");
        // The eval names no image: the harness's own ran it.
        assert_eq!(r.image.as_deref(), Some(harness_image.as_str()));
        let calls: Vec<&str> = r.turns[0].tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(calls, ["Read", "Edit", "Write"], "{}", show(r));
        assert_eq!(
            r.final_diff.as_ref().unwrap().paths(),
            ["app.py", "test_app.py"],
            "{}",
            show(r)
        );
        egress_is_the_model_api_only(r, "api.anthropic.com");
    }
    assert_eq!(report.exit_code(), 0);
    assert_eq!(provider.model_requests().len(), 12, "four requests per trial");
}

// ---------------------------------------------------------------- Codex

/// The model Codex is run with in most tests: the catalog's model without code mode.
const CODEX_MODEL: &str = "gpt-5.5";

const CODEX_WRITE: Billed =
    Billed { input: 416, output: 100, cache_read: 800, cache_write: 0, reasoning: 20 };
const CODEX_WROTE: Billed =
    Billed { input: 211, output: 50, cache_read: 400, cache_write: 0, reasoning: 12 };
const CODEX_RUN: Billed =
    Billed { input: 120, output: 40, cache_read: 1200, cache_write: 0, reasoning: 8 };
const CODEX_RAN: Billed =
    Billed { input: 60, output: 15, cache_read: 1300, cache_write: 0, reasoning: 4 };

/// The last input item of a Responses request.
fn last_input(body: &Value) -> &Value {
    body["input"].as_array().and_then(|i| i.last()).unwrap_or(&Value::Null)
}

/// The text of the last user message in a Responses request.
fn last_user_text(body: &Value) -> String {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .rfind(|i| i["role"] == "user")
        .map(|i| i["content"].to_string())
        .unwrap_or_default()
}

/// Codex over its WebSocket first sends a warm-up (`generate: false`), then
/// each request holds only what is new since `previous_response_id`: the
/// answer follows the user's latest words, or the tool call whose output came back.
fn codex_model(_: usize, req: &Recorded) -> Answer {
    if req.body["generate"] == false {
        return responses::response("resp_warm", CODEX_MODEL, &[], Billed::default());
    }
    let last = last_input(&req.body);
    let (id, items, billed) = match (last["call_id"].as_str(), last_user_text(&req.body)) {
        (Some("call_w"), _) => {
            ("resp_wrote", vec![responses::message("Created hello.py.")], CODEX_WROTE)
        }
        (Some(_), _) => ("resp_ran", vec![responses::message("Ran it.")], CODEX_RAN),
        (None, prompt) if prompt.contains("Run hello.py") => (
            "resp_run",
            vec![responses::exec_command("call_r", "python3 hello.py > out.txt")],
            CODEX_RUN,
        ),
        (None, _) => (
            "resp_write",
            vec![responses::add_file("call_w", "hello.py", &["print('hello')"])],
            CODEX_WRITE,
        ),
    };
    responses::response(id, CODEX_MODEL, &items, billed)
}

fn codex_env() -> Environment {
    Environment::new().image(Image::from(images().codex.as_str()))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_writes_a_file_then_resumes_with_each_turns_own_usage() {
    require_docker!();
    let provider = Provider::start(codex_model).await;
    let eval = writes_then_runs_hello("codex_real_two_turns", "OPENAI_API_KEY")
        .harness(format!("codex:{CODEX_MODEL}"))
        .environment(codex_env);
    let (r, report) = run_one(&provider, "real-codex-turns", eval).await;
    common::atif::check_record(&report.run_dir, &r);
    assert_eq!(r.outcome, Outcome::Pass, "{}", show(&r));
    let (first, second) = (&r.turns[0], &r.turns[1]);
    let own = |parts: &[Billed]| openai_usage(Billed::sum(parts));
    assert_eq!(first.model.as_deref(), Some(CODEX_MODEL), "{}", show(&r));
    assert_eq!(first.usage, own(&[CODEX_WRITE, CODEX_WROTE]), "{}", show(&r));
    // Codex reports the thread's totals: the resumed turn is recorded with its own share.
    assert_eq!(second.usage, own(&[CODEX_RUN, CODEX_RAN]), "{}", show(&r));
    assert_eq!(first.tool_calls.len(), 1, "{}", show(&r));
    assert_eq!(first.tool_calls[0].name, "file_change");
    assert_eq!(
        first.file_edits,
        vec![reeval::FileEdit { path: "hello.py".into(), kind: EditKind::Add }]
    );
    assert!(first.diff.patch.contains("+print('hello')"), "{}", first.diff.patch);
    assert_eq!(first.final_message.as_deref(), Some("Created hello.py."));
    assert_eq!(second.tool_calls[0].name, "command_execution");
    assert_eq!(second.diff.paths(), vec!["out.txt"]);
    egress_is_the_model_api_only(&r, "api.openai.com");

    // Over the WebSocket: a warm-up, then two requests per turn.
    let requests: Vec<Recorded> =
        provider.model_requests().into_iter().filter(|q| q.body["generate"] != false).collect();
    assert_eq!(requests.len(), 4, "two requests per turn: {requests:?}");
    assert!(requests.iter().all(|q| q.method == "WS"), "Codex's first transport: {requests:?}");
    for req in &provider.model_requests() {
        let bearer = format!("Bearer {OPENAI_KEY}");
        assert_eq!(
            req.header("authorization"),
            Some(bearer.as_str()),
            "the upstream gets the real key"
        );
    }
    // A new process resumes: its first request carries the first turn's conversation.
    let resumed = requests[2].body["input"].to_string();
    assert!(resumed.contains("Created hello.py."), "the resumed turn carries the first: {resumed}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_overload_is_infra_and_a_rejected_key_is_config_in_seconds() {
    require_docker!();
    // Errors over HTTP (a WebSocket upgrade gets a 404): Codex falls back to POSTs.
    let overloads = std::sync::atomic::AtomicUsize::new(0);
    let provider = Provider::without_websocket(move |_, _| {
        let first = overloads.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
        openai_error(if first { 429 } else { 529 })
    })
    .await;
    let (r, _) = run_one(
        &provider,
        "real-codex-overload",
        sends("codex_real_overload", "OVERLOAD please")
            .harness(format!("codex:{CODEX_MODEL}"))
            .environment(codex_env),
    )
    .await;
    assert_eq!(r.outcome, Outcome::InfraError, "{}", show(&r));
    assert!(r.turns[0].duration_ms < 30_000, "{} ms", r.turns[0].duration_ms);

    // A rejected key as OpenAI's API rejects one: 401 at the WebSocket upgrade and on HTTP.
    let provider = Provider::refusing_upgrades(401, |_, _| openai_error(401)).await;
    let (r, _) = run_one(
        &provider,
        "real-codex-401",
        sends("codex_real_401", "hello")
            .harness(format!("codex:{CODEX_MODEL}"))
            .environment(codex_env),
    )
    .await;
    assert_eq!(r.outcome, Outcome::Config, "{}", show(&r));
    // Codex retries no failed stream (its provider's retries are 0): the
    // classification follows the first 401 within seconds, not Codex's 14 s of backoff.
    let first_401 = r.egress.iter().filter(|e| e.status == 401).map(|e| e.at_ms).min();
    let first_401 = first_401.unwrap_or_else(|| panic!("no 401 reached the sandbox: {}", show(&r)));
    let turn = r.phases.iter().find(|p| p.phase == reeval::Phase::Turn).expect("a turn phase");
    let classified = turn.start_ms + turn.duration_ms;
    let statuses: Vec<u16> = r.egress.iter().map(|e| e.status).collect();
    eprintln!(
        "codex 401: classified {} ms after the first 401 (turn {} ms), upstream statuses {statuses:?}",
        classified.saturating_sub(first_401),
        r.turns[0].duration_ms
    );
    assert!(
        classified.saturating_sub(first_401) <= 5_000,
        "the turn ended {} ms after the first 401: {statuses:?}",
        classified.saturating_sub(first_401)
    );
    assert!(statuses.iter().filter(|s| **s == 401).count() <= 3, "retried: {statuses:?}");
}

/// An OpenAI API error with `status`.
fn openai_error(status: u16) -> Answer {
    Answer::Json {
        status,
        headers: Vec::new(),
        body: json!({"error": {"message": format!("scripted {status}"), "type": "x", "param": null, "code": null}}),
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_without_its_code_mode_helper_records_the_clis_notice() {
    require_docker!();
    // The default model runs in code mode: its one tool is `exec` (JavaScript).
    let provider = Provider::start(|_, req| {
        let last = last_input(&req.body);
        if last["type"] == "custom_tool_call_output" {
            responses::response(
                "resp_2",
                "gpt-6.1-sol",
                &[responses::message("Done.")],
                Billed::default(),
            )
        } else {
            let code = "await tools.exec_command({cmd: 'echo hi > hi.txt'});";
            responses::response(
                "resp_1",
                "gpt-6.1-sol",
                &[responses::code_exec("call_x", code)],
                Billed::default(),
            )
        }
    })
    .await;
    let eval = Eval::new("codex_real_no_code_mode", |c| {
        Box::pin(async move {
            c.send("Write hi.txt.").await?;
            Ok(())
        })
    })
    .harness("codex")
    .environment(|| codex_env().setup("rm /usr/local/bin/codex-code-mode-host"));
    let (r, _) = run_one(&provider, "real-codex-no-code-mode", eval).await;
    let t = &r.turns[0];
    assert_eq!(t.status, TurnStatus::Completed, "{}", show(&r));
    assert!(t.diff.paths().is_empty(), "{}", show(&r));
    let notice = t.error.as_deref().unwrap_or_default();
    assert!(notice.contains("codex-code-mode-host"), "the record says why: {}", show(&r));
}

// ---------------------------------------------------------------- cut short

const HUNG: Billed = Billed { input: 33, output: 0, cache_read: 0, cache_write: 700, reasoning: 0 };

/// A turn limit of `secs`, and the turn it cut short.
async fn cut_short(c: &mut reeval::Ctx, prompt: &str, secs: u64) -> reeval::Result<reeval::Turn> {
    c.send_with(
        prompt,
        TurnOptions { timeout: Some(std::time::Duration::from_secs(secs)), ..Default::default() },
    )
    .await
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_cut_short_keeps_partial_usage_and_a_cut_stream_is_infra() {
    require_docker!();
    let provider = Provider::start(|_, req| {
        let prompt = req.body["messages"].to_string();
        let started =
            anthropic::message_start("msg_h", &[anthropic::text("Working on it...")], HUNG);
        if prompt.contains("HANG") { Answer::SseStall(started) } else { Answer::SseCut(started) }
    })
    .await;
    let hang = Eval::new("claude_real_hang", |c| {
        Box::pin(async move {
            let t = cut_short(c, "HANG here", 8).await?;
            expect(t.status).to_equal(TurnStatus::TimedOut)?;
            Ok(())
        })
    })
    .harness("claude-code:sonnet")
    .environment(claude_env);
    let (r, _) = run_one(&provider, "real-claude-hang", hang).await;
    let t = &r.turns[0];
    assert_eq!(t.status, TurnStatus::TimedOut, "{}", show(&r));
    // Killed before `result`: the message_start snapshot, said to be partial.
    assert!(t.usage.partial, "{}", show(&r));
    assert_eq!((t.usage.input, t.usage.cache_write), (Some(HUNG.input), Some(HUNG.cache_write)));

    let (r, _) = run_one(
        &provider,
        "real-claude-cut",
        sends("claude_real_cut", "CUT here").harness("claude-code:sonnet").environment(claude_env),
    )
    .await;
    assert_eq!(
        r.outcome,
        Outcome::InfraError,
        "a stream cut mid-way is the platform's: {}",
        show(&r)
    );
    assert!(r.turns[0].duration_ms < 30_000, "{} ms", r.turns[0].duration_ms);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_cut_short_keeps_partial_usage() {
    require_docker!();
    let provider = Provider::start(|_, req| {
        if req.body["generate"] == false {
            return responses::response("resp_warm", CODEX_MODEL, &[], Billed::default());
        }
        let started = responses::response_start(
            "resp_h",
            CODEX_MODEL,
            &[responses::message("Working on it...")],
        );
        Answer::SseStall(started)
    })
    .await;
    let hang = Eval::new("codex_real_hang", |c| {
        Box::pin(async move {
            let t = cut_short(c, "HANG here", 8).await?;
            expect(t.status).to_equal(TurnStatus::TimedOut)?;
            Ok(())
        })
    })
    .harness(format!("codex:{CODEX_MODEL}"))
    .environment(codex_env);
    let (r, _) = run_one(&provider, "real-codex-hang", hang).await;
    let t = &r.turns[0];
    assert_eq!(t.status, TurnStatus::TimedOut, "{}", show(&r));
    // Codex reports usage only with turn.completed: none came, and the record says so.
    assert!(t.usage.partial, "{}", show(&r));
}
