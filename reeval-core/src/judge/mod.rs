//! The judge: a verdict from a model on criteria the eval names.
//!
//! `c.judge("the test covers an empty name")` or
//! `c.judge(Judge::new().criterion(..).threshold(0.7).model("anthropic:claude-sonnet-4-5"))`.
//!
//! - The model is the builder's, else the eval's `judge = ".."`, else the host's
//!   `REEVAL_JUDGE`; specs read `anthropic:<model>` or `openai:<model>`.
//! - The key is read on the host (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`), never
//!   from the sandbox, and appears in no record, error or log.
//! - Answers are structured only: a forced `submit_verdict` tool call
//!   (Anthropic, OpenAI function calling) or a strict JSON schema (OpenAI).
//! - One request per criterion (and per sample, with [`Judge::samples`]); each
//!   criterion becomes one [`Verdict`] in the record.
//! - A verdict that does not pass fails the attempt with kind `judge` while the
//!   eval goes on; so does a judge that could not answer (after retries), with
//!   the cause in the verdict's `error`.
//! - [`Judge::agentic`] lets the judge look around the sandbox (read a file,
//!   list a directory, run a command in a throwaway copy of the workspace).

mod agentic;
mod anthropic;
mod openai;
pub mod prompt;

use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::record::Verdict;
use crate::sandbox::SandboxHandle;
use crate::turn::{ToolCall, Usage};

pub use prompt::State;

/// The host variable naming the judge model when neither the builder nor the eval does.
pub const JUDGE_ENV: &str = "REEVAL_JUDGE";
/// The default pass threshold of a verdict's score.
pub const DEFAULT_THRESHOLD: f64 = 0.5;
/// The default number of steps of an agentic judge (model requests, the verdict included).
pub const DEFAULT_MAX_STEPS: u32 = 8;
/// The name of the tool the judge answers with.
pub const SUBMIT_VERDICT: &str = "submit_verdict";

/// How an OpenAI-compatible judge is asked for structured output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenAiOutput {
    /// `response_format: json_schema` with `strict: true` (OpenAI's own API).
    #[default]
    JsonSchema,
    /// A forced `submit_verdict` function call (works on more compatible servers).
    FunctionCall,
}

/// What to ask the judge, and how. Built with [`Judge::new`] (or [`Judge::agentic`]);
/// a `&str` or `String` is a judge of that one criterion.
#[derive(Debug, Clone)]
pub struct Judge {
    criteria: Vec<String>,
    threshold: f64,
    state: State,
    model: Option<String>,
    base_url: Option<String>,
    api_key_env: Option<String>,
    samples: u32,
    agentic: bool,
    max_steps: u32,
    timeout: Duration,
    retries: u32,
    temperature: Option<f64>,
    max_tokens: u32,
    openai_output: OpenAiOutput,
}

impl Default for Judge {
    fn default() -> Self {
        Self {
            criteria: Vec::new(),
            threshold: DEFAULT_THRESHOLD,
            state: State::default(),
            model: None,
            base_url: None,
            api_key_env: None,
            samples: 1,
            agentic: false,
            max_steps: DEFAULT_MAX_STEPS,
            timeout: Duration::from_secs(120),
            retries: 3,
            temperature: Some(0.0),
            max_tokens: 2048,
            openai_output: OpenAiOutput::default(),
        }
    }
}

impl From<&str> for Judge {
    fn from(criterion: &str) -> Self {
        Judge::new().criterion(criterion)
    }
}

impl From<String> for Judge {
    fn from(criterion: String) -> Self {
        Judge::new().criterion(criterion)
    }
}

impl From<&String> for Judge {
    fn from(criterion: &String) -> Self {
        Judge::new().criterion(criterion.clone())
    }
}

impl<const N: usize> From<[&str; N]> for Judge {
    fn from(criteria: [&str; N]) -> Self {
        criteria.into_iter().fold(Judge::new(), Judge::criterion)
    }
}

impl From<Vec<String>> for Judge {
    fn from(criteria: Vec<String>) -> Self {
        criteria.into_iter().fold(Judge::new(), Judge::criterion)
    }
}

impl Judge {
    /// A judge with no criteria yet, threshold 0.5, the default [`State`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A judge that may inspect the sandbox before its verdict: read a file,
    /// list a directory, run a command in a throwaway copy of the workspace,
    /// for at most [`Judge::max_steps`] model requests. Its tool calls are recorded.
    pub fn agentic() -> Self {
        Self { agentic: true, ..Self::default() }
    }

    /// Adds a criterion; each one gets its own verdict.
    pub fn criterion(mut self, criterion: impl Into<String>) -> Self {
        self.criteria.push(criterion.into());
        self
    }

    /// The score (0..1) a verdict needs to pass. Default 0.5.
    pub fn threshold(mut self, threshold: f64) -> Self {
        self.threshold = threshold;
        self
    }

    /// What the judge sees of the attempt.
    pub fn state(mut self, state: State) -> Self {
        self.state = state;
        self
    }

    /// The judge model, `anthropic:<model>` or `openai:<model>`.
    pub fn model(mut self, spec: impl Into<String>) -> Self {
        self.model = Some(spec.into());
        self
    }

    /// The API's base URL, instead of `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`.
    /// Anthropic's is the host (`https://api.anthropic.com`); OpenAI's includes
    /// the version (`https://api.openai.com/v1`), as the providers' SDKs read them.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }

    /// The host variable holding the API key, instead of `ANTHROPIC_API_KEY` / `OPENAI_API_KEY`.
    pub fn api_key_env(mut self, name: impl Into<String>) -> Self {
        self.api_key_env = Some(name.into());
        self
    }

    /// Asks each criterion `n` times and takes the majority (default 1).
    /// Set a [`Judge::temperature`] above 0 for the samples to differ.
    pub fn samples(mut self, n: u32) -> Self {
        self.samples = n.max(1);
        self
    }

    /// The most model requests an agentic judge makes per verdict (default 8);
    /// the last one must give the verdict.
    pub fn max_steps(mut self, steps: u32) -> Self {
        self.max_steps = steps.max(1);
        self
    }

    /// The limit of one model request (default 2 minutes).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries of a rate-limited, overloaded, failed, timed-out or malformed answer (default 3).
    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    /// The sampling temperature (default 0); `None` leaves it to the provider,
    /// as models that accept only their default need.
    pub fn temperature(mut self, temperature: impl Into<Option<f64>>) -> Self {
        self.temperature = temperature.into();
        self
    }

    /// The most tokens one answer may take (default 2048; Anthropic only).
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// How an OpenAI-compatible judge gives structured output (default: a strict JSON schema).
    pub fn openai_output(mut self, output: OpenAiOutput) -> Self {
        self.openai_output = output;
        self
    }

    /// The criteria.
    pub fn criteria(&self) -> &[String] {
        &self.criteria
    }
}

/// The verdicts of one [`Ctx::judge`] call, one per criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeResult {
    /// One verdict per criterion, in order.
    pub verdicts: Vec<Verdict>,
}

impl JudgeResult {
    /// Whether every verdict passed.
    pub fn passed(&self) -> bool {
        self.verdicts.iter().all(|v| v.pass)
    }

    /// The mean score.
    pub fn score(&self) -> f64 {
        if self.verdicts.is_empty() {
            return 0.0;
        }
        self.verdicts.iter().map(|v| v.score).sum::<f64>() / self.verdicts.len() as f64
    }

    /// The first verdict that did not pass.
    pub fn first_failure(&self) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| !v.pass)
    }
}

impl std::ops::Deref for JudgeResult {
    type Target = [Verdict];

    fn deref(&self) -> &[Verdict] {
        &self.verdicts
    }
}

/// Which API a judge model is served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    fn default_key_env(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::OpenAi => "OPENAI_API_KEY",
        }
    }

    fn base_url_env(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::OpenAi => "OPENAI_BASE_URL",
        }
    }

    fn default_base_url(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::OpenAi => "https://api.openai.com/v1",
        }
    }
}

/// `anthropic:claude-sonnet-4-5` → (Anthropic, `claude-sonnet-4-5`).
pub(crate) fn parse_spec(spec: &str) -> std::result::Result<(Provider, String), String> {
    let (provider, model) =
        spec.split_once(':').ok_or_else(|| format!("judge model `{spec}` names no provider; write `anthropic:<model>` or `openai:<model>`"))?;
    let provider = match provider.trim() {
        "anthropic" => Provider::Anthropic,
        "openai" => Provider::OpenAi,
        other => return Err(format!("judge provider `{other}` of `{spec}` is not known; use `anthropic:<model>` or `openai:<model>`")),
    };
    let model = model.trim();
    if model.is_empty() {
        return Err(format!("judge model `{spec}` names no model after the colon"));
    }
    Ok((provider, model.to_string()))
}

/// The host variable holding the key for a judge spec (`anthropic:..` → `ANTHROPIC_API_KEY`),
/// for a preflight that checks it before anything starts.
///
/// # Errors
/// The spec's problem, when it names no known provider or no model.
pub fn key_env(spec: &str) -> std::result::Result<&'static str, String> {
    parse_spec(spec).map(|(provider, _)| provider.default_key_env())
}

/// A judge model ready to be asked: provider, model, URL and key.
pub(crate) struct Endpoint {
    pub(crate) provider: Provider,
    pub(crate) model: String,
    pub(crate) base_url: String,
    pub(crate) key: String,
    pub(crate) key_env: String,
    pub(crate) timeout: Duration,
    pub(crate) temperature: Option<f64>,
    pub(crate) max_tokens: u32,
    pub(crate) openai_output: OpenAiOutput,
    pub(crate) client: reqwest::Client,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The key stays out of debug output.
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("key_env", &self.key_env)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Resolves the model, URL and key of `judge`; a miss is a config error.
    fn resolve(judge: &Judge, eval_spec: Option<&str>, resolved: &[crate::secrets::Secret]) -> Result<Self> {
        let spec = match (&judge.model, eval_spec) {
            (Some(spec), _) => spec.clone(),
            (None, Some(spec)) => spec.to_string(),
            (None, None) => std::env::var(JUDGE_ENV).ok().filter(|s| !s.trim().is_empty()).ok_or_else(|| {
                Error::Config(format!("failed to choose a judge model: name one with Judge::model(..), the eval's `judge = \"..\"` or {JUDGE_ENV} (e.g. `anthropic:claude-sonnet-4-5`)"))
            })?,
        };
        let (provider, model) = parse_spec(&spec).map_err(Error::Config)?;
        let key_env = judge.api_key_env.clone().unwrap_or_else(|| provider.default_key_env().to_string());
        // Resolved in preflight (host environment or the run's `.env` file), else the process environment.
        let key = resolved
            .iter()
            .find(|s| s.name == key_env)
            .map(|s| crate::secrets::ExposeSecret::expose_secret(&s.value).to_string())
            .or_else(|| std::env::var(&key_env).ok())
            .filter(|k| !k.is_empty())
            .ok_or_else(|| Error::Config(format!("failed to find the judge's API key: {key_env} is not set in the host environment")))?;
        let base_url = judge
            .base_url
            .clone()
            .or_else(|| std::env::var(provider.base_url_env()).ok().filter(|u| !u.is_empty()))
            .unwrap_or_else(|| provider.default_base_url().to_string())
            .trim_end_matches('/')
            .to_string();
        let client = reqwest::Client::builder().build().map_err(|e| Error::infra("build the judge's HTTP client", e))?;
        Ok(Self {
            provider,
            model,
            base_url,
            key,
            key_env,
            timeout: judge.timeout,
            temperature: judge.temperature,
            max_tokens: judge.max_tokens,
            openai_output: judge.openai_output,
            client,
        })
    }

    /// One model request.
    async fn call(&self, req: &Request<'_>) -> std::result::Result<Reply, CallError> {
        match self.provider {
            Provider::Anthropic => anthropic::call(self, req).await,
            Provider::OpenAi => openai::call(self, req).await,
        }
    }

    /// POSTs `body` to `url` and returns the JSON answer, mapping every failure to a [`CallError`].
    pub(crate) async fn post(&self, url: &str, headers: &[(&str, String)], body: &Value) -> std::result::Result<Value, CallError> {
        let mut request = self.client.post(url).timeout(self.timeout).json(body);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let response = request.send().await.map_err(|e| self.transport_error(url, e))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let text = response.text().await.map_err(|e| self.transport_error(url, e))?;
        if status == 401 || status == 403 {
            // The body may echo part of the key: it is not kept.
            return Err(CallError::Auth { status, key_env: self.key_env.clone() });
        }
        if !(200..300).contains(&status) {
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
                .unwrap_or_else(|| crate::exec::tail(text.trim(), 300).to_string());
            return Err(CallError::Status { status, message: self.redact(&message), retry_after });
        }
        serde_json::from_str(&text).map_err(|e| CallError::Malformed(format!("the answer is not JSON ({e})")))
    }

    fn transport_error(&self, url: &str, e: reqwest::Error) -> CallError {
        if e.is_timeout() {
            CallError::Timeout(self.timeout)
        } else {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message = format!("{message}: {s}");
                source = s.source();
            }
            CallError::Network { url: url.to_string(), message: self.redact(&message) }
        }
    }

    fn redact(&self, text: &str) -> String {
        crate::secrets::redact(text, std::slice::from_ref(&self.key))
    }
}

/// `retry-after-ms` or `retry-after` (seconds), when the server sent one.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let read = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0);
    read("retry-after-ms").map(|ms| Duration::from_secs_f64(ms / 1000.0)).or_else(|| read("retry-after").map(Duration::from_secs_f64))
}

/// Why one model request gave no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CallError {
    /// The API answered with an error status.
    #[error("failed to get an answer: HTTP {status}: {message}")]
    Status { status: u16, message: String, retry_after: Option<Duration> },
    /// The key was rejected. The message names the variable, never the key.
    #[error("failed to authenticate with the judge's API (HTTP {status}): check the key in {key_env} on the host")]
    Auth { status: u16, key_env: String },
    /// No answer within the request's limit.
    #[error("failed to get an answer within {:.1}s", .0.as_secs_f64())]
    Timeout(Duration),
    /// The API could not be reached.
    #[error("failed to reach {url}: {message}")]
    Network { url: String, message: String },
    /// The answer was not what was asked for.
    #[error("failed to read the answer: {0}")]
    Malformed(String),
    /// The model refused to answer.
    #[error("failed to get a verdict: the model refused ({0})")]
    Refused(String),
    /// The answer was cut at its token limit.
    #[error("failed to get a verdict: the answer was cut at the token limit")]
    Truncated,
}

impl CallError {
    /// Whether asking again may help: rate limits, overload, server errors, timeouts, network, malformed answers.
    fn retryable(&self) -> bool {
        match self {
            CallError::Status { status, .. } => *status == 408 || *status == 409 || *status == 429 || *status >= 500,
            CallError::Timeout(_) | CallError::Network { .. } | CallError::Malformed(_) => true,
            CallError::Auth { .. } | CallError::Refused(_) | CallError::Truncated => false,
        }
    }
}

/// How long to wait before retry `n` (0-based): the server's `retry-after`, else 0.5s doubling to 8s.
fn backoff(n: u32, error: &CallError) -> Duration {
    if let CallError::Status { retry_after: Some(after), .. } = error {
        return (*after).min(Duration::from_secs(60));
    }
    Duration::from_millis(500 * 2u64.pow(n.min(4)))
}

/// A tool the judge may call.
#[derive(Debug, Clone)]
pub(crate) struct ToolDef {
    pub(crate) name: &'static str,
    pub(crate) description: &'static str,
    /// JSON schema of the input, in the strict subset (every property required, no extras).
    pub(crate) schema: Value,
}

/// One tool call of the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) input: Value,
}

/// One tool's result, sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    pub(crate) id: String,
    pub(crate) content: String,
    pub(crate) is_error: bool,
}

/// A message of a judge's conversation, in neither provider's shape.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    User(String),
    Assistant { text: Option<String>, calls: Vec<Call> },
    Results(Vec<ToolResult>),
}

/// Which tool the model must call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// This one.
    Tool(&'static str),
    /// Any of them.
    Any,
}

/// One model request.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) system: &'a str,
    pub(crate) messages: &'a [Message],
    pub(crate) tools: &'a [ToolDef],
    pub(crate) choice: Choice,
}

/// What one model request answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Reply {
    pub(crate) calls: Vec<Call>,
    pub(crate) text: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) usage: Usage,
}

/// The `submit_verdict` tool. Reasoning comes first, so the model reasons before it scores.
pub(crate) fn verdict_tool() -> ToolDef {
    ToolDef {
        name: SUBMIT_VERDICT,
        description: "Record your verdict on the criterion.",
        schema: json!({
            "type": "object",
            "properties": {
                "reasoning": {"type": "string", "description": "Why, citing the evidence."},
                "score": {"type": "number", "description": "How well the criterion is met, from 0 (not at all) to 1 (fully)."},
                "passed": {"type": "boolean", "description": "Whether the criterion is met."}
            },
            "required": ["reasoning", "score", "passed"],
            "additionalProperties": false
        }),
    }
}

/// One answer of the judge on one criterion.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    score: f64,
    passed: bool,
    reasoning: String,
}

/// Reads and validates a `submit_verdict` call's input.
fn parse_verdict(reply: &Reply) -> std::result::Result<Sample, CallError> {
    let call = reply.calls.iter().find(|c| c.name == SUBMIT_VERDICT).ok_or_else(|| {
        CallError::Malformed(match &reply.text {
            Some(text) => format!("no {SUBMIT_VERDICT} call, only text: {}", crate::exec::tail(text.trim(), 200)),
            None => format!("no {SUBMIT_VERDICT} call"),
        })
    })?;
    let input = &call.input;
    let score = input["score"].as_f64().ok_or_else(|| CallError::Malformed(format!("`score` is missing or not a number in {input}")))?;
    if !(0.0..=1.0).contains(&score) {
        return Err(CallError::Malformed(format!("`score` {score} is outside 0..1")));
    }
    let passed = input["passed"].as_bool().ok_or_else(|| CallError::Malformed(format!("`passed` is missing or not a boolean in {input}")))?;
    let reasoning = input["reasoning"].as_str().ok_or_else(|| CallError::Malformed(format!("`reasoning` is missing or not a string in {input}")))?;
    Ok(Sample { score, passed, reasoning: reasoning.to_string() })
}

/// What one criterion's requests spent and used.
#[derive(Debug, Default)]
struct Spent {
    usage: Usage,
    model: Option<String>,
    tool_calls: Vec<ToolCall>,
}

/// One request, retried while the failure is one that asking again may fix;
/// `parse` turns a reply into what the caller needs (its failure is retried as malformed).
async fn call_retrying<T>(
    endpoint: &Endpoint,
    req: &Request<'_>,
    retries: u32,
    spent: &mut Spent,
    parse: impl Fn(&Reply) -> std::result::Result<T, CallError>,
) -> std::result::Result<T, CallError> {
    let mut n = 0;
    loop {
        let result = match endpoint.call(req).await {
            Ok(reply) => {
                spent.usage.add(&reply.usage);
                if reply.model.is_some() {
                    spent.model = reply.model.clone();
                }
                parse(&reply)
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(v) => return Ok(v),
            Err(e) if e.retryable() && n < retries => {
                tokio::time::sleep(backoff(n, &e)).await;
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Everything one criterion is judged with.
struct Task<'a> {
    endpoint: &'a Endpoint,
    system: String,
    user: String,
    retries: u32,
    agentic: Option<(&'a SandboxHandle, u32)>,
}

/// One sample: a forced verdict, or an agentic look around and then a verdict.
async fn sample(task: &Task<'_>, spent: &mut Spent) -> std::result::Result<Sample, CallError> {
    let Some((sandbox, max_steps)) = task.agentic else {
        let messages = [Message::User(task.user.clone())];
        let tools = [verdict_tool()];
        let req = Request { system: &task.system, messages: &messages, tools: &tools, choice: Choice::Tool(SUBMIT_VERDICT) };
        return call_retrying(task.endpoint, &req, task.retries, spent, parse_verdict).await;
    };
    let tools = agentic::tools();
    let mut messages = vec![Message::User(task.user.clone())];
    for step in 1..=max_steps {
        let choice = if step == max_steps { Choice::Tool(SUBMIT_VERDICT) } else { Choice::Any };
        let req = Request { system: &task.system, messages: &messages, tools: &tools, choice };
        let reply = call_retrying(task.endpoint, &req, task.retries, spent, |r| {
            if r.calls.iter().any(|c| c.name == SUBMIT_VERDICT) {
                parse_verdict(r).map(|_| r.clone())
            } else if r.calls.is_empty() {
                Err(CallError::Malformed("no tool call".into()))
            } else {
                Ok(r.clone())
            }
        })
        .await?;
        if reply.calls.iter().any(|c| c.name == SUBMIT_VERDICT) {
            return parse_verdict(&reply);
        }
        let mut results = Vec::new();
        for call in &reply.calls {
            let outcome = agentic::run(sandbox, call).await;
            let is_error = outcome.is_err();
            let shown = match &outcome {
                Ok(text) | Err(text) => text.clone(),
            };
            spent.tool_calls.push(ToolCall {
                name: call.name.clone(),
                input: call.input.clone(),
                result: outcome.as_ref().ok().map(|t| crate::exec::tail(t, crate::lifecycle::check::CHECK_TAIL).to_string()),
                error: outcome.err(),
            });
            results.push(ToolResult { id: call.id.clone(), content: prompt::untrusted(&shown), is_error });
        }
        messages.push(Message::Assistant { text: reply.text.clone(), calls: reply.calls.clone() });
        messages.push(Message::Results(results));
    }
    Err(CallError::Malformed(format!("no verdict within {max_steps} steps")))
}

/// The verdict on one criterion: its samples and their majority.
async fn verdict(task: &Task<'_>, criterion: &str, threshold: f64, samples: u32) -> Verdict {
    let mut spent = Spent::default();
    let mut got = Vec::new();
    let mut error = None;
    for _ in 0..samples {
        match sample(task, &mut spent).await {
            Ok(s) => got.push(s),
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        }
    }
    let model = spent.model.clone().or_else(|| Some(task.endpoint.model.clone()));
    let base = Verdict {
        criterion: criterion.to_string(),
        score: 0.0,
        pass: false,
        reasoning: String::new(),
        threshold,
        model,
        usage: spent.usage,
        error: None,
        tool_calls: spent.tool_calls,
    };
    if let Some(error) = error {
        return Verdict { error: Some(error), ..base };
    }
    let passes = |s: &Sample| s.passed && s.score >= threshold;
    let passing = got.iter().filter(|s| passes(s)).count();
    let pass = passing * 2 > got.len();
    let score = got.iter().map(|s| s.score).sum::<f64>() / got.len() as f64;
    let chosen = got.iter().find(|s| passes(s) == pass).expect("the majority has a member");
    let reasoning = if got.len() > 1 { format!("{passing} of {} samples passed. {}", got.len(), chosen.reasoning) } else { chosen.reasoning.clone() };
    Verdict { score, pass, reasoning, ..base }
}

/// Why a verdict fails the attempt, as the record's message reads.
fn failure_message(v: &Verdict) -> String {
    match &v.error {
        Some(e) => format!("failed to get a verdict on {:?} from {}: {e}", v.criterion, v.model.as_deref().unwrap_or("the judge")),
        None => format!("{:?} did not pass (score {:.2}, threshold {:.2}): {}", v.criterion, v.score, v.threshold, prompt::shorten(&v.reasoning, 500)),
    }
}

/// A judge call made ready before any request: its model endpoint (the key
/// resolved on the host) and what it asks. The attempt runs one `Judge`
/// phase per criterion with [`Prepared::verdict`] (`lifecycle/12_judge.rs`).
pub(crate) struct Prepared {
    endpoint: Endpoint,
    system: String,
    pub(crate) judge: Judge,
}

impl Judge {
    /// Checks the judge and resolves its model and key.
    ///
    /// # Errors
    /// [`Error::Config`] for no criterion, a threshold outside 0..1, no model
    /// named, an unknown provider or a key not set on the host.
    pub(crate) fn prepare(&self, eval_spec: Option<&str>, secrets: &[crate::secrets::Secret]) -> Result<Prepared> {
        if self.criteria.is_empty() {
            return Err(Error::Config("failed to judge: the judge was given no criterion".into()));
        }
        if !(0.0..=1.0).contains(&self.threshold) {
            return Err(Error::Config(format!("failed to judge: threshold {} is outside 0..1", self.threshold)));
        }
        let endpoint = Endpoint::resolve(self, eval_spec, secrets)?;
        let json_schema = endpoint.provider == Provider::OpenAi && endpoint.openai_output == OpenAiOutput::JsonSchema && !self.agentic;
        let system = prompt::system(self.threshold, self.agentic.then_some(self.max_steps), json_schema);
        Ok(Prepared { endpoint, system, judge: self.clone() })
    }

    /// Whether the judge looks around the sandbox before its verdict.
    pub(crate) fn is_agentic(&self) -> bool {
        self.agentic
    }

    /// What the judge sees of the attempt.
    pub(crate) fn state_shown(&self) -> &State {
        &self.state
    }
}

impl Prepared {
    /// The verdict on one criterion over `evidence`; an agentic judge acts in `sandbox`.
    pub(crate) async fn verdict(&self, criterion: &str, evidence: &prompt::Evidence, sandbox: Option<&SandboxHandle>) -> Verdict {
        let task = Task {
            endpoint: &self.endpoint,
            system: self.system.clone(),
            user: prompt::user(criterion, self.judge.threshold, evidence),
            retries: self.judge.retries,
            agentic: sandbox.map(|s| (s, self.judge.max_steps)),
        };
        verdict(&task, criterion, self.judge.threshold, self.judge.samples).await
    }
}

/// The phase's detail for a verdict.
pub(crate) fn detail(criterion: &str, verdict: &Verdict) -> String {
    match &verdict.error {
        Some(e) => format!("{:?} failed: {e}", prompt::shorten(criterion, 60)),
        None => format!(
            "{:?} {} with {:.2} by {}",
            prompt::shorten(criterion, 60),
            if verdict.pass { "passed" } else { "did not pass" },
            verdict.score,
            verdict.model.as_deref().unwrap_or("?")
        ),
    }
}

/// The error a verdict that did not pass fails the attempt with (the eval goes on).
pub(crate) fn failure(verdict: &Verdict) -> Option<Error> {
    (!verdict.pass).then(|| Error::Judge { message: failure_message(verdict) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(input: Value) -> Reply {
        Reply { calls: vec![Call { id: "1".into(), name: SUBMIT_VERDICT.into(), input }], ..Reply::default() }
    }

    #[test]
    fn specs_name_a_provider_and_a_model() {
        assert_eq!(parse_spec("anthropic:claude-sonnet-4-5").unwrap(), (Provider::Anthropic, "claude-sonnet-4-5".into()));
        assert_eq!(parse_spec("openai:gpt-4.1").unwrap(), (Provider::OpenAi, "gpt-4.1".into()));
        assert!(parse_spec("gpt-4.1").unwrap_err().contains("names no provider"));
        assert!(parse_spec("google:gemini").unwrap_err().contains("not known"));
        assert!(parse_spec("openai:").unwrap_err().contains("no model"));
    }

    #[test]
    fn verdicts_are_validated() {
        assert_eq!(
            parse_verdict(&reply(json!({"reasoning": "ok", "score": 0.8, "passed": true}))).unwrap(),
            Sample { score: 0.8, passed: true, reasoning: "ok".into() }
        );
        assert!(
            matches!(parse_verdict(&reply(json!({"reasoning": "ok", "score": 1.5, "passed": true}))), Err(CallError::Malformed(m)) if m.contains("outside 0..1"))
        );
        assert!(matches!(parse_verdict(&reply(json!({"reasoning": "ok", "score": "high", "passed": true}))), Err(CallError::Malformed(_))));
        assert!(matches!(parse_verdict(&reply(json!({"score": 0.5, "passed": true}))), Err(CallError::Malformed(_))));
        assert!(matches!(parse_verdict(&Reply { text: Some("PASS".into()), ..Reply::default() }), Err(CallError::Malformed(m)) if m.contains("only text")));
    }

    #[test]
    fn what_is_retried() {
        let status = |s| CallError::Status { status: s, message: String::new(), retry_after: None };
        assert!(status(429).retryable() && status(500).retryable() && status(529).retryable() && status(503).retryable());
        assert!(!status(400).retryable() && !status(404).retryable());
        assert!(!CallError::Auth { status: 401, key_env: "K".into() }.retryable());
        assert!(!CallError::Refused("no".into()).retryable() && !CallError::Truncated.retryable());
        assert!(CallError::Timeout(Duration::from_secs(1)).retryable() && CallError::Malformed("x".into()).retryable());
        assert_eq!(backoff(0, &status(500)), Duration::from_millis(500));
        assert_eq!(backoff(2, &status(500)), Duration::from_secs(2));
        assert_eq!(backoff(9, &status(500)), Duration::from_secs(8));
        let limited = CallError::Status { status: 429, message: String::new(), retry_after: Some(Duration::from_secs(2)) };
        assert_eq!(backoff(0, &limited), Duration::from_secs(2));
    }

    #[test]
    fn criteria_convert_into_a_judge() {
        assert_eq!(Judge::from("a").criteria(), ["a"]);
        assert_eq!(Judge::from(["a", "b"]).criteria(), ["a", "b"]);
        assert_eq!(Judge::from(vec!["c".to_string()]).criteria(), ["c"]);
        let j = Judge::agentic().threshold(0.7).samples(0).max_steps(0);
        assert!(j.agentic && j.threshold == 0.7 && j.samples == 1 && j.max_steps == 1);
    }

    #[test]
    fn key_variables_follow_the_provider() {
        assert_eq!(key_env("anthropic:claude-sonnet-4-5"), Ok("ANTHROPIC_API_KEY"));
        assert_eq!(key_env("openai:gpt-4.1"), Ok("OPENAI_API_KEY"));
        assert!(key_env("nope").is_err());
    }

    #[test]
    fn auth_errors_name_the_variable() {
        let e = CallError::Auth { status: 401, key_env: "ANTHROPIC_API_KEY".into() };
        assert!(e.to_string().contains("ANTHROPIC_API_KEY"));
    }
}
