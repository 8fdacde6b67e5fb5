//! Answers as the real agent CLIs read them: Anthropic Messages SSE (Claude
//! Code), OpenAI Responses events (Codex, over SSE or WebSocket) and OpenAI
//! Chat Completions (mini-swe-agent through litellm). Each answer carries the
//! usage the test expects the record to show.

use serde_json::{Value, json};

use super::Answer;

/// What one model request used, as the provider bills it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Billed {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the cache.
    pub cache_read: u64,
    /// Input tokens written to the cache (Anthropic).
    pub cache_write: u64,
    /// Reasoning tokens (OpenAI; part of `output`).
    pub reasoning: u64,
}

impl Billed {
    /// The sum of `all`.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Billed>) -> Billed {
        all.into_iter().fold(Billed::default(), |a, b| Billed {
            input: a.input + b.input,
            output: a.output + b.output,
            cache_read: a.cache_read + b.cache_read,
            cache_write: a.cache_write + b.cache_write,
            reasoning: a.reasoning + b.reasoning,
        })
    }
}

/// Anthropic Messages SSE.
pub mod anthropic {
    use super::*;

    /// The model the answers say served them.
    pub const MODEL: &str = "claude-sonnet-4-5-20250929";

    /// A streamed message with `blocks` (`text` or `tool_use` content blocks):
    /// `message_start` with the input usage (output 1), each block's start,
    /// delta and stop, `message_delta` with the output tokens, `message_stop`.
    pub fn message(id: &str, blocks: &[Value], billed: Billed) -> Answer {
        let tool = blocks.iter().any(|b| b["type"] == "tool_use");
        let mut events = vec![json!({"type": "message_start", "message": {
            "id": id, "type": "message", "role": "assistant", "model": MODEL, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": billed.input, "cache_creation_input_tokens": billed.cache_write,
                      "cache_read_input_tokens": billed.cache_read, "output_tokens": 1}}})];
        for (index, block) in blocks.iter().enumerate() {
            let (start, delta) = match block["type"].as_str() {
                Some("tool_use") => (
                    json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
                ),
                _ => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": block["text"]}),
                ),
            };
            events.push(
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            );
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
            events.push(json!({"type": "content_block_stop", "index": index}));
        }
        events.push(json!({"type": "message_delta",
            "delta": {"stop_reason": if tool { "tool_use" } else { "end_turn" }, "stop_sequence": null},
            "usage": {"output_tokens": billed.output}}));
        events.push(json!({"type": "message_stop"}));
        Answer::Sse(events)
    }

    /// The events of [`message`] up to its first block's end: what a model
    /// that hangs mid-answer has sent (for [`Answer::SseStall`] or [`Answer::SseCut`]).
    pub fn message_start(id: &str, blocks: &[Value], billed: Billed) -> Vec<Value> {
        let Answer::Sse(events) = message(id, blocks, billed) else { unreachable!() };
        events.into_iter().take(4).collect()
    }

    /// A `tool_use` block.
    pub fn tool_use(id: &str, name: &str, input: Value) -> Value {
        json!({"type": "tool_use", "id": id, "name": name, "input": input})
    }

    /// A `text` block.
    pub fn text(text: &str) -> Value {
        json!({"type": "text", "text": text})
    }
}

/// OpenAI Responses events.
pub mod responses {
    use super::*;

    /// A response whose output is `items`: `response.created`, each item's
    /// `response.output_item.done`, `response.completed` with the usage
    /// (`input_tokens` including the cached ones).
    pub fn response(id: &str, model: &str, items: &[Value], billed: Billed) -> Answer {
        let mut events = vec![json!({"type": "response.created", "response": {
            "id": id, "object": "response", "status": "in_progress", "model": model, "output": []}})];
        for (index, item) in items.iter().enumerate() {
            events.push(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        events.push(json!({"type": "response.completed", "response": {
            "id": id, "object": "response", "status": "completed", "model": model, "output": items,
            "usage": {"input_tokens": billed.input + billed.cache_read,
                      "input_tokens_details": {"cached_tokens": billed.cache_read},
                      "output_tokens": billed.output,
                      "output_tokens_details": {"reasoning_tokens": billed.reasoning},
                      "total_tokens": billed.input + billed.cache_read + billed.output}}}));
        Answer::Sse(events)
    }

    /// The events of [`response`] before its `response.completed`.
    pub fn response_start(id: &str, model: &str, items: &[Value]) -> Vec<Value> {
        let Answer::Sse(mut events) = response(id, model, items, Billed::default()) else {
            unreachable!()
        };
        events.pop();
        events
    }

    /// Codex's `apply_patch` (a freeform custom tool) adding `path` with `lines`.
    pub fn add_file(call_id: &str, path: &str, lines: &[&str]) -> Value {
        let body: String = lines.iter().map(|l| format!("+{l}\n")).collect();
        json!({"type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id,
               "name": "apply_patch", "status": "completed",
               "input": format!("*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n")})
    }

    /// Codex's `exec_command` function call.
    pub fn exec_command(call_id: &str, cmd: &str) -> Value {
        json!({"type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
               "name": "exec_command", "status": "completed",
               "arguments": json!({"cmd": cmd}).to_string()})
    }

    /// Code mode's `exec` custom tool (JavaScript).
    pub fn code_exec(call_id: &str, code: &str) -> Value {
        json!({"type": "custom_tool_call", "id": format!("ctc_{call_id}"), "call_id": call_id,
               "name": "exec", "status": "completed", "input": code})
    }

    /// An assistant message.
    pub fn message(text: &str) -> Value {
        json!({"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    }
}

/// OpenAI Chat Completions answers (non-streaming: litellm, under
/// mini-swe-agent, does not ask for a stream), with the usage as billed.
pub mod chat {
    use super::*;

    /// The model the answers say served them.
    pub const MODEL: &str = "gpt-4.1-2025-04-14";

    /// A `chat.completion` whose message says `text` and makes `calls`
    /// (`(id, function name, arguments)`); `prompt_tokens` includes the cached tokens.
    pub fn completion(
        id: &str,
        text: Option<&str>,
        calls: &[(&str, &str, Value)],
        billed: Billed,
    ) -> Answer {
        let mut message = json!({"role": "assistant", "content": text, "refusal": null});
        if !calls.is_empty() {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": args.to_string()}})
                })
                .collect();
            message["tool_calls"] = Value::from(calls);
        }
        let finish_reason = if calls.is_empty() { "stop" } else { "tool_calls" };
        Answer::ok(json!({
            "id": id,
            "object": "chat.completion",
            "created": 1767225600,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": billed.input + billed.cache_read,
                      "completion_tokens": billed.output,
                      "total_tokens": billed.input + billed.cache_read + billed.output,
                      "prompt_tokens_details": {"cached_tokens": billed.cache_read},
                      "completion_tokens_details": {"reasoning_tokens": billed.reasoning}}
        }))
    }

    /// An error in OpenAI's shape.
    pub fn error(status: u16, kind: &str, code: &str) -> Answer {
        Answer::Json {
            status,
            headers: Vec::new(),
            body: json!({"error": {"message": format!("scripted {status}"), "type": kind, "param": null, "code": code}}),
        }
    }
}
