//! Checks ATIF trajectories against Harbor's schema (tests/atif/) and the
//! rules of its validators that a JSON Schema cannot say.

use std::path::Path;

use serde_json::Value;

/// Validates every trajectory of `run_dir/atif/` and returns them; panics
/// with the file and the violations otherwise.
pub fn validate_run(run_dir: &Path) -> Vec<Value> {
    let schema: Value = serde_json::from_str(include_str!("../atif/atif.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the ATIF schema compiles");
    let dir = run_dir.join("atif");
    let mut out = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    paths.sort();
    for path in paths {
        let doc = super::json(&path);
        let errors: Vec<String> = validator
            .iter_errors(&doc)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(
            errors.is_empty(),
            "{} breaks the ATIF schema:\n{}",
            path.display(),
            errors.join("\n")
        );
        check_rules(&path, &doc);
        out.push(doc);
    }
    out
}

fn check_rules(path: &Path, doc: &Value) {
    let steps = doc["steps"].as_array().expect("steps");
    for (i, step) in steps.iter().enumerate() {
        assert_eq!(step["step_id"], i as u64 + 1, "{}: step ids run from 1", path.display());
        if step["source"] != "agent" {
            for field in
                ["model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics"]
            {
                assert!(
                    step.get(field).is_none(),
                    "{}: {field} on a non-agent step",
                    path.display()
                );
            }
        }
        let ids: Vec<&Value> = step["tool_calls"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["tool_call_id"]).collect())
            .unwrap_or_default();
        for result in step["observation"]["results"].as_array().into_iter().flatten() {
            if let Some(source) = result.get("source_call_id") {
                assert!(
                    ids.contains(&source),
                    "{}: {source} names no call of its step",
                    path.display()
                );
            }
        }
    }
}

/// Validates the run's trajectories and checks the one of `record` against
/// it: two steps a turn, each agent step with the turn's tool calls, model
/// and output tokens.
pub fn check_record(run_dir: &Path, record: &reeval::Record) -> Value {
    let all = validate_run(run_dir);
    let name = record.file_name();
    let doc = all
        .into_iter()
        .find(|d| d["extra"]["reeval"]["record"] == name.as_str())
        .unwrap_or_else(|| panic!("no ATIF trajectory for {name}"));
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), record.turns.len() * 2, "two steps a turn");
    for (turn, pair) in record.turns.iter().zip(steps.chunks(2)) {
        assert_eq!(pair[0]["source"], "user");
        assert_eq!(pair[0]["message"], turn.prompt.as_str());
        let agent = &pair[1];
        assert_eq!(agent["source"], "agent");
        let calls = agent["tool_calls"].as_array().map_or(0, Vec::len);
        assert_eq!(calls, turn.tool_calls.len(), "{agent}");
        for (call, recorded) in
            agent["tool_calls"].as_array().into_iter().flatten().zip(&turn.tool_calls)
        {
            assert_eq!(call["function_name"], recorded.name.as_str());
        }
        assert_eq!(agent["model_name"].as_str(), turn.model.as_deref(), "{agent}");
        assert_eq!(agent["metrics"]["completion_tokens"].as_u64(), turn.usage.output, "{agent}");
    }
    doc
}
