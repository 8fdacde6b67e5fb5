//! `reeval-gateway`: the egress gateway as its own process, for engines
//! where the runner's process cannot serve the sandbox's socket.
//!
//! ```text
//! reeval-gateway --config FILE          serve; egress entries as JSON lines on stdout
//! reeval-gateway gen-ca --cert OUT --key OUT
//! ```
//!
//! Once listening it prints `reeval-gateway: listening on <addr>` (and
//! `reeval-gateway: control on <addr>`) to stderr. SIGTERM or Ctrl-C stops
//! it cleanly (exit 0).

use std::convert::Infallible;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::ExitCode;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use reeval_gateway::config::{Config, ListenAddr};
use reeval_gateway::{
    AttemptGateway, CertificateAuthority, ExposeSecret, Gateway, GatewayError, Policy, Serving,
};
use tokio::net::{TcpListener, UnixListener};
use tokio::signal::unix::{SignalKind, signal};

const USAGE: &str =
    "usage: reeval-gateway --config FILE | reeval-gateway gen-ca --cert OUT --key OUT";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["--config", file] => run(PathBuf::from(file)),
        ["gen-ca", "--cert", cert, "--key", key] => gen_ca(PathBuf::from(cert), PathBuf::from(key)),
        ["--help" | "-h"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reeval-gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

fn gen_ca(cert: PathBuf, key: PathBuf) -> Result<(), GatewayError> {
    let ca = CertificateAuthority::generate()?;
    std::fs::write(&cert, ca.cert_pem()).map_err(|source| GatewayError::File {
        op: "write",
        path: cert.clone(),
        source,
    })?;
    // The key is readable by its owner only.
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&key)
        .map_err(|source| GatewayError::File { op: "write", path: key.clone(), source })?;
    file.write_all(ca.key_pem().expose_secret().as_bytes())
        .map_err(|source| GatewayError::File { op: "write", path: key.clone(), source })?;
    Ok(())
}

fn run(config_path: PathBuf) -> Result<(), GatewayError> {
    let config = Config::load(&config_path)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| GatewayError::Listen { addr: "a Tokio runtime".into(), source })?;
    runtime.block_on(serve(config))
}

async fn serve(config: Config) -> Result<(), GatewayError> {
    let gateway = Gateway::new(config.gateway_options()?)?;
    let attempt = gateway.attempt(config.policy.clone(), config.bindings()?)?;
    let mut entries = attempt.subscribe();
    let serving = listen(&attempt, &config.listen).await?;
    eprintln!("reeval-gateway: listening on {}", shown(&serving, &config.listen));
    let control = match &config.control {
        Some(addr) => Some(control(attempt.clone(), addr).await?),
        None => None,
    };
    let mut term = signal(SignalKind::terminate())
        .map_err(|source| GatewayError::Listen { addr: "SIGTERM".into(), source })?;
    let stdout = std::io::stdout();
    // The sandbox relay's isolation report, as one line: the runner reads it from our stdout.
    let reporter = attempt.clone();
    tokio::spawn(async move {
        if let Ok(report) = reporter.isolation(std::time::Duration::from_secs(24 * 3600)).await
            && let Ok(line) = serde_json::to_string(&serde_json::json!({ "isolation": &*report }))
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    });
    let mut policies = config.policy_from_stdin.then(|| {
        use tokio::io::AsyncBufReadExt;
        tokio::io::BufReader::new(tokio::io::stdin()).lines()
    });
    let mut applied = 0u64;
    loop {
        let next_policy = async {
            match policies.as_mut() {
                Some(lines) => lines.next_line().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            line = next_policy => {
                let Ok(Some(line)) = line else {
                    // The runner went away: stop taking policies, keep serving until told to stop.
                    policies = None;
                    continue;
                };
                let ack = match serde_json::from_str::<Policy>(&line).map_err(|e| e.to_string()).and_then(|p| attempt.set_policy(p).map_err(|e| e.to_string())) {
                    Ok(()) => {
                        applied += 1;
                        serde_json::json!({ "policyApplied": applied })
                    }
                    Err(e) => serde_json::json!({ "policyRejected": e }),
                };
                let mut out = stdout.lock();
                let _ = writeln!(out, "{ack}");
                let _ = out.flush();
            }
            entry = entries.recv() => {
                let Some(entry) = entry else { break };
                let mut out = stdout.lock();
                if let Ok(line) = serde_json::to_string(&entry) {
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    serving.shutdown().await;
    if let Some(control) = control {
        control.abort();
    }
    // Entries finished by the shutdown itself.
    while let Ok(entry) = entries.try_recv() {
        if let Ok(line) = serde_json::to_string(&entry) {
            let _ = writeln!(stdout.lock(), "{line}");
        }
    }
    let _ = stdout.lock().flush();
    Ok(())
}

fn shown(serving: &Serving, configured: &ListenAddr) -> String {
    match serving.local_addr() {
        Some(addr) => format!("tcp:{addr}"),
        None => configured.to_string(),
    }
}

async fn listen(attempt: &AttemptGateway, addr: &ListenAddr) -> Result<Serving, GatewayError> {
    match addr {
        ListenAddr::Tcp(addr) => {
            let listener = TcpListener::bind(addr)
                .await
                .map_err(|source| GatewayError::Listen { addr: addr.to_string(), source })?;
            attempt.serve_tcp(listener)
        }
        ListenAddr::Unix(path) => attempt.bind_unix(path),
    }
}

/// The control listener: `PUT /policy`, `GET /policy`, `GET /counters`.
async fn control(
    attempt: AttemptGateway,
    addr: &ListenAddr,
) -> Result<tokio::task::JoinHandle<()>, GatewayError> {
    let err = |source| GatewayError::Listen { addr: addr.to_string(), source };
    let task = match addr {
        ListenAddr::Tcp(a) => {
            let listener = TcpListener::bind(a).await.map_err(err)?;
            let local = listener.local_addr().map_err(err)?;
            eprintln!("reeval-gateway: control on tcp:{local}");
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(control_connection(attempt.clone(), TokioIo::new(stream)));
                }
            })
        }
        ListenAddr::Unix(path) => {
            let _ = std::fs::remove_file(path);
            let listener = UnixListener::bind(path).map_err(err)?;
            eprintln!("reeval-gateway: control on {addr}");
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(control_connection(attempt.clone(), TokioIo::new(stream)));
                }
            })
        }
    };
    Ok(task)
}

async fn control_connection<IO>(attempt: AttemptGateway, io: IO)
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let attempt = attempt.clone();
        async move { Ok::<_, Infallible>(control_request(&attempt, req).await) }
    });
    let _ = http1::Builder::new().serve_connection(io, svc).await;
}

async fn control_request(
    attempt: &AttemptGateway,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: String| {
        let mut resp = Response::new(Full::new(Bytes::from(body)));
        *resp.status_mut() = status;
        resp
    };
    match (req.method().clone(), req.uri().path()) {
        (Method::PUT, "/policy") => {
            let body = match Limited::new(req.into_body(), 1 << 20).collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        format!("failed to read the policy: {e}\n"),
                    );
                }
            };
            let policy: Policy = match serde_json::from_slice(&body) {
                Ok(p) => p,
                Err(e) => {
                    return reply(
                        StatusCode::BAD_REQUEST,
                        format!("failed to parse the policy: {e}\n"),
                    );
                }
            };
            match attempt.set_policy(policy) {
                Ok(()) => reply(StatusCode::NO_CONTENT, String::new()),
                Err(e) => reply(StatusCode::UNPROCESSABLE_ENTITY, format!("{e}\n")),
            }
        }
        (Method::GET, "/policy") => {
            reply(StatusCode::OK, serde_json::to_string(&*attempt.policy()).unwrap_or_default())
        }
        (Method::GET, "/counters") => {
            reply(StatusCode::OK, serde_json::to_string(&attempt.counters()).unwrap_or_default())
        }
        _ => reply(
            StatusCode::NOT_FOUND,
            "reeval-gateway control: PUT /policy, GET /policy, GET /counters\n".into(),
        ),
    }
}
