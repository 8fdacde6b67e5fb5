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
pub mod prompt;

use std::ops::ControlFlow;
use std::time::Duration;

use serde_json::json;

use crate::error::{Error, Result};
use crate::llm::chat::{ChatModel, ChatRequest, Choice, Message, Provider, Reply, ToolResult};
use crate::llm::tools::ToolDef;
use crate::llm::{ApiKey, LlmClient, LlmError, RetryPolicy};
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

/// The verdicts of one [`Ctx::judge`](crate::Ctx::judge) call, one per criterion.
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

// A judge spec's provider and model, and its key's variable: `llm/chat.rs`
// (settings and preflight read them without naming the judge).
pub use crate::llm::chat::key_env;
pub(crate) use crate::llm::chat::parse_spec;

/// How the judge backs off between tries: 0.5 s doubling to 8 s, jittered; the retries are the builder's.
const BACKOFF: RetryPolicy =
    RetryPolicy { retries: 0, base: Duration::from_millis(500), max: Duration::from_secs(8) };
/// What `response_format` is named when the verdict is asked for as a JSON schema.
const JSON_SCHEMA_NAME: &str = "verdict";

/// A judge model ready to be asked, and how it gives structured output.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// The chat's provider, read where the judge chooses how to ask.
    pub(crate) provider: Provider,
    pub(crate) openai_output: OpenAiOutput,
    pub(crate) chat: ChatModel,
}

impl Endpoint {
    /// Resolves the model, URL and key of `judge`; a miss is a config error.
    fn resolve(
        judge: &Judge,
        eval_spec: Option<&str>,
        resolved: &[crate::secrets::Secret],
    ) -> Result<Self> {
        let spec = match (&judge.model, eval_spec) {
            (Some(spec), _) => spec.clone(),
            (None, Some(spec)) => spec.to_string(),
            (None, None) => std::env::var(JUDGE_ENV).ok().filter(|s| !s.trim().is_empty()).ok_or_else(|| {
                Error::Config(format!("failed to choose a judge model: name one with Judge::model(..), the eval's `judge = \"..\"` or {JUDGE_ENV} (e.g. `anthropic:claude-sonnet-4-5`)"))
            })?,
        };
        let (provider, model) = parse_spec(&spec).map_err(Error::Config)?;
        let key_env =
            judge.api_key_env.clone().unwrap_or_else(|| provider.default_key_env().to_string());
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
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| Error::infra("build the judge's HTTP client", e))?;
        let client = LlmClient::new(http).timeout(judge.timeout).key(ApiKey::from_env(
            provider.key_header(),
            &key_env,
            Some(key),
        ));
        let chat = ChatModel {
            provider,
            model,
            base_url,
            temperature: judge.temperature,
            max_tokens: judge.max_tokens,
            client,
        };
        Ok(Self { provider, openai_output: judge.openai_output, chat })
    }
}

/// The `submit_verdict` tool. Reasoning comes first, so the model reasons before it scores.
pub(crate) fn verdict_tool() -> ToolDef {
    ToolDef {
        name: SUBMIT_VERDICT,
        description: "Record your verdict on the criterion.".into(),
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
        // The range is checked on reading too, for the providers that do not take it.
        extra_keywords: Some(json!({"score": {"minimum": 0, "maximum": 1}})),
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
fn parse_verdict(reply: &Reply) -> std::result::Result<Sample, LlmError> {
    let call = reply.calls.iter().find(|c| c.name == SUBMIT_VERDICT).ok_or_else(|| {
        LlmError::malformed(match &reply.text {
            Some(text) => format!(
                "no {SUBMIT_VERDICT} call, only text: {}",
                crate::exec::tail(text.trim(), 200)
            ),
            None => format!("no {SUBMIT_VERDICT} call"),
        })
    })?;
    let input = &call.input;
    let score = input["score"].as_f64().ok_or_else(|| {
        LlmError::malformed(format!("`score` is missing or not a number in {input}"))
    })?;
    if !(0.0..=1.0).contains(&score) {
        return Err(LlmError::malformed(format!("`score` {score} is outside 0..1")));
    }
    let passed = input["passed"].as_bool().ok_or_else(|| {
        LlmError::malformed(format!("`passed` is missing or not a boolean in {input}"))
    })?;
    let reasoning = input["reasoning"].as_str().ok_or_else(|| {
        LlmError::malformed(format!("`reasoning` is missing or not a string in {input}"))
    })?;
    Ok(Sample { score, passed, reasoning: reasoning.to_string() })
}

/// What one criterion's requests spent and used.
#[derive(Debug, Default)]
struct Spent {
    usage: Usage,
    model: Option<String>,
    tool_calls: Vec<ToolCall>,
}

/// Everything one criterion is judged with.
struct Task<'a> {
    endpoint: &'a Endpoint,
    system: String,
    user: String,
    retries: u32,
    agentic: Option<(&'a SandboxHandle, u32)>,
}

impl Task<'_> {
    /// One request, retried while asking again may help; `parse` turns a reply
    /// into what the caller needs, and its failure is retried as a malformed answer.
    /// Every reply's usage is counted, a retried one's too.
    async fn ask<T>(
        &self,
        req: &ChatRequest<'_>,
        spent: &mut Spent,
        parse: impl Fn(&Reply) -> std::result::Result<T, LlmError>,
    ) -> std::result::Result<T, LlmError> {
        let mut tries = RetryPolicy { retries: self.retries, ..BACKOFF }.tries();
        loop {
            let result = match self.endpoint.chat.send(req).await {
                Ok(reply) => {
                    spent.usage.add(&reply.usage);
                    if reply.model.is_some() {
                        spent.model = reply.model.clone();
                    }
                    parse(&reply)
                }
                Err(e) => Err(e),
            };
            if let ControlFlow::Break(done) = tries.settle(result).await {
                return done;
            }
        }
    }

    /// The request of one step, over `messages` and `tools`.
    fn request<'r>(
        &'r self,
        messages: &'r [Message],
        tools: &'r [ToolDef],
        choice: Choice,
    ) -> ChatRequest<'r> {
        // A request for nothing but the verdict may take it as a JSON schema, where the judge is set to.
        let json_schema =
            (self.endpoint.openai_output == OpenAiOutput::JsonSchema).then_some(JSON_SCHEMA_NAME);
        ChatRequest { system: &self.system, messages, tools, choice, json_schema }
    }
}

/// One sample: a forced verdict, or an agentic look around and then a verdict.
async fn sample(task: &Task<'_>, spent: &mut Spent) -> std::result::Result<Sample, LlmError> {
    let Some((sandbox, max_steps)) = task.agentic else {
        let messages = [Message::User(task.user.clone())];
        let tools = [verdict_tool()];
        return task
            .ask(
                &task.request(&messages, &tools, Choice::Tool(SUBMIT_VERDICT)),
                spent,
                parse_verdict,
            )
            .await;
    };
    let toolset = agentic::toolset();
    let tools = agentic::tools();
    let mut messages = vec![Message::User(task.user.clone())];
    for step in 1..=max_steps {
        let choice = if step == max_steps { Choice::Tool(SUBMIT_VERDICT) } else { Choice::Any };
        let req = task.request(&messages, &tools, choice);
        let reply = task
            .ask(&req, spent, |r| {
                if r.calls.iter().any(|c| c.name == SUBMIT_VERDICT) {
                    parse_verdict(r).map(|_| r.clone())
                } else if r.calls.is_empty() {
                    Err(LlmError::malformed("no tool call"))
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
            let mut output = toolset.run(sandbox, &call.name, &call.input).await;
            // The record keeps the tail, as it does of a check's output.
            output.call.result = output
                .call
                .result
                .map(|t| crate::exec::tail(&t, crate::lifecycle::check::CHECK_TAIL).to_string());
            spent.tool_calls.push(output.call);
            results.push(ToolResult {
                id: call.id.clone(),
                content: prompt::untrusted(&output.text),
                is_error: output.failed,
            });
        }
        messages.push(Message::Assistant { text: reply.text.clone(), calls: reply.calls.clone() });
        messages.push(Message::Results(results));
    }
    Err(LlmError::malformed(format!("no verdict within {max_steps} steps")))
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
    let model = spent.model.clone().or_else(|| Some(task.endpoint.chat.model.clone()));
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
    let reasoning = if got.len() > 1 {
        format!("{passing} of {} samples passed. {}", got.len(), chosen.reasoning)
    } else {
        chosen.reasoning.clone()
    };
    Verdict { score, pass, reasoning, ..base }
}

/// Why a verdict fails the attempt, as the record's message reads.
fn failure_message(v: &Verdict) -> String {
    match &v.error {
        Some(e) => format!(
            "failed to get a verdict on {:?} from {}: {e}",
            v.criterion,
            v.model.as_deref().unwrap_or("the judge")
        ),
        None => format!(
            "{:?} did not pass (score {:.2}, threshold {:.2}): {}",
            v.criterion,
            v.score,
            v.threshold,
            prompt::shorten(&v.reasoning, 500)
        ),
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
    pub(crate) fn prepare(
        &self,
        eval_spec: Option<&str>,
        secrets: &[crate::secrets::Secret],
    ) -> Result<Prepared> {
        if self.criteria.is_empty() {
            return Err(Error::Config("failed to judge: the judge was given no criterion".into()));
        }
        if !(0.0..=1.0).contains(&self.threshold) {
            return Err(Error::Config(format!(
                "failed to judge: threshold {} is outside 0..1",
                self.threshold
            )));
        }
        let endpoint = Endpoint::resolve(self, eval_spec, secrets)?;
        let json_schema = endpoint.provider == Provider::OpenAi
            && endpoint.openai_output == OpenAiOutput::JsonSchema
            && !self.agentic;
        let system =
            prompt::system(self.threshold, self.agentic.then_some(self.max_steps), json_schema);
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
    pub(crate) async fn verdict(
        &self,
        criterion: &str,
        evidence: &prompt::Evidence,
        sandbox: Option<&SandboxHandle>,
    ) -> Verdict {
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
    use serde_json::Value;

    use super::*;
    use crate::llm::chat::Call;

    fn reply(input: Value) -> Reply {
        Reply {
            calls: vec![Call { id: "1".into(), name: SUBMIT_VERDICT.into(), input }],
            ..Reply::default()
        }
    }

    #[test]
    fn specs_name_a_provider_and_a_model() {
        assert_eq!(
            parse_spec("anthropic:claude-sonnet-4-5").unwrap(),
            (Provider::Anthropic, "claude-sonnet-4-5".into())
        );
        assert_eq!(parse_spec("openai:gpt-4.1").unwrap(), (Provider::OpenAi, "gpt-4.1".into()));
        assert!(parse_spec("gpt-4.1").unwrap_err().contains("names no provider"));
        assert!(parse_spec("google:gemini").unwrap_err().contains("not known"));
        assert!(parse_spec("openai:").unwrap_err().contains("no model"));
    }

    #[test]
    fn verdicts_are_validated() {
        assert_eq!(
            parse_verdict(&reply(json!({"reasoning": "ok", "score": 0.8, "passed": true})))
                .unwrap(),
            Sample { score: 0.8, passed: true, reasoning: "ok".into() }
        );
        let malformed = |r: &Reply, needle: &str| matches!(parse_verdict(r), Err(LlmError::Malformed { message, .. }) if message.contains(needle));
        assert!(malformed(
            &reply(json!({"reasoning": "ok", "score": 1.5, "passed": true})),
            "outside 0..1"
        ));
        assert!(malformed(
            &reply(json!({"reasoning": "ok", "score": "high", "passed": true})),
            "`score`"
        ));
        assert!(malformed(&reply(json!({"score": 0.5, "passed": true})), "`reasoning`"));
        assert!(malformed(&Reply { text: Some("PASS".into()), ..Reply::default() }, "only text"));
    }

    #[test]
    fn the_judge_backs_off_from_half_a_second_to_eight() {
        let policy = RetryPolicy { retries: 3, ..BACKOFF };
        assert_eq!(
            (policy.ceiling(0), policy.ceiling(2), policy.ceiling(9)),
            (Duration::from_millis(500), Duration::from_secs(2), Duration::from_secs(8))
        );
        assert_eq!(policy.delay(0, Some(Duration::from_secs(2))), Duration::from_secs(2));
    }

    #[test]
    fn the_verdict_tool_takes_a_range_where_the_provider_does() {
        let tool = verdict_tool();
        assert!(tool.schema["properties"]["score"].get("maximum").is_none());
        assert_eq!(tool.schema_with_extra_keywords()["properties"]["score"]["maximum"], 1);
        assert_eq!(tool.schema_with_extra_keywords()["properties"]["score"]["minimum"], 0);
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
    fn failures_read_as_the_record_keeps_them() {
        let v = Verdict {
            criterion: "c".into(),
            score: 0.0,
            pass: false,
            reasoning: String::new(),
            threshold: 0.5,
            model: Some("m".into()),
            usage: Usage::default(),
            error: Some(LlmError::Truncated.to_string()),
            tool_calls: Vec::new(),
        };
        assert_eq!(
            failure_message(&v),
            "failed to get a verdict on \"c\" from m: failed to get an answer: it was cut at the token limit"
        );
    }
}
