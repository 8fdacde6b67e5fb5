//! A model server on loopback that speaks the Anthropic Messages and OpenAI
//! chat completions wire formats: it answers from a script and records every
//! request, so tests can check what a client sent and how it took each answer.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `POST`.
    pub method: String,
    /// `/v1/messages`, `/v1/chat/completions`.
    pub path: String,
    /// Headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`Null` when it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// What the server answers.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A status, extra headers and a JSON body.
    Json { status: u16, headers: Vec<(String, String)>, body: Value },
    /// A status and a raw body.
    Raw { status: u16, body: String },
    /// Nothing for this long, then a 500.
    Hang(Duration),
}

impl Answer {
    /// 200 with `body`.
    pub fn ok(body: Value) -> Self {
        Answer::Json { status: 200, headers: Vec::new(), body }
    }
}

type Script = Arc<dyn Fn(usize, &Recorded) -> Answer + Send + Sync>;

/// The server; stops when dropped.
pub struct ModelServer {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ModelServer {
    /// Starts a server answering request `n` (0-based) with `script(n, &request)`.
    pub async fn start(
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Script = Arc::new(script);
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (script, recorded) = (script.clone(), recorded.clone());
                tokio::spawn(async move {
                    let service =
                        service_fn(move |req| handle(req, script.clone(), recorded.clone()));
                    let _ =
                        http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Self { url, requests, task }
    }

    /// Starts a server giving `answers` in order, then 500s.
    pub async fn scripted(answers: Vec<Answer>) -> Self {
        Self::start(move |n, _| {
            answers.get(n).cloned().unwrap_or_else(|| Answer::Raw {
                status: 500,
                body: "the script has no more answers".into(),
            })
        })
        .await
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn handle(
    req: Request<Incoming>,
    script: Script,
    recorded: Arc<Mutex<Vec<Recorded>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let headers = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_lowercase(), v.to_str().unwrap_or("").to_string()))
        .collect();
    let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let request = Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    };
    let n = {
        let mut all = recorded.lock().unwrap();
        all.push(request.clone());
        all.len() - 1
    };
    let answer = script(n, &request);
    let (status, headers, body) = match answer {
        Answer::Json { status, headers, body } => (status, headers, body.to_string()),
        Answer::Raw { status, body } => (status, Vec::new(), body),
        Answer::Hang(d) => {
            tokio::time::sleep(d).await;
            (500, Vec::new(), "hung".to_string())
        }
    };
    let mut response =
        Response::builder().status(status).header("content-type", "application/json");
    for (k, v) in headers {
        response = response.header(k, v);
    }
    Ok(response.body(Full::new(Bytes::from(body))).expect("a valid response"))
}

/// Answers in the Anthropic Messages format.
pub mod anthropic {
    use super::*;

    /// The model the answers say served them.
    pub const MODEL: &str = "claude-sonnet-4-5-20250929";

    fn message(content: Value, stop_reason: &str) -> Answer {
        Answer::ok(json!({
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": 812, "output_tokens": 64, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 100}
        }))
    }

    /// A forced `submit_verdict` call.
    pub fn verdict(score: f64, passed: bool, reasoning: &str) -> Answer {
        tool_use(&[(
            "submit_verdict",
            json!({"reasoning": reasoning, "score": score, "passed": passed}),
        )])
    }

    /// Tool calls, `toolu_0`, `toolu_1`, …
    pub fn tool_use(calls: &[(&str, Value)]) -> Answer {
        let content: Vec<Value> =
            calls.iter().enumerate().map(|(i, (name, input))| json!({"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": input})).collect();
        message(json!(content), "tool_use")
    }

    /// Prose only.
    pub fn text(text: &str) -> Answer {
        message(json!([{"type": "text", "text": text}]), "end_turn")
    }

    /// An error in Anthropic's shape.
    pub fn error(status: u16, kind: &str, message: &str, headers: &[(&str, &str)]) -> Answer {
        Answer::Json {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: json!({"type": "error", "error": {"type": kind, "message": message}}),
        }
    }
}

/// Answers in the OpenAI chat completions format.
pub mod openai {
    use super::*;

    /// The model the answers say served them.
    pub const MODEL: &str = "gpt-4.1-2025-04-14";

    /// A completion with `message` and `finish_reason`.
    pub fn completion(message: Value, finish_reason: &str) -> Answer {
        Answer::ok(json!({
            "id": "chatcmpl-AbC123",
            "object": "chat.completion",
            "created": 1767225600,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 812, "completion_tokens": 40, "total_tokens": 852,
                      "prompt_tokens_details": {"cached_tokens": 100}, "completion_tokens_details": {"reasoning_tokens": 7}}
        }))
    }

    /// A verdict as JSON-schema content.
    pub fn json_verdict(score: f64, passed: bool, reasoning: &str) -> Answer {
        let content = json!({"reasoning": reasoning, "score": score, "passed": passed}).to_string();
        completion(json!({"role": "assistant", "content": content, "refusal": null}), "stop")
    }

    /// A forced `submit_verdict` function call.
    pub fn call_verdict(score: f64, passed: bool, reasoning: &str) -> Answer {
        tool_calls(&[(
            "submit_verdict",
            json!({"reasoning": reasoning, "score": score, "passed": passed}),
        )])
    }

    /// Function calls, `call_0`, `call_1`, …
    pub fn tool_calls(calls: &[(&str, Value)]) -> Answer {
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, input))| json!({"id": format!("call_{i}"), "type": "function", "function": {"name": name, "arguments": input.to_string()}}))
            .collect();
        completion(json!({"role": "assistant", "content": null, "tool_calls": calls}), "tool_calls")
    }

    /// A plain message.
    pub fn text(text: &str) -> Answer {
        completion(json!({"role": "assistant", "content": text, "refusal": null}), "stop")
    }

    /// An error in OpenAI's shape.
    pub fn error(
        status: u16,
        kind: &str,
        code: &str,
        message: &str,
        headers: &[(&str, &str)],
    ) -> Answer {
        Answer::Json {
            status,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            body: json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
        }
    }
}
