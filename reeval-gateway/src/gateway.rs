//! One gateway per run (the CA and the upstream client), one identity per
//! attempt (its policy, bindings and egress log), and the listeners that tie
//! connections to an attempt.

use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::broker::{Binding, Bindings};
use crate::ca::CertificateAuthority;
use crate::egress::{EgressCounters, EgressEntry, EgressLog};
use crate::error::GatewayError;
use crate::proxy::{self, Conn};
use crate::rules::Policy;
use crate::shared::{AttemptShared, GatewayShared};
use crate::upstream::Dialer;
use crate::upstream_proxy::UpstreamProxy;

/// How long [`Serving::shutdown`] waits for open connections to end.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// How the gateway reaches upstreams and which CA it intercepts with.
#[derive(Debug)]
pub struct GatewayOptions {
    ca: Option<CertificateAuthority>,
    webpki_roots: bool,
    extra_roots_pem: Vec<String>,
    resolve: Vec<(String, SocketAddr)>,
    connect_timeout: Duration,
    allow_private_upstreams: bool,
    upstream_proxy: Option<UpstreamProxy>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            ca: None,
            webpki_roots: true,
            extra_roots_pem: Vec::new(),
            resolve: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            allow_private_upstreams: false,
            upstream_proxy: None,
        }
    }
}

impl GatewayOptions {
    /// Intercept with this CA instead of generating one.
    #[must_use]
    pub fn ca(mut self, ca: CertificateAuthority) -> Self {
        self.ca = Some(ca);
        self
    }

    /// Trust these PEM certificates for upstream TLS, besides webpki-roots.
    #[must_use]
    pub fn extra_root_pem(mut self, pem: impl Into<String>) -> Self {
        self.extra_roots_pem.push(pem.into());
        self
    }

    /// Whether upstream TLS trusts the webpki-roots set (default true).
    #[must_use]
    pub fn webpki_roots(mut self, yes: bool) -> Self {
        self.webpki_roots = yes;
        self
    }

    /// **Test-only.** Every connection to `host` (any port) goes to `addr`,
    /// like `curl --resolve`, so a test can stand up a fake
    /// `api.anthropic.com` on loopback. SNI and certificate verification
    /// still use the host name; the address is exempt from the address
    /// rules, and is dialled directly, never through an upstream proxy.
    /// Never use it to route real traffic.
    #[must_use]
    pub fn resolve(mut self, host: impl Into<String>, addr: SocketAddr) -> Self {
        self.resolve.push((host.into(), addr));
        self
    }

    /// How long resolving plus connecting to an upstream may take (default
    /// 10 s), and separately its TLS handshake; past it the sandbox gets a 502.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// **Test-only.** Let sandboxes reach every address, loopback and this
    /// host's own included (default false: hosts that resolve to addresses
    /// that are not public are refused with 403 even when allowlisted or
    /// under [`Egress::Any`](crate::Egress::Any), unless the policy's
    /// `allow_internal` opens them, and this host's own, link-local and
    /// metadata addresses always are; see the crate's docs).
    #[must_use]
    pub fn allow_private_upstreams(mut self, yes: bool) -> Self {
        self.allow_private_upstreams = yes;
        self
    }

    /// Reach upstreams through this HTTP proxy (see [`UpstreamProxy`]):
    /// TLS upstreams and tunnels by `CONNECT`, plain HTTP in absolute form.
    #[must_use]
    pub fn upstream_proxy(mut self, proxy: Option<UpstreamProxy>) -> Self {
        self.upstream_proxy = proxy;
        self
    }
}

/// The egress gateway of a run: its CA and the shared upstream client.
/// Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gateway {
    shared: Arc<GatewayShared>,
}

impl Gateway {
    /// Makes the CA (unless the options bring one) and the upstream client.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Certificate`] if the CA cannot be made,
    /// [`GatewayError::Roots`] if an extra root is not PEM.
    pub fn new(options: GatewayOptions) -> Result<Self, GatewayError> {
        let ca = match options.ca {
            Some(ca) => ca,
            None => CertificateAuthority::generate()?,
        };
        let dialer = Dialer::new(
            options.webpki_roots,
            &options.extra_roots_pem,
            &options.resolve,
            options.connect_timeout,
            options.allow_private_upstreams,
            options.upstream_proxy,
        )?;
        Ok(Gateway { shared: Arc::new(GatewayShared::new(ca, dialer)) })
    }

    /// The per-run CA certificate (PEM) the sandbox must trust.
    pub fn ca_pem(&self) -> &str {
        self.shared.ca.cert_pem()
    }

    /// The per-run CA.
    pub fn ca(&self) -> &CertificateAuthority {
        &self.shared.ca
    }

    /// An attempt's identity: its starting policy and its bindings.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Binding`] if two bindings share a name,
    /// [`GatewayError::UnknownBinding`] if the policy activates a name that
    /// is not among them.
    pub fn attempt(
        &self,
        policy: Policy,
        bindings: Vec<Binding>,
    ) -> Result<AttemptGateway, GatewayError> {
        let bindings = Bindings::new(bindings)?;
        check_active(&policy, &bindings)?;
        let (policy, _) = watch::channel(Arc::new(policy));
        Ok(AttemptGateway {
            shared: Arc::new(AttemptShared {
                gateway: self.shared.clone(),
                policy,
                bindings,
                log: Arc::new(EgressLog::default()),
                isolation: watch::channel(None).0,
            }),
        })
    }
}

fn check_active(policy: &Policy, bindings: &Bindings) -> Result<(), GatewayError> {
    for name in &policy.active_bindings {
        if !bindings.names().any(|n| n == name) {
            return Err(GatewayError::UnknownBinding {
                name: name.clone(),
                known: bindings.names().collect::<Vec<_>>().join(", "),
            });
        }
    }
    Ok(())
}

/// One attempt's view of the gateway. Every connection that arrives on one
/// of its listeners is this attempt's. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AttemptGateway {
    shared: Arc<AttemptShared>,
}

impl AttemptGateway {
    /// Replaces the policy for requests from now on. Open tunnels to hosts
    /// the new policy no longer allows are closed; requests already
    /// forwarded finish.
    ///
    /// # Errors
    ///
    /// [`GatewayError::UnknownBinding`] if the policy activates a name the
    /// attempt has no binding for (the old policy stays).
    pub fn set_policy(&self, policy: Policy) -> Result<(), GatewayError> {
        check_active(&policy, &self.shared.bindings)?;
        self.shared.policy.send_replace(Arc::new(policy));
        Ok(())
    }

    /// The policy in force.
    pub fn policy(&self) -> Arc<Policy> {
        self.shared.policy.borrow().clone()
    }

    /// The per-run CA certificate (PEM) the sandbox must trust.
    pub fn ca_pem(&self) -> &str {
        self.shared.gateway.ca.cert_pem()
    }

    /// Listens on a unix socket at `path` (a stale socket there is removed
    /// first; any other file is an error), made mode 0666 so an
    /// unprivileged user in the container can connect. Must be called
    /// within a Tokio runtime: it spawns the accept loop.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Listen`] if the path holds a file that is not a
    /// socket, or binding or chmod fails.
    pub fn bind_unix(&self, path: impl AsRef<Path>) -> Result<Serving, GatewayError> {
        let path = path.as_ref().to_owned();
        let err = |source| GatewayError::Listen { addr: path.display().to_string(), source };
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(&path).map_err(err)?,
            Ok(_) => {
                return Err(err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "a file that is not a socket is in the way",
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let listener = UnixListener::bind(&path).map_err(err)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).map_err(err)?;
        Ok(Serving::start(self.shared.clone(), listener, Listening::Unix(path)))
    }

    /// Serves connections from `listener` (for the binary and tests). Must
    /// be called within a Tokio runtime.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Listen`] if the listener's address cannot be read.
    pub fn serve_tcp(&self, listener: TcpListener) -> Result<Serving, GatewayError> {
        let addr = listener
            .local_addr()
            .map_err(|source| GatewayError::Listen { addr: "a TCP listener".into(), source })?;
        Ok(Serving::start(self.shared.clone(), listener, Listening::Tcp(addr)))
    }

    /// The entries recorded since the last call. A request is recorded when
    /// its response body ends (a tunnel when it closes), so requests in
    /// flight are not in it yet.
    pub fn take_log(&self) -> Vec<EgressEntry> {
        self.shared.log.take()
    }

    /// From now on, entries go to the returned receiver as they are
    /// recorded (those kept so far first) instead of being kept for
    /// [`take_log`](Self::take_log).
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<EgressEntry> {
        self.shared.log.subscribe()
    }

    /// Totals so far.
    pub fn counters(&self) -> EgressCounters {
        self.shared.log.counters()
    }

    /// The isolation report the sandbox's relay sent when it started
    /// ([`relay::supervise_argv`](crate::relay::supervise_argv)), waiting up to `within` for it.
    ///
    /// # Errors
    ///
    /// [`GatewayError::NoReport`] when none arrived in time.
    ///
    /// # Cancel safety
    ///
    /// Safe: a report that arrives later is kept for the next call.
    pub async fn isolation(
        &self,
        within: Duration,
    ) -> Result<Arc<crate::relay::RelayReport>, GatewayError> {
        let mut rx = self.shared.isolation.subscribe();
        let wait = rx.wait_for(Option::is_some);
        match tokio::time::timeout(within, wait).await {
            Ok(Ok(report)) => Ok(report.clone().expect("waited for Some")),
            _ => Err(GatewayError::NoReport { within }),
        }
    }
}

/// Where a [`Serving`] listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listening {
    /// A TCP address.
    Tcp(SocketAddr),
    /// A unix socket path.
    Unix(PathBuf),
}

/// A listener the accept loop can take connections from.
trait Accept: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    fn accept_stream(&self) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Accept for TcpListener {
    type Stream = TcpStream;

    async fn accept_stream(&self) -> std::io::Result<TcpStream> {
        let (stream, _) = self.accept().await?;
        // Small writes (SSE events, TLS records) must not wait for Nagle.
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

impl Accept for UnixListener {
    type Stream = UnixStream;

    async fn accept_stream(&self) -> std::io::Result<UnixStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// A running accept loop. Dropping it (or [`Serving::shutdown`]) stops the
/// loop and closes the connections it accepted, tunnels included; a unix
/// socket file is removed.
#[derive(Debug)]
pub struct Serving {
    local: Listening,
    // Dropping the sender is the stop signal every connection task watches.
    stop: watch::Sender<()>,
    task: JoinHandle<()>,
    // Every task serving one of this listener's connections holds a clone.
    alive: Arc<()>,
}

impl Serving {
    fn start<L: Accept>(shared: Arc<AttemptShared>, listener: L, local: Listening) -> Serving {
        let (stop, stop_rx) = watch::channel(());
        let alive = Arc::new(());
        let token = alive.clone();
        let task = tokio::spawn(async move {
            let mut stopped = stop_rx.clone();
            loop {
                let stream = tokio::select! {
                    accepted = listener.accept_stream() => match accepted {
                        Ok(stream) => stream,
                        // Out of descriptors and the like: back off rather than spin.
                        Err(_) => { tokio::time::sleep(Duration::from_millis(50)).await; continue; }
                    },
                    _ = stopped.changed() => return,
                };
                tokio::spawn(proxy::serve_connection(
                    Conn::new(shared.clone(), stop_rx.clone(), token.clone()),
                    stream,
                ));
            }
        });
        Serving { local, stop, task, alive }
    }

    /// Where it listens.
    pub fn local(&self) -> &Listening {
        &self.local
    }

    /// The TCP address, if it listens on TCP.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self.local {
            Listening::Tcp(addr) => Some(addr),
            Listening::Unix(_) => None,
        }
    }

    /// Stops accepting, closes open connections (tunnels included) and
    /// waits, up to 5 s, until their tasks have ended, so that
    /// [`AttemptGateway::take_log`] afterwards holds every entry.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the stop signal is sent before the first await, and
    /// dropping the rest of the wait only skips waiting.
    pub async fn shutdown(mut self) {
        let (dead, _) = watch::channel(());
        drop(std::mem::replace(&mut self.stop, dead));
        let _ = (&mut self.task).await;
        let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
        while Arc::strong_count(&self.alive) > 1 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.task.abort();
        if let Listening::Unix(path) = &self.local {
            let _ = std::fs::remove_file(path);
        }
    }
}
