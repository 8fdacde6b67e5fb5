//! Asking the judge model: its endpoint (model, URL, key), one sample per
//! request with retries, and the verdict over the samples of one criterion.

use std::ops::ControlFlow;
use std::time::Duration;

use super::{JUDGE_ENV, Judge, OpenAiOutput, SUBMIT_VERDICT, State, agentic, prompt, verdict_tool};
use crate::error::{Error, Result};
use crate::llm::chat::parse_spec;
use crate::llm::conversation::{
    ChatModel, ChatRequest, Choice, Message, Provider, Reply, ToolResult,
};
use crate::llm::tools::ToolDef;
use crate::llm::{ApiKey, LlmClient, LlmError, RetryPolicy};
use crate::record::Verdict;
use crate::sandbox::SandboxHandle;
use crate::turn::{ToolCall, Usage};

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
            .ok_or_else(|| Error::Config(format!("failed to find the judge's API key: {key_env} is not set in the host environment{}", if key_env == provider.default_key_env() { " or the run's env files" } else { "" })))?;
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
                .map(|t| crate::exec::tail(&t, crate::record::OUTPUT_TAIL).to_string());
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

// The judge's tests, mostly of asking.
#[cfg(test)]
#[path = "tests.rs"]
mod tests;
