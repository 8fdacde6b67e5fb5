//! opencode: `opencode run --format json [-m provider/model] [-s <sessionID>]
//! -- <task>`. Config home: the `XDG_*` directories under one per-attempt
//! directory; `opencode.json` there allows every tool (headless runs cannot
//! ask) and holds MCP servers under `"mcp"`; skills go in its `skills/`.
//! An `error` event fails the turn even when the exit code is 0.

use reeval_core::Command;
use reeval_core::environment::McpServer;
use reeval_core::harness::SessionSetup;
use reeval_core::turn::{EditKind, Usage};
use serde_json::{Map, Value, json};

use super::report::{count, status_of, string, text_of};
use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};
use reeval_core::egress::HarnessEgress;

/// The pinned npm release of opencode.
pub const VERSION: &str = "1.18.33";

/// opencode's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Opencode;

/// The opencode harness.
pub type OpencodeHarness = CliHarness<Opencode>;

/// An opencode harness for `model` (`anthropic/claude-sonnet-4-5`, …).
pub fn harness(model: Option<&str>) -> OpencodeHarness {
    CliHarness::new(Opencode, model)
}

fn mcp_config(servers: &[McpServer]) -> Map<String, Value> {
    servers
        .iter()
        .map(|s| {
            let v = match s {
                McpServer::Stdio { argv, env, .. } => json!({
                    "type": "local",
                    "command": argv,
                    "environment": env.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect::<Map<String, Value>>(),
                    "enabled": true,
                }),
                McpServer::Http { url, .. } => json!({ "type": "remote", "url": url, "enabled": true }),
            };
            (s.name().to_string(), v)
        })
        .collect()
}

impl CliAgent for Opencode {
    const IDENTITY: CliIdentity = CliIdentity {
        name: "opencode",
        program: "opencode",
        version: Some(VERSION),
        rules_file: "AGENTS.md",
    };

    fn install_steps(&self) -> Vec<String> {
        super::npm_install_steps("opencode-ai", VERSION)
    }

    fn credentials(&self, model: Option<&str>) -> Vec<String> {
        let provider = super::provider_of(model);
        // The AI SDK's Google provider reads its own variable.
        if provider == "google" {
            return vec!["GOOGLE_GENERATIVE_AI_API_KEY".into()];
        }
        vec![super::provider_key(&provider)]
    }

    fn egress(&self, model: Option<&str>) -> HarnessEgress {
        let provider = super::provider_of(model);
        let brokers = match super::provider_broker(&provider) {
            // The AI SDK's Google provider reads its own variable.
            Some((_, broker)) if provider == "google" => {
                vec![("GOOGLE_GENERATIVE_AI_API_KEY".into(), broker)]
            }
            Some(b) => vec![b],
            None => Vec::new(),
        };
        // opencode reads its model catalogue from models.dev.
        super::egress_of(brokers, &["models.dev"])
    }

    fn env(&self, home: &str, _sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        vec![
            ("XDG_CONFIG_HOME".into(), format!("{home}/config")),
            ("XDG_DATA_HOME".into(), format!("{home}/data")),
            ("XDG_STATE_HOME".into(), format!("{home}/state")),
            ("XDG_CACHE_HOME".into(), format!("{home}/cache")),
            ("OPENCODE_DISABLE_AUTOUPDATE".into(), "true".into()),
            // Only the model API: the model list bundled with the CLI, not models.dev.
            ("OPENCODE_DISABLE_MODELS_FETCH".into(), "true".into()),
        ]
    }

    fn skills_dir(&self, home: &str) -> Option<String> {
        Some(format!("{home}/config/opencode/skills"))
    }

    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        let config = json!({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": false,
            "permission": { "edit": "allow", "bash": "allow", "webfetch": "allow" },
            "mcp": mcp_config(&setup.mcp),
        });
        let mut files = vec![super::config::json_file(
            format!("{home}/config/opencode/opencode.json"),
            &config,
        )];
        files.extend(super::skill_files(&self.skills_dir(home).unwrap_or_default(), &setup.skills));
        Ok(files)
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        let mut cmd = Command::new(inv.program).args(["run", "--format", "json"]);
        if let Some(model) = inv.model {
            cmd = cmd.arg("-m").arg(model);
        }
        if let Some(session) = inv.resume {
            cmd = cmd.arg("-s").arg(session);
        }
        cmd.arg("--").arg(inv.prompt)
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::<Parser>::default()
    }

    fn fallback_model(&self, selected: Option<&str>) -> Option<String> {
        selected.map(str::to_string)
    }
}

/// Reads `--format json` events; usage is summed over `step_finish` parts.
#[derive(Debug, Default)]
struct Parser {
    /// Text parts of the latest message that had text.
    text_message: Option<String>,
    texts: Vec<String>,
}

impl EventParser for Parser {
    fn event(&mut self, ev: &Value, turn: &mut TurnBuilder) {
        if let Some(id) = string(ev, "sessionID") {
            turn.session_id = Some(id.to_string());
        }
        let part = ev.get("part").unwrap_or(&Value::Null);
        match string(ev, "type") {
            Some("text") => {
                let message = string(part, "messageID").map(str::to_string);
                if message != self.text_message {
                    self.text_message = message;
                    self.texts.clear();
                }
                if let Some(t) = string(part, "text") {
                    self.texts.push(t.to_string());
                }
            }
            Some("tool_use") => {
                let id = string(part, "callID").or_else(|| string(part, "id")).unwrap_or_default();
                let name = string(part, "tool").unwrap_or("tool");
                let state = part.get("state").unwrap_or(&Value::Null);
                let input = state.get("input").cloned().unwrap_or(Value::Null);
                let path = string(&input, "filePath").map(str::to_string);
                turn.tool_started(Some(id), name, input);
                let kind = match name {
                    "write"
                        if state
                            .get("metadata")
                            .and_then(|m| m.get("exists"))
                            .and_then(Value::as_bool)
                            == Some(true) =>
                    {
                        Some(EditKind::Update)
                    }
                    "write" => Some(EditKind::Add),
                    "edit" | "multiedit" => Some(EditKind::Update),
                    _ => None,
                };
                match string(state, "status") {
                    Some("completed") => {
                        if let (Some(kind), Some(path)) = (kind, path) {
                            turn.edit_on_success(id, &path, kind);
                        }
                        turn.tool_finished(
                            id,
                            name,
                            Some(text_of(state.get("output").unwrap_or(&Value::Null))),
                            None,
                        );
                    }
                    Some("error") => {
                        let error = state
                            .get("error")
                            .map(text_of)
                            .filter(|e| !e.is_empty())
                            .unwrap_or_else(|| "error".into());
                        turn.tool_finished(id, name, None, Some(error));
                    }
                    _ => {}
                }
            }
            Some("step_finish") => {
                if let Some(t) = part.get("tokens") {
                    let cache = t.get("cache").unwrap_or(&Value::Null);
                    turn.usage.add(&Usage {
                        input: count(t, "input"),
                        output: count(t, "output"),
                        cache_read: count(cache, "read"),
                        cache_write: count(cache, "write"),
                        reasoning: count(t, "reasoning"),
                        partial: false,
                    });
                }
            }
            Some("error") => {
                let e = ev.get("error").unwrap_or(&Value::Null);
                let data = e.get("data").unwrap_or(&Value::Null);
                let message =
                    string(data, "message").or_else(|| string(e, "message")).map(str::to_string);
                let name = string(e, "name").unwrap_or("error");
                let message = match message {
                    Some(m) => format!("{name}: {m}"),
                    None => name.to_string(),
                };
                turn.fail(message, status_of(data.get("statusCode")));
            }
            _ => {}
        }
    }

    fn finish(&mut self, turn: &mut TurnBuilder) {
        if !self.texts.is_empty() {
            turn.final_message = Some(self.texts.join("\n"));
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
            p.event(&super::super::ndjson::parse_event(l).unwrap(), &mut t);
        }
        p.finish(&mut t);
        t
    }

    #[test]
    fn sums_steps_and_reads_tools() {
        let t = parse(&[
            r#"{"type":"step_start","sessionID":"s1","part":{"messageID":"m1","type":"step-start"}}"#,
            r#"{"type":"tool_use","sessionID":"s1","part":{"messageID":"m1","type":"tool","callID":"c1","tool":"write","state":{"status":"completed","input":{"filePath":"/workspace/hello.py","content":"x"},"output":""}}}"#,
            r#"{"type":"step_finish","sessionID":"s1","part":{"type":"step-finish","tokens":{"input":100,"output":50,"reasoning":10,"cache":{"read":20,"write":5}}}}"#,
            r#"{"type":"text","sessionID":"s1","part":{"messageID":"m2","type":"text","text":"Done."}}"#,
            r#"{"type":"step_finish","sessionID":"s1","part":{"type":"step-finish","tokens":{"input":30,"output":20,"reasoning":0,"cache":{"read":100,"write":0}}}}"#,
        ]);
        assert_eq!(
            t.usage,
            Usage {
                input: Some(130),
                output: Some(70),
                cache_read: Some(120),
                cache_write: Some(5),
                reasoning: Some(10),
                partial: false,
            }
        );
        assert_eq!(t.final_message.as_deref(), Some("Done."));
        assert_eq!(t.file_edits[0].path, "hello.py");
        assert_eq!(t.session_id.as_deref(), Some("s1"));
    }

    #[test]
    fn an_error_event_fails_with_its_status() {
        let t = parse(&[
            r#"{"type":"error","sessionID":"s1","error":{"name":"APIError","data":{"message":"Rate limit exceeded","statusCode":429,"isRetryable":true}}}"#,
        ]);
        let f = t.failure.unwrap();
        assert_eq!(f.status, Some(429));
        assert_eq!(f.message, "APIError: Rate limit exceeded");
    }
}
