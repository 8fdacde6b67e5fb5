//! The backend against a fake API server on loopback: real HTTP and a real
//! websocket upgrade (kube-rs talks to it as to a cluster), with answers and
//! exec sessions scripted per test, and every request recorded. The exec
//! side speaks `v4.channel.k8s.io` as a v1.20 server does: channel-prefixed
//! binary frames, the `Status` on channel 3, no stdin close.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::*;
use crate::docker::owner_label;
use crate::exec::{CAPTURE_LIMIT, Command};
use crate::{
    Backend, ImageSpec, LABEL_OWNER, LABEL_RUN, NetworkSpec, Sandbox, SandboxError, Sweep,
};
use crate::{ExecRequest, Limits, SandboxSpec, archive};

mod exec_session;
mod gateway_pod;
mod image_user;
mod pod_shape;
mod preflight_checks;
mod room;
mod services;
mod teardown;

/// One request the fake server got.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query, percent-decoded.
    target: String,
    body: Value,
    /// Offered websocket subprotocols, for upgrades.
    protocols: String,
    /// For execs: the command's argv, the environment block at the head of
    /// its stdin (the prologue's `$2` bytes), and the command's own stdin after it.
    argv: Vec<String>,
    env_block: Vec<u8>,
    stdin: Vec<u8>,
}

/// What an exec session does once its stdin is in.
#[derive(Debug, Clone)]
struct Session {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    /// The `Status` sent on channel 3; `None`: the socket closes without one.
    status: Option<Value>,
}

/// Whether an exec is the start's probe of the container's user (`user.rs`).
fn is_probe(r: &Seen) -> bool {
    r.argv.iter().any(|a| a == super::user::PROBE)
}

fn exited(code: i64) -> Option<Value> {
    Some(if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
               "message": format!("command terminated with non-zero exit code: exit status {code}"),
               "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    })
}

/// A session "status" that makes the fake break the connection instead (see `run_session`).
fn broken() -> Value {
    json!({"fake": "break the connection"})
}

type Answer = Box<dyn Fn(&Seen) -> Reply + Send + Sync>;

enum Reply {
    Json(u16, Value),
    Exec(Session),
    /// A plain-text body (a container's log).
    Text(String),
}

#[derive(Clone)]
struct FakeApi {
    seen: Arc<Mutex<Vec<Seen>>>,
    url: String,
}

impl FakeApi {
    async fn start(answer: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let answer: Arc<Answer> = Arc::new(Box::new(answer));
        let record = seen.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(serve(socket, answer.clone(), record.clone()));
            }
        });
        Self { seen, url }
    }

    fn backend(&self, config: KubernetesConfig) -> KubeBackend {
        let mut kube_config = kube::Config::new(self.url.parse().unwrap());
        kube_config.default_namespace = "evals".into();
        KubeBackend::with_config(kube_config, config).unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn calls(&self) -> Vec<String> {
        self.seen()
            .iter()
            .map(|s| format!("{} {}", s.method, s.target.split('?').next().unwrap_or("")))
            .collect()
    }
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

async fn serve(socket: TcpStream, answer: Arc<Answer>, seen: Arc<Mutex<Vec<Seen>>>) {
    let mut reader = BufReader::new(socket);
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            head.push(line.trim_end().to_string());
        }
        let Some(first) = head.first() else { return };
        let mut parts = first.split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let raw_target = parts.next().unwrap_or("").to_string();
        let header = |name: &str| {
            head.iter()
                .find_map(|h| {
                    let (k, v) = h.split_once(':')?;
                    k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                })
                .unwrap_or_default()
        };
        let length: usize = header("content-length").parse().unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await.unwrap();
        let argv: Vec<String> = raw_target
            .split_once('?')
            .map(|(_, q)| q)
            .unwrap_or("")
            .split('&')
            .filter_map(|kv| kv.strip_prefix("command="))
            .map(decode)
            .collect();
        let mut request = Seen {
            method,
            target: decode(&raw_target),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            protocols: header("sec-websocket-protocol"),
            argv,
            env_block: Vec::new(),
            stdin: Vec::new(),
        };
        if request.target.contains("/portforward?") {
            let key = header("sec-websocket-key");
            let accept =
                tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
            let text = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
            );
            reader.get_mut().write_all(text.as_bytes()).await.unwrap();
            let ws =
                WebSocketStream::from_raw_socket(reader.into_inner(), Role::Server, None).await;
            seen.lock().unwrap().push(request.clone());
            echo_port(ws, &request).await;
            return;
        }
        if request.target.contains("/exec?") {
            let key = header("sec-websocket-key");
            let accept =
                tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
            let text = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n"
            );
            reader.get_mut().write_all(text.as_bytes()).await.unwrap();
            let ws =
                WebSocketStream::from_raw_socket(reader.into_inner(), Role::Server, None).await;
            run_session(ws, &answer, &mut request).await;
            seen.lock().unwrap().push(request);
            return;
        }
        let (code, kind, body) = match answer(&request) {
            Reply::Json(code, value) => (code, "application/json", value.to_string()),
            Reply::Text(text) => (200, "text/plain", text),
            Reply::Exec(_) => panic!("an exec answer to {}", request.target),
        };
        seen.lock().unwrap().push(request);
        let text = format!(
            "HTTP/1.1 {code} X\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        if reader.get_mut().write_all(text.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// A port-forward session whose pod side echoes what it gets: each channel
/// first names its port (2 bytes, little endian), as the kubelet does.
async fn echo_port(mut ws: WebSocketStream<TcpStream>, request: &Seen) {
    let port: u16 = request
        .target
        .split("ports=")
        .nth(1)
        .and_then(|p| p.split('&').next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    for channel in [0u8, 1] {
        let [lo, hi] = port.to_le_bytes();
        let _ = ws.send(Message::Binary(Bytes::from(vec![channel, lo, hi]))).await;
    }
    while let Some(Ok(message)) = ws.next().await {
        if let Message::Binary(frame) = message
            && frame.first() == Some(&0)
            && frame.len() > 1
            && ws.send(Message::Binary(frame)).await.is_err()
        {
            return;
        }
    }
}

/// Reads the stdin the prologue announced (its `$2` and `$3`), then plays the session.
async fn run_session(mut ws: WebSocketStream<TcpStream>, answer: &Answer, request: &mut Seen) {
    let length = |i: usize| request.argv.get(i).and_then(|n| n.parse::<usize>().ok()).unwrap_or(0);
    let (block, expected) = (length(5), length(5) + length(6));
    let mut got = Vec::new();
    while got.len() < expected {
        match ws.next().await {
            Some(Ok(Message::Binary(frame))) if frame.first() == Some(&0) => {
                got.extend_from_slice(&frame[1..])
            }
            Some(Ok(_)) => {}
            _ => return,
        }
    }
    request.stdin = got.split_off(block);
    request.env_block = got;
    let Reply::Exec(session) = answer(request) else { panic!("a JSON answer to an exec") };
    // Output in several frames, as a server sends it.
    for (channel, bytes) in [(1u8, &session.stdout), (2u8, &session.stderr)] {
        for chunk in bytes.chunks(256 << 10) {
            let mut frame = vec![channel];
            frame.extend_from_slice(chunk);
            if ws.send(Message::Binary(Bytes::from(frame))).await.is_err() {
                return;
            }
        }
    }
    // The connection broken: the socket dropped with no close frame (an API server killed).
    if session.status.as_ref() == Some(&broken()) {
        return;
    }
    if let Some(status) = session.status {
        let mut frame = vec![3u8];
        frame.extend_from_slice(status.to_string().as_bytes());
        let _ = ws.send(Message::Binary(Bytes::from(frame))).await;
    }
    let _ = ws.close(None).await;
}

fn spec() -> SandboxSpec {
    SandboxSpec {
        image: "registry.example/reeval/base:1".into(),
        labels: BTreeMap::from([
            (LABEL_RUN.to_string(), "2026-12-03T13:11:42-77".to_string()),
            (crate::LABEL_ATTEMPT.to_string(), "a#1".to_string()),
        ]),
        workdir: "/workspace".into(),
        limits: Limits { memory_bytes: 1 << 30, nano_cpus: 500_000_000, pids: 256 },
        network: NetworkSpec::None,
        ..Default::default()
    }
}

/// Answers creates by echoing, reads of the pod with a Ready pod, and execs with `exec`.
fn cluster(
    exec: impl Fn(&Seen) -> Session + Send + Sync + 'static,
) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    move |r: &Seen| {
        if r.target.contains("/exec?") {
            return Reply::Exec(exec(r));
        }
        match r.method.as_str() {
            "POST" => Reply::Json(201, r.body.clone()),
            "GET" => Reply::Json(
                200,
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}),
            ),
            _ => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
        }
    }
}

async fn sandbox(api: &FakeApi) -> Arc<dyn Sandbox> {
    api.backend(KubernetesConfig::default()).create(&spec()).await.unwrap()
}
