//! Cursor CLI: `cursor-agent --print --output-format stream-json --force
//! [--model m] [--resume <chatId>] -- <task>`. Config home: `HOME` (its
//! `.cursor/` holds `mcp.json` and `skills/`). Usage is only in the
//! `result` event; the model is the display name from `system/init`.

use reeval_core::Command;
use reeval_core::harness::SessionSetup;
use reeval_core::turn::{EditKind, Usage};
use serde_json::{Value, json};

use super::report::{count, string, text_of};
use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};
use reeval_core::egress::{Broker, HarnessEgress};

/// The pinned Cursor CLI build (the vendor ships it as a tarball, not on npm).
pub const VERSION: &str = "2026.09.28-64d2043";

/// Cursor's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cursor;

/// The Cursor harness.
pub type CursorHarness = CliHarness<Cursor>;

/// A Cursor harness for `model` (`composer-2.5`, `sonnet-4.5`, …).
pub fn harness(model: Option<&str>) -> CursorHarness {
    CliHarness::new(Cursor, model)
}

impl CliAgent for Cursor {
    const IDENTITY: CliIdentity = CliIdentity {
        name: "cursor",
        program: "cursor-agent",
        version: Some(VERSION),
        rules_file: "AGENTS.md",
    };

    fn install_steps(&self) -> Vec<String> {
        vec![format!(
            "case $(uname -m) in x86_64) a=x64;; aarch64) a=arm64;; *) echo unsupported arch >&2; exit 1;; esac; \
             mkdir -p /opt/cursor-agent && curl -fsSL https://downloads.cursor.com/lab/{VERSION}/linux/$a/agent-cli-package.tar.gz \
             | tar -xz -C /opt/cursor-agent --strip-components=1 --no-same-owner && ln -sf /opt/cursor-agent/cursor-agent /usr/local/bin/cursor-agent"
        )]
    }

    fn credentials(&self, _model: Option<&str>) -> Vec<String> {
        vec!["CURSOR_API_KEY".into()]
    }

    fn egress(&self, _model: Option<&str>) -> HarnessEgress {
        // Cursor's API is its own (bearer token); its hosts are under cursor.sh.
        super::egress_of(
            vec![("CURSOR_API_KEY".into(), Broker::header("api2.cursor.sh", "authorization"))],
            &["*.cursor.sh"],
        )
    }

    fn env(&self, home: &str, _sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        vec![("HOME".into(), home.into())]
    }

    fn skills_dir(&self, home: &str) -> Option<String> {
        Some(format!("{home}/.cursor/skills"))
    }

    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        let mut files = Vec::new();
        if !setup.mcp.is_empty() {
            let config = json!({ "mcpServers": super::mcp_servers(&setup.mcp, false, "url") });
            files.push(super::config::json_file(format!("{home}/.cursor/mcp.json"), &config));
        }
        files.extend(super::skill_files(&self.skills_dir(home).unwrap_or_default(), &setup.skills));
        Ok(files)
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        let mut cmd = Command::new(inv.program).args([
            "--print",
            "--output-format",
            "stream-json",
            "--force",
        ]);
        if let Some(model) = inv.model {
            cmd = cmd.arg("--model").arg(model);
        }
        if let Some(chat) = inv.resume {
            cmd = cmd.arg("--resume").arg(chat);
        }
        if inv.mcp {
            cmd = cmd.arg("--approve-mcps");
        }
        cmd.arg("--").arg(inv.prompt)
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::<Parser>::default()
    }
}

/// Reads Cursor's `stream-json`.
#[derive(Debug, Default)]
struct Parser {
    last_text: Option<String>,
}

/// The tool's key in a `tool_call` object (`shellToolCall`) and its body.
fn tool_of(ev: &Value) -> Option<(&str, &Value)> {
    ev.get("tool_call")?.as_object()?.iter().next().map(|(k, v)| (k.as_str(), v))
}

fn tool_name(key: &str, body: &Value) -> String {
    if key == "mcpToolCall"
        && let Some(name) = body.get("args").and_then(|a| string(a, "toolName"))
    {
        return name.to_string();
    }
    key.strip_suffix("ToolCall").unwrap_or(key).to_string()
}

/// The result and error of a completed tool call.
fn outcome(result: Option<&Value>) -> (Option<String>, Option<String>) {
    let Some(result) = result else { return (None, None) };
    if let Some(ok) = result.get("success") {
        let text = match (string(ok, "stdout"), string(ok, "stderr")) {
            (Some(out), Some(err)) if !err.is_empty() => format!("{out}{err}"),
            (Some(out), _) => out.to_string(),
            _ => ok.get("content").map(text_of).unwrap_or_else(|| ok.to_string()),
        };
        let code = ok.get("exitCode").and_then(Value::as_i64).unwrap_or(0);
        let error = (code != 0).then(|| format!("exit code {code}"));
        return (Some(text), error);
    }
    for key in ["failure", "error", "rejected"] {
        if let Some(e) = result.get(key) {
            let message = string(e, "message")
                .or_else(|| string(e, "error"))
                .or_else(|| string(e, "stderr"))
                .map(str::to_string)
                .unwrap_or_else(|| text_of(e));
            return (None, Some(if message.is_empty() { key.to_string() } else { message }));
        }
    }
    (Some(text_of(result)), None)
}

impl EventParser for Parser {
    fn event(&mut self, ev: &Value, turn: &mut TurnBuilder) {
        if let Some(id) = string(ev, "session_id") {
            turn.session_id = Some(id.to_string());
        }
        match string(ev, "type") {
            Some("system") if string(ev, "subtype") == Some("init") => {
                if let Some(m) = string(ev, "model") {
                    turn.model = Some(m.to_string());
                }
            }
            Some("assistant") => {
                let content =
                    ev.get("message").and_then(|m| m.get("content")).unwrap_or(&Value::Null);
                let text = text_of(content);
                if !text.trim().is_empty() {
                    self.last_text = Some(text);
                }
            }
            Some("tool_call") => {
                let Some((key, body)) = tool_of(ev) else { return };
                let id = string(ev, "call_id").unwrap_or_default();
                let name = tool_name(key, body);
                let args = body.get("args").cloned().unwrap_or(Value::Null);
                let path = string(&args, "path").map(str::to_string);
                turn.tool_started(Some(id), &name, args);
                if string(ev, "subtype") == Some("completed") {
                    let kind = match key {
                        "writeToolCall" => Some(EditKind::Add),
                        "editToolCall" => Some(EditKind::Update),
                        "deleteToolCall" => Some(EditKind::Delete),
                        _ => None,
                    };
                    if let (Some(kind), Some(path)) = (kind, path) {
                        turn.edit_on_success(id, &path, kind);
                    }
                    let (result, error) = outcome(body.get("result"));
                    turn.tool_finished(id, &name, result, error);
                }
            }
            Some("result") => {
                if let Some(u) = ev.get("usage") {
                    turn.usage = Usage {
                        input: count(u, "inputTokens"),
                        output: count(u, "outputTokens"),
                        cache_read: count(u, "cacheReadTokens"),
                        cache_write: count(u, "cacheWriteTokens"),
                        reasoning: None,
                        partial: false,
                    };
                }
                let text = string(ev, "result");
                let subtype = string(ev, "subtype").unwrap_or("success");
                if ev.get("is_error").and_then(Value::as_bool).unwrap_or(false)
                    || subtype.starts_with("error")
                {
                    turn.fail(text.filter(|t| !t.is_empty()).unwrap_or(subtype), None);
                } else if let Some(t) = text {
                    turn.final_message = Some(t.to_string());
                }
            }
            _ => {}
        }
    }

    fn finish(&mut self, turn: &mut TurnBuilder) {
        if turn.final_message.is_none() {
            turn.final_message = self.last_text.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_tool_calls_edits_and_usage() {
        let mut p = Parser::default();
        let mut t = TurnBuilder::new("/workspace");
        for l in [
            r#"{"type":"system","subtype":"init","session_id":"c1","model":"Composer 2.5"}"#,
            r#"{"type":"tool_call","subtype":"started","call_id":"a","tool_call":{"shellToolCall":{"args":{"command":"cat x"}}}}"#,
            r#"{"type":"tool_call","subtype":"completed","call_id":"a","tool_call":{"shellToolCall":{"args":{"command":"cat x"},"result":{"failure":{"stderr":"cat: x: No such file","exitCode":1}}}}}"#,
            r#"{"type":"tool_call","subtype":"completed","call_id":"b","tool_call":{"writeToolCall":{"args":{"path":"/workspace/hello.py"},"result":{"success":{"linesCreated":2}}}}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"result":"ok","session_id":"c1","usage":{"inputTokens":120,"outputTokens":30,"cacheReadTokens":80,"cacheWriteTokens":5}}"#,
        ] {
            p.event(&super::super::ndjson::parse_event(l).unwrap(), &mut t);
        }
        p.finish(&mut t);
        assert_eq!(t.tool_calls[0].name, "shell");
        assert_eq!(t.tool_calls[0].error.as_deref(), Some("cat: x: No such file"));
        assert_eq!(t.tool_calls[1].name, "write");
        assert_eq!(t.file_edits[0].path, "hello.py");
        assert_eq!(t.usage.cache_write, Some(5));
        assert_eq!(t.model.as_deref(), Some("Composer 2.5"));
        assert_eq!(t.session_id.as_deref(), Some("c1"));
    }
}
