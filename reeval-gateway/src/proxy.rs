//! The hyper service: dispatch by route, the allowlist check before any
//! dial, tunnels, TLS interception, forwarding with hop-by-hop handling,
//! credential swapping and upgrades.

use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use secrecy::ExposeSecret;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::addresses::InternalGrant;
use crate::body::{Counted, GatewayBody};
use crate::egress::{Pending, Refusal, Route};
use crate::error::error_chain;
use crate::headers::{strip_hop_by_hop, wants_upgrade};
use crate::hosts::{is_valid_host, normalize_host, split_host_port};
use crate::rules::{Egress, Policy};
use crate::shared::AttemptShared;
use crate::upstream::dial_error;

/// The path prefix of the base-url route: a request for
/// `/_reeval/upstream/<host>[:<port>]/<rest>` is forwarded to
/// `https://<host>[:<port>]/<rest>`. See [`base_url`].
pub const BASE_URL_PREFIX: &str = "/_reeval/upstream/";

/// The base URL to give a CLI that accepts one, so its requests to `host`
/// go through the gateway at `proxy_url` (as the sandbox sees it, for
/// example `http://127.0.0.1:3128`) and leave it over TLS:
/// `base_url("http://127.0.0.1:3128", "api.anthropic.com")` is
/// `http://127.0.0.1:3128/_reeval/upstream/api.anthropic.com`.
pub fn base_url(proxy_url: &str, host: &str) -> String {
    format!("{}{BASE_URL_PREFIX}{host}", proxy_url.trim_end_matches('/'))
}

/// How long the sandbox may take to send a request's headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// A connection's context: the attempt it belongs to and its listener's stop signal.
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    attempt: Arc<AttemptShared>,
    stop: watch::Receiver<()>,
    // Held while anything serves this connection; the listener's shutdown waits for it.
    _alive: Arc<()>,
}

impl Conn {
    pub(crate) fn new(
        attempt: Arc<AttemptShared>,
        stop: watch::Receiver<()>,
        alive: Arc<()>,
    ) -> Self {
        Conn { attempt, stop, _alive: alive }
    }

    fn policy(&self) -> Arc<Policy> {
        self.attempt.policy.borrow().clone()
    }

    fn pending(&self, route: Route, host: &str, port: u16, method: &str, path: &str) -> Pending {
        Pending::new(self.attempt.log.clone(), route, host, port, method, path)
    }

    /// Resolves when the listener stops.
    async fn stopped(&self) {
        let mut stop = self.stop.clone();
        let _ = stop.changed().await;
    }

    /// Resolves when the policy stops allowing `host:port`.
    async fn revoked(&self, host: &str, port: u16) {
        let mut policy = self.attempt.policy.subscribe();
        while policy.changed().await.is_ok() {
            if !policy.borrow().egress.allows(host, port) {
                return;
            }
        }
        // The attempt is gone; the listener's stop signal ends the tunnel.
        std::future::pending::<()>().await;
    }
}

/// Serves one sandbox connection to the proxy listener (HTTP/1.1 with upgrades for CONNECT).
pub(crate) async fn serve_connection<IO>(conn: Conn, io: IO)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let svc_conn = conn.clone();
    let svc = service_fn(move |req| {
        let conn = svc_conn.clone();
        async move { Ok::<_, Infallible>(handle(conn, req).await) }
    });
    let served = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(io), svc)
        .with_upgrades();
    tokio::select! {
        _ = served => {}
        () = conn.stopped() => {}
    }
}

async fn handle(conn: Conn, req: Request<Incoming>) -> Response<GatewayBody> {
    if req.method() == Method::CONNECT {
        return connect(conn, req).await;
    }
    let uri = req.uri().clone();
    match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(authority)) => {
            let host = normalize_host(authority.host());
            let port = authority.port_u16().unwrap_or(80);
            let pq = uri.path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
            forward(conn, req, Target { https: false, host, port }, Route::Http, pq).await
        }
        (Some(_), _) => text(
            StatusCode::BAD_REQUEST,
            "reeval egress gateway: only http:// URLs can be sent as plain proxy requests; use CONNECT for https\n",
        ),
        (None, _) if uri.path() == crate::relay::ISOLATION_PATH && req.method() == Method::POST => {
            isolation_report(&conn, req).await
        }
        (None, _) => match parse_base_url(&uri) {
            Some(Ok((target, pq))) => forward(conn, req, target, Route::BaseUrl, pq).await,
            Some(Err(why)) => {
                text(StatusCode::BAD_REQUEST, format!("reeval egress gateway: {why}\n"))
            }
            None => text(
                StatusCode::BAD_REQUEST,
                format!(
                    "reeval egress gateway: this is an HTTP proxy; send absolute-form requests or CONNECT, or use a base URL under {BASE_URL_PREFIX}<host>/\n"
                ),
            ),
        },
    }
}

/// Keeps the relay's isolation report: the first one only, so nothing that
/// runs later in the sandbox can replace it.
async fn isolation_report(conn: &Conn, req: Request<Incoming>) -> Response<GatewayBody> {
    use http_body_util::BodyExt;
    let limited = http_body_util::Limited::new(req.into_body(), 64 * 1024);
    let Ok(body) = limited.collect().await.map(|b| b.to_bytes()) else {
        return text(
            StatusCode::BAD_REQUEST,
            "reeval egress gateway: the report is unreadable or too large\n",
        );
    };
    let report: crate::relay::RelayReport = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("reeval egress gateway: the report does not parse: {e}\n"),
            );
        }
    };
    let mut first = false;
    conn.attempt.isolation.send_if_modified(|slot| {
        first = slot.is_none();
        if first {
            *slot = Some(Arc::new(report));
        }
        first
    });
    if first {
        text(StatusCode::NO_CONTENT, "")
    } else {
        text(
            StatusCode::CONFLICT,
            "reeval egress gateway: this sandbox's isolation was already reported\n",
        )
    }
}

/// `/_reeval/upstream/<host>[:port]/<rest>?q` → (target, `/<rest>?q`); `None` when the prefix is absent.
fn parse_base_url(uri: &Uri) -> Option<Result<(Target, String), String>> {
    let rest = uri.path().strip_prefix(BASE_URL_PREFIX)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let Some((host, port)) = split_host_port(authority) else {
        return Some(Err(format!("{authority:?} in the base-url path is not host or host:port")));
    };
    let host = normalize_host(host);
    if !is_valid_host(&host) {
        return Some(Err(format!("{authority:?} in the base-url path is not a host name")));
    }
    let pq = match uri.query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    Some(Ok((Target { https: true, host, port: port.unwrap_or(443) }, pq)))
}

#[derive(Debug, Clone)]
struct Target {
    https: bool,
    host: String,
    port: u16,
}

impl Target {
    /// `host[:port]`, the port only when not the scheme's default.
    fn authority(&self) -> String {
        let host =
            if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let default = if self.https { 443 } else { 80 };
        if self.port == default { host } else { format!("{host}:{}", self.port) }
    }
}

fn refuse(mut pending: Pending, policy: &Policy, host: &str, port: u16) -> Response<GatewayBody> {
    let (why, refusal) = match policy.egress {
        Egress::None => (
            format!(
                "host {host} (port {port}) refused: this sandbox has no egress in its current phase"
            ),
            Refusal::NoEgress,
        ),
        _ => (
            format!("host {host} (port {port}) is not on this sandbox's allowlist"),
            Refusal::NotAllowed,
        ),
    };
    let body = format!("reeval egress gateway: {why}\n");
    pending.refused(403, why, refusal);
    text(StatusCode::FORBIDDEN, body)
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<GatewayBody> {
    let mut resp = Response::new(GatewayBody::text(body));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    resp
}

async fn connect(conn: Conn, mut req: Request<Incoming>) -> Response<GatewayBody> {
    let Some(authority) = req.uri().authority().cloned() else {
        return text(StatusCode::BAD_REQUEST, "reeval egress gateway: CONNECT needs host:port\n");
    };
    let host = normalize_host(authority.host());
    let port = authority.port_u16().unwrap_or(443);
    let intercept = conn.attempt.bindings.intercepts(&host);
    let route = if intercept { Route::Intercept } else { Route::Tunnel };
    let policy = conn.policy();
    if !policy.egress.allows(&host, port) {
        return refuse(conn.pending(route, &host, port, "CONNECT", ""), &policy, &host, port);
    }
    let on_upgrade = hyper::upgrade::on(&mut req);
    if intercept {
        tokio::spawn(async move {
            if let Ok(upgraded) = on_upgrade.await {
                intercept_connection(conn, upgraded, host, port).await;
            }
        });
        return Response::new(GatewayBody::empty());
    }
    // Dial before answering, so a failure is a clear 502 rather than a dead tunnel.
    let mut pending = conn.pending(route, &host, port, "CONNECT", "");
    let upstream = match conn.attempt.gateway.dialer.tcp(&host, port, &policy.allow_internal).await
    {
        Ok(dialed) => {
            pending.internal(dialed.grant);
            dialed.stream
        }
        Err(e) => {
            let body = format!("reeval egress gateway: {e}\n");
            return match e.refusal() {
                Some(refusal) => {
                    pending.refused(403, e.to_string(), refusal);
                    text(StatusCode::FORBIDDEN, body)
                }
                None => {
                    pending.failed(502, e.to_string());
                    text(StatusCode::BAD_GATEWAY, body)
                }
            };
        }
    };
    pending.status(200);
    tokio::spawn(async move {
        // A failed upgrade (the client went away) still records the tunnel, with no bytes.
        if let Ok(upgraded) = on_upgrade.await {
            pipe(&conn, TokioIo::new(upgraded), upstream, &mut pending, &host, port).await;
        }
    });
    Response::new(GatewayBody::empty())
}

/// Copies both ways until either side closes, the policy stops allowing the
/// host, or the listener stops; counts bytes into `pending`.
async fn pipe<A, B>(
    conn: &Conn,
    sandbox: A,
    mut upstream: B,
    pending: &mut Pending,
    host: &str,
    port: u16,
) where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let mut sandbox =
        CountingIo { inner: sandbox, read: pending.up.clone(), written: pending.down.clone() };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut sandbox, &mut upstream) => {}
        () = conn.revoked(host, port) => pending.note("closed by the gateway: the policy no longer allows this host"),
        () = conn.stopped() => pending.note("closed by the gateway: its listener stopped"),
    }
}

async fn intercept_connection(
    conn: Conn,
    upgraded: hyper::upgrade::Upgraded,
    host: String,
    port: u16,
) {
    let handshake_failed = |why: String| {
        let mut pending = conn.pending(Route::Intercept, &host, port, "CONNECT", "");
        pending.failed(200, why);
    };
    let config = match conn.attempt.gateway.ca.server_config(&host) {
        Ok(config) => config,
        Err(e) => return handshake_failed(e.to_string()),
    };
    let tls = match TlsAcceptor::from(config).accept(TokioIo::new(upgraded)).await {
        Ok(tls) => tls,
        Err(e) => {
            return handshake_failed(format!(
                "failed TLS handshake with the sandbox's client (does it trust the reeval CA?): {e}"
            ));
        }
    };
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let svc_conn = conn.clone();
    let svc = service_fn(move |req| {
        let conn = svc_conn.clone();
        let target = Target { https: true, host: host.clone(), port };
        async move { Ok::<_, Infallible>(intercepted(conn, req, target).await) }
    });
    let io = TokioIo::new(tls);
    if h2 {
        let served = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .serve_connection(io, svc);
        tokio::select! {
            _ = served => {}
            () = conn.stopped() => {}
        }
    } else {
        let served = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .serve_connection(io, svc)
            .with_upgrades();
        tokio::select! {
            _ = served => {}
            () = conn.stopped() => {}
        }
    }
}

async fn intercepted(conn: Conn, req: Request<Incoming>, target: Target) -> Response<GatewayBody> {
    if req.method() == Method::CONNECT {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "reeval egress gateway: CONNECT inside an intercepted connection is not supported\n",
        );
    }
    // The destination is the CONNECT target whatever the Host header says: that is the identity the client verified.
    let pq = req.uri().path_and_query().map_or("/", |pq| pq.as_str()).to_owned();
    forward(conn, req, target, Route::Intercept, pq).await
}

async fn forward(
    conn: Conn,
    mut req: Request<Incoming>,
    target: Target,
    route: Route,
    pq: String,
) -> Response<GatewayBody> {
    let method = req.method().clone();
    let path = pq.split_once('?').map_or(pq.as_str(), |(p, _)| p).to_owned();
    let mut pending = conn.pending(route, &target.host, target.port, method.as_str(), &path);
    let policy = conn.policy();
    if !policy.egress.allows(&target.host, target.port) {
        return refuse(pending, &policy, &target.host, target.port);
    }
    let upgrade = wants_upgrade(req.headers());
    let sandbox_upgrade: Option<OnUpgrade> = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers, upgrade);
    if route != Route::Http {
        // Secrets only ever travel over TLS: the plain-HTTP route never swaps.
        let names = conn.attempt.bindings.swap(
            &policy.active_bindings,
            &target.host,
            &method,
            &path,
            &mut parts.headers,
        );
        pending.brokered(names);
    }
    let scheme = if target.https { "https" } else { "http" };
    let authority = target.authority();
    parts.uri = match format!("{scheme}://{authority}{pq}").parse() {
        Ok(uri) => uri,
        Err(_) => {
            pending.failed(400, "the request path is not a valid URI path".into());
            return text(
                StatusCode::BAD_REQUEST,
                "reeval egress gateway: the request path is not a valid URI path\n",
            );
        }
    };
    parts.version = Version::HTTP_11;
    parts.extensions = http::Extensions::new();
    if let Ok(host) = HeaderValue::from_str(&authority) {
        parts.headers.insert(header::HOST, host);
    }
    if !target.https {
        proxy_authorization(&conn, &target.host, &mut parts.headers);
    }
    let upstream_req = Request::from_parts(parts, Counted::new(body, pending.up.clone()));
    let client = conn.attempt.gateway.client(&policy.allow_internal);
    let mut resp = match client.request(upstream_req).await {
        Ok(resp) => resp,
        Err(e) => {
            let refused = dial_error(&e).and_then(|d| d.refusal().map(|r| (d.to_string(), r)));
            if let Some((why, refusal)) = refused {
                pending.refused(403, why.clone(), refusal);
                return text(StatusCode::FORBIDDEN, format!("reeval egress gateway: {why}\n"));
            }
            let why = match dial_error(&e) {
                Some(d) => d.to_string(),
                None => format!(
                    "failed to forward the request to {}:{}: {}",
                    target.host,
                    target.port,
                    error_chain(&e)
                ),
            };
            pending.failed(502, why.clone());
            return text(StatusCode::BAD_GATEWAY, format!("reeval egress gateway: {why}\n"));
        }
    };
    pending.internal(resp.extensions().get::<InternalGrant>().cloned());
    pending.status(resp.status().as_u16());
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(sandbox_upgrade) = sandbox_upgrade
    {
        let upstream_upgrade = hyper::upgrade::on(&mut resp);
        let (mut parts, _) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers, true);
        let (host, port) = (target.host.clone(), target.port);
        tokio::spawn(async move {
            if let (Ok(sandbox), Ok(upstream)) = tokio::join!(sandbox_upgrade, upstream_upgrade) {
                pipe(
                    &conn,
                    TokioIo::new(sandbox),
                    TokioIo::new(upstream),
                    &mut pending,
                    &host,
                    port,
                )
                .await;
            }
        });
        return Response::from_parts(parts, GatewayBody::empty());
    }
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers, false);
    let down = pending.down.clone();
    Response::from_parts(parts, GatewayBody::stream(Counted::new(body, down), pending))
}

/// A plain HTTP request that goes to the upstream HTTP proxy carries its
/// credentials (the sandbox's own `Proxy-Authorization` was stripped).
fn proxy_authorization(conn: &Conn, host: &str, headers: &mut HeaderMap) {
    let auth = conn.attempt.gateway.dialer.proxy().and_then(|p| p.for_http(host)?.authorization());
    if let Some(auth) = auth
        && let Ok(mut value) = HeaderValue::from_str(auth.expose_secret())
    {
        value.set_sensitive(true);
        headers.insert(header::PROXY_AUTHORIZATION, value);
    }
}

/// Counts bytes read from and written to the sandbox's side of a tunnel, as they pass.
struct CountingIo<T> {
    inner: T,
    read: Arc<AtomicU64>,
    written: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for CountingIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.read.fetch_add((buf.filled().len() - before) as u64, Ordering::Relaxed);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for CountingIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.written.fetch_add(n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_round_trip() {
        assert_eq!(
            base_url("http://127.0.0.1:3128/", "api.anthropic.com"),
            "http://127.0.0.1:3128/_reeval/upstream/api.anthropic.com"
        );
        let uri: Uri = "/_reeval/upstream/API.anthropic.com/v1/messages?beta=true".parse().unwrap();
        let (target, pq) = parse_base_url(&uri).unwrap().unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, pq.as_str()),
            ("api.anthropic.com", 443, "/v1/messages?beta=true")
        );
        let uri: Uri = "/_reeval/upstream/h.example:8443".parse().unwrap();
        let (target, pq) = parse_base_url(&uri).unwrap().unwrap();
        assert_eq!((target.authority().as_str(), pq.as_str()), ("h.example:8443", "/"));
        assert!(parse_base_url(&"/v1/messages".parse().unwrap()).is_none());
        assert!(
            parse_base_url(&"/_reeval/upstream/bad host/x".replace(' ', "%20").parse().unwrap())
                .unwrap()
                .is_err()
        );
    }
}
