//! OpenAI-compatible chat completions: `POST {base}/chat/completions` with a
//! strict JSON schema, or with forced function calls.

use serde_json::{Value, json};

use super::LlmError;
use super::conversation::{Call, ChatModel, ChatRequest, Choice, Message, Reply};
use crate::turn::Usage;

/// The request body.
pub(crate) fn body(model: &ChatModel, req: &ChatRequest<'_>) -> Value {
    let mut messages = vec![json!({"role": "system", "content": req.system})];
    for m in req.messages {
        match m {
            Message::User(text) => messages.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, calls } => {
                let mut msg = json!({"role": "assistant", "content": text});
                if !calls.is_empty() {
                    msg["tool_calls"] =
                        calls.iter().map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.input.to_string()}})).collect();
                }
                messages.push(msg);
            }
            Message::Results(results) => messages.extend(
                results
                    .iter()
                    .map(|r| json!({"role": "tool", "tool_call_id": r.id, "content": r.content})),
            ),
        }
    }
    let mut body = json!({"model": model.model, "messages": messages});
    if let Some((name, tool)) = req.json_schema_tool() {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {"name": name, "strict": true, "schema": tool.schema},
        });
    } else {
        body["tools"] = req.tools.iter().map(|t| t.chat_function(true)).collect();
        body["tool_choice"] = match req.choice {
            Choice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
            Choice::Any => json!("required"),
        };
    }
    if let Some(t) = model.temperature {
        body["temperature"] = json!(t);
    }
    body
}

/// Reads a response. With `json_schema` (the name of the tool whose schema was
/// asked for), the content is read as that tool's call; otherwise tool calls
/// are read whatever the `finish_reason` (a forced call may end with `stop`).
pub(crate) fn parse(answer: &Value, json_schema: Option<&str>) -> Result<Reply, LlmError> {
    let choice =
        answer["choices"].get(0).ok_or_else(|| LlmError::malformed("the answer has no choices"))?;
    let message = &choice["message"];
    if let Some(refusal) = message["refusal"].as_str() {
        return Err(LlmError::Refused(refusal.to_string()));
    }
    if choice["finish_reason"].as_str() == Some("length") {
        return Err(LlmError::Truncated);
    }
    let mut reply = Reply {
        model: answer["model"].as_str().map(str::to_string),
        usage: Usage::from_chat_completions(&answer["usage"]),
        text: message["content"].as_str().map(str::to_string),
        ..Reply::default()
    };
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let arguments = call["function"]["arguments"].as_str().unwrap_or("{}");
        let input = serde_json::from_str(arguments).map_err(|e| {
            LlmError::not_json(&format!("the arguments of {}", call["function"]["name"]), e)
        })?;
        reply.calls.push(Call {
            id: call["id"].as_str().unwrap_or_default().to_string(),
            name: call["function"]["name"].as_str().unwrap_or_default().to_string(),
            input,
        });
    }
    if let Some(tool) = json_schema
        && let Some(content) = &reply.text
    {
        let input = serde_json::from_str(content)
            .map_err(|e| LlmError::not_json(&format!("the content (the input of {tool})"), e))?;
        reply.calls.push(Call { id: "content".into(), name: tool.to_string(), input });
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUBMIT_VERDICT: &str = "submit_verdict";

    #[test]
    fn only_a_request_forcing_its_one_tool_asks_for_a_json_schema() {
        use crate::llm::LlmClient;
        use crate::llm::conversation::Provider;
        use crate::llm::tools::{Tool, ToolDef};

        let model = ChatModel {
            provider: Provider::OpenAi,
            model: "gpt-4.1".into(),
            base_url: "http://127.0.0.1:1/v1".into(),
            temperature: None,
            max_tokens: 10,
            client: LlmClient::new(reqwest::Client::new()),
        };
        let verdict = ToolDef::strings(SUBMIT_VERDICT, "v", &[("reasoning", "r")]);
        let messages = [Message::User("u".into())];
        let one = [verdict.clone()];
        let req = |tools, choice| ChatRequest {
            system: "s",
            messages: &messages,
            tools,
            choice,
            json_schema: Some("verdict"),
        };
        let b = body(&model, &req(&one, Choice::Tool(SUBMIT_VERDICT)));
        assert_eq!(
            (b["response_format"]["json_schema"]["name"].as_str(), b.get("tools")),
            (Some("verdict"), None)
        );
        assert!(b.get("temperature").is_none());
        let two = [Tool::ReadFile.def(), verdict];
        let b = body(&model, &req(&two, Choice::Tool(SUBMIT_VERDICT)));
        assert!(b.get("response_format").is_none());
        assert_eq!(b["tools"][1]["function"]["strict"], true);
        assert_eq!(body(&model, &req(&two, Choice::Any))["tool_choice"], "required");
    }

    #[test]
    fn reads_json_schema_content() {
        let answer = json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-2025-04-14",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"reasoning\":\"ok\",\"score\":0.9,\"passed\":true}", "refusal": null}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 812, "completion_tokens": 40, "total_tokens": 852, "prompt_tokens_details": {"cached_tokens": 12}, "completion_tokens_details": {"reasoning_tokens": 5}}
        });
        let reply = parse(&answer, Some(SUBMIT_VERDICT)).unwrap();
        assert_eq!(reply.calls[0].name, SUBMIT_VERDICT);
        assert_eq!(reply.calls[0].input["passed"], true);
        assert_eq!(reply.model.as_deref(), Some("gpt-4.1-2025-04-14"));
        assert_eq!(
            reply.usage,
            Usage {
                input: Some(800),
                output: Some(40),
                cache_read: Some(12),
                cache_write: None,
                reasoning: Some(5),
                partial: false,
            }
        );
    }

    #[test]
    fn reads_forced_function_calls_whatever_the_finish_reason() {
        let answer = json!({"model": "m", "choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "submit_verdict", "arguments": "{\"reasoning\":\"r\",\"score\":0.2,\"passed\":false}"}}
        ]}, "finish_reason": "stop"}]});
        let reply = parse(&answer, None).unwrap();
        assert_eq!(reply.calls[0].id, "call_1");
        assert_eq!(reply.calls[0].input["score"], 0.2);
        assert_eq!(reply.text, None);
    }

    #[test]
    fn refusals_cuts_and_bad_json_are_errors() {
        let refused = json!({"choices": [{"message": {"content": null, "refusal": "I can't help"}, "finish_reason": "stop"}]});
        assert!(
            matches!(parse(&refused, Some(SUBMIT_VERDICT)), Err(LlmError::Refused(m)) if m == "I can't help")
        );
        let cut =
            json!({"choices": [{"message": {"content": "{\"reas"}, "finish_reason": "length"}]});
        assert!(matches!(parse(&cut, Some(SUBMIT_VERDICT)), Err(LlmError::Truncated)));
        let prose = json!({"choices": [{"message": {"content": "PASS, looks good"}, "finish_reason": "stop"}]});
        assert!(matches!(
            parse(&prose, Some(SUBMIT_VERDICT)),
            Err(LlmError::Malformed { source: Some(_), .. })
        ));
        assert!(matches!(parse(&json!({}), Some(SUBMIT_VERDICT)), Err(LlmError::Malformed { .. })));
    }
}
