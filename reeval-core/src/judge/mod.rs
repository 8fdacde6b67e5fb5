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
//!
//! Here the builder and the result; `ask.rs` asks the model (endpoint,
//! samples, retries, the verdict), `agentic.rs` its tools in the sandbox,
//! [`prompt`] what it is shown.

mod agentic;
mod ask;
pub mod prompt;

pub(crate) use ask::{Prepared, detail, failure};

use std::time::Duration;

use crate::record::Verdict;

pub use prompt::State;

/// The host variable naming the judge model when neither the builder nor the eval does.
pub const JUDGE_ENV: &str = "REEVAL_JUDGE";
/// The default pass threshold of a verdict's score.
pub const DEFAULT_THRESHOLD: f64 = 0.5;
/// The default number of steps of an agentic judge (model requests, the verdict included).
pub const DEFAULT_MAX_STEPS: u32 = 8;
/// The name of the tool the judge answers with.
pub const SUBMIT_VERDICT: &str = "submit_verdict";

/// The `submit_verdict` tool. Reasoning comes first, so the model reasons before it scores.
pub(crate) fn verdict_tool() -> crate::llm::tools::ToolDef {
    use serde_json::json;
    crate::llm::tools::ToolDef {
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
