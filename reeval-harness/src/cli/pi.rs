//! pi (the pi-mono coding agent): `pi --print --mode json [--model m]
//! --session-dir <home>/sessions [--continue] <task>`. Config home:
//! `PI_CODING_AGENT_DIR` (skills in its `skills/`). pi has no MCP support by
//! design: a session with MCP servers is a configuration error. Usage is
//! summed over assistant `message_end` events.

use reeval_core::Command;
use reeval_core::harness::SessionSetup;
use reeval_core::turn::{EditKind, Usage};
use serde_json::Value;

use super::report::{count, string, text_of};
use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};
use reeval_core::egress::HarnessEgress;

/// The pinned npm release of pi.
pub const VERSION: &str = "0.73.1";

/// pi's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pi;

/// The pi harness.
pub type PiHarness = CliHarness<Pi>;

/// A pi harness for `model` (`claude-sonnet-4-5`, `openai/gpt-5`, …).
pub fn harness(model: Option<&str>) -> PiHarness {
    CliHarness::new(Pi, model)
}

impl CliAgent for Pi {
    const IDENTITY: CliIdentity =
        CliIdentity { name: "pi", program: "pi", version: Some(VERSION), rules_file: "AGENTS.md" };

    fn install_steps(&self) -> Vec<String> {
        super::npm_install_steps("@mariozechner/pi-coding-agent", VERSION)
    }

    fn credentials(&self, model: Option<&str>) -> Vec<String> {
        vec![super::provider_key(&super::provider_of(model))]
    }

    fn egress(&self, model: Option<&str>) -> HarnessEgress {
        super::egress_of(
            super::provider_broker(&super::provider_of(model)).into_iter().collect(),
            &[],
        )
    }

    fn env(&self, home: &str, _sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        vec![("PI_CODING_AGENT_DIR".into(), home.into())]
    }

    // No MCP support: the core refuses an environment naming servers (`Harness::takes_mcp`).
    fn takes_mcp(&self) -> bool {
        false
    }

    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        Ok(super::skill_files(&self.skills_dir(home).unwrap_or_default(), &setup.skills))
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        let mut cmd = Command::new(inv.program).args(["--print", "--mode", "json"]);
        if let Some(model) = inv.model {
            cmd = cmd.arg("--model").arg(model);
        }
        cmd = cmd.arg("--session-dir").arg(format!("{}/sessions", inv.home));
        if inv.resume.is_some() {
            cmd = cmd.arg("--continue");
        }
        cmd.arg(inv.prompt)
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::<Parser>::default()
    }
}

/// Reads `--mode json`: a session header, then `AgentSessionEvent`s.
#[derive(Debug, Default)]
struct Parser {
    last_text: Option<String>,
    /// The error of the latest assistant message, cleared by a later good one (a retry).
    last_error: Option<String>,
}

impl EventParser for Parser {
    fn event(&mut self, ev: &Value, turn: &mut TurnBuilder) {
        match string(ev, "type") {
            Some("session") => {
                if let Some(id) = string(ev, "id") {
                    turn.session_id = Some(id.to_string());
                }
            }
            Some("tool_execution_start") => {
                let id = string(ev, "toolCallId").unwrap_or_default();
                let name = string(ev, "toolName").unwrap_or("tool");
                let args = ev.get("args").cloned().unwrap_or(Value::Null);
                let path = string(&args, "path").map(str::to_string);
                turn.tool_started(Some(id), name, args);
                let kind = match name {
                    "write" => Some(EditKind::Add),
                    "edit" => Some(EditKind::Update),
                    _ => None,
                };
                if let (Some(kind), Some(path)) = (kind, path) {
                    turn.edit_on_success(id, &path, kind);
                }
            }
            Some("tool_execution_end") => {
                let id = string(ev, "toolCallId").unwrap_or_default();
                let name = string(ev, "toolName").unwrap_or("tool");
                let result = ev.get("result").map(|r| text_of(r.get("content").unwrap_or(r)));
                if ev.get("isError").and_then(Value::as_bool).unwrap_or(false) {
                    turn.tool_finished(
                        id,
                        name,
                        None,
                        Some(result.unwrap_or_else(|| "error".into())),
                    );
                } else {
                    turn.tool_finished(id, name, result, None);
                }
            }
            Some("message_end") => {
                let Some(msg) =
                    ev.get("message").filter(|m| string(m, "role") == Some("assistant"))
                else {
                    return;
                };
                if let Some(u) = msg.get("usage") {
                    turn.usage.add(&Usage {
                        input: count(u, "input"),
                        output: count(u, "output"),
                        cache_read: count(u, "cacheRead"),
                        cache_write: count(u, "cacheWrite"),
                        reasoning: None,
                        partial: false,
                    });
                }
                if let Some(m) = string(msg, "model") {
                    turn.model = Some(m.to_string());
                }
                if matches!(string(msg, "stopReason"), Some("error")) {
                    self.last_error = Some(
                        string(msg, "errorMessage").unwrap_or("the model call failed").to_string(),
                    );
                } else {
                    self.last_error = None;
                    let text = msg
                        .get("content")
                        .and_then(Value::as_array)
                        .map(|blocks| {
                            blocks
                                .iter()
                                .filter(|b| string(b, "type") == Some("text"))
                                .filter_map(|b| string(b, "text"))
                                .collect::<Vec<_>>()
                                .join("")
                        })
                        .unwrap_or_default();
                    if !text.trim().is_empty() {
                        self.last_text = Some(text);
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, turn: &mut TurnBuilder) {
        if let Some(e) = self.last_error.take() {
            turn.fail(e, None);
        }
        turn.final_message = self.last_text.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_only_assistant_message_ends() {
        let mut p = Parser::default();
        let mut t = TurnBuilder::new("/workspace");
        for l in [
            r#"{"type":"session","version":3,"id":"p1","cwd":"/workspace"}"#,
            r#"{"type":"message_update","message":{"role":"assistant","usage":{"input":999}},"assistantMessageEvent":{"type":"text_delta","delta":"x"}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"step"}],"model":"claude-sonnet-4-5","usage":{"input":100,"output":50,"cacheRead":20,"cacheWrite":10},"stopReason":"toolUse"}}"#,
            r#"{"type":"message_end","message":{"role":"user","usage":{"input":5}}}"#,
            r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"model":"claude-sonnet-4-5","usage":{"input":10,"output":5,"cacheRead":120,"cacheWrite":0},"stopReason":"stop"}}"#,
            r#"{"type":"turn_end","message":{"role":"assistant","usage":{"input":10}}}"#,
        ] {
            p.event(&super::super::ndjson::parse_event(l).unwrap(), &mut t);
        }
        p.finish(&mut t);
        assert_eq!(
            t.usage,
            Usage {
                input: Some(110),
                output: Some(55),
                cache_read: Some(140),
                cache_write: Some(10),
                reasoning: None,
                partial: false,
            }
        );
        assert_eq!(t.final_message.as_deref(), Some("Done."));
        assert_eq!(t.session_id.as_deref(), Some("p1"));
        assert!(t.failure.is_none());
    }
}
