//! A model server on loopback that speaks the Anthropic Messages and OpenAI
//! chat completions wire formats, and the streamed ones real agent CLIs use
//! (Anthropic Messages SSE, OpenAI Responses SSE and over WebSocket, see
//! [`streams`]): it answers from a script and records every request, so tests
//! can check what a client sent and how it took each answer. Plain HTTP, or
//! TLS for a provider's host name (reached through reeval's gateway).
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod streams;

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
    /// 200 `text/event-stream`: each JSON event as `event: <its type>` and `data:`
    /// (over a WebSocket: one text message per event).
    Sse(Vec<Value>),
    /// The first bytes of an SSE answer, then the connection is cut (no end of body).
    SseCut(Vec<Value>),
    /// The first events of an SSE answer, then nothing more, ever (a model that hangs mid-answer).
    SseStall(Vec<Value>),
}

impl Answer {
    /// 200 with `body`.
    pub fn ok(body: Value) -> Self {
        Answer::Json { status: 200, headers: Vec::new(), body }
    }
}

type Script = Arc<dyn Fn(usize, &Recorded) -> Answer + Send + Sync>;

/// How the server listens.
#[derive(Clone, Default)]
pub struct Options {
    /// Serve TLS with this config (a leaf for the provider's host), else plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Accept `Upgrade: websocket` (each text message a request, answered with
    /// the events of an [`Answer::Sse`]); else such a request gets a 404.
    pub websocket: bool,
    /// Answer every `Upgrade: websocket` with this status and an API error
    /// instead (a provider rejecting the key before the socket opens).
    pub refuse_upgrades: Option<u16>,
}

/// The server; stops when dropped.
pub struct ModelServer {
    /// `http://127.0.0.1:<port>` (`https://` with TLS).
    pub url: String,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
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
        Self::start_with(Options::default(), script).await
    }

    /// Starts a server as [`ModelServer::start`] does, listening as `options` say.
    pub async fn start_with(
        options: Options,
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let scheme = if options.tls.is_some() { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Script = Arc::new(script);
        let recorded = requests.clone();
        let acceptor = options.tls.clone().map(tokio_rustls::TlsAcceptor::from);
        let upgrades = Upgrades { accept: options.websocket, refuse: options.refuse_upgrades };
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let (script, recorded, acceptor) =
                    (script.clone(), recorded.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        handle(req, script.clone(), recorded.clone(), upgrades)
                    });
                    let http = http1::Builder::new();
                    match acceptor {
                        Some(acceptor) => {
                            let Ok(tls) = acceptor.accept(stream).await else { return };
                            let _ = http
                                .serve_connection(TokioIo::new(tls), service)
                                .with_upgrades()
                                .await;
                        }
                        None => {
                            let _ = http
                                .serve_connection(TokioIo::new(stream), service)
                                .with_upgrades()
                                .await;
                        }
                    }
                });
            }
        });
        Self { url, addr, requests, task }
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

type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).map_err(|never| match never {}).boxed()
}

/// `event: <type>` / `data: <json>` for each event.
pub fn sse_text(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("message")))
        .collect()
}

/// How the server answers `Upgrade: websocket` (see [`Options`]).
#[derive(Debug, Clone, Copy)]
struct Upgrades {
    accept: bool,
    refuse: Option<u16>,
}

fn record(recorded: &Mutex<Vec<Recorded>>, request: Recorded) -> usize {
    let mut all = recorded.lock().unwrap();
    all.push(request);
    all.len() - 1
}

async fn handle(
    req: Request<Incoming>,
    script: Script,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    upgrades: Upgrades,
) -> Result<Response<Body>, Infallible> {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let headers: BTreeMap<String, String> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_lowercase(), v.to_str().unwrap_or("").to_string()))
        .collect();
    if headers.get("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        return Ok(upgrade(req, path, headers, script, recorded, upgrades));
    }
    let bytes = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let request = Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    };
    let n = record(&recorded, request.clone());
    let answer = script(n, &request);
    let (status, headers, body, content_type) = match answer {
        Answer::Json { status, headers, body } => {
            (status, headers, full(body.to_string()), "application/json")
        }
        Answer::Raw { status, body } => (status, Vec::new(), full(body), "application/json"),
        Answer::Hang(d) => {
            tokio::time::sleep(d).await;
            (500, Vec::new(), full("hung"), "application/json")
        }
        Answer::Sse(events) => (200, Vec::new(), full(sse_text(&events)), "text/event-stream"),
        Answer::SseStall(events) => {
            let first: Result<hyper::body::Frame<Bytes>, std::io::Error> =
                Ok(hyper::body::Frame::data(Bytes::from(sse_text(&events))));
            let stream = futures_util::StreamExt::chain(
                futures_util::stream::iter([first]),
                futures_util::stream::pending(),
            );
            (200, Vec::new(), http_body_util::StreamBody::new(stream).boxed(), "text/event-stream")
        }
        Answer::SseCut(events) => {
            // Chunked, and the stream fails after the events: hyper ends the connection mid-body.
            let first: Result<hyper::body::Frame<Bytes>, std::io::Error> =
                Ok(hyper::body::Frame::data(Bytes::from(sse_text(&events))));
            let cut = Err(std::io::Error::other("cut by the script"));
            let stream = futures_util::stream::iter([first, cut]);
            (200, Vec::new(), http_body_util::StreamBody::new(stream).boxed(), "text/event-stream")
        }
    };
    let mut response = Response::builder().status(status).header("content-type", content_type);
    for (k, v) in headers {
        response = response.header(k, v);
    }
    Ok(response.body(body).expect("a valid response"))
}

/// Answers a WebSocket upgrade: 101, then each text message is a request
/// (recorded with method `WS`) whose [`Answer::Sse`] events go back as text
/// messages; any other answer closes the socket. Without `websocket`, a 404;
/// with `refuse_upgrades`, that status and an API error.
fn upgrade(
    mut req: Request<Incoming>,
    path: String,
    headers: BTreeMap<String, String>,
    script: Script,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    upgrades: Upgrades,
) -> Response<Body> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::protocol::Role;

    if let Some(status) = upgrades.refuse {
        record(&recorded, Recorded { method: "GET".into(), path, headers, body: Value::Null });
        let body = json!({"error": {"message": format!("refused upgrade: {status}"), "type": "invalid_request_error", "param": null, "code": null}});
        return Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(full(body.to_string()))
            .expect("valid");
    }
    let key = headers.get("sec-websocket-key").cloned();
    let (true, Some(key)) = (upgrades.accept, key) else {
        record(&recorded, Recorded { method: "GET".into(), path, headers, body: Value::Null });
        return Response::builder().status(404).body(full("no websocket here")).expect("valid");
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else { return };
        let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        while let Some(Ok(message)) = ws.next().await {
            let Message::Text(text) = message else { continue };
            let request = Recorded {
                method: "WS".into(),
                path: path.clone(),
                headers: headers.clone(),
                body: serde_json::from_str(text.as_str()).unwrap_or(Value::Null),
            };
            let n = record(&recorded, request.clone());
            let events = match script(n, &request) {
                Answer::Sse(events) | Answer::SseStall(events) => events,
                _ => {
                    let _ = ws.close(None).await;
                    return;
                }
            };
            for event in events {
                if ws.send(Message::text(event.to_string())).await.is_err() {
                    return;
                }
            }
        }
    });
    Response::builder()
        .status(101)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-accept", accept)
        .body(full(Bytes::new()))
        .expect("a valid response")
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
