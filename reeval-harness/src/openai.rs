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
use reeval_core::Command;
use reeval_core::harness::{ErrorClass, Harness, HarnessError, TurnContext};
use reeval_core::sandbox::{SandboxError, SandboxHandle};
use reeval_core::turn::{EditKind, FileEdit, ToolCall, TurnReport, TurnStatus, Usage};
use serde_json::{Value, json};

/// The OpenAI API, when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// The host variable holding the key.
pub const KEY_ENV: &str = "OPENAI_API_KEY";
/// The default most model requests in one turn.
pub const DEFAULT_MAX_STEPS: u32 = 50;
/// How much of a tool's output the model is shown, and the record keeps.
const OUTPUT_LIMIT: usize = 16_000;

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
    client: reqwest::Client,
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

/// Why one completion request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
enum RequestError {
    #[error("failed to reach {url}: {message}")]
    Network { url: String, message: String },
    #[error("failed to get a completion within {}s", .0.as_secs())]
    Timeout(Duration),
    #[error("failed to get a completion: the API rejected the key (HTTP {status}); check {KEY_ENV} or the key given to OpenAiAgent::with_endpoint")]
    Auth { status: u16 },
    #[error("failed to get a completion: HTTP {status}: {message}")]
    Status { status: u16, message: String, retry_after: Option<Duration> },
    #[error("failed to read the completion: {0}")]
    Malformed(String),
}

impl RequestError {
    /// Rate limits, overload, server errors and network loss are the platform's;
    /// a rejected key is configuration; any other refusal is the agent's.
    fn class(&self) -> ErrorClass {
        match self {
            RequestError::Network { .. } | RequestError::Timeout(_) | RequestError::Malformed(_) => ErrorClass::Infra,
            RequestError::Auth { .. } => ErrorClass::Config,
            RequestError::Status { status, .. } if *status == 408 || *status == 429 || *status >= 500 => ErrorClass::Infra,
            RequestError::Status { .. } => ErrorClass::Agent,
        }
    }
}

impl OpenAiAgent {
    /// The agent for `model`, with the base URL and key of the host's
    /// `OPENAI_BASE_URL` and `OPENAI_API_KEY`. Without a model, `OPENAI_MODEL` is used.
    /// On the OpenAI API itself the key is a credential checked in preflight;
    /// a local server (vLLM, llama.cpp, Ollama) may need none.
    pub fn new(model: Option<&str>) -> Self {
        let model = model.map(str::to_string).or_else(|| std::env::var("OPENAI_MODEL").ok().filter(|m| !m.is_empty()));
        let base_url = std::env::var("OPENAI_BASE_URL").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_BASE_URL.to_string());
        let key = std::env::var(KEY_ENV).ok().filter(|k| !k.is_empty());
        let credentials = if base_url.trim_end_matches('/') == DEFAULT_BASE_URL { vec![KEY_ENV.to_string()] } else { Vec::new() };
        Self { credentials, ..Self::with_endpoint_parts(model, base_url, key) }
    }

    /// The agent for `model` at `base_url` (e.g. `http://127.0.0.1:8000/v1`),
    /// with `api_key` sent as a bearer token when given.
    pub fn with_endpoint(model: impl Into<String>, base_url: impl Into<String>, api_key: Option<String>) -> Self {
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
            client: reqwest::Client::new(),
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

    /// One completion, retried while the failure is the platform's.
    async fn complete(&self, model: &str) -> Result<Value, RequestError> {
        let body = json!({"model": model, "messages": self.messages, "tools": tools()});
        let mut n = 0;
        loop {
            match self.request(&body).await {
                Err(e) if e.class() == ErrorClass::Infra && n < self.retries => {
                    let wait = match &e {
                        RequestError::Status { retry_after: Some(after), .. } => (*after).min(Duration::from_secs(60)),
                        _ => Duration::from_secs(1 << n.min(5)),
                    };
                    tokio::time::sleep(wait).await;
                    n += 1;
                }
                other => return other,
            }
        }
    }

    async fn request(&self, body: &Value) -> Result<Value, RequestError> {
        let url = format!("{}/chat/completions", self.base_url);
        let mut request = self.client.post(&url).timeout(self.request_timeout).json(body);
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let transport = |e: reqwest::Error| {
            if e.is_timeout() {
                RequestError::Timeout(self.request_timeout)
            } else {
                RequestError::Network { url: url.clone(), message: self.redact(&e.to_string()) }
            }
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
        let text = response.text().await.map_err(transport)?;
        if status == 401 || status == 403 {
            // The body may echo part of the key: it is not kept.
            return Err(RequestError::Auth { status });
        }
        if !(200..300).contains(&status) {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| reeval_core::exec::tail(text.trim(), 300).to_string());
            return Err(RequestError::Status { status, message: self.redact(&message), retry_after });
        }
        serde_json::from_str(&text).map_err(|e| RequestError::Malformed(format!("the answer is not JSON ({e})")))
    }

    fn redact(&self, text: &str) -> String {
        match &self.key {
            Some(key) => reeval_core::secrets::redact(text, std::slice::from_ref(key)),
            None => text.to_string(),
        }
    }

    /// Runs one tool call in the sandbox: what the model is told, and what the record keeps.
    async fn run_tool(&self, sandbox: &SandboxHandle, name: &str, input: &Value) -> (String, ToolCall, Option<FileEdit>) {
        let result = match input {
            Value::Object(_) => self.tool(sandbox, name, input).await,
            _ => Err(format!("failed to run {name}: its arguments are not a JSON object")),
        };
        let (text, call, edit) = match result {
            Ok((text, error, edit)) => {
                let call = ToolCall { name: name.to_string(), input: input.clone(), result: Some(text.clone()), error };
                (text, call, edit)
            }
            Err(error) => (error.clone(), ToolCall { name: name.to_string(), input: input.clone(), result: None, error: Some(error) }, None),
        };
        (text, call, edit)
    }

    /// A tool's output, its failure when the command failed, and the edit it made.
    async fn tool(&self, sandbox: &SandboxHandle, name: &str, input: &Value) -> Result<(String, Option<String>, Option<FileEdit>), String> {
        let arg =
            |key: &str| input[key].as_str().map(str::to_string).ok_or_else(|| format!("failed to run {name}: the `{key}` argument is missing or not a string"));
        let sandbox_error = |e: SandboxError| e.to_string();
        match name {
            "bash" => {
                let command = arg("command")?;
                let out = sandbox.exec(Command::new("bash").arg("-c").arg(command).timeout(self.command_timeout)).await.map_err(sandbox_error)?;
                let status = if out.timed_out { format!("killed after {}s", self.command_timeout.as_secs()) } else { format!("exit code {}", out.exit_code) };
                let mut text = status.clone();
                if !out.stdout.is_empty() {
                    text.push_str(&format!("\n--- stdout ---\n{}", reeval_core::exec::tail(&out.stdout, OUTPUT_LIMIT)));
                }
                if !out.stderr.is_empty() {
                    text.push_str(&format!("\n--- stderr ---\n{}", reeval_core::exec::tail(&out.stderr, OUTPUT_LIMIT)));
                }
                Ok((text, (!out.success()).then_some(status), None))
            }
            "read_file" => {
                let path = arg("path")?;
                let bytes = sandbox.read_file(&path).await.map_err(sandbox_error)?;
                match String::from_utf8(bytes) {
                    Ok(text) if text.len() > OUTPUT_LIMIT => {
                        Ok((format!("{}\n[truncated: the file has {} bytes]", head(&text, OUTPUT_LIMIT), text.len()), None, None))
                    }
                    Ok(text) => Ok((text, None, None)),
                    Err(e) => Err(format!("failed to read {path} as text: it is binary ({} bytes)", e.as_bytes().len())),
                }
            }
            "write_file" => {
                let path = arg("path")?;
                let content = arg("content")?;
                let existed = sandbox.exec(Command::new("test").arg("-e").arg(&path)).await.map_err(sandbox_error)?.success();
                sandbox.write_file(&path, content.as_bytes(), 0o644).await.map_err(sandbox_error)?;
                let kind = if existed { EditKind::Update } else { EditKind::Add };
                Ok((format!("wrote {} bytes to {path}", content.len()), None, Some(FileEdit { path, kind })))
            }
            "list_files" => {
                let path = arg("path")?;
                let script = "find \"$1\" -not -path '*/.git' -not -path '*/.git/*' | sort | head -n 1000";
                let out = sandbox
                    .exec(Command::new("sh").arg("-c").arg(script).arg("list_files").arg(&path).timeout(Duration::from_secs(60)))
                    .await
                    .map_err(sandbox_error)?;
                if out.stdout.trim().is_empty() && !out.stderr.trim().is_empty() {
                    return Err(format!("failed to list {path}: {}", out.stderr.trim()));
                }
                Ok((reeval_core::exec::tail(&out.stdout, OUTPUT_LIMIT).to_string(), None, None))
            }
            other => Err(format!("failed to run {other}: there is no such tool; use bash, read_file, write_file or list_files")),
        }
    }
}

/// The first `limit` bytes of `text`, at a character boundary.
fn head(text: &str, limit: usize) -> &str {
    let mut end = limit.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The tools, as chat completions function definitions.
fn tools() -> Value {
    let function = |name: &str, description: &str, properties: Value| {
        let required: Vec<&String> = properties.as_object().map(|p| p.keys().collect()).unwrap_or_default();
        json!({"type": "function", "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required, "additionalProperties": false}
        }})
    };
    json!([
        function(
            "bash",
            "Run a bash command in the workspace. Returns the exit code, stdout and stderr.",
            json!({"command": {"type": "string", "description": "The command."}})
        ),
        function("read_file", "Read a text file. Relative paths are in the workspace.", json!({"path": {"type": "string", "description": "The file's path."}})),
        function(
            "write_file",
            "Write a file (created with its directories, or replaced). Relative paths are in the workspace.",
            json!({"path": {"type": "string", "description": "The file's path."}, "content": {"type": "string", "description": "The whole new content."}})
        ),
        function(
            "list_files",
            "List files under a directory, recursively (.git excluded).",
            json!({"path": {"type": "string", "description": "The directory; `.` is the workspace."}})
        ),
    ])
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

    async fn start(&mut self, sandbox: &SandboxHandle, setup: &reeval_core::SessionSetup) -> Result<(), HarnessError> {
        // A key from the run's `.env` file, resolved in preflight, when the process environment had none.
        if self.key.is_none() {
            self.key = setup.credentials.iter().find(|(name, _)| name == KEY_ENV).map(|(_, value)| value.clone());
        }
        // The rules file is what this agent reads, as a CLI agent would.
        match sandbox.read_file(self.rules_file()).await {
            Ok(bytes) => self.instructions = String::from_utf8_lossy(&bytes).into_owned(),
            Err(SandboxError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(())
    }

    async fn turn(&mut self, sandbox: &SandboxHandle, prompt: &str, _turn: &TurnContext) -> Result<TurnReport, HarnessError> {
        let Some(model) = self.model.clone() else {
            return Err(HarnessError::Failed {
                harness: "openai".into(),
                message: "no model is selected: name one as `openai:<model>` or set OPENAI_MODEL".into(),
                class: ErrorClass::Config,
            });
        };
        if self.messages.is_empty() {
            self.messages.push(json!({"role": "system", "content": self.system_prompt(sandbox.workspace())}));
        }
        self.messages.push(json!({"role": "user", "content": prompt}));
        let mut report = TurnReport::default();
        for _ in 0..self.max_steps {
            let answer = match self.complete(&model).await {
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
                return Ok(failed(report, "failed to read the completion: it has no choices".into(), ErrorClass::Infra));
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
                let input = serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()));
                let (text, record, edit) = self.run_tool(sandbox, name, &input).await;
                report.tool_calls.push(record);
                report.file_edits.extend(edit);
                results.push(json!({"role": "tool", "tool_call_id": call["id"], "content": text}));
            }
            self.messages.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
            self.messages.extend(results);
        }
        let steps = self.max_steps;
        Ok(failed(report, format!("failed to finish the turn within {steps} steps"), ErrorClass::Agent))
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
        assert_eq!(u, Usage { input: Some(70), output: Some(20), cache_read: Some(30), cache_write: None, reasoning: Some(5) });
        assert_eq!(
            Usage::from_chat_completions(&json!({"prompt_tokens": 10, "completion_tokens": 2})),
            Usage { input: Some(10), output: Some(2), ..Usage::default() }
        );
    }

    #[test]
    fn failures_are_classified() {
        let status = |s| RequestError::Status { status: s, message: String::new(), retry_after: None };
        assert_eq!(status(429).class(), ErrorClass::Infra);
        assert_eq!(status(503).class(), ErrorClass::Infra);
        assert_eq!(status(400).class(), ErrorClass::Agent);
        assert_eq!(RequestError::Auth { status: 401 }.class(), ErrorClass::Config);
        assert_eq!(RequestError::Network { url: "u".into(), message: "m".into() }.class(), ErrorClass::Infra);
        assert!(RequestError::Auth { status: 401 }.to_string().contains(KEY_ENV));
    }

    #[test]
    fn tools_are_strict_functions() {
        let tools = tools();
        let names: Vec<&str> = tools.as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["bash", "read_file", "write_file", "list_files"]);
        assert_eq!(tools[2]["function"]["parameters"]["required"], json!(["content", "path"]));
    }

    #[test]
    fn selected_by_name_with_a_model() {
        let h = crate::registry().make("openai:gpt-4.1").expect("openai is registered");
        assert_eq!((h.name(), h.model()), ("openai", Some("gpt-4.1")));
        let agent = OpenAiAgent::with_endpoint("m", "http://127.0.0.1:1/v1/", Some("sk-secret-value".into()));
        assert_eq!(agent.base_url, "http://127.0.0.1:1/v1");
        assert!(agent.credentials().is_empty());
        assert!(!format!("{agent:?}").contains("sk-secret-value"));
    }
}
