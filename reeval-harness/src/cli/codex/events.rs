//! The Codex CLI's turn as reeval reads it: the `--json` event stream
//! (`Parser`) and, after the turn, its rollout file (`read_rollout`) for the
//! model and the reasoning tokens the stream does not carry.

use reeval_core::turn::{EditKind, Usage};
use serde_json::{Value, json};

use crate::cli::report::{count, string, text_of};
use crate::cli::{EventParser, SessionTotal, TurnBuilder};

/// Reads the last turn of a rollout file: its model, and its reasoning tokens
/// (the growth of the session's cumulative count over the turn).
pub(super) fn read_rollout(text: &str, turn: &mut TurnBuilder) {
    let mut model = None;
    let mut before_turn = 0u64;
    let mut last_total: Option<u64> = None;
    let mut in_turn: Option<u64> = None;
    for line in text.lines() {
        let Some(ev) = crate::cli::ndjson::parse_event(line) else { continue };
        let payload = ev.get("payload").unwrap_or(&Value::Null);
        match string(&ev, "type") {
            Some("turn_context") => {
                model = string(payload, "model").map(str::to_string).or(model);
                before_turn = last_total.unwrap_or(0);
                in_turn = None;
            }
            Some("event_msg") if string(payload, "type") == Some("token_count") => {
                let total = payload
                    .get("info")
                    .and_then(|i| i.get("total_token_usage"))
                    .and_then(|u| count(u, "reasoning_output_tokens"));
                if let Some(total) = total {
                    last_total = Some(total);
                    in_turn = Some(total);
                }
            }
            _ => {}
        }
    }
    if let Some(m) = model {
        turn.model = Some(m);
    }
    if let Some(total) = in_turn {
        turn.usage.reasoning = Some(total.saturating_sub(before_turn));
    }
}

/// Reads `ThreadEvent`s.
#[derive(Debug, Default)]
pub(super) struct Parser {
    last_message: Option<String>,
    /// An `error` event not followed by a completed turn.
    pending_error: Option<String>,
    /// Whether `turn.completed` (which carries the usage) arrived.
    completed: bool,
}

/// `turn.completed.usage` as reported: totals over the whole thread.
fn thread_usage(u: &Value) -> Usage {
    let cached = count(u, "cached_input_tokens");
    Usage {
        // input_tokens include the cached ones.
        input: count(u, "input_tokens").map(|i| i.saturating_sub(cached.unwrap_or(0))),
        output: count(u, "output_tokens"),
        cache_read: cached,
        cache_write: None,
        reasoning: count(u, "reasoning_output_tokens"),
        partial: false,
    }
}

/// What `now` adds to `before`, figure by figure.
fn growth(now: &Usage, before: &Usage) -> Usage {
    let minus = |a: Option<u64>, b: Option<u64>| a.map(|a| a.saturating_sub(b.unwrap_or(0)));
    Usage {
        input: minus(now.input, before.input),
        output: minus(now.output, before.output),
        cache_read: minus(now.cache_read, before.cache_read),
        cache_write: minus(now.cache_write, before.cache_write),
        reasoning: minus(now.reasoning, before.reasoning),
        partial: false,
    }
}

impl Parser {
    /// This turn's usage from the thread's totals: what they grew by since
    /// the previous turn of the same thread (a resumed turn's totals include
    /// every earlier turn).
    fn turn_usage(&mut self, u: &Value, turn: &mut TurnBuilder) {
        let total = thread_usage(u);
        let Some(thread) = turn.session_id.clone() else {
            turn.usage = total;
            return;
        };
        let before = turn.session_total.take().filter(|t| t.session == thread);
        turn.usage = match &before {
            Some(before) => growth(&total, &before.usage),
            None => total.clone(),
        };
        turn.session_total = Some(SessionTotal { session: thread, usage: total });
    }

    fn item(&mut self, item: &Value, completed: bool, turn: &mut TurnBuilder) {
        let id = string(item, "id").unwrap_or_default();
        let status = string(item, "status").unwrap_or_default();
        match string(item, "type") {
            Some("agent_message") if completed => {
                if let Some(t) = string(item, "text") {
                    self.last_message = Some(t.to_string());
                }
            }
            Some("command_execution") => {
                turn.tool_started(
                    Some(id),
                    "command_execution",
                    json!({ "command": item.get("command").cloned().unwrap_or(Value::Null) }),
                );
                if completed {
                    let output = string(item, "aggregated_output").unwrap_or_default().to_string();
                    let code = item.get("exit_code").and_then(Value::as_i64);
                    let error = match (status, code) {
                        ("failed" | "declined", _) | (_, Some(1..)) | (_, Some(..=-1)) => {
                            Some(format!(
                                "{} (exit code {})",
                                if status == "declined" { "declined" } else { "failed" },
                                code.map(|c| c.to_string()).unwrap_or_else(|| "none".into())
                            ))
                        }
                        _ => None,
                    };
                    turn.tool_finished(id, "command_execution", Some(output), error);
                }
            }
            Some("file_change") => {
                let changes = item.get("changes").cloned().unwrap_or(Value::Null);
                turn.tool_started(Some(id), "file_change", json!({ "changes": changes }));
                if completed {
                    let failed = status == "failed";
                    if !failed {
                        for c in changes.as_array().into_iter().flatten() {
                            let kind = match string(c, "kind") {
                                Some("add") => EditKind::Add,
                                Some("delete") => EditKind::Delete,
                                _ => EditKind::Update,
                            };
                            if let Some(path) = string(c, "path") {
                                turn.edit(path, kind);
                            }
                        }
                    }
                    turn.tool_finished(
                        id,
                        "file_change",
                        Some(status.to_string()),
                        failed.then(|| "patch failed".to_string()),
                    );
                }
            }
            Some("mcp_tool_call") => {
                let name = string(item, "tool").unwrap_or("mcp_tool_call").to_string();
                turn.tool_started(
                    Some(id),
                    &name,
                    item.get("arguments").cloned().unwrap_or(Value::Null),
                );
                if completed {
                    let result = item.get("result").map(|r| text_of(r.get("content").unwrap_or(r)));
                    let error = item.get("error").filter(|e| !e.is_null()).map(|e| {
                        string(e, "message").map(str::to_string).unwrap_or_else(|| text_of(e))
                    });
                    let error =
                        error.or_else(|| (status == "failed").then(|| "failed".to_string()));
                    turn.tool_finished(id, &name, result, error);
                }
            }
            // Non-fatal: the turn goes on (e.g. code mode could not start its helper).
            Some("error") if completed => {
                if let Some(m) = string(item, "message").filter(|m| !m.trim().is_empty()) {
                    turn.notices.push(m.to_string());
                }
            }
            Some("web_search") => {
                turn.tool_started(
                    Some(id),
                    "web_search",
                    json!({ "query": item.get("query").cloned().unwrap_or(Value::Null) }),
                );
                if completed {
                    turn.tool_finished(id, "web_search", None, None);
                }
            }
            _ => {}
        }
    }
}

impl EventParser for Parser {
    fn event(&mut self, ev: &Value, turn: &mut TurnBuilder) {
        match string(ev, "type") {
            Some("thread.started") => {
                if let Some(t) = string(ev, "thread_id") {
                    turn.session_id = Some(t.to_string());
                }
            }
            Some("item.started") | Some("item.updated") => {
                if let Some(item) = ev.get("item") {
                    self.item(item, false, turn);
                }
            }
            Some("item.completed") => {
                if let Some(item) = ev.get("item") {
                    self.item(item, true, turn);
                }
            }
            Some("turn.completed") => {
                self.pending_error = None;
                self.completed = true;
                if let Some(u) = ev.get("usage") {
                    self.turn_usage(u, turn);
                }
            }
            Some("turn.failed") => {
                let message = ev
                    .get("error")
                    .and_then(|e| string(e, "message"))
                    .unwrap_or("turn failed")
                    .to_string();
                turn.fail(message, None);
            }
            Some("error") => {
                if let Some(m) = string(ev, "message") {
                    self.pending_error = Some(m.to_string());
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, turn: &mut TurnBuilder) {
        // Usage comes only with `turn.completed`: without it the figure is what little there is.
        turn.usage.partial |= !self.completed;
        if let Some(m) = self.pending_error.take() {
            turn.fail(m, None);
        }
        if turn.final_message.is_none() {
            turn.final_message = self.last_message.take();
        }
    }
}
