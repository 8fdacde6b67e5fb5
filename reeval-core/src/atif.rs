//! An attempt's trajectory in ATIF, the Agent Trajectory Interchange Format
//! of Harbor (`harbor/models/trajectories/` in Harbor 0.26), which other
//! tools read. Written beside each record as `atif/<record file name>`.
//!
//! The mapping from a [`Record`]: each turn is two steps, the prompt as a
//! `user` step and the agent's answer as an `agent` step holding the turn's
//! model, its tool calls (ids `call_<turn>_<n>`) with their results as the
//! step's observation, and its usage as the step's metrics. Token counts
//! follow ATIF: `prompt_tokens` counts every input token, cached or not
//! (reeval's `input + cacheRead + cacheWrite`), `cached_tokens` the cache
//! reads. A figure the harness did not report is left out, never written as
//! zero; a turn whose usage is partial says so in the step's `extra`.
//! reeval keeps a turn's tool calls but not the model calls between them, so
//! one agent step stands for the whole turn (`llm_call_count` is not set).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::prices::PriceTable;
use crate::record::Record;
use crate::turn::{Turn, Usage};

/// The ATIF version written: the one Harbor 0.26 writes for Claude Code and Codex.
pub const SCHEMA_VERSION: &str = "ATIF-v1.7";

/// The root of an ATIF document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trajectory {
    /// `ATIF-v1.7`.
    pub schema_version: String,
    /// The run this trajectory belongs to (reeval's run id).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// This document's id (the attempt: eval, harness, arm, trial and try).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trajectory_id: Option<String>,
    /// The agent that ran.
    pub agent: Agent,
    /// The interaction, in order, `step_id` from 1.
    pub steps: Vec<Step>,
    /// Totals over the steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub final_metrics: Option<FinalMetrics>,
    /// reeval's own facts: the eval, the outcome, the record's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// The agent system of a trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agent {
    /// The harness's name (`claude-code`, `codex`, `shell`, …), without the
    /// model of its spec (the spec is in the root's `extra`).
    pub name: String,
    /// The harness's pinned version, or `unknown`.
    pub version: String,
    /// The model most turns used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
}

/// One step: a prompt (`user`) or the agent's answer to it (`agent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step's ordinal, from 1.
    pub step_id: u32,
    /// When the turn started (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// `user` or `agent`.
    pub source: String,
    /// The model that served the turn (agent steps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// The prompt, or the agent's final message.
    pub message: String,
    /// The agent's tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The tools' results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    /// The turn's tokens and cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    /// reeval's facts of the turn: its status, error, duration, partial usage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// One tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// `call_<turn>_<n>`, unique in the trajectory.
    pub tool_call_id: String,
    /// The tool's name as the harness reported it.
    pub function_name: String,
    /// The tool's input (an object; other JSON is wrapped as `{"input": …}`).
    pub arguments: Value,
}

/// The results of a step's tool calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// One per tool call that has a result or an error.
    pub results: Vec<ObservationResult>,
}

/// One tool call's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservationResult {
    /// The call it answers.
    pub source_call_id: String,
    /// The result, or the error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// `{"error": true}` when the content is the tool's error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// A step's usage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Every input token, cached or not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Output tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Input tokens read from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// What the step cost, where the model has a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Cache writes and reasoning tokens, where reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Value>,
}

/// Totals of a trajectory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FinalMetrics {
    /// Sum of the steps' prompt tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_prompt_tokens: Option<u64>,
    /// Sum of the steps' completion tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_completion_tokens: Option<u64>,
    /// Sum of the steps' cached tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_cached_tokens: Option<u64>,
    /// The attempt's agent cost, when every turn's model has a price.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_cost_usd: Option<f64>,
    /// How many steps.
    pub total_steps: u32,
}

/// The trajectory of `record`'s turns; `None` when the attempt sent no turn
/// (ATIF requires at least one step). `version` is the harness's version;
/// `prices` price each turn where its model has one.
pub fn trajectory(
    record: &Record,
    version: Option<&str>,
    prices: Option<&PriceTable>,
) -> Option<Trajectory> {
    if record.turns.is_empty() {
        return None;
    }
    let starts = turn_starts(record);
    let mut steps = Vec::with_capacity(record.turns.len() * 2);
    for (n, turn) in record.turns.iter().enumerate() {
        let timestamp = starts.get(n).cloned().flatten();
        steps.push(Step {
            step_id: steps.len() as u32 + 1,
            timestamp: timestamp.clone(),
            source: "user".into(),
            model_name: None,
            message: turn.prompt.clone(),
            tool_calls: None,
            observation: None,
            metrics: None,
            extra: None,
        });
        steps.push(agent_step(steps.len() as u32 + 1, n + 1, turn, timestamp, prices));
    }
    let agent_steps = steps.iter().filter_map(|s| s.metrics.as_ref());
    let sum = |f: fn(&Metrics) -> Option<u64>| -> Option<u64> {
        agent_steps.clone().filter_map(f).reduce(|a, b| a + b)
    };
    let total_cost_usd = prices.and_then(|p| p.cost([record]));
    let final_metrics = FinalMetrics {
        total_prompt_tokens: sum(|m| m.prompt_tokens),
        total_completion_tokens: sum(|m| m.completion_tokens),
        total_cached_tokens: sum(|m| m.cached_tokens),
        total_cost_usd,
        total_steps: steps.len() as u32,
    };
    Some(Trajectory {
        schema_version: SCHEMA_VERSION.into(),
        session_id: Some(record.run_id.clone()),
        trajectory_id: Some(record.artifacts_dir_name()),
        agent: Agent {
            name: crate::harness::split_spec(&record.harness).0.to_string(),
            version: version.unwrap_or("unknown").to_string(),
            model_name: main_model(record),
        },
        steps,
        final_metrics: Some(final_metrics),
        extra: Some(json!({
            "reeval": {
                "eval": record.eval,
                "harness": record.harness,
                "arm": record.arm,
                "trial": record.trial,
                "try": record.try_,
                "outcome": record.outcome.as_str(),
                "kind": record.outcome.kind().map(|k| k.as_str()),
                "record": record.file_name(),
            }
        })),
    })
}

/// The agent's answer to turn `n` (from 1).
fn agent_step(
    step_id: u32,
    n: usize,
    turn: &Turn,
    timestamp: Option<String>,
    prices: Option<&PriceTable>,
) -> Step {
    let calls: Vec<ToolCall> = turn
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, c)| ToolCall {
            tool_call_id: format!("call_{n}_{}", i + 1),
            function_name: c.name.clone(),
            arguments: match &c.input {
                Value::Object(_) => c.input.clone(),
                Value::Null => json!({}),
                other => json!({ "input": other }),
            },
        })
        .collect();
    let results: Vec<ObservationResult> = turn
        .tool_calls
        .iter()
        .zip(&calls)
        .filter_map(|(c, id)| {
            let (content, failed) = match (&c.error, &c.result) {
                (Some(e), _) => (e.clone(), true),
                (None, Some(r)) => (r.clone(), false),
                (None, None) => return None,
            };
            Some(ObservationResult {
                source_call_id: id.tool_call_id.clone(),
                content: Some(content),
                extra: failed.then(|| json!({ "error": true })),
            })
        })
        .collect();
    let mut extra = json!({
        "status": turn.status,
        "durationMs": turn.duration_ms,
    });
    if let Some(e) = &turn.error {
        extra["error"] = json!(e);
    }
    if turn.usage.partial {
        extra["partialUsage"] = json!(true);
    }
    Step {
        step_id,
        timestamp,
        source: "agent".into(),
        model_name: turn.model.clone(),
        message: turn.final_message.clone().unwrap_or_default(),
        tool_calls: (!calls.is_empty()).then_some(calls),
        observation: (!results.is_empty()).then_some(Observation { results }),
        metrics: metrics(&turn.usage, turn.model.as_deref(), prices),
        extra: Some(extra),
    }
}

/// ATIF's metrics of a turn's usage; `None` when the harness reported none.
fn metrics(usage: &Usage, model: Option<&str>, prices: Option<&PriceTable>) -> Option<Metrics> {
    let cached = [usage.cache_read, usage.cache_write];
    let prompt_tokens = match (usage.input, cached) {
        (None, [None, None]) => None,
        (input, [read, write]) => Some(input.unwrap_or(0) + read.unwrap_or(0) + write.unwrap_or(0)),
    };
    let mut extra = serde_json::Map::new();
    if let Some(w) = usage.cache_write {
        extra.insert("cache_creation_input_tokens".into(), json!(w));
    }
    if let Some(r) = usage.reasoning {
        extra.insert("reasoning_tokens".into(), json!(r));
    }
    let cost_usd = match (prices, model) {
        (Some(p), Some(m)) if prompt_tokens.is_some() || usage.output.is_some() => {
            p.price(m).map(|price| price.cost(usage))
        }
        _ => None,
    };
    let m = Metrics {
        prompt_tokens,
        completion_tokens: usage.output,
        cached_tokens: usage.cache_read,
        cost_usd,
        extra: (!extra.is_empty()).then_some(Value::Object(extra)),
    };
    (m != Metrics::default()).then_some(m)
}

/// Each turn's start, as RFC 3339: the attempt's start plus the turn phase's offset.
fn turn_starts(record: &Record) -> Vec<Option<String>> {
    let started = humantime::parse_rfc3339_weak(&record.started_at).ok();
    record
        .phases
        .iter()
        .filter(|p| p.phase == crate::phase::Phase::Turn)
        .map(|p| {
            started.map(|s| {
                let at = s + std::time::Duration::from_millis(p.start_ms);
                humantime::format_rfc3339_millis(at).to_string()
            })
        })
        .collect()
}

/// The model most of the turns named.
fn main_model(record: &Record) -> Option<String> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for m in record.turns.iter().filter_map(|t| t.model.as_deref()) {
        match counts.iter_mut().find(|(n, _)| *n == m) {
            Some((_, c)) => *c += 1,
            None => counts.push((m, 1)),
        }
    }
    counts.iter().max_by_key(|(_, c)| *c).map(|(m, _)| m.to_string())
}

#[cfg(test)]
mod tests;
