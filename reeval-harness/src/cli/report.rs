//! What a parser builds while a turn's events arrive: the partial
//! [`TurnReport`](reeval_core::turn::TurnReport) that is returned whether the turn finishes or is killed.

use std::collections::HashMap;

use reeval_core::turn::{EditKind, FileEdit, ToolCall, Usage};
use serde_json::Value;

/// An error the CLI reported in its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The CLI's message.
    pub message: String,
    /// The provider's HTTP status, when the CLI reports it.
    pub status: Option<u16>,
}

/// A session's running usage total, as a CLI that reports cumulative usage last reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionTotal {
    /// The session (thread) the total belongs to.
    pub session: String,
    /// The total over every turn of that session so far.
    pub usage: Usage,
}

/// A turn as far as its events go.
#[derive(Debug, Default)]
pub struct TurnBuilder {
    workspace: String,
    /// The agent's final message.
    pub final_message: Option<String>,
    /// Tool calls in the order they started.
    pub tool_calls: Vec<ToolCall>,
    by_id: HashMap<String, usize>,
    pending_edits: HashMap<String, (String, EditKind)>,
    /// File edits the agent reported.
    pub file_edits: Vec<FileEdit>,
    /// Usage so far.
    pub usage: Usage,
    /// The model the CLI reported.
    pub model: Option<String>,
    /// The session to resume on the next turn.
    pub session_id: Option<String>,
    /// The first fatal error the CLI reported.
    pub failure: Option<Failure>,
    /// Non-fatal errors the CLI reported (a tool it could not start): the
    /// record shows them when the turn completes anyway.
    pub notices: Vec<String>,
    /// The session's running usage total as the CLI last reported it, for a
    /// CLI that reports totals over the whole session (Codex): set before the
    /// turn to the previous turn's, so the parser can take this turn's share.
    pub session_total: Option<SessionTotal>,
    /// JSON events parsed.
    pub events: u64,
}

impl TurnBuilder {
    /// A builder for a turn in `workspace` (reported paths under it become relative).
    pub fn new(workspace: &str) -> Self {
        Self { workspace: workspace.trim_end_matches('/').to_string(), ..Self::default() }
    }

    /// Records a tool call that started; `id` links its result. Returns its index.
    pub fn tool_started(&mut self, id: Option<&str>, name: &str, input: Value) -> usize {
        if let Some(id) = id
            && let Some(&i) = self.by_id.get(id)
        {
            return i;
        }
        self.tool_calls.push(ToolCall { name: name.to_string(), input, result: None, error: None });
        let i = self.tool_calls.len() - 1;
        if let Some(id) = id {
            self.by_id.insert(id.to_string(), i);
        }
        i
    }

    /// Records a tool call's result or error. A result for an unknown id starts
    /// a call named `name`. An edit announced with [`TurnBuilder::edit_on_success`] is
    /// kept when the call succeeded.
    pub fn tool_finished(
        &mut self,
        id: &str,
        name: &str,
        result: Option<String>,
        error: Option<String>,
    ) {
        let i = match self.by_id.get(id) {
            Some(&i) => i,
            None => self.tool_started(Some(id), name, Value::Null),
        };
        let ok = error.is_none();
        let call = &mut self.tool_calls[i];
        call.result = result;
        call.error = error;
        if let Some((path, kind)) = self.pending_edits.remove(id)
            && ok
        {
            self.edit(&path, kind);
        }
    }

    /// Announces that tool call `id` edits `path`; kept when the call succeeds.
    pub fn edit_on_success(&mut self, id: &str, path: &str, kind: EditKind) {
        self.pending_edits.insert(id.to_string(), (path.to_string(), kind));
    }

    /// Changes the kind of an announced edit (a write that turned out to update a file).
    pub fn set_pending_kind(&mut self, id: &str, kind: EditKind) {
        if let Some(p) = self.pending_edits.get_mut(id) {
            p.1 = kind;
        }
    }

    /// Records a file edit; paths in the workspace are made relative to it.
    pub fn edit(&mut self, path: &str, kind: EditKind) {
        let path = self.relative(path);
        if path.is_empty() {
            return;
        }
        match self.file_edits.iter_mut().find(|e| e.path == path) {
            // A file added in this turn stays added; a delete (or a re-add after one) wins.
            Some(e) if e.kind == EditKind::Delete || kind == EditKind::Delete => e.kind = kind,
            Some(_) => {}
            None => self.file_edits.push(FileEdit { path, kind }),
        }
    }

    fn relative(&self, path: &str) -> String {
        let prefix = format!("{}/", self.workspace);
        let p = path.strip_prefix(&prefix).unwrap_or(path);
        p.trim_start_matches("./").to_string()
    }

    /// Records a fatal error; the first one is kept.
    pub fn fail(&mut self, message: impl Into<String>, status: Option<u16>) {
        if self.failure.is_none() {
            self.failure = Some(Failure { message: message.into(), status });
        }
    }
}

/// `v[key]` as a count.
pub fn count(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// `v[key]` as a string.
pub fn string<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A tool result as text: a string, the text blocks of a content array, or the JSON.
pub fn text_of(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b {
                Value::String(s) => s.clone(),
                _ => string(b, "text").map(str::to_string).unwrap_or_else(|| b.to_string()),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(_) if v.get("text").is_some_and(Value::is_string) => {
            string(v, "text").unwrap_or_default().to_string()
        }
        other => other.to_string(),
    }
}

/// An HTTP status in a JSON number or string (`429`, `"429"`).
pub fn status_of(v: Option<&Value>) -> Option<u16> {
    match v? {
        Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn links_results_to_calls_and_keeps_edits_of_successful_calls() {
        let mut b = TurnBuilder::new("/workspace");
        b.tool_started(Some("t1"), "Write", json!({"file_path": "/workspace/a.py"}));
        b.edit_on_success("t1", "/workspace/a.py", EditKind::Add);
        b.tool_started(Some("t2"), "Edit", json!({}));
        b.edit_on_success("t2", "/workspace/b.py", EditKind::Update);
        b.tool_finished("t2", "Edit", None, Some("no match".into()));
        b.tool_finished("t1", "Write", Some("ok".into()), None);
        b.tool_finished("t3", "Bash", Some("late".into()), None);
        assert_eq!(b.tool_calls.len(), 3);
        assert_eq!(b.tool_calls[0].result.as_deref(), Some("ok"));
        assert_eq!(b.tool_calls[1].error.as_deref(), Some("no match"));
        assert_eq!(b.tool_calls[2].name, "Bash");
        assert_eq!(b.file_edits, vec![FileEdit { path: "a.py".into(), kind: EditKind::Add }]);
    }

    #[test]
    fn an_added_file_stays_added() {
        let mut b = TurnBuilder::new("/workspace/");
        b.edit("/workspace/x", EditKind::Add);
        b.edit("./x", EditKind::Update);
        b.edit("/elsewhere/y", EditKind::Update);
        assert_eq!(b.file_edits.len(), 2);
        assert_eq!(b.file_edits[0].kind, EditKind::Add);
        assert_eq!(b.file_edits[1].path, "/elsewhere/y");
    }

    #[test]
    fn reads_text_and_statuses() {
        assert_eq!(
            text_of(&json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
            "a\nb"
        );
        assert_eq!(text_of(&json!("x")), "x");
        assert_eq!(status_of(Some(&json!("401"))), Some(401));
        assert_eq!(status_of(Some(&json!(529))), Some(529));
        assert_eq!(status_of(Some(&json!(null))), None);
    }
}
