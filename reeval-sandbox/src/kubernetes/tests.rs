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

mod room;
mod services;

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
        main_process: None,
        services: Vec::new(),
        mounts: Vec::new(),
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

#[tokio::test]
async fn the_pod_is_bare_unprivileged_limited_labelled_and_placed_as_configured() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let config = KubernetesConfig {
        runtime_class: Some("gvisor".into()),
        node_selector: BTreeMap::from([("pool".into(), "evals".into())]),
        tolerations: vec![BTreeMap::from([
            ("key".into(), "dedicated".into()),
            ("operator".into(), "Equal".into()),
            ("value".into(), "evals".into()),
            ("effect".into(), "NoSchedule".into()),
        ])],
        image_pull_policy: Some("Always".into()),
        ..Default::default()
    };
    let sandbox = api.backend(config).create(&spec()).await.unwrap();
    let seen = api.seen();
    // The policy before the pod: the pod is never up without it.
    assert_eq!(
        api.calls(),
        [
            "POST /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies",
            "POST /api/v1/namespaces/evals/pods"
        ]
    );
    let policy = &seen[0].body;
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"]["dev.reeval.pod"], sandbox.id());
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert!(
        policy["spec"].get("egress").is_none() && policy["spec"].get("ingress").is_none(),
        "{policy}"
    );

    let pod = &seen[1].body;
    let s = &pod["spec"];
    assert_eq!(s["restartPolicy"], "Never");
    assert_eq!(s["automountServiceAccountToken"], false);
    assert_eq!(s["runtimeClassName"], "gvisor");
    assert_eq!(s["nodeSelector"], json!({"pool": "evals"}));
    assert_eq!(
        s["tolerations"][0],
        json!({"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"})
    );
    assert!(s.get("hostNetwork").is_none());
    let c = &s["containers"][0];
    assert_eq!(c["image"], "registry.example/reeval/base:1");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["command"], json!(["sleep", "infinity"]));
    assert_eq!(c["workingDir"], "/workspace");
    assert_eq!(c["resources"]["limits"], json!({"memory": "1073741824", "cpu": "500m"}));
    assert_eq!(c["resources"]["requests"], c["resources"]["limits"]);
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        sc["capabilities"]["add"],
        json!(["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"])
    );
    // Labels are valid label values; the exact ones (and the owner) are annotations.
    let labels = &pod["metadata"]["labels"];
    assert_eq!(labels[LABEL_RUN], "2026-12-03T13-11-42-77");
    assert_eq!(labels["dev.reeval.attempt"], "a-1");
    assert_eq!(labels["dev.reeval.pod"], sandbox.id());
    assert_eq!(pod["metadata"]["annotations"][LABEL_RUN], "2026-12-03T13:11:42-77");
    assert_eq!(pod["metadata"]["annotations"][LABEL_OWNER], owner_label());
}

#[tokio::test]
async fn requests_can_be_lower_than_limits_and_test_clusters_use_the_host_network() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let config = KubernetesConfig {
        requests: BTreeMap::from([("cpu".into(), "50m".into())]),
        host_network: true,
        ..Default::default()
    };
    api.backend(config).create(&spec()).await.unwrap();
    let pod = &api.seen()[1].body;
    assert_eq!(pod["spec"]["hostNetwork"], true);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"],
        json!({"memory": "1073741824", "cpu": "50m"})
    );
}

#[tokio::test]
async fn exec_gives_both_streams_and_the_exit_code_from_the_status() {
    let api = FakeApi::start(cluster(|_| Session {
        stdout: b"out\n".to_vec(),
        stderr: b"err\n".to_vec(),
        status: exited(3),
    }))
    .await;
    let sandbox = sandbox(&api).await;
    let cmd = Command::new("sh")
        .arg("-c")
        .arg("echo out; echo err >&2; exit 3")
        .workdir("/workspace")
        .user("1000:1000");
    let env = [("CI".to_string(), "1".to_string())];
    let out = sandbox.exec(ExecRequest::plain(&cmd, &env)).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str(), out.stderr.as_str()), (3, "out\n", "err\n"));
    // The prologue carries what the exec API cannot: directory, environment (on stdin), no stdin, user.
    let exec = api.seen().into_iter().find(|s| s.target.contains("/exec?")).unwrap();
    assert!(exec.target.contains("container=sandbox"), "{}", exec.target);
    assert!(
        exec.protocols.starts_with("v5.channel.k8s.io"),
        "v5 is offered first: {}",
        exec.protocols
    );
    assert_eq!(exec.argv[..2], ["/bin/sh", "-c"]);
    assert_eq!(
        exec.argv[4..],
        [
            "/workspace",
            "14", // `export 'CI=1'` and a newline
            "",
            "setpriv",
            "--reuid=1000",
            "--regid=1000",
            "--clear-groups",
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3"
        ]
    );

    let ok = FakeApi::start(cluster(|_| Session {
        stdout: b"fine".to_vec(),
        stderr: vec![],
        status: exited(0),
    }))
    .await;
    let out = sandbox_exec(&ok, Command::new("true")).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (0, "fine"));
}

async fn sandbox_exec(
    api: &FakeApi,
    cmd: Command,
) -> Result<crate::exec::ExecOutput, SandboxError> {
    sandbox(api).await.exec(ExecRequest::plain(&cmd, &[])).await
}

#[tokio::test]
async fn capture_is_bounded_and_the_total_is_counted() {
    let big = 3 * CAPTURE_LIMIT;
    let api = FakeApi::start(cluster(move |_| Session {
        stdout: vec![b'a'; big],
        stderr: vec![b'b'; big],
        status: exited(0),
    }))
    .await;
    let out = sandbox_exec(&api, Command::new("yes")).await.unwrap();
    assert_eq!(out.stdout_bytes, big as u64);
    assert_eq!(out.stderr_bytes, big as u64);
    assert!(out.stdout.len() < CAPTURE_LIMIT + 100, "{}", out.stdout.len());
    assert!(out.stderr.contains("bytes omitted"));
}

#[tokio::test]
async fn a_socket_closed_without_a_status_is_an_infra_error() {
    let api = FakeApi::start(cluster(|_| Session {
        stdout: b"partial".to_vec(),
        stderr: vec![],
        status: None,
    }))
    .await;
    let e = sandbox_exec(&api, Command::new("make")).await.unwrap_err();
    assert!(e.to_string().contains("closed without a status"), "{e}");
    // An engine's error: reeval-core's `outcome::classify` takes it as infra (its tests).
    assert!(matches!(e, SandboxError::Engine { .. }), "{e:?}");
}

#[tokio::test]
async fn stdin_is_length_delimited_and_sent_in_chunks_without_a_close() {
    let api = FakeApi::start(cluster(|r| Session {
        stdout: format!("{}", r.stdin.len()).into_bytes(),
        stderr: vec![],
        status: exited(0),
    }))
    .await;
    let input = vec![7u8; 3 * super::exec::STDIN_CHUNK + 5];
    let out = sandbox_exec(&api, Command::new("wc").arg("-c").stdin(input.clone())).await.unwrap();
    assert_eq!(out.stdout, input.len().to_string());
    let exec = api.seen().into_iter().find(|s| s.target.contains("/exec?")).unwrap();
    assert_eq!(exec.argv[6], input.len().to_string());
    assert!(exec.target.contains("stdin=true"));
    assert_eq!(exec.stdin, input);
}

#[tokio::test]
async fn the_environment_goes_on_stdin_and_never_into_the_request() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let secret = "s3cr3t-'value' with $(rm -rf /) and\nnewline";
    let env = [("API_TOKEN".to_string(), secret.to_string())];
    let cmd = Command::new("cat").stdin(b"payload".to_vec());
    sandbox(&api).await.exec(ExecRequest::plain(&cmd, &env)).await.unwrap();
    let exec = api.seen().into_iter().find(|s| s.target.contains("/exec?")).unwrap();
    // Not in the URL (the API server's logs), not in any argv (`/proc/*/cmdline`).
    assert!(!exec.target.contains("s3cr3t"), "{}", exec.target);
    assert!(exec.argv.iter().all(|a| !a.contains("s3cr3t") && !a.contains("API_TOKEN")));
    // On stdin, single-quoted for the prologue's `eval`, ahead of the command's own stdin.
    let block = String::from_utf8(exec.env_block.clone()).unwrap();
    assert_eq!(block, format!("export 'API_TOKEN={}'\n", secret.replace('\'', r"'\''")));
    assert_eq!(exec.argv[5], block.len().to_string());
    assert_eq!(exec.stdin, b"payload");
    // A name a shell cannot export is refused before anything is sent, its value unnamed.
    let bad = [("NOT-A-NAME".to_string(), "hidden".to_string())];
    let e = sandbox(&api).await.exec(ExecRequest::plain(&cmd, &bad)).await.unwrap_err();
    assert!(e.to_string().contains("NOT-A-NAME") && !e.to_string().contains("hidden"), "{e}");
}

/// The prologue as the pod's `sh` runs it: the block is read, `eval`ed and
/// exported, the command gets the rest of stdin, and no value is in any argv.
#[test]
fn the_prologue_exports_the_block_and_passes_the_rest_of_stdin() {
    let secret = "it's \"q\" $(touch /tmp/pwned) `x`\nline2";
    let spec = super::exec::ExecSpec {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "printf '%s|' \"$TOKEN\"; cat; cat /proc/$$/cmdline | tr '\\0' ' '".into(),
        ],
        env: vec![("TOKEN".into(), secret.into())],
        stdin: super::exec::Stdin::Bytes(b"rest"),
        ..Default::default()
    };
    let argv = spec.full_argv().unwrap();
    let mut input = spec.env_block().unwrap();
    input.extend_from_slice(b"rest");
    let mut child = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    assert!(out.starts_with(&format!("{secret}|rest")), "{out}");
    assert!(!out[secret.len()..].contains("line2"), "a value in a cmdline: {out}");
    assert!(!std::path::Path::new("/tmp/pwned").exists());
}

#[tokio::test]
async fn files_go_in_and_out_as_tar_over_exec() {
    let file =
        archive::tar_of(&[crate::FileToWrite::new("greet.py", b"def greet(): pass\n", 0o644)])
            .unwrap();
    let sent = file.clone();
    let api = FakeApi::start(cluster(move |r| {
        let script = r.argv.join(" ");
        if script.contains("tar -x") {
            Session {
                stdout: vec![],
                stderr: vec![],
                status: exited(if r.stdin == sent { 0 } else { 1 }),
            }
        } else if r.argv.last().map(String::as_str) == Some("missing") {
            Session { stdout: vec![], stderr: vec![], status: exited(44) }
        } else {
            Session { stdout: sent.to_vec(), stderr: vec![], status: exited(0) }
        }
    }))
    .await;
    let sandbox = sandbox(&api).await;
    sandbox.upload("/workspace", file.clone()).await.unwrap();
    let down = sandbox.download("/workspace/greet.py", 1 << 20).await.unwrap();
    assert_eq!(archive::single_file(&down, "greet.py").unwrap(), b"def greet(): pass\n");
    // The first upload waits until the pod works (`exec true`): files may go in before start.
    let execs: Vec<Seen> = api.seen().into_iter().filter(|s| s.target.contains("/exec?")).collect();
    assert_eq!(execs[0].argv.last().map(String::as_str), Some("true"));
    let execs = &execs[1..];
    assert_eq!(execs[0].argv[4], "/workspace", "unpacked in the directory");
    assert_eq!(execs[0].argv[7..], ["tar", "-x", "-f", "-", "--no-overwrite-dir"]);
    assert_eq!(execs[1].argv[4], "/workspace", "packed from the parent");
    assert_eq!(execs[1].argv.last().unwrap(), "greet.py");
    // Over the limit: an archive error, not a truncated archive.
    let e = sandbox.download("/workspace/greet.py", 10).await.unwrap_err();
    assert!(matches!(e, SandboxError::Archive { .. }), "{e}");
    let e = sandbox.download("/workspace/missing", 1 << 20).await.unwrap_err();
    assert!(matches!(e, SandboxError::NotFound { .. }), "{e}");
}

#[tokio::test]
async fn teardown_deletes_the_pod_now_and_its_policy_and_waits_until_it_is_gone() {
    let gets = Arc::new(Mutex::new(0));
    let counter = gets.clone();
    let api = FakeApi::start(move |r: &Seen| match r.method.as_str() {
        "POST" => Reply::Json(201, r.body.clone()),
        "DELETE" => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
        // Still there twice (terminating), then gone.
        _ => {
            let mut n = counter.lock().unwrap();
            *n += 1;
            if *n <= 2 {
                Reply::Json(200, json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
            } else {
                Reply::Json(404, json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "gone"}))
            }
        }
    })
    .await;
    let sandbox = sandbox(&api).await;
    let name = sandbox.id().to_string();
    sandbox.destroy().await.unwrap();
    let calls = api.calls();
    assert_eq!(
        calls[2..],
        [
            format!("DELETE /api/v1/namespaces/evals/pods/{name}"),
            format!("DELETE /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies/{name}"),
            format!("GET /api/v1/namespaces/evals/pods/{name}"),
            format!("GET /api/v1/namespaces/evals/pods/{name}"),
            format!("GET /api/v1/namespaces/evals/pods/{name}"),
        ]
    );
    assert_eq!(api.seen()[2].body["gracePeriodSeconds"], 0);
}

#[tokio::test]
async fn the_sweep_deletes_only_this_runners_pods_policies_services_and_secrets_of_the_run() {
    let api = FakeApi::start(move |r: &Seen| {
        let item = |name: &str, owner: &str| {
            json!({"metadata": {"name": name, "annotations": {LABEL_OWNER: owner}}})
        };
        let list = |kind: &str, items: Vec<Value>| {
            Reply::Json(200, json!({"apiVersion": "v1", "kind": kind, "metadata": {}, "items": items}))
        };
        match r.method.as_str() {
            "GET" if r.target.contains("/pods") => list(
                "PodList",
                vec![item("mine", &owner_label()), item("theirs", "other-host:1:1")],
            ),
            "GET" if r.target.contains("/services") => list(
                "ServiceList",
                vec![item("reeval-gw-1-20000", &owner_label()), item("their-svc", "other-host:1:1")],
            ),
            "GET" if r.target.contains("/secrets") => list(
                "SecretList",
                vec![item("reeval-gw-1", &owner_label()), item("their-secret", "other-host:1:1")],
            ),
            "GET" => list("NetworkPolicyList", vec![item("mine", &owner_label())]),
            _ => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
        }
    })
    .await;
    let removed =
        api.backend(KubernetesConfig::default()).sweep(Sweep::OwnRun("run:1")).await.unwrap();
    assert_eq!(removed, 1);
    let calls = api.calls();
    assert_eq!(
        calls,
        [
            "GET /api/v1/namespaces/evals/pods",
            "DELETE /api/v1/namespaces/evals/pods/mine",
            "GET /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies",
            "DELETE /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies/mine",
            // The run's gateway: its attempts' Services, and the Secret with its credentials.
            "GET /api/v1/namespaces/evals/services",
            "DELETE /api/v1/namespaces/evals/services/reeval-gw-1-20000",
            "GET /api/v1/namespaces/evals/secrets",
            "DELETE /api/v1/namespaces/evals/secrets/reeval-gw-1",
        ]
    );
    for seen in api.seen().iter().filter(|s| s.method == "GET") {
        assert!(seen.target.contains("labelSelector=dev.reeval.run=run-1"), "{}", seen.target);
    }
}

/// The run's gateway: a Secret with the CA and the brokered values under the
/// gateway pod's variable names; a pod that gets them as variables and
/// nothing else of the host; a Service per attempt selecting that pod on the
/// attempt's port; and the attempt pod's policy, which lets it reach only that.
#[test]
fn the_gateway_pod_its_secret_service_and_the_attempts_policy() {
    let request = crate::GatewayRequest {
        labels: BTreeMap::from([
            (LABEL_RUN.to_string(), "run:1".to_string()),
            (crate::LABEL_ATTEMPT.to_string(), "a-1".to_string()),
        ]),
        binary: Arc::new(Vec::new()),
        base_image: "reeval/base:latest".into(),
        files: Vec::new(),
        env: Vec::new(),
        command: Vec::new(),
        port: 3128,
    };
    let labels = gateway::run_labels(&request, "reeval-gw-1");
    assert!(!labels.contains_key(crate::LABEL_ATTEMPT), "the run's, not an attempt's");
    assert_eq!(labels[gateway::LABEL_GATEWAY], "reeval-gw-1");
    let credentials = BTreeMap::from([(
        "REEVAL_GW_SECRET_API_KEY".to_string(),
        secrecy::SecretString::from("real-value"),
    )]);

    let secret = gateway::secret("reeval-gw-1", &labels, "me:1:2", (b"CERT", b"KEY"), &credentials);
    let secret = serde_json::to_value(&secret).unwrap();
    assert_eq!(secret["metadata"]["labels"][LABEL_RUN], "run-1");
    assert_eq!(secret["metadata"]["annotations"][LABEL_OWNER], "me:1:2");
    let data = secret["data"].as_object().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["REEVAL_GW_CA_CERT", "REEVAL_GW_CA_KEY", "REEVAL_GW_SECRET_API_KEY"]
    );
    // base64 of "real-value"
    assert_eq!(data["REEVAL_GW_SECRET_API_KEY"], "cmVhbC12YWx1ZQ==");

    let names: Vec<String> = credentials.keys().cloned().collect();
    let pod = gateway::gateway_pod(
        "reeval-gw-1",
        "reeval/gateway:1",
        &labels,
        "me:1:2",
        &KubernetesConfig::default(),
        &names,
    );
    let pod = serde_json::to_value(&pod).unwrap();
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "reeval/gateway:1");
    assert_eq!(container["command"], json!(["sleep", "infinity"]));
    assert_eq!(container["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    assert_eq!(pod["metadata"]["labels"][gateway::LABEL_GATEWAY], "reeval-gw-1");
    assert!(pod["spec"]["volumes"].is_null(), "nothing of the host is mounted");
    let env = container["env"].as_array().unwrap();
    let from: Vec<(&str, &str, &str)> = env
        .iter()
        .map(|e| {
            let r = &e["valueFrom"]["secretKeyRef"];
            (e["name"].as_str().unwrap(), r["name"].as_str().unwrap(), r["key"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        from,
        [
            ("REEVAL_GW_CA_CERT", "reeval-gw-1", "REEVAL_GW_CA_CERT"),
            ("REEVAL_GW_CA_KEY", "reeval-gw-1", "REEVAL_GW_CA_KEY"),
            ("REEVAL_GW_SECRET_API_KEY", "reeval-gw-1", "REEVAL_GW_SECRET_API_KEY"),
        ]
    );
    assert!(env.iter().all(|e| e.get("value").is_none()), "no value in the pod spec");

    let service =
        gateway::service("reeval-gw-1-20000", "reeval-gw-1", &request.labels, "me:1:2", 20000);
    let service = serde_json::to_value(&service).unwrap();
    assert_eq!(service["spec"]["selector"], json!({gateway::LABEL_GATEWAY: "reeval-gw-1"}));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "proxy", "port": 20000, "targetPort": 20000, "protocol": "TCP"}])
    );
    assert_eq!(service["metadata"]["labels"][crate::LABEL_ATTEMPT], "a-1");

    // The attempt's pod: its policy allows egress to the gateway pods on its port, nothing else.
    let mut spec = spec();
    spec.network = crate::NetworkSpec::PodGateway {
        pod_labels: BTreeMap::from([(
            gateway::LABEL_GATEWAY.to_string(),
            "reeval-gw-1".to_string(),
        )]),
        port: 20000,
    };
    spec.main_process = Some(vec!["/run/reeval/reeval-relay".into(), "supervise".into()]);
    let policy = serde_json::to_value(pod::policy("reeval-abc", &spec, "me:1:2")).unwrap();
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert!(policy["spec"]["ingress"].is_null(), "nothing in");
    assert_eq!(
        policy["spec"]["egress"],
        json!([{"to": [{"podSelector": {"matchLabels": {gateway::LABEL_GATEWAY: "reeval-gw-1"}}}],
                "ports": [{"protocol": "TCP", "port": 20000}]}])
    );
    let none = serde_json::to_value(pod::policy("reeval-abc", &self::spec(), "me:1:2")).unwrap();
    assert!(none["spec"]["egress"].is_null(), "without a gateway: nothing out");
    // Its relay is copied in after the pod started: the main process waits until it runs.
    let manifest = serde_json::to_value(pod::manifest(
        "reeval-abc",
        &spec,
        &KubernetesConfig::default(),
        "me:1:2",
    ))
    .unwrap();
    let command: Vec<String> =
        serde_json::from_value(manifest["spec"]["containers"][0]["command"].clone()).unwrap();
    assert_eq!(command[..2], ["/bin/sh", "-c"]);
    assert_eq!(command[3..], ["/run/reeval/reeval-relay", "supervise"]);
}

#[tokio::test]
async fn preflight_lists_every_permission_rbac_denies() {
    let api = FakeApi::start(|r: &Seen| {
        if r.target.starts_with("/version") {
            return Reply::Json(200, json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}));
        }
        if r.target.starts_with("/api/v1/namespaces/") {
            return Reply::Json(200, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "evals"}}));
        }
        let attrs = &r.body["spec"]["resourceAttributes"];
        let denied = (attrs["resource"] == "pods" && attrs["subresource"] == "exec")
            || (attrs["resource"] == "secrets" && attrs["verb"] == "create");
        let mut review = r.body.clone();
        review["status"] = json!({"allowed": !denied});
        Reply::Json(201, review)
    })
    .await;
    let found = api.backend(KubernetesConfig::default()).preflight().await;
    assert_eq!(found.missing.len(), 1, "{found:?}");
    let m = &found.missing[0];
    assert!(m.contains("namespace evals"), "{m}");
    assert!(m.contains("not allowed to create pods/exec, get pods/exec, create secrets;"), "{m}");
    assert!(!m.contains("portforward"), "{m}");
    assert!(found.warnings[0].contains("NetworkPolicy"));
    // Every needed permission was asked about, in the backend's namespace.
    let asked = api.seen().iter().filter(|s| s.target.contains("selfsubjectaccessreviews")).count();
    assert_eq!(asked, preflight::NEEDED.iter().map(|n| n.3.len()).sum::<usize>());
}

#[tokio::test]
async fn preflight_names_a_missing_namespace() {
    let api = FakeApi::start(|r: &Seen| {
        if r.target.starts_with("/version") {
            return Reply::Json(200, json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}));
        }
        if r.target.starts_with("/api/v1/namespaces/") {
            return Reply::Json(404, json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}));
        }
        let mut review = r.body.clone();
        review["status"] = json!({"allowed": true});
        Reply::Json(201, review)
    })
    .await;
    let found = api.backend(KubernetesConfig::default()).preflight().await;
    assert_eq!(found.missing.len(), 1, "{found:?}");
    assert!(found.missing[0].contains("kubectl create namespace evals"), "{found:?}");
}

#[tokio::test]
async fn images_reeval_builds_need_a_registry_and_say_so() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let backend = api.backend(KubernetesConfig::default());
    let ready = backend.ensure_image(&ImageSpec::From("ghcr.io/x/y:1".into()), "").await.unwrap();
    assert_eq!(ready.reference, "ghcr.io/x/y:1");
    let e = backend
        .ensure_image(
            &ImageSpec::Install { base: "debian:12".into(), steps: vec!["true".into()] },
            "",
        )
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::ImageMissing { .. }), "{e}");
    assert!(e.to_string().contains("Image::from") && e.to_string().contains("registry ="), "{e}");
    // With a registry, preflight lets it through (it is built and pushed in the image phase).
    let install = ImageSpec::Install { base: "debian:12".into(), steps: vec!["true".into()] };
    assert!(backend.check_image(&install).is_err());
    let with = api.backend(KubernetesConfig {
        registry: Some("127.0.0.1:5000".into()),
        ..Default::default()
    });
    assert!(with.check_image(&install).is_ok());
}

/// What a run asks of the cluster, checked before anything starts: images it cannot pull,
/// egress on the node's network, and the brokered secrets its gateway pod gets.
#[tokio::test]
async fn a_runs_needs_are_checked_and_its_brokered_secrets_kept_for_the_gateway() {
    use crate::{Backend, CellNeeds, RunNeeds};
    let api = FakeApi::start(|r: &Seen| {
        if r.target.starts_with("/version") {
            return Reply::Json(200, json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}));
        }
        if r.target.starts_with("/api/v1/namespaces/") {
            return Reply::Json(200, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "evals"}}));
        }
        let mut review = r.body.clone();
        review["status"] = json!({"allowed": true});
        Reply::Json(201, review)
    })
    .await;
    let install = ImageSpec::Install { base: "debian:12".into(), steps: vec!["true".into()] };
    let cell = |eval: &str, images: Vec<ImageSpec>, egress: bool| CellNeeds {
        eval: eval.into(),
        images,
        egress,
        brokered: BTreeMap::from([(
            "REEVAL_GW_SECRET_KEY".to_string(),
            secrecy::SecretString::from("real".to_string()),
        )]),
    };
    let run = RunNeeds {
        cells: vec![
            cell("builds", vec![install.clone(), install.clone()], false),
            cell("talks", vec![ImageSpec::From("ghcr.io/x/y:1".into())], true),
        ],
    };
    let backend = api.backend(KubernetesConfig { host_network: true, ..Default::default() });
    let found = backend.check_run(&run).await;
    assert_eq!(found.missing.len(), 2, "one line per problem, not per image: {found:?}");
    assert!(found.missing[0].starts_with("environment of eval builds: "), "{found:?}");
    assert!(found.missing[1].starts_with("eval talks needs egress"), "{found:?}");
    let unisolated = api.backend(KubernetesConfig {
        host_network: true,
        unisolated_egress: true,
        registry: Some("127.0.0.1:5000".into()),
        ..Default::default()
    });
    let found = unisolated.check_run(&run).await;
    assert!(found.missing.is_empty(), "{found:?}");
    assert!(found.warnings.iter().any(|w| w.starts_with("unisolated_egress = true")), "{found:?}");
    let kept = unisolated.credentials.read().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(kept, ["REEVAL_GW_SECRET_KEY"]);
}

#[tokio::test]
async fn serve_connects_through_the_port_forward_api() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let sandbox = sandbox(&api).await;
    let mut stream =
        sandbox.connect_port(8080).await.unwrap().expect("Kubernetes forwards ports itself");
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut echoed = [0u8; 18];
    tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_exact(&mut echoed))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&echoed, b"GET / HTTP/1.0\r\n\r\n");
    let forward = api.seen().into_iter().find(|s| s.target.contains("/portforward")).unwrap();
    assert!(
        forward
            .target
            .starts_with(&format!("/api/v1/namespaces/evals/pods/{}/portforward?", sandbox.id())),
        "{}",
        forward.target
    );
    assert!(forward.target.contains("ports=8080"), "{}", forward.target);
}

#[test]
fn label_values_are_valid() {
    assert_eq!(pod::label_value("2026-12-03T13:11:42-77"), "2026-12-03T13-11-42-77");
    assert_eq!(pod::label_value(":x:"), "x");
    assert_eq!(pod::label_value(&"a".repeat(80)).len(), 63);
}

#[test]
fn a_status_without_an_exit_code_is_not_a_success() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
    let s = |v: Value| Some(serde_json::from_value::<Status>(v).unwrap());
    assert_eq!(exec::outcome(s(exited(0).unwrap()), "p").unwrap(), exec::Outcome::Exited(0));
    assert_eq!(exec::outcome(s(exited(137).unwrap()), "p").unwrap(), exec::Outcome::Exited(137));
    let odd = s(
        json!({"status": "Failure", "reason": "InternalError", "message": "container not running"}),
    );
    assert!(exec::outcome(odd, "p").unwrap_err().to_string().contains("container not running"));
    assert!(exec::outcome(None, "p").is_err());
    let missing = s(
        json!({"status": "Failure", "message": "exec: \"nope\": executable file not found in $PATH"}),
    );
    assert!(matches!(exec::outcome(missing, "p").unwrap(), exec::Outcome::NotFound(_)));
}

#[test]
fn a_pod_evicted_or_being_deleted_is_removed() {
    use k8s_openapi::api::core::v1::Pod;
    let state =
        |pod: Value| super::sandbox::pod_state(&serde_json::from_value::<Pod>(pod).unwrap());
    let running = json!({"phase": "Running", "containerStatuses": [{"name": "sandbox", "image": "i",
        "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]});
    assert_eq!(
        state(json!({"metadata": {"name": "p"}, "status": running})),
        crate::SandboxState::Running
    );
    let deleting =
        state(json!({"metadata": {"name": "p", "deletionTimestamp": "2026-12-06T06:00:00Z"},
        "status": running}));
    assert!(deleting.is_lost(), "{deleting}");
    assert_eq!(
        deleting.to_string(),
        "was removed (its pod is being deleted: deleted or evicted from outside)"
    );
    let evicted =
        state(json!({"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Evicted",
        "message": "The node was low on resource: memory."}}));
    assert_eq!(
        evicted.to_string(),
        "was removed (its pod was evicted: The node was low on resource: memory.)"
    );
}

#[tokio::test]
async fn an_exec_whose_connection_breaks_is_an_infra_error_not_a_wait() {
    let api = FakeApi::start(cluster(|r| {
        if r.argv.iter().any(|a| a == "true") {
            return Session { stdout: vec![], stderr: vec![], status: exited(0) };
        }
        Session { stdout: b"partial".to_vec(), stderr: vec![], status: Some(broken()) }
    }))
    .await;
    let sandbox = sandbox(&api).await;
    sandbox.start().await.unwrap();
    let cmd = Command::new("sh").arg("-c").arg("echo partial; sleep 60");
    let run = sandbox.exec(ExecRequest::plain(&cmd, &[]));
    let e = tokio::time::timeout(std::time::Duration::from_secs(10), run)
        .await
        .expect("it ends: kube-rs leaves the pipes of a broken connection open")
        .unwrap_err();
    assert!(e.to_string().contains("closed without a status"), "{e}");
}
