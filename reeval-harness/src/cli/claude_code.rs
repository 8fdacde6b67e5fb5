//! Claude Code: `claude --print --output-format stream-json --verbose
//! --permission-mode bypassPermissions`, the task on stdin, later turns with
//! `--resume <session_id>`. Config home: `CLAUDE_CONFIG_DIR`; skills in its
//! `skills/`, MCP servers in its `.claude.json` (user scope: no trust dialog).
//! Rules: `CLAUDE.md`.

use std::collections::BTreeMap;

use reeval_core::Command;
use reeval_core::harness::SessionSetup;
use reeval_core::turn::{EditKind, Usage};
use serde_json::{Value, json};

use super::report::{count, status_of, string, text_of};
use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};
use reeval_core::egress::HarnessEgress;

/// The pinned npm release of Claude Code (the one the real-CLI tests run,
/// from the `claude-agent-sdk` 0.2.189 wheel).
pub const VERSION: &str = "2.1.332";

/// How often Claude Code retries a failed API request itself: never. A 429,
/// 529 or 401 reaches reeval's classification in seconds (Claude Code's own
/// ten retries took about 3 minutes, and it retries a rejected key too);
/// reeval's retry policy decides what is tried again.
pub const MAX_RETRIES: &str = "0";

/// Claude Code's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeCode;

/// The Claude Code harness.
pub type ClaudeCodeHarness = CliHarness<ClaudeCode>;

/// A Claude Code harness for `model` (`sonnet`, `opus`, a full model id).
pub fn harness(model: Option<&str>) -> ClaudeCodeHarness {
    CliHarness::new(ClaudeCode, model)
}

impl CliAgent for ClaudeCode {
    const IDENTITY: CliIdentity = CliIdentity {
        name: "claude-code",
        program: "claude",
        version: Some(VERSION),
        rules_file: "CLAUDE.md",
    };

    fn install_steps(&self) -> Vec<String> {
        super::npm_install_steps("@anthropic-ai/claude-code", VERSION)
    }

    fn credentials(&self, _model: Option<&str>) -> Vec<String> {
        vec!["ANTHROPIC_API_KEY".into()]
    }

    fn egress(&self, _model: Option<&str>) -> HarnessEgress {
        // Claude Code takes a base URL: the plain route inside the sandbox.
        super::egress_of(vec![super::anthropic(Some("ANTHROPIC_BASE_URL"))], &[])
    }

    fn env(&self, home: &str, _sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        vec![
            ("CLAUDE_CONFIG_DIR".into(), home.into()),
            // Tells Claude Code it is in a sandbox, so bypassPermissions is allowed (also as root).
            ("IS_SANDBOX".into(), "1".into()),
            // Only the model API: no bootstrap, telemetry or update calls past the allowlist.
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(), "1".into()),
            ("DISABLE_AUTOUPDATER".into(), "1".into()),
            // Claude Code retries 429, 529 and 401 ten times (about 3 minutes)
            // by default; reeval's retry policy decides instead.
            ("CLAUDE_CODE_MAX_RETRIES".into(), MAX_RETRIES.into()),
        ]
    }

    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        let config = json!({ "hasCompletedOnboarding": true, "mcpServers": super::mcp_servers(&setup.mcp, true, "url") });
        let mut files = vec![super::config::json_file(format!("{home}/.claude.json"), &config)];
        files.extend(super::skill_files(&self.skills_dir(home).unwrap_or_default(), &setup.skills));
        Ok(files)
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        let mut cmd = Command::new(inv.program).args([
            "--print",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "bypassPermissions",
        ]);
        if let Some(model) = inv.model {
            cmd = cmd.arg("--model").arg(model);
        }
        if let Some(session) = inv.resume {
            cmd = cmd.arg("--resume").arg(session);
        }
        cmd.stdin(inv.prompt.as_bytes().to_vec())
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::<Parser>::default()
    }
}

/// Reads `stream-json`. The turn's usage is the final `result` event's
/// (per invocation, so a resumed turn's is its own): each `assistant` event
/// is one content block carrying its message's `message_start` snapshot, whose
/// `output_tokens` is a token or two. Only a turn cut short before `result`
/// falls back to the last snapshot per message id, marked partial.
#[derive(Debug, Default)]
struct Parser {
    usage_by_message: BTreeMap<String, Usage>,
    result_usage: Option<Usage>,
    last_text: Option<String>,
}

/// The model name Claude Code reports on an API error, for a message no model wrote.
const SYNTHETIC_MODEL: &str = "<synthetic>";

/// `name` as the turn's model, unless it is no real model.
fn set_model(turn: &mut TurnBuilder, name: Option<&str>) {
    if let Some(m) = name.filter(|m| !m.is_empty() && *m != SYNTHETIC_MODEL) {
        turn.model = Some(m.to_string());
    }
}

fn usage_of(u: &Value) -> Usage {
    Usage {
        input: count(u, "input_tokens"),
        output: count(u, "output_tokens"),
        cache_read: count(u, "cache_read_input_tokens"),
        cache_write: count(u, "cache_creation_input_tokens"),
        reasoning: None,
        partial: false,
    }
}

impl EventParser for Parser {
    fn event(&mut self, ev: &Value, turn: &mut TurnBuilder) {
        if let Some(id) = string(ev, "session_id") {
            turn.session_id = Some(id.to_string());
        }
        match string(ev, "type") {
            Some("system") if string(ev, "subtype") == Some("init") => {
                set_model(turn, string(ev, "model"));
            }
            Some("assistant") => {
                let Some(msg) = ev.get("message") else { return };
                set_model(turn, string(msg, "model"));
                if let (Some(id), Some(u)) = (string(msg, "id"), msg.get("usage")) {
                    self.usage_by_message.insert(id.to_string(), usage_of(u));
                }
                for block in msg.get("content").and_then(Value::as_array).into_iter().flatten() {
                    match string(block, "type") {
                        Some("text") => {
                            if let Some(t) = string(block, "text").filter(|t| !t.trim().is_empty())
                            {
                                self.last_text = Some(t.to_string());
                            }
                        }
                        Some("tool_use") => {
                            let id = string(block, "id").unwrap_or_default();
                            let name = string(block, "name").unwrap_or("tool");
                            let input = block.get("input").cloned().unwrap_or(Value::Null);
                            let path = string(&input, "file_path")
                                .or_else(|| string(&input, "notebook_path"))
                                .map(str::to_string);
                            turn.tool_started(Some(id), name, input);
                            let kind = match name {
                                "Write" => Some(EditKind::Add),
                                "Edit" | "MultiEdit" | "NotebookEdit" => Some(EditKind::Update),
                                _ => None,
                            };
                            if let (Some(kind), Some(path)) = (kind, path) {
                                turn.edit_on_success(id, &path, kind);
                            }
                        }
                        _ => {}
                    }
                }
            }
            Some("user") => {
                let blocks =
                    ev.get("message").and_then(|m| m.get("content")).and_then(Value::as_array);
                for block in blocks
                    .into_iter()
                    .flatten()
                    .filter(|b| string(b, "type") == Some("tool_result"))
                {
                    let id = string(block, "tool_use_id").unwrap_or_default();
                    let text = text_of(block.get("content").unwrap_or(&Value::Null));
                    // A Write that replaced an existing file.
                    let updated = ev.get("tool_use_result").and_then(|r| string(r, "type"))
                        == Some("update")
                        || text.contains("has been updated");
                    if updated {
                        turn.set_pending_kind(id, EditKind::Update);
                    }
                    if block.get("is_error").and_then(Value::as_bool).unwrap_or(false) {
                        turn.tool_finished(id, "tool", None, Some(text));
                    } else {
                        turn.tool_finished(id, "tool", Some(text), None);
                    }
                }
            }
            Some("result") => {
                let text = ev.get("result").and_then(Value::as_str);
                if let Some(u) = ev.get("usage") {
                    self.result_usage = Some(usage_of(u));
                }
                if turn.model.is_none() {
                    let models = ev.get("modelUsage").and_then(Value::as_object);
                    let real =
                        models.into_iter().flat_map(|m| m.keys()).find(|m| *m != SYNTHETIC_MODEL);
                    set_model(turn, real.map(String::as_str));
                }
                let subtype = string(ev, "subtype").unwrap_or("success");
                let is_error = ev.get("is_error").and_then(Value::as_bool).unwrap_or(false)
                    || subtype.starts_with("error");
                if is_error {
                    let message = text
                        .filter(|t| !t.is_empty())
                        .map(str::to_string)
                        .unwrap_or_else(|| subtype.to_string());
                    turn.fail(message, status_of(ev.get("api_error_status")));
                } else if let Some(t) = text {
                    turn.final_message = Some(t.to_string());
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, turn: &mut TurnBuilder) {
        turn.usage = match self.result_usage.take() {
            Some(u) => u,
            None => {
                // Cut short before `result`: the snapshots are all there is.
                let mut best = Usage::default();
                for u in self.usage_by_message.values() {
                    best.add(u);
                }
                best.partial = true;
                best
            }
        };
        if turn.final_message.is_none() && turn.failure.is_none() {
            turn.final_message = self.last_text.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &[&str]) -> TurnBuilder {
        let mut p = Parser::default();
        let mut t = TurnBuilder::new("/workspace");
        for l in lines {
            if let Some(ev) = super::super::ndjson::parse_event(l) {
                t.events += 1;
                p.event(&ev, &mut t);
            }
        }
        p.finish(&mut t);
        t
    }

    /// One block per `assistant` event, each with its message's `message_start`
    /// snapshot (output 1), as Claude Code 2.1.332 prints them.
    const BLOCKS: &[&str] = &[
        r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}"#,
        r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":0,"output_tokens":1}},"session_id":"s1"}"#,
        r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/workspace/a.py","content":"x"}}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":0,"output_tokens":1}},"session_id":"s1"}"#,
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"File created successfully at: /workspace/a.py","is_error":false}]},"session_id":"s1"}"#,
        r#"{"type":"assistant","message":{"id":"m2","model":"claude-sonnet-4-5","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":4,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"output_tokens":1}},"session_id":"s1"}"#,
        r#"{"type":"brand_new_event","x":1}"#,
    ];

    #[test]
    fn usage_is_the_results_not_the_snapshots() {
        let mut lines = BLOCKS.to_vec();
        lines.push(r#"{"type":"result","subtype":"success","is_error":false,"result":"Done.","session_id":"s1","usage":{"input_tokens":7,"cache_creation_input_tokens":100,"cache_read_input_tokens":100,"output_tokens":23}}"#);
        let t = parse(&lines);
        assert_eq!(
            t.usage,
            Usage {
                input: Some(7),
                output: Some(23),
                cache_read: Some(100),
                cache_write: Some(100),
                reasoning: None,
                partial: false,
            }
        );
        assert_eq!(t.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(t.final_message.as_deref(), Some("Done."));
        assert_eq!(t.session_id.as_deref(), Some("s1"));
        assert_eq!(t.tool_calls.len(), 1);
        assert_eq!(t.file_edits[0].path, "a.py");
        assert_eq!(t.file_edits[0].kind, EditKind::Add);
        assert_eq!(t.events, 7);
    }

    #[test]
    fn a_turn_cut_short_before_result_has_partial_usage() {
        let t = parse(BLOCKS);
        // The last snapshot per message, summed: the best figure there is, and said to be partial.
        assert_eq!(
            t.usage,
            Usage {
                input: Some(7),
                output: Some(2),
                cache_read: Some(100),
                cache_write: Some(100),
                reasoning: None,
                partial: true,
            }
        );
        assert_eq!(t.final_message.as_deref(), Some("done"));
    }

    #[test]
    fn the_synthetic_model_of_an_api_error_is_never_the_turns() {
        let t = parse(&[
            r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}"#,
            r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}"}],"usage":{"input_tokens":0,"output_tokens":0}},"session_id":"s1","error":"unknown"}"#,
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"API Error: 529 Overloaded","session_id":"s1","usage":{"input_tokens":0,"output_tokens":0},"modelUsage":{}}"#,
        ]);
        assert_eq!(t.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(t.failure.expect("failure").status, Some(529));
        // No real model anywhere: none, rather than `<synthetic>`.
        let t = parse(&[
            r#"{"type":"assistant","message":{"id":"e1","model":"<synthetic>","content":[{"type":"text","text":"API Error: 401"}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key","modelUsage":{"<synthetic>":{"inputTokens":0}}}"#,
        ]);
        assert_eq!(t.model, None);
    }

    #[test]
    fn provider_errors_are_left_to_reeval_and_the_only_egress_is_the_api() {
        let env = ClaudeCode.env("/h", &[]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("CLAUDE_CODE_MAX_RETRIES"), Some(MAX_RETRIES));
        assert_eq!(get("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"), Some("1"));
    }

    #[test]
    fn an_error_result_is_a_failure_with_its_status() {
        let t = parse(&[
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":"401","result":"Not logged in"}"#,
        ]);
        let f = t.failure.expect("failure");
        assert_eq!(f.status, Some(401));
        assert_eq!(f.message, "Not logged in");
        // 2.1.332 prints the status as a number.
        let t = parse(&[
            r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Not logged in"}"#,
        ]);
        let f = t.failure.expect("failure");
        assert_eq!(f.status, Some(401));
        assert_eq!(f.message, "Not logged in");
    }
}
