//! The Anthropic Messages API: `POST {base}/v1/messages` with forced tool calls.

use serde_json::{Value, json};

use super::LlmError;
use super::conversation::{Call, ChatModel, ChatRequest, Choice, Message, Reply};
use crate::turn::Usage;

/// The API version sent in `anthropic-version`.
pub(crate) const API_VERSION: &str = "2023-06-01";

/// The request body.
pub(crate) fn body(model: &ChatModel, req: &ChatRequest<'_>) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| match m {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, calls } => {
                let mut content: Vec<Value> = text.iter().filter(|t| !t.is_empty()).map(|t| json!({"type": "text", "text": t})).collect();
                content.extend(calls.iter().map(|c| json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input})));
                json!({"role": "assistant", "content": content})
            }
            Message::Results(results) => json!({
                "role": "user",
                "content": results.iter().map(|r| json!({"type": "tool_result", "tool_use_id": r.id, "content": r.content, "is_error": r.is_error})).collect::<Vec<_>>(),
            }),
        })
        .collect();
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| {
            // Anthropic takes keywords (ranges) that the strict subset elsewhere does not.
            json!({"name": t.name, "description": t.description, "input_schema": t.schema_with_extra_keywords()})
        })
        .collect();
    let tool_choice = match req.choice {
        Choice::Tool(name) => json!({"type": "tool", "name": name}),
        Choice::Any => json!({"type": "any"}),
    };
    let mut body = json!({
        "model": model.model,
        "max_tokens": model.max_tokens,
        "system": req.system,
        "messages": messages,
        "tools": tools,
        "tool_choice": tool_choice,
    });
    if let Some(t) = model.temperature {
        body["temperature"] = json!(t);
    }
    body
}

/// Reads a response: tool calls, text, model, usage; a refusal or a cut answer is an error.
pub(crate) fn parse(answer: &Value) -> Result<Reply, LlmError> {
    let content = answer["content"]
        .as_array()
        .ok_or_else(|| LlmError::malformed("the answer has no `content` array"))?;
    let mut reply = Reply {
        model: answer["model"].as_str().map(str::to_string),
        usage: usage(&answer["usage"]),
        ..Reply::default()
    };
    let mut text = String::new();
    for block in content {
        match block["type"].as_str() {
            Some("tool_use") => reply.calls.push(Call {
                id: block["id"].as_str().unwrap_or_default().to_string(),
                name: block["name"].as_str().unwrap_or_default().to_string(),
                input: block["input"].clone(),
            }),
            Some("text") => text.push_str(block["text"].as_str().unwrap_or_default()),
            _ => {}
        }
    }
    if !text.is_empty() {
        reply.text = Some(text);
    }
    match answer["stop_reason"].as_str() {
        Some("max_tokens") => Err(LlmError::Truncated),
        Some("refusal") => Err(LlmError::Refused(
            reply.text.clone().unwrap_or_else(|| "stop_reason refusal".into()),
        )),
        _ => Ok(reply),
    }
}

/// Anthropic's usage: `input_tokens` excludes the cache, which is reported apart.
fn usage(u: &Value) -> Usage {
    if !u.is_object() {
        return Usage::default();
    }
    Usage {
        input: u["input_tokens"].as_u64(),
        output: u["output_tokens"].as_u64(),
        cache_read: u["cache_read_input_tokens"].as_u64(),
        cache_write: u["cache_creation_input_tokens"].as_u64(),
        reasoning: None,
        partial: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_forced_tool_call() {
        let answer = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "toolu_01", "name": "submit_verdict", "input": {"reasoning": "ok", "score": 0.9, "passed": true}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 812, "output_tokens": 64, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 7}
        });
        let reply = parse(&answer).unwrap();
        assert_eq!(reply.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
        assert_eq!(reply.calls[0].name, "submit_verdict");
        assert_eq!(reply.calls[0].input["score"], 0.9);
        assert_eq!(reply.text.as_deref(), Some("Looking."));
        assert_eq!(
            reply.usage,
            Usage {
                input: Some(812),
                output: Some(64),
                cache_read: Some(7),
                cache_write: Some(3),
                reasoning: None,
                partial: false,
            }
        );
    }

    #[test]
    fn a_cut_or_refused_answer_is_an_error() {
        let cut = json!({"content": [], "stop_reason": "max_tokens"});
        assert!(matches!(parse(&cut), Err(LlmError::Truncated)));
        let refused =
            json!({"content": [{"type": "text", "text": "I can't"}], "stop_reason": "refusal"});
        assert!(matches!(parse(&refused), Err(LlmError::Refused(m)) if m == "I can't"));
        assert!(matches!(parse(&json!({"type": "message"})), Err(LlmError::Malformed { .. })));
    }
}
