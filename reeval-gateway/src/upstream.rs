//! Reaching upstream servers: name resolution (with the test-only overrides),
//! the rules that keep sandboxes off addresses that are not public
//! (`addresses.rs`), TCP with a connect timeout (directly or through an
//! upstream proxy, `upstream_proxy.rs`), TLS with webpki roots and any extra
//! ones, and the pooled HTTP clients built on them.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::ClientConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::addresses::{InternalGrant, InternalRule, Standing, standing};
use crate::body::Counted;
use crate::egress::Refusal;
use crate::error::GatewayError;
use crate::hosts::normalize_host;
use crate::upstream_proxy::{ProxyUrl, UpstreamProxy};

/// Why an upstream could not be reached. Displayed in 502 bodies and egress
/// entries, so it never holds a header or body value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    #[error("failed to resolve {host}: {source}")]
    Resolve { host: String, source: io::Error },
    #[error("failed to resolve {host}: no addresses")]
    NoAddress { host: String },
    #[error(
        "{host} resolves to {addr}, {what}: sandboxes reach it only when allow_internal opens it (the host, or a range holding the address)"
    )]
    NotPublic { host: String, addr: IpAddr, what: &'static str },
    #[error(
        "{host} resolves to {addr}, {what}, which sandboxes never reach, whatever allow_internal says"
    )]
    Closed { host: String, addr: IpAddr, what: &'static str },
    #[error("failed to connect to {host}:{port} within {}s", .timeout.as_secs_f32())]
    Timeout { host: String, port: u16, timeout: Duration },
    #[error("failed to connect to {host}:{port}: {source}")]
    Connect { host: String, port: u16, source: io::Error },
    #[error("failed to reach {host}:{port} through the upstream proxy {proxy}: {why}")]
    Proxy { host: String, port: u16, proxy: String, why: String },
    #[error("failed TLS handshake with upstream {host}:{port}: {source}")]
    Tls { host: String, port: u16, source: io::Error },
    #[error("failed to connect to {uri}: the upstream URI has no host or an unsupported scheme")]
    BadUri { uri: String },
}

impl DialError {
    /// Why the gateway refused it (403), if it was a refusal by policy and
    /// not a failure of the upstream (502).
    pub(crate) fn refusal(&self) -> Option<Refusal> {
        match self {
            DialError::NotPublic { addr, what, .. } => {
                Some(Refusal::Internal { addr: *addr, what: (*what).to_owned() })
            }
            DialError::Closed { addr, what, .. } => {
                Some(Refusal::Closed { addr: *addr, what: (*what).to_owned() })
            }
            _ => None,
        }
    }
}

/// A connection to an upstream, with what the egress log says of it.
#[derive(Debug)]
pub(crate) struct Dialed<S> {
    pub(crate) stream: S,
    /// The private or reserved address the opt-in opened for it.
    pub(crate) grant: Option<InternalGrant>,
}

/// What a host resolved to, checked.
struct Admitted {
    /// Empty when only the upstream proxy can resolve the name.
    addrs: Vec<SocketAddr>,
    grant: Option<InternalGrant>,
}

/// Opens TCP and TLS connections to upstreams.
#[derive(Clone)]
pub(crate) struct Dialer {
    resolve: Arc<HashMap<String, SocketAddr>>,
    connect_timeout: Duration,
    allow_private: bool,
    tls: TlsConnector,
    proxy: Option<Arc<UpstreamProxy>>,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("resolve", &self.resolve)
            .field("connect_timeout", &self.connect_timeout)
            .field("allow_private", &self.allow_private)
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

impl Dialer {
    pub(crate) fn new(
        webpki: bool,
        extra_roots_pem: &[String],
        resolve: &[(String, SocketAddr)],
        connect_timeout: Duration,
        allow_private: bool,
        proxy: Option<UpstreamProxy>,
    ) -> Result<Self, GatewayError> {
        let mut roots = rustls::RootCertStore::empty();
        if webpki {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        for pem in extra_roots_pem {
            let mut found = false;
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                let cert = cert.map_err(|e| GatewayError::Roots { message: e.to_string() })?;
                roots.add(cert).map_err(|e| GatewayError::Roots { message: e.to_string() })?;
                found = true;
            }
            if !found {
                return Err(GatewayError::Roots {
                    message: "a PEM string holds no CERTIFICATE block".into(),
                });
            }
        }
        let mut config = ClientConfig::builder_with_provider(crate::trust::crypto_provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| GatewayError::Roots { message: e.to_string() })?
            .with_root_certificates(roots)
            .with_no_client_auth();
        // The pooled client speaks HTTP/1.1 upstream whatever the sandbox spoke.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let resolve = resolve.iter().map(|(host, addr)| (normalize_host(host), *addr)).collect();
        Ok(Dialer {
            resolve: Arc::new(resolve),
            connect_timeout,
            allow_private,
            tls: TlsConnector::from(Arc::new(config)),
            proxy: proxy.map(Arc::new),
        })
    }

    /// The upstream proxy, if the gateway has one.
    pub(crate) fn proxy(&self) -> Option<&UpstreamProxy> {
        self.proxy.as_deref()
    }

    /// What `host` resolves to, every address checked: one that is closed,
    /// or private or reserved and not opened by `rules`, refuses the host (a
    /// name that mixes them is a rebinding attempt or a misconfiguration).
    /// Through a proxy, a name this host cannot resolve is left to the proxy.
    async fn admit(
        &self,
        host: &str,
        port: u16,
        rules: &[InternalRule],
        via_proxy: bool,
    ) -> Result<Admitted, DialError> {
        let key = normalize_host(host);
        if let Some(addr) = self.resolve.get(&key) {
            return Ok(Admitted { addrs: vec![*addr], grant: None });
        }
        let lookup = tokio::net::lookup_host((key.as_str(), port));
        let found = match tokio::time::timeout(self.connect_timeout, lookup).await {
            Ok(Ok(found)) => found.collect::<Vec<_>>(),
            _ if via_proxy => Vec::new(),
            Err(_) => return Err(self.timed_out(host, port)),
            Ok(Err(source)) => return Err(DialError::Resolve { host: host.to_owned(), source }),
        };
        if found.is_empty() && !via_proxy {
            return Err(DialError::NoAddress { host: host.to_owned() });
        }
        let mut grant = None;
        for addr in found.iter().filter(|_| !self.allow_private) {
            let ip = addr.ip();
            match standing(ip) {
                Standing::Public => {}
                Standing::Closed(what) => {
                    return Err(DialError::Closed { host: host.to_owned(), addr: ip, what });
                }
                Standing::Internal(what) => match rules.iter().find(|r| r.opens(&key, ip)) {
                    Some(rule) => {
                        grant.get_or_insert(InternalGrant { addr: ip, by: rule.to_string() });
                    }
                    None => {
                        return Err(DialError::NotPublic { host: host.to_owned(), addr: ip, what });
                    }
                },
            }
        }
        Ok(Admitted { addrs: found, grant })
    }

    /// TCP to `host:port` (a tunnel through the HTTPS proxy, unless `NO_PROXY`
    /// names the host), within the connect timeout, its addresses admitted first.
    pub(crate) async fn tcp(
        &self,
        host: &str,
        port: u16,
        rules: &[InternalRule],
    ) -> Result<Dialed<TcpStream>, DialError> {
        let proxy =
            self.proxy.as_ref().and_then(|p| p.for_tunnel(host)).filter(|_| !self.mapped(host));
        let admitted = self.admit(host, port, rules, proxy.is_some()).await?;
        let stream = match proxy {
            Some(proxy) => {
                let name = normalize_host(host);
                match tokio::time::timeout(self.connect_timeout, proxy.tunnel(&name, port)).await {
                    Err(_) => return Err(self.timed_out(host, port)),
                    Ok(Err(e)) => return Err(proxy_error(host, port, proxy, e.to_string())),
                    Ok(Ok(stream)) => stream,
                }
            }
            None => self.connect(host, port, &admitted.addrs).await?,
        };
        Ok(Dialed { stream, grant: admitted.grant })
    }

    /// TCP for a plain HTTP request to `host:port`: to the HTTP proxy (the
    /// request then goes in absolute form: `true`), or to the host.
    async fn http(
        &self,
        host: &str,
        port: u16,
        rules: &[InternalRule],
    ) -> Result<(Dialed<TcpStream>, bool), DialError> {
        let proxy = self.proxy.as_ref().and_then(|p| p.for_http(host));
        let Some(proxy) = proxy.filter(|_| !self.mapped(host)) else {
            return Ok((self.tcp(host, port, rules).await?, false));
        };
        let admitted = self.admit(host, port, rules, true).await?;
        let stream = match tokio::time::timeout(self.connect_timeout, proxy.connect()).await {
            Err(_) => return Err(self.timed_out(host, port)),
            Ok(Err(e)) => {
                return Err(proxy_error(
                    host,
                    port,
                    proxy,
                    format!("failed to connect to it: {e}"),
                ));
            }
            Ok(Ok(stream)) => stream,
        };
        Ok((Dialed { stream, grant: admitted.grant }, true))
    }

    /// Whether a test's resolve override maps `host` (then it is dialled
    /// directly, never through a proxy, which could not know the mapping).
    fn mapped(&self, host: &str) -> bool {
        self.resolve.contains_key(&normalize_host(host))
    }

    fn timed_out(&self, host: &str, port: u16) -> DialError {
        DialError::Timeout { host: host.to_owned(), port, timeout: self.connect_timeout }
    }

    /// The first of `addrs` that accepts, within the connect timeout.
    async fn connect(
        &self,
        host: &str,
        port: u16,
        addrs: &[SocketAddr],
    ) -> Result<TcpStream, DialError> {
        let deadline = Instant::now() + self.connect_timeout;
        let mut last = None;
        for addr in addrs {
            match tokio::time::timeout_at(deadline.into(), TcpStream::connect(addr)).await {
                Err(_) => return Err(self.timed_out(host, port)),
                Ok(Ok(stream)) => {
                    let _ = stream.set_nodelay(true);
                    return Ok(stream);
                }
                Ok(Err(source)) => last = Some(source),
            }
        }
        Err(DialError::Connect {
            host: host.to_owned(),
            port,
            source: last.unwrap_or_else(|| io::Error::other("no address to try")),
        })
    }

    /// TLS to `host:port`, SNI and verification by the host name (also when
    /// a resolve override picked the address, or a proxy tunnels it).
    pub(crate) async fn tls(
        &self,
        host: &str,
        port: u16,
        rules: &[InternalRule],
    ) -> Result<Dialed<TlsStream<TcpStream>>, DialError> {
        let tcp = self.tcp(host, port, rules).await?;
        let name = normalize_host(host);
        let server_name = ServerName::try_from(name).map_err(|e| DialError::Tls {
            host: host.to_owned(),
            port,
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let handshake = self.tls.connect(server_name, tcp.stream);
        match tokio::time::timeout(self.connect_timeout, handshake).await {
            Err(_) => Err(self.timed_out(host, port)),
            Ok(Err(source)) => Err(DialError::Tls { host: host.to_owned(), port, source }),
            Ok(Ok(tls)) => Ok(Dialed { stream: tls, grant: tcp.grant }),
        }
    }
}

fn proxy_error(host: &str, port: u16, proxy: &ProxyUrl, why: String) -> DialError {
    DialError::Proxy { host: host.to_owned(), port, proxy: proxy.to_string(), why }
}

/// A connection to an upstream, plain or TLS, with what each response on it
/// carries: the address the opt-in opened for it, and whether it goes to a
/// proxy (then requests are sent in absolute form).
#[derive(Debug)]
pub(crate) struct UpstreamStream {
    io: Io,
    grant: Option<InternalGrant>,
    proxied: bool,
}

#[derive(Debug)]
enum Io {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        let connected = Connected::new().proxy(self.proxied);
        match &self.grant {
            // Set on every response of this connection (`forward` records it).
            Some(grant) => connected.extra(grant.clone()),
            None => connected,
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => match Pin::new(s.as_mut()).poll_read(cx, buf) {
                // The upstream closed TCP without a TLS close_notify (many
                // servers do): its side has ended, so an end of stream, as
                // over plain HTTP. hyper's framing still tells a complete
                // body (Content-Length, chunked) from a cut one; only a body
                // delimited by the close needs this to end cleanly, where
                // the error made the relayed stream look broken.
                Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::UnexpectedEof => {
                    Poll::Ready(Ok(()))
                }
                other => other,
            },
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().io {
            Io::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Io::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.io {
            Io::Plain(s) => s.is_write_vectored(),
            Io::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// The connector of a pooled client: `http://` plain (to the HTTP proxy, if
/// any), `https://` TLS; `rules` open private or reserved addresses.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    dialer: Dialer,
    rules: Arc<[InternalRule]>,
}

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<UpstreamStream>;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DialError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let (dialer, rules) = (self.dialer.clone(), self.rules.clone());
        Box::pin(async move {
            let bad = || DialError::BadUri { uri: uri.to_string() };
            let host = uri.host().ok_or_else(bad)?.to_owned();
            let stream = match uri.scheme_str() {
                Some("https") => {
                    let tls = dialer.tls(&host, uri.port_u16().unwrap_or(443), &rules).await?;
                    UpstreamStream {
                        io: Io::Tls(Box::new(tls.stream)),
                        grant: tls.grant,
                        proxied: false,
                    }
                }
                Some("http") => {
                    let (tcp, proxied) =
                        dialer.http(&host, uri.port_u16().unwrap_or(80), &rules).await?;
                    UpstreamStream { io: Io::Plain(tcp.stream), grant: tcp.grant, proxied }
                }
                _ => return Err(bad()),
            };
            Ok(TokioIo::new(stream))
        })
    }
}

/// The request body type sent upstream.
pub(crate) type UpBody = Counted<hyper::body::Incoming>;

/// A pooled upstream client. Its pool holds connections dialled under one
/// set of opt-in rules only: a connection an attempt's opt-in opened is
/// never reused by an attempt without it.
pub(crate) type UpstreamClient = Client<Connector, UpBody>;

pub(crate) fn client(dialer: Dialer, rules: &[InternalRule]) -> UpstreamClient {
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .timer(TokioTimer::new())
        .build(Connector { dialer, rules: rules.into() })
}

/// The dial error behind a client error, if that is what failed.
pub(crate) fn dial_error<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a DialError> {
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(d) = e.downcast_ref::<DialError>() {
            return Some(d);
        }
        cur = e.source();
    }
    None
}
