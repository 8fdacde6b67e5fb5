//! The built-in `openai` agent: an agent loop on the host that speaks the
//! OpenAI-compatible chat completions API (OpenAI, vLLM, llama.cpp server,
//! Ollama, …) and acts in the sandbox through the same exec and file calls as
//! any in-process harness, with tools `bash`, `read_file`, `write_file` and
//! `list_files`.
//!
//! Select it as `openai:<model>` (`openai:gpt-4.1`). The base URL and key come
//! from the host's `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and
//! `OPENAI_API_KEY`, or from [`OpenAiAgent::with_endpoint`]. The conversation
//! is kept across turns: the next `send` continues it.

use std::time::Duration;

use async_trait::async_trait;
use reeval_core::harness::{Harness, HarnessError, TurnContext};
use reeval_core::llm::tools::{CommandScope, CommandTool, Tool, Toolset};
use reeval_core::llm::{ApiKey, KeyHeader, LlmClient, LlmError, RetryPolicy};
use reeval_core::sandbox::{SandboxError, SandboxHandle};
use reeval_core::turn::ErrorClass;
use reeval_core::turn::{TurnReport, TurnStatus, Usage};
use serde_json::{Value, json};

/// The OpenAI API, when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The host variable holding the key.
pub const KEY_ENV: &str = "OPENAI_API_KEY";
/// The default most model requests in one turn.
pub const DEFAULT_MAX_STEPS: u32 = 50;
/// What a rejected key's error tells the user to check.
const KEY_CHECK: &str = "OPENAI_API_KEY or the key given to OpenAiAgent::with_endpoint";
/// How the agent backs off between tries: 1 s doubling to 32 s, jittered; the retries are the builder's.
const BACKOFF: RetryPolicy =
    RetryPolicy { retries: 0, base: Duration::from_secs(1), max: Duration::from_secs(32) };

/// The built-in agent for OpenAI-compatible chat completions.
pub struct OpenAiAgent {
    model: Option<String>,
    base_url: String,
    key: Option<String>,
    credentials: Vec<String>,
    max_steps: u32,
    retries: u32,
    request_timeout: Duration,
    command_timeout: Duration,
    instructions: String,
    messages: Vec<Value>,
    http: reqwest::Client,
}

impl std::fmt::Debug for OpenAiAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of debug output.
        f.debug_struct("OpenAiAgent")
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("max_steps", &self.max_steps)
            .field("messages", &self.messages.len())
            .finish_non_exhaustive()
    }
}

impl OpenAiAgent {
    /// The agent for `model`, with the base URL and key of the host's
    /// `OPENAI_BASE_URL` and `OPENAI_API_KEY`. Without a model, `OPENAI_MODEL` is used.
    /// On the OpenAI API itself the key is a credential checked in preflight;
    /// a local server (vLLM, llama.cpp, Ollama) may need none.
    pub fn new(model: Option<&str>) -> Self {
        let model = model
            .map(str::to_string)
            .or_else(|| std::env::var("OPENAI_MODEL").ok().filter(|m| !m.is_empty()));
        let base_url = std::env::var("OPENAI_BASE_URL")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let key = std::env::var(KEY_ENV).ok().filter(|k| !k.is_empty());
        let credentials = if base_url.trim_end_matches('/') == DEFAULT_BASE_URL {
            vec![KEY_ENV.to_string()]
        } else {
            Vec::new()
        };
        Self { credentials, ..Self::with_endpoint_parts(model, base_url, key) }
    }

    /// The agent for `model` at `base_url` (e.g. `http://127.0.0.1:8000/v1`),
    /// with `api_key` sent as a bearer token when given.
    pub fn with_endpoint(
        model: impl Into<String>,
        base_url: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        Self::with_endpoint_parts(Some(model.into()), base_url.into(), api_key)
    }

    fn with_endpoint_parts(model: Option<String>, base_url: String, key: Option<String>) -> Self {
        Self {
            model,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            credentials: Vec::new(),
            max_steps: DEFAULT_MAX_STEPS,
            retries: 2,
            request_timeout: Duration::from_secs(300),
            command_timeout: Duration::from_secs(300),
            instructions: String::new(),
            messages: Vec::new(),
            http: reqwest::Client::new(),
        }
    }

    /// The most model requests in one turn (default 50); a turn that reaches it fails.
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// Retries of a rate-limited, failed or lost request within a turn (default 2).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The limit of one model request (default 5 minutes).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The limit of one `bash` command (default 5 minutes).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    fn system_prompt(&self, workspace: &str) -> String {
        let mut s = format!(
            "You are a coding agent working in a Linux sandbox. The workspace is {workspace}; relative paths are in it.\n\
             Use the tools to look at files, change them and run commands. When the task is done, answer with a short summary and no tool call."
        );
        if !self.instructions.is_empty() {
            s.push_str("\n\nThe project's rules (AGENTS.md):\n");
            s.push_str(&self.instructions);
        }
        s
    }

    /// The client of this agent's requests: its key, request limit and retries.
    fn client(&self) -> LlmClient {
        LlmClient::new(self.http.clone())
            .timeout(self.request_timeout)
            .retry(RetryPolicy { retries: self.retries, ..BACKOFF })
            .key(ApiKey::new(KeyHeader::Bearer, self.key.clone(), KEY_CHECK))
    }

    /// One completion, retried while asking again may help.
    async fn complete(
        &self,
        client: &LlmClient,
        model: &str,
        tools: &Value,
    ) -> Result<Value, LlmError> {
        let body = json!({"model": model, "messages": self.messages, "tools": tools});
        client.post_retrying(&format!("{}/chat/completions", self.base_url), &[], &body).await
    }
}

/// `bash` (in the workspace), `read_file`, `write_file`, `list_files`.
fn toolset(command_timeout: Duration) -> Toolset {
    let bash = CommandTool {
        name: "bash",
        shell: "bash",
        scope: CommandScope::Workspace,
        timeout: command_timeout,
    };
    Toolset::new([Tool::Command(bash), Tool::ReadFile, Tool::WriteFile, Tool::ListFiles])
}

/// The tools, as chat completions function definitions.
fn tools(toolset: &Toolset) -> Value {
    toolset.defs().iter().map(|t| t.chat_function(false)).collect()
}

fn failed(mut report: TurnReport, error: String, class: ErrorClass) -> TurnReport {
    report.status = TurnStatus::Failed;
    report.error = Some(error);
    report.error_class = Some(class);
    report
}

#[async_trait]
impl Harness for OpenAiAgent {
    fn name(&self) -> &str {
        "openai"
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    fn credentials(&self) -> Vec<String> {
        self.credentials.clone()
    }

    async fn start(
        &mut self,
        sandbox: &SandboxHandle,
        setup: &reeval_core::SessionSetup,
    ) -> Result<(), HarnessError> {
        // A key from the run's `.env` file, resolved in preflight, when the process environment had none.
        if self.key.is_none() {
            self.key = setup
                .credentials
                .iter()
                .find(|(name, _)| name == KEY_ENV)
                .map(|(_, value)| value.clone());
        }
        // The rules file is what this agent reads, as a CLI agent would.
        match sandbox.read_file(self.rules_file()).await {
            Ok(bytes) => self.instructions = String::from_utf8_lossy(&bytes).into_owned(),
            Err(SandboxError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        let Some(model) = self.model.clone() else {
            return Err(HarnessError::Failed {
                harness: "openai".into(),
                message: "no model is selected: name one as `openai:<model>` or set OPENAI_MODEL"
                    .into(),
                class: ErrorClass::Config,
            });
        };
        if self.messages.is_empty() {
            self.messages.push(
                json!({"role": "system", "content": self.system_prompt(sandbox.workspace())}),
            );
        }
        self.messages.push(json!({"role": "user", "content": prompt}));
        let mut report = TurnReport::default();
        let client = self.client();
        // Its commands get the turn's variables (Harbor's `--ae`).
        let toolset = toolset(self.command_timeout).with_env(turn.env.clone());
        let functions = tools(&toolset);
        for _ in 0..self.max_steps {
            let answer = match self.complete(&client, &model, &functions).await {
                Ok(answer) => answer,
                Err(e) => {
                    let class = e.class();
                    return Ok(failed(report, e.to_string(), class));
                }
            };
            report.events += 1;
            report.usage.add(&Usage::from_chat_completions(&answer["usage"]));
            if let Some(m) = answer["model"].as_str() {
                report.model = Some(m.to_string());
            }
            let Some(message) = answer["choices"].get(0).map(|c| &c["message"]) else {
                return Ok(failed(
                    report,
                    "failed to read the completion: it has no choices".into(),
                    ErrorClass::Infra,
                ));
            };
            let content = message["content"].as_str().map(str::to_string);
            let calls = message["tool_calls"].as_array().cloned().unwrap_or_default();
            if calls.is_empty() {
                self.messages.push(json!({"role": "assistant", "content": content}));
                report.final_message = content;
                return Ok(report);
            }
            // The assistant's calls and their results join the conversation together,
            // so a turn cut short never leaves a call without its result.
            let mut results = Vec::new();
            for call in &calls {
                let name = call["function"]["name"].as_str().unwrap_or_default();
                let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
                let input = serde_json::from_str(arguments)
                    .unwrap_or_else(|_| Value::String(arguments.to_string()));
                let output = toolset.run(sandbox, name, &input).await;
                report.tool_calls.push(output.call);
                report.file_edits.extend(output.edit);
                results.push(
                    json!({"role": "tool", "tool_call_id": call["id"], "content": output.text}),
                );
            }
            self.messages
                .push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
            self.messages.extend(results);
        }
        let steps = self.max_steps;
        Ok(failed(
            report,
            format!("failed to finish the turn within {steps} steps"),
            ErrorClass::Agent,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_splits_cached_tokens() {
        let u = Usage::from_chat_completions(
            &json!({"prompt_tokens": 100, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 30}, "completion_tokens_details": {"reasoning_tokens": 5}}),
        );
        assert_eq!(
            u,
            Usage {
                input: Some(70),
                output: Some(20),
                cache_read: Some(30),
                cache_write: None,
                reasoning: Some(5),
                partial: false,
            }
        );
        assert_eq!(
            Usage::from_chat_completions(&json!({"prompt_tokens": 10, "completion_tokens": 2})),
            Usage { input: Some(10), output: Some(2), ..Usage::default() }
        );
    }

    #[test]
    fn failures_are_classified() {
        let status = |s| LlmError::Status { status: s, message: String::new(), retry_after: None };
        assert_eq!(status(429).class(), ErrorClass::Infra);
        assert_eq!(status(503).class(), ErrorClass::Infra);
        assert_eq!(status(400).class(), ErrorClass::Agent);
        let auth = LlmError::Auth { status: 401, key_check: KEY_CHECK.into() };
        assert_eq!(auth.class(), ErrorClass::Config);
        assert_eq!(LlmError::malformed("m").class(), ErrorClass::Infra);
        assert!(auth.to_string().contains(KEY_ENV));
    }

    #[test]
    fn tools_are_strict_functions() {
        let tools = tools(&toolset(Duration::from_secs(1)));
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["bash", "read_file", "write_file", "list_files"]);
        assert_eq!(tools[2]["function"]["parameters"]["required"], json!(["content", "path"]));
    }

    #[test]
    fn selected_by_name_with_a_model() {
        let h = crate::registry().make("openai:gpt-4.1").expect("openai is registered");
        assert_eq!((h.name(), h.model()), ("openai", Some("gpt-4.1")));
        let agent = OpenAiAgent::with_endpoint(
            "m",
            "http://127.0.0.1:1/v1/",
            Some("sk-secret-value".into()),
        );
        assert_eq!(agent.base_url, "http://127.0.0.1:1/v1");
        assert!(agent.credentials().is_empty());
        assert!(!format!("{agent:?}").contains("sk-secret-value"));
    }
}
