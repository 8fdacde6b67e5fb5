//! Test fixtures: a test PKI, fake upstreams on loopback (plain and TLS,
//! echo, SSE, websocket-style upgrade), a gateway on a TCP listener, and
//! raw clients for CONNECT.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use reeval_gateway::{
    AttemptGateway, Binding, EgressEntry, Gateway, GatewayOptions, Policy, Serving,
};
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// The secret tests broker; it must never show up anywhere but upstream.
pub const SECRET: &str = "sk-ant-REAL-SECRET-0123456789";
pub const PLACEHOLDER: &str = "reeval-placeholder-ANTHROPIC_API_KEY-7f3a";

/// A CA for the fake upstreams (not the gateway's).
pub struct TestPki {
    pub ca_pem: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestPki {
    pub fn new() -> Self {
        let mut params = CertificateParams::default();
        // A name of its own: with rcgen's default for both, OpenSSL takes the leaf for self-signed.
        params.distinguished_name.push(rcgen::DnType::CommonName, "reeval test upstream CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        TestPki { ca_pem: issuer.pem(), issuer }
    }

    /// A server config with a leaf for `hosts`, HTTP/1.1 only.
    pub fn server_config(&self, hosts: &[&str]) -> Arc<ServerConfig> {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let mut config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(
                    vec![cert.der().clone()],
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
                )
                .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

/// What a fake upstream answers.
#[derive(Clone)]
pub enum Behaviour {
    /// 200 with body `hello from <path>` and the request's headers recorded.
    Echo,
    /// `text/event-stream` with `events` events `gap` apart; `sent` counts events handed to hyper.
    Sse { events: usize, gap: Duration, sent: Arc<AtomicUsize> },
    /// Answers an `Upgrade: websocket` request with 101, then echoes bytes.
    UpgradeEcho,
}

#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
}

/// A fake upstream on 127.0.0.1.
pub struct Upstream {
    pub addr: SocketAddr,
    /// Connections accepted (TCP level): proves whether anything was dialled.
    pub accepted: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Upstream {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

pub async fn upstream(tls: Option<Arc<ServerConfig>>, behaviour: Behaviour) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (acc, seen2) = (accepted.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            acc.fetch_add(1, Ordering::SeqCst);
            // Without it, Nagle and delayed ACKs hold small SSE writes back ~40 ms.
            let _ = stream.set_nodelay(true);
            let (tls, behaviour, seen) = (tls.clone(), behaviour.clone(), seen2.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let (behaviour, seen) = (behaviour.clone(), seen.clone());
                    async move { Ok::<_, Infallible>(answer(req, behaviour, seen).await) }
                });
                match tls {
                    Some(config) => {
                        let Ok(tls) = tokio_rustls::TlsAcceptor::from(config).accept(stream).await
                        else {
                            return;
                        };
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(tls), svc)
                            .with_upgrades()
                            .await;
                    }
                    None => {
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), svc)
                            .with_upgrades()
                            .await;
                    }
                }
            });
        }
    });
    Upstream { addr, accepted, seen }
}

async fn answer(
    mut req: Request<Incoming>,
    behaviour: Behaviour,
    seen: Arc<Mutex<Vec<Seen>>>,
) -> Response<TestBody> {
    seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        uri: req.uri().to_string(),
        headers: req.headers().clone(),
    });
    match behaviour {
        Behaviour::Echo => {
            // Read the request body fully so uploads are counted.
            let mut body = req.into_body();
            let mut up = 0usize;
            while let Some(Ok(frame)) =
                std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
            {
                up += frame.data_ref().map_or(0, |d| d.len());
            }
            let _ = up;
            Response::new(TestBody::Full(Some(Bytes::from("hello from upstream"))))
        }
        Behaviour::Sse { events, gap, sent } => {
            let (tx, rx) = mpsc::channel::<Bytes>(1);
            tokio::spawn(async move {
                for i in 0..events {
                    if tx.send(Bytes::from(format!("data: event {i}\n\n"))).await.is_err() {
                        return;
                    }
                    sent.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(gap).await;
                }
            });
            let mut resp = Response::new(TestBody::Channel(rx));
            resp.headers_mut().insert("content-type", "text/event-stream".parse().unwrap());
            resp
        }
        Behaviour::UpgradeEcho => {
            let on_upgrade = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let Ok(upgraded) = on_upgrade.await else { return };
                let mut io = TokioIo::new(upgraded);
                let mut buf = [0u8; 1024];
                loop {
                    match io.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if io.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
            let mut resp = Response::new(TestBody::Full(None));
            *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
            resp.headers_mut().insert("connection", "upgrade".parse().unwrap());
            resp.headers_mut().insert("upgrade", "websocket".parse().unwrap());
            resp
        }
    }
}

pub enum TestBody {
    Full(Option<Bytes>),
    Channel(mpsc::Receiver<Bytes>),
}

impl Body for TestBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            TestBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            TestBody::Channel(rx) => rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            TestBody::Full(b) => {
                http_body::SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64))
            }
            TestBody::Channel(_) => http_body::SizeHint::default(),
        }
    }
}

/// A gateway for one attempt on 127.0.0.1.
pub struct Harness {
    pub gateway: Gateway,
    pub attempt: AttemptGateway,
    pub serving: Serving,
    pub addr: SocketAddr,
    pub proxy: String,
}

pub async fn gateway(options: GatewayOptions, policy: Policy, bindings: Vec<Binding>) -> Harness {
    let gateway = Gateway::new(options).unwrap();
    let attempt = gateway.attempt(policy, bindings).unwrap();
    let serving = attempt.serve_tcp(TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
    let addr = serving.local_addr().unwrap();
    Harness { gateway, attempt, serving, addr, proxy: format!("http://{addr}") }
}

/// A reqwest client using the gateway as its proxy and trusting these roots.
pub fn client(proxy: &str, roots: &[&str]) -> reqwest::Client {
    let mut builder = reqwest::Client::builder()
        .proxy(reqwest::Proxy::all(proxy).unwrap())
        .timeout(Duration::from_secs(20));
    for pem in roots {
        builder =
            builder.add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap());
    }
    builder.build().unwrap()
}

/// A client that goes nowhere near a proxy (for the base-url route).
pub fn direct_client() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(20)).build().unwrap()
}

/// Waits until the attempt has recorded `n` entries (tunnels are recorded when they close).
pub async fn wait_log(attempt: &AttemptGateway, n: usize) -> Vec<EgressEntry> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut all = Vec::new();
    loop {
        all.extend(attempt.take_log());
        if all.len() >= n {
            return all;
        }
        assert!(Instant::now() < deadline, "expected {n} egress entries, got {all:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends `CONNECT host:port` on a fresh connection; returns the stream, the status and any body read.
pub async fn raw_connect(proxy: SocketAddr, authority: &str) -> (TcpStream, u16, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let (status, head_rest) = read_head(&mut stream).await;
    (stream, status, head_rest)
}

/// Reads a response head; returns the status and the headers + whatever body bytes came with them.
pub async fn read_head(stream: &mut TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).await.unwrap();
        assert!(
            n > 0,
            "connection closed inside a response head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, head)
}

/// Reads a body of `content-length` bytes after a head from `read_head`.
pub async fn read_body(stream: &mut TcpStream, head: &str) -> String {
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await.unwrap();
    String::from_utf8(body).unwrap()
}

/// What a [`ConnectProxy`] was asked: the request line and its `Proxy-Authorization`.
#[derive(Debug, Clone)]
pub struct Asked {
    pub line: String,
    pub authorization: Option<String>,
}

/// A small forward proxy on 127.0.0.1, as a company's would be: `CONNECT
/// host:port` opens a tunnel, an absolute-form `GET http://host/…` is passed
/// on as it came, each to the address `routes` maps the host to (the
/// proxy's own name resolution). With `authorization`, a request without
/// that `Proxy-Authorization` value gets 407.
pub struct ConnectProxy {
    pub addr: SocketAddr,
    pub asked: Arc<Mutex<Vec<Asked>>>,
}

impl ConnectProxy {
    pub async fn start(routes: Vec<(String, SocketAddr)>, authorization: Option<&str>) -> Self {
        Self::start_on("127.0.0.1:0", routes, authorization).await
    }

    /// As [`ConnectProxy::start`], listening on `bind`.
    pub async fn start_on(
        bind: &str,
        routes: Vec<(String, SocketAddr)>,
        authorization: Option<&str>,
    ) -> Self {
        let listener = TcpListener::bind(bind).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let expected = authorization.map(str::to_string);
        let (routes, log) = (Arc::new(routes), asked.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let (routes, log, expected) = (routes.clone(), log.clone(), expected.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match stream.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let line = text.lines().next().unwrap_or_default().to_string();
                    let authorization = text
                        .lines()
                        .find_map(|l| {
                            l.split_once(':')
                                .filter(|(k, _)| k.eq_ignore_ascii_case("proxy-authorization"))
                        })
                        .map(|(_, v)| v.trim().to_string());
                    log.lock()
                        .unwrap()
                        .push(Asked { line: line.clone(), authorization: authorization.clone() });
                    if expected.is_some() && authorization != expected {
                        let _ = stream.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n\r\n").await;
                        return;
                    }
                    let mut parts = line.split_whitespace();
                    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                    let authority = match method {
                        "CONNECT" => target.to_string(),
                        _ => target
                            .trim_start_matches("http://")
                            .split('/')
                            .next()
                            .unwrap_or("")
                            .to_string(),
                    };
                    let host = authority.rsplit_once(':').map_or(authority.as_str(), |(h, _)| h);
                    let Some((_, to)) = routes.iter().find(|(name, _)| name == host) else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                            .await;
                        return;
                    };
                    let Ok(mut upstream) = TcpStream::connect(to).await else { return };
                    if method == "CONNECT" {
                        let _ =
                            stream.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await;
                    } else {
                        // Passed on as it came, less the proxy's own header.
                        let passed: String = text
                            .split_inclusive("\r\n")
                            .filter(|l| !l.to_ascii_lowercase().starts_with("proxy-authorization:"))
                            .collect();
                        if upstream.write_all(passed.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    let _ = tokio::io::copy_bidirectional(&mut stream, &mut upstream).await;
                });
            }
        });
        ConnectProxy { addr, asked }
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}
