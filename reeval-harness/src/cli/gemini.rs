//! Gemini CLI: `gemini --output-format stream-json --approval-mode yolo
//! [--model m] [--resume latest] --prompt=<task>`. Config home: `HOME` (its
//! `.gemini/settings.json` holds MCP servers and the pre-selected auth type,
//! skills go in `.gemini/skills/`). Rules: `GEMINI.md`. Exit code 41 is an
//! auth error, 52 a configuration error.

use reeval_core::Command;
use reeval_core::harness::SessionSetup;
use reeval_core::turn::ErrorClass;
use reeval_core::turn::{EditKind, Usage};
use serde_json::{Value, json};

use super::report::{count, string, text_of};
use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};
use reeval_core::egress::{Broker, HarnessEgress};

/// The pinned npm release of Gemini CLI.
pub const VERSION: &str = "0.61.0";

/// Gemini CLI's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gemini;

/// The Gemini CLI harness.
pub type GeminiHarness = CliHarness<Gemini>;

/// A Gemini CLI harness for `model` (`gemini-2.5-pro`, …).
pub fn harness(model: Option<&str>) -> GeminiHarness {
    CliHarness::new(Gemini, model)
}

impl CliAgent for Gemini {
    const IDENTITY: CliIdentity = CliIdentity {
        name: "gemini",
        program: "gemini",
        version: Some(VERSION),
        rules_file: "GEMINI.md",
    };

    fn install_steps(&self) -> Vec<String> {
        super::npm_install_steps("@google/gemini-cli", VERSION)
    }

    fn credentials(&self, _model: Option<&str>) -> Vec<String> {
        vec!["GEMINI_API_KEY".into()]
    }

    fn egress(&self, _model: Option<&str>) -> HarnessEgress {
        let broker = Broker::header("generativelanguage.googleapis.com", "x-goog-api-key")
            .base_url_env("GOOGLE_GEMINI_BASE_URL");
        super::egress_of(vec![("GEMINI_API_KEY".into(), broker)], &[])
    }

    fn env(&self, home: &str, _sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        // Without a trusted workspace, yolo mode is downgraded.
        vec![("HOME".into(), home.into()), ("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into())]
    }

    fn skills_dir(&self, home: &str) -> Option<String> {
        Some(format!("{home}/.gemini/skills"))
    }

    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        let mut servers = super::mcp_servers(&setup.mcp, false, "httpUrl");
        for s in servers.values_mut() {
            if s.get("command").is_some() {
                s["trust"] = Value::Bool(true);
            }
        }
        let mut settings = json!({
            // Headless runs cannot show the auth dialog.
            "security": { "auth": { "selectedType": "gemini-api-key" } },
            "general": { "disableAutoUpdate": true },
            // Only the model API: no usage statistics to Google's telemetry hosts.
            "privacy": { "usageStatisticsEnabled": false },
            "mcpServers": servers,
        });
        if !setup.skills.is_empty() || !setup.skills_in_sandbox.is_empty() {
            settings["experimental"] = json!({ "skills": true });
        }
        let mut files =
            vec![super::config::json_file(format!("{home}/.gemini/settings.json"), &settings)];
        files.extend(super::skill_files(&self.skills_dir(home).unwrap_or_default(), &setup.skills));
        Ok(files)
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        let mut cmd = Command::new(inv.program).args([
            "--output-format",
            "stream-json",
            "--approval-mode",
            "yolo",
        ]);
        if let Some(model) = inv.model {
            cmd = cmd.arg("--model").arg(model);
        }
        if inv.resume.is_some() {
            cmd = cmd.args(["--resume", "latest"]);
        }
        // One element, `=` form: a task that starts with `-` is still the task.
        cmd.arg(format!("--prompt={}", inv.prompt))
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::<Parser>::default()
    }

    fn classify_exit(&self, exit_code: i64) -> Option<ErrorClass> {
        match exit_code {
            41 | 52 => Some(ErrorClass::Config),
            _ => None,
        }
    }
}

/// Reads Gemini's `stream-json`; the final message is the assistant text after the last tool call.
#[derive(Debug, Default)]
struct Parser {
    current: String,
    last_segment: Option<String>,
}

impl EventParser for Parser {
    fn event(&mut self, ev: &Value, turn: &mut TurnBuilder) {
        match string(ev, "type") {
            Some("init") => {
                if let Some(id) = string(ev, "session_id") {
                    turn.session_id = Some(id.to_string());
                }
                if let Some(m) = string(ev, "model") {
                    turn.model = Some(m.to_string());
                }
            }
            Some("message") if string(ev, "role") == Some("assistant") => {
                let text = text_of(ev.get("content").unwrap_or(&Value::Null));
                if ev.get("delta").and_then(Value::as_bool).unwrap_or(false) {
                    self.current.push_str(&text);
                } else {
                    self.current = text;
                }
            }
            Some("tool_use") => {
                if !self.current.trim().is_empty() {
                    self.last_segment = Some(std::mem::take(&mut self.current));
                }
                self.current.clear();
                let id = string(ev, "tool_id").unwrap_or_default();
                let name = string(ev, "tool_name").unwrap_or("tool");
                let params = ev.get("parameters").cloned().unwrap_or(Value::Null);
                let path = string(&params, "file_path")
                    .or_else(|| string(&params, "absolute_path"))
                    .map(str::to_string);
                turn.tool_started(Some(id), name, params);
                let kind = match name {
                    "write_file" => Some(EditKind::Add),
                    "replace" | "edit" => Some(EditKind::Update),
                    _ => None,
                };
                if let (Some(kind), Some(path)) = (kind, path) {
                    turn.edit_on_success(id, &path, kind);
                }
            }
            Some("tool_result") => {
                let id = string(ev, "tool_id").unwrap_or_default();
                let output = ev.get("output").map(text_of);
                if string(ev, "status") == Some("success") {
                    turn.tool_finished(id, "tool", output, None);
                } else {
                    let error = ev
                        .get("error")
                        .and_then(|e| string(e, "message"))
                        .map(str::to_string)
                        .or(output.clone())
                        .unwrap_or_else(|| "error".into());
                    turn.tool_finished(id, "tool", output, Some(error));
                }
            }
            Some("result") => {
                if let Some(s) = ev.get("stats") {
                    let cached = count(s, "cached");
                    let input = count(s, "input").or_else(|| {
                        count(s, "input_tokens").map(|i| i.saturating_sub(cached.unwrap_or(0)))
                    });
                    turn.usage = Usage {
                        input,
                        output: count(s, "output_tokens"),
                        cache_read: cached,
                        cache_write: None,
                        reasoning: None,
                        partial: false,
                    };
                }
                if string(ev, "status") == Some("error") {
                    let e = ev.get("error").unwrap_or(&Value::Null);
                    let message = string(e, "message")
                        .map(str::to_string)
                        .unwrap_or_else(|| "the run ended with an error".into());
                    turn.fail(message, None);
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, turn: &mut TurnBuilder) {
        let current = std::mem::take(&mut self.current);
        turn.final_message =
            if current.trim().is_empty() { self.last_segment.take() } else { Some(current) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_message_is_the_text_after_the_last_tool() {
        let mut p = Parser::default();
        let mut t = TurnBuilder::new("/workspace");
        for l in [
            r#"{"type":"init","session_id":"g1","model":"gemini-2.5-pro"}"#,
            r#"{"type":"message","role":"assistant","content":"I'll write","delta":true}"#,
            r#"{"type":"tool_use","tool_name":"write_file","tool_id":"w","parameters":{"file_path":"/workspace/hello.py","content":"x"}}"#,
            r#"{"type":"tool_result","tool_id":"w","status":"success","output":"ok"}"#,
            r#"{"type":"message","role":"assistant","content":"Done","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":" now.","delta":true}"#,
            r#"{"type":"result","status":"success","stats":{"total_tokens":1500,"input_tokens":1200,"output_tokens":300,"cached":800,"input":400}}"#,
        ] {
            p.event(&super::super::ndjson::parse_event(l).unwrap(), &mut t);
        }
        p.finish(&mut t);
        assert_eq!(t.final_message.as_deref(), Some("Done now."));
        assert_eq!(
            t.usage,
            Usage {
                input: Some(400),
                output: Some(300),
                cache_read: Some(800),
                cache_write: None,
                reasoning: None,
                partial: false,
            }
        );
        assert_eq!(t.file_edits[0].path, "hello.py");
    }
}
