//! Reaching upstream servers: name resolution (with the test-only overrides),
//! the rule that keeps sandboxes off non-public addresses, TCP with a
//! connect timeout, TLS with webpki roots, and the pooled HTTP client built
//! on them.

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
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::body::Counted;
use crate::error::GatewayError;
use crate::rules::normalize_host;

/// The ring provider, explicitly: the process-wide default is never relied on.
pub(crate) fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Why an upstream could not be reached. Displayed in 502 bodies and egress
/// entries, so it never holds a header or body value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DialError {
    #[error("failed to resolve {host}: {source}")]
    Resolve { host: String, source: io::Error },
    #[error("failed to resolve {host}: no addresses")]
    NoAddress { host: String },
    #[error("{host} resolves to {addr}, which is not a public address; sandboxes may not reach it")]
    NotPublic { host: String, addr: IpAddr },
    #[error("failed to connect to {host}:{port} within {}s", .timeout.as_secs_f32())]
    Timeout { host: String, port: u16, timeout: Duration },
    #[error("failed to connect to {host}:{port}: {source}")]
    Connect { host: String, port: u16, source: io::Error },
    #[error("failed TLS handshake with upstream {host}:{port}: {source}")]
    Tls { host: String, port: u16, source: io::Error },
    #[error("failed to connect to {uri}: the upstream URI has no host or an unsupported scheme")]
    BadUri { uri: String },
}

impl DialError {
    /// A refusal by policy (403), not a failure of the upstream (502).
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(self, DialError::NotPublic { .. })
    }
}

/// Opens TCP and TLS connections to upstreams.
#[derive(Clone)]
pub(crate) struct Dialer {
    resolve: Arc<HashMap<String, SocketAddr>>,
    connect_timeout: Duration,
    allow_private: bool,
    tls: TlsConnector,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("resolve", &self.resolve)
            .field("connect_timeout", &self.connect_timeout)
            .field("allow_private", &self.allow_private)
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
        let mut config = ClientConfig::builder_with_provider(crypto_provider())
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
        })
    }

    /// TCP to `host:port`, within the connect timeout, refusing non-public
    /// addresses unless they come from a resolve override or private
    /// upstreams are allowed.
    pub(crate) async fn tcp(&self, host: &str, port: u16) -> Result<TcpStream, DialError> {
        let deadline = Instant::now() + self.connect_timeout;
        let timeout =
            || DialError::Timeout { host: host.to_owned(), port, timeout: self.connect_timeout };
        let key = normalize_host(host);
        let addrs: Vec<SocketAddr> = if let Some(addr) = self.resolve.get(&key) {
            vec![*addr]
        } else {
            let lookup = tokio::net::lookup_host((key.as_str(), port));
            let found = tokio::time::timeout_at(deadline.into(), lookup)
                .await
                .map_err(|_| timeout())?
                .map_err(|source| DialError::Resolve { host: host.to_owned(), source })?
                .collect::<Vec<_>>();
            if found.is_empty() {
                return Err(DialError::NoAddress { host: host.to_owned() });
            }
            // Any non-public answer refuses the host: a name that mixes them is a rebinding attempt or a misconfiguration.
            if !self.allow_private
                && let Some(bad) = found.iter().find(|a| !is_public(a.ip()))
            {
                return Err(DialError::NotPublic { host: host.to_owned(), addr: bad.ip() });
            }
            found
        };
        let mut last = None;
        for addr in addrs {
            match tokio::time::timeout_at(deadline.into(), TcpStream::connect(addr)).await {
                Err(_) => return Err(timeout()),
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
    /// a resolve override picked the address).
    pub(crate) async fn tls(
        &self,
        host: &str,
        port: u16,
    ) -> Result<TlsStream<TcpStream>, DialError> {
        let tcp = self.tcp(host, port).await?;
        let name = normalize_host(host);
        let server_name = ServerName::try_from(name).map_err(|e| DialError::Tls {
            host: host.to_owned(),
            port,
            source: io::Error::new(io::ErrorKind::InvalidInput, e),
        })?;
        let handshake = self.tls.connect(server_name, tcp);
        let remaining = self.connect_timeout;
        match tokio::time::timeout(remaining, handshake).await {
            Err(_) => Err(DialError::Timeout {
                host: host.to_owned(),
                port,
                timeout: self.connect_timeout,
            }),
            Ok(Err(source)) => Err(DialError::Tls { host: host.to_owned(), port, source }),
            Ok(Ok(tls)) => Ok(tls),
        }
    }
}

/// Whether a sandbox may reach `ip` without an explicit opt-in: not
/// loopback, private, link-local (cloud metadata), CGNAT, unspecified,
/// multicast or broadcast, also when mapped into IPv6.
pub(crate) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19)))
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => {
                !(v6.is_loopback()
                    || v6.is_unspecified()
                    || v6.is_multicast()
                    || v6.is_unique_local()
                    || v6.is_unicast_link_local())
            }
        },
    }
}

/// A connection to an upstream, plain or TLS.
#[derive(Debug)]
pub(crate) enum UpstreamStream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpstreamStream::Tls(s) => match Pin::new(s.as_mut()).poll_read(cx, buf) {
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
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            UpstreamStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            UpstreamStream::Plain(s) => s.is_write_vectored(),
            UpstreamStream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// The connector of the pooled client: `http://` plain, `https://` TLS.
#[derive(Debug, Clone)]
pub(crate) struct Connector(pub(crate) Dialer);

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<UpstreamStream>;
    type Error = DialError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, DialError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), DialError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let dialer = self.0.clone();
        Box::pin(async move {
            let bad = || DialError::BadUri { uri: uri.to_string() };
            let host = uri.host().ok_or_else(bad)?.to_owned();
            let stream = match uri.scheme_str() {
                Some("https") => UpstreamStream::Tls(Box::new(
                    dialer.tls(&host, uri.port_u16().unwrap_or(443)).await?,
                )),
                Some("http") => {
                    UpstreamStream::Plain(dialer.tcp(&host, uri.port_u16().unwrap_or(80)).await?)
                }
                _ => return Err(bad()),
            };
            Ok(TokioIo::new(stream))
        })
    }
}

/// The request body type sent upstream.
pub(crate) type UpBody = Counted<hyper::body::Incoming>;

/// The shared, pooled upstream client.
pub(crate) type UpstreamClient = Client<Connector, UpBody>;

pub(crate) fn client(dialer: Dialer) -> UpstreamClient {
    Client::builder(TokioExecutor::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(60))
        .timer(TokioTimer::new())
        .build(Connector(dialer))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_public_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.17.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip} should not be public");
        }
        for ip in ["1.1.1.1", "140.82.112.3", "2606:4700::1111"] {
            assert!(is_public(ip.parse().unwrap()), "{ip} should be public");
        }
    }
}
