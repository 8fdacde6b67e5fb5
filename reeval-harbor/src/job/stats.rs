//! The job's `result.json` (Harbor's `JobResult`, without its trial results,
//! as Harbor writes it): counts, and per agent × dataset the metric (the
//! mean reward over the trials with a valid reward), pass@k, the trials by
//! reward and by exception.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde_json::{Value, json};

use super::rfc3339;
use super::trial::TrialOutcome;

/// Harbor's `JobResult` of `trials`.
pub(super) fn job_result(
    job_id: &str,
    started_at: SystemTime,
    trials: &[TrialOutcome],
    n_retries: usize,
) -> Value {
    let finished_at = trials.iter().map(|t| t.finished_at).max().unwrap_or_else(SystemTime::now);
    let mut groups: BTreeMap<&str, Vec<&TrialOutcome>> = BTreeMap::new();
    for t in trials {
        groups.entry(t.evals_key.as_str()).or_default().push(t);
    }
    let evals: serde_json::Map<String, Value> =
        groups.iter().map(|(key, group)| (key.to_string(), eval_stats(group))).collect();
    let errored = trials.iter().filter(|t| t.exception.is_some()).count();
    json!({
        "schema_version": 1,
        "id": job_id,
        "started_at": rfc3339(started_at),
        "updated_at": rfc3339(finished_at),
        "finished_at": rfc3339(finished_at),
        "n_total_trials": trials.len(),
        "stats": {
            "n_completed_trials": trials.len(),
            "n_errored_trials": errored,
            "n_running_trials": 0,
            "n_pending_trials": 0,
            "n_cancelled_trials": 0,
            "n_retries": n_retries,
            "evals": evals,
        },
    })
}

/// One agent × dataset's `AgentDatasetStats`.
fn eval_stats(trials: &[&TrialOutcome]) -> Value {
    let rewarded: Vec<&BTreeMap<String, f64>> =
        trials.iter().filter(|t| t.reward_valid).filter_map(|t| t.rewards.as_ref()).collect();
    let mut reward_stats: BTreeMap<&str, BTreeMap<String, Vec<&str>>> = BTreeMap::new();
    for t in trials.iter().filter(|t| t.reward_valid) {
        for (key, value) in t.rewards.iter().flatten() {
            let by_value = reward_stats.entry(key.as_str()).or_default();
            by_value.entry(format!("{value:?}")).or_default().push(t.trial_name.as_str());
        }
    }
    let mut exception_stats: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in trials {
        if let Some(kind) = &t.exception {
            exception_stats.entry(kind.as_str()).or_default().push(t.trial_name.as_str());
        }
    }
    let metrics = if rewarded.is_empty() { json!([]) } else { json!([mean(&rewarded)]) };
    json!({
        "n_trials": rewarded.len(),
        "n_errors": trials.iter().filter(|t| t.exception.is_some()).count(),
        "metrics": metrics,
        "pass_at_k": pass_at_k(trials),
        "reward_stats": reward_stats,
        "exception_stats": exception_stats,
    })
}

/// Harbor's `Mean` metric: one key → `{"mean": …}`; several → the mean per key (a missing key 0).
fn mean(rewards: &[&BTreeMap<String, f64>]) -> Value {
    let mut keys: Vec<&str> = rewards.iter().flat_map(|r| r.keys().map(String::as_str)).collect();
    keys.sort_unstable();
    keys.dedup();
    let n = rewards.len() as f64;
    if keys.len() <= 1 {
        let sum: f64 = rewards.iter().map(|r| r.values().next().copied().unwrap_or(0.0)).sum();
        return json!({"mean": sum / n});
    }
    let per_key: serde_json::Map<String, Value> = keys
        .iter()
        .map(|k| {
            let sum: f64 = rewards.iter().map(|r| r.get(*k).copied().unwrap_or(0.0)).sum();
            (k.to_string(), json!(sum / n))
        })
        .collect();
    Value::Object(per_key)
}

/// Harbor's pass@k: only for rewards of one key, each 0 or 1; k = 2, 4, 8, …
/// and 5, 10, 15, … up to the fewest trials of a task.
fn pass_at_k(trials: &[&TrialOutcome]) -> Value {
    let mut by_task: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    for t in trials.iter().filter(|t| t.reward_valid) {
        let Some(rewards) = &t.rewards else { continue };
        let mut values = rewards.values();
        match (values.next(), values.next()) {
            (Some(v), None) if *v == 0.0 || *v == 1.0 => {
                by_task.entry(t.task_name.as_str()).or_default().push(*v == 1.0)
            }
            _ => return json!({}),
        }
    }
    let Some(fewest) = by_task.values().map(Vec::len).min() else { return json!({}) };
    let mut ks: Vec<usize> = std::iter::successors(Some(2), |k| Some(k * 2))
        .take_while(|k| *k <= fewest)
        .chain((5..=fewest).step_by(5))
        .collect();
    ks.sort_unstable();
    ks.dedup();
    let out: serde_json::Map<String, Value> = ks
        .into_iter()
        .map(|k| {
            let sum: f64 = by_task
                .values()
                .map(|s| {
                    let (n, c) = (s.len(), s.iter().filter(|p| **p).count());
                    if n - c < k {
                        1.0
                    } else {
                        1.0 - (0..k).map(|i| (n - c - i) as f64 / (n - i) as f64).product::<f64>()
                    }
                })
                .sum();
            (k.to_string(), json!(sum / by_task.len() as f64))
        })
        .collect();
    Value::Object(out)
}
