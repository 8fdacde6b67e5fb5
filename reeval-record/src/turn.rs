//! What one agent turn produced, in the shape every harness reports it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::diff::Diff;

/// Options of one turn (`Ctx::send_with`). Its `Debug` names the variables,
/// not their values (one may be a credential).
#[derive(Clone, Default)]
pub struct TurnOptions {
    /// Ends only this turn, as `timed_out`, when it runs out; the attempt goes on.
    pub timeout: Option<Duration>,
    /// Variables for the agent's own processes in this turn only (Harbor's
    /// `--ae`): not the sandbox's, so no check, verifier or later turn sees them.
    pub env: Vec<(String, String)>,
}

impl std::fmt::Debug for TurnOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnOptions")
            .field("timeout", &self.timeout)
            .field("env", &self.env.iter().map(|(name, _)| format!("{name}=…")).collect::<Vec<_>>())
            .finish()
    }
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    /// The agent finished the turn.
    Completed,
    /// The agent (or its CLI) reported an error.
    Failed,
    /// The attempt's budget ran out during the turn; it was stopped.
    Aborted,
    /// The turn's own limit (`send_with`) ran out; the attempt goes on.
    TimedOut,
    /// The run was interrupted (Ctrl-C, SIGTERM) during the turn; it was stopped.
    Interrupted,
}

/// Token usage. `None` where the harness does not report that figure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    /// Input tokens not read from the cache.
    pub input: Option<u64>,
    /// Output tokens (reasoning included where the provider does not split it).
    pub output: Option<u64>,
    /// Input tokens read from the prompt cache.
    pub cache_read: Option<u64>,
    /// Input tokens written to the prompt cache.
    pub cache_write: Option<u64>,
    /// Reasoning tokens, where reported separately.
    pub reasoning: Option<u64>,
    /// The figures fall short of what was billed: the turn was cut short
    /// (timed out, killed, crashed) before its CLI reported the totals.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

impl Usage {
    /// Usage from an OpenAI-compatible chat completions response's `usage`:
    /// `prompt_tokens` includes the cached tokens, which are reported apart here.
    pub fn from_chat_completions(u: &serde_json::Value) -> Self {
        if !u.is_object() {
            return Usage::default();
        }
        let prompt = u["prompt_tokens"].as_u64();
        let cached = u["prompt_tokens_details"]["cached_tokens"].as_u64();
        Usage {
            input: prompt.map(|p| p.saturating_sub(cached.unwrap_or(0))),
            output: u["completion_tokens"].as_u64(),
            cache_read: cached,
            cache_write: None,
            reasoning: u["completion_tokens_details"]["reasoning_tokens"].as_u64(),
            partial: false,
        }
    }

    /// Adds `other` into `self`; a figure stays `None` only if both are `None`,
    /// and the sum is partial if either is.
    pub fn add(&mut self, other: &Usage) {
        fn sum(a: &mut Option<u64>, b: Option<u64>) {
            *a = match (*a, b) {
                (None, None) => None,
                (x, y) => Some(x.unwrap_or(0) + y.unwrap_or(0)),
            };
        }
        sum(&mut self.input, other.input);
        sum(&mut self.output, other.output);
        sum(&mut self.cache_read, other.cache_read);
        sum(&mut self.cache_write, other.cache_write);
        sum(&mut self.reasoning, other.reasoning);
        self.partial |= other.partial;
    }
}

/// One tool call the agent made during a turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCall {
    /// The tool's name as the harness reports it (`Bash`, `command_execution`, …).
    pub name: String,
    /// The tool's input.
    pub input: serde_json::Value,
    /// The tool's result, as text.
    pub result: Option<String>,
    /// The tool's error, when it failed.
    pub error: Option<String>,
}

/// What kind of change the agent reported for a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EditKind {
    /// A new file.
    Add,
    /// A changed file.
    Update,
    /// A removed file.
    Delete,
}

/// A file edit the agent reported (the diff is the ground truth; this is its claim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileEdit {
    /// Path as reported by the agent.
    pub path: String,
    /// The kind of change.
    pub kind: EditKind,
}

/// What a harness reports for one turn; the context adds prompt, timing and diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TurnReport {
    /// How the turn ended.
    pub status: TurnStatus,
    /// The agent's final message.
    pub final_message: Option<String>,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCall>,
    /// File edits the agent reported.
    pub file_edits: Vec<FileEdit>,
    /// Usage for this turn.
    pub usage: Usage,
    /// The model that served the turn, when reported.
    pub model: Option<String>,
    /// The error the agent or its CLI reported: why the turn failed, or a
    /// non-fatal error notice of a turn that completed anyway.
    pub error: Option<String>,
    /// Who is to blame when the turn failed (default: the agent).
    pub error_class: Option<ErrorClass>,
    /// How many events the harness parsed (0 means the agent never started).
    pub events: u64,
}

impl Default for TurnReport {
    fn default() -> Self {
        Self {
            status: TurnStatus::Completed,
            final_message: None,
            tool_calls: Vec::new(),
            file_edits: Vec::new(),
            usage: Usage::default(),
            model: None,
            error: None,
            error_class: None,
            events: 0,
        }
    }
}

/// Who is to blame when a turn fails: decides the attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The agent's own error: the attempt fails with kind `agent`.
    Agent,
    /// Rate limit, overload, provider 5xx, network loss, an agent that never started: retried.
    Infra,
    /// Missing or rejected credentials: the run is misconfigured.
    Config,
}

/// One agent turn as recorded: what `Ctx::send` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// The prompt sent.
    pub prompt: String,
    /// How the turn ended.
    pub status: TurnStatus,
    /// The agent's final message.
    pub final_message: Option<String>,
    /// The model that served the turn.
    pub model: Option<String>,
    /// Usage for this turn.
    pub usage: Usage,
    /// Tool calls in order.
    pub tool_calls: Vec<ToolCall>,
    /// File edits the agent reported.
    pub file_edits: Vec<FileEdit>,
    /// The error the agent reported, if any.
    pub error: Option<String>,
    /// Wall time of the turn.
    pub duration_ms: u64,
    /// The workspace diff this turn made.
    pub diff: Diff,
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn debug_names_a_turns_variables_not_their_values() {
        let options = TurnOptions {
            timeout: None,
            env: vec![("API_KEY".into(), "sk-value-never-shown".into())],
        };
        let shown = format!("{options:?}");
        assert!(shown.contains("API_KEY=…"), "{shown}");
        assert!(!shown.contains("sk-value-never-shown"), "{shown}");
    }
}
