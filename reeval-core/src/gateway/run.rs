//! The run's egress service: one gateway per run, started when the first
//! attempt needs a way out, that every attempt of the run gets an identity on
//! (`attempt.rs`).
//!
//! On a local engine it runs in this process: a proxy with the run's CA, a
//! host directory of the attempts' sockets with the static `reeval-relay` in
//! it, and a canary listener on the host's 0.0.0.0 that a sandbox must never
//! reach. On a remote engine each attempt gets a gateway container instead;
//! what those share (the run's CA and the `reeval-gateway` binary) is made
//! here once.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use reeval_gateway::relay;
use reeval_gateway::{Gateway, GatewayOptions, HostRoots};

use crate::egress::EgressSettings;
use crate::error::{Error, Result};

/// Outside addresses the sandbox must not reach.
pub(super) const OUTSIDE: [SocketAddr; 2] = [
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1)), 443),
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)), 53),
];

/// The run's gateway, started when the first attempt needs it.
#[derive(Debug, Default)]
pub(crate) struct RunEgress {
    pub(super) settings: EgressSettings,
    gateway: tokio::sync::OnceCell<std::result::Result<Arc<RunGateway>, String>>,
    remote: tokio::sync::OnceCell<std::result::Result<Arc<RemoteGateway>, String>>,
    /// What this host trusts beyond the public roots, read once.
    host_roots: std::sync::OnceLock<HostRoots>,
    /// Attempts given a socket so far: each gets a directory of its own.
    pub(super) attempts: AtomicU64,
}

/// What gateway containers of a run share: the per-run CA and the binary.
#[derive(Debug)]
pub(super) struct RemoteGateway {
    pub(super) ca: reeval_gateway::CertificateAuthority,
    pub(super) binary: Arc<Vec<u8>>,
}

/// One run's gateway: the proxy and its CA, the host directory of the
/// attempts' sockets, the relay, and the addresses isolation is probed on.
#[derive(Debug)]
pub(crate) struct RunGateway {
    pub(super) gateway: Gateway,
    pub(super) dir: PathBuf,
    pub(super) relay: PathBuf,
    /// The host's own addresses at the canary's port, then outside addresses.
    pub(super) probes: Vec<SocketAddr>,
    /// Connections the canary listener (0.0.0.0) accepted: any is a leak.
    pub(super) canary_hits: Arc<AtomicU64>,
    _canary: tokio::task::JoinHandle<()>,
}

impl Drop for RunGateway {
    fn drop(&mut self) {
        self._canary.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl RunEgress {
    /// A run's egress with these settings.
    pub(crate) fn new(settings: EgressSettings) -> Self {
        Self { settings, ..Self::default() }
    }

    /// The run's own `allow_internal` (added to every environment's, an
    /// extra sandbox's too).
    pub(crate) fn allow_internal(&self) -> &[String] {
        &self.settings.allow_internal
    }

    /// What this host's trust store adds to the public roots (a company's
    /// CA, an intercepting proxy's): the gateway trusts it upstream and the
    /// sandbox trusts it too.
    pub(super) fn host_roots(&self) -> &HostRoots {
        self.host_roots.get_or_init(HostRoots::load)
    }

    /// The gateway's upstream proxy as shown (credentials hidden), `` when it dials directly.
    pub(super) fn proxy_shown(&self) -> String {
        self.upstream_proxy().ok().flatten().map(|p| p.to_string()).unwrap_or_default()
    }

    /// The upstream proxy as a gateway container's configuration takes it
    /// (`null`: directly). Its URLs may hold credentials: the file is the gateway's only.
    pub(super) fn proxy_config(&self) -> serde_json::Value {
        use crate::egress::UpstreamProxySetting;
        let env = process_env;
        let first = |names: [&str; 2]| {
            names.into_iter().find_map(|n| env(n).filter(|v| !v.trim().is_empty()))
        };
        let no_proxy = first(["no_proxy", "NO_PROXY"]).unwrap_or_default();
        let (https, http) = match &self.settings.upstream_proxy {
            UpstreamProxySetting::Direct => return serde_json::Value::Null,
            UpstreamProxySetting::Environment => {
                (first(["https_proxy", "HTTPS_PROXY"]), first(["http_proxy", "HTTP_PROXY"]))
            }
            UpstreamProxySetting::Url(url) => (Some(url.clone()), Some(url.clone())),
        };
        if https.is_none() && http.is_none() {
            return serde_json::Value::Null;
        }
        serde_json::json!({ "https": https, "http": http, "noProxy": no_proxy })
    }

    /// The upstream proxy the settings name (the runner's variables by
    /// default); one that cannot be used is the run's configuration's fault.
    fn upstream_proxy(&self) -> Result<Option<reeval_gateway::UpstreamProxy>> {
        self.settings
            .upstream_proxy
            .resolve(process_env)
            .map_err(|e| Error::Config(format!("failed to use the upstream proxy: {e}")))
    }

    pub(super) async fn remote(&self) -> Result<Arc<RemoteGateway>> {
        self.upstream_proxy()?;
        let made = self
            .remote
            .get_or_init(|| async {
                let ca =
                    reeval_gateway::CertificateAuthority::generate().map_err(|e| e.to_string())?;
                let path = gateway_binary(&self.settings)?;
                let binary =
                    std::fs::read(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
                Ok(Arc::new(RemoteGateway { ca, binary: Arc::new(binary) }))
            })
            .await;
        made.clone().map_err(|e| Error::Config(format!("failed to start a gateway container: {e}")))
    }

    pub(super) async fn gateway(&self) -> Result<Arc<RunGateway>> {
        let proxy = self.upstream_proxy()?;
        let started = self
            .gateway
            .get_or_init(|| async {
                start_run_gateway(&self.settings, proxy, self.host_roots()).await.map(Arc::new)
            })
            .await;
        started.clone().map_err(|e| Error::infra("start the egress gateway", e))
    }
}

async fn start_run_gateway(
    settings: &EgressSettings,
    proxy: Option<reeval_gateway::UpstreamProxy>,
    host_roots: &HostRoots,
) -> std::result::Result<RunGateway, String> {
    let mut options = GatewayOptions::default()
        .allow_private_upstreams(settings.allow_private_upstreams)
        .upstream_proxy(proxy);
    for pem in &settings.extra_roots_pem {
        options = options.extra_root_pem(pem.clone());
    }
    if host_roots.count > 0 {
        options = options.extra_root_pem(host_roots.pem.clone());
    }
    for (host, addr) in &settings.resolve {
        options = options.resolve(host.clone(), *addr);
    }
    let gateway = Gateway::new(options).map_err(|e| e.to_string())?;
    // Short: a unix socket's path has to fit in 108 bytes.
    let temp = std::env::temp_dir();
    let dir = crate::host_dir::fresh(&temp, "reeval-gw")
        .map_err(|e| format!("create a directory in {}: {e}", temp.display()))?;
    let relay = dir.join("reeval-relay");
    crate::host_dir::write_executable(&relay, relay::RELAY_BINARY)
        .map_err(|e| format!("write {}: {e}", relay.display()))?;
    // A listener on every host address: a sandbox that reaches it is not isolated.
    let canary = tokio::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
        .await
        .map_err(|e| format!("listen on 0.0.0.0: {e}"))?;
    let port = canary.local_addr().map_err(|e| e.to_string())?.port();
    let canary_hits = Arc::new(AtomicU64::new(0));
    let hits = canary_hits.clone();
    let canary = tokio::spawn(async move {
        while canary.accept().await.is_ok() {
            hits.fetch_add(1, Ordering::SeqCst);
        }
    });
    let mut probes: Vec<SocketAddr> =
        host_addresses().into_iter().map(|ip| SocketAddr::new(IpAddr::V4(ip), port)).collect();
    probes.extend(OUTSIDE);
    Ok(RunGateway { gateway, dir, relay, probes, canary_hits, _canary: canary })
}

/// The `reeval-gateway` executable a gateway container runs: the one the
/// settings name, else `REEVAL_GATEWAY_BIN`, else one beside this program or
/// its parent directory (cargo's target dir), else one on `PATH`.
fn gateway_binary(settings: &EgressSettings) -> std::result::Result<PathBuf, String> {
    const NAME: &str = "reeval-gateway";
    let mut tried = Vec::new();
    let mut candidates: Vec<PathBuf> = settings.gateway_binary.iter().cloned().collect();
    candidates.extend(std::env::var_os("REEVAL_GATEWAY_BIN").map(PathBuf::from));
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(2) {
            candidates.push(dir.join(NAME));
        }
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        candidates.push(dir.join(NAME));
    }
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
        tried.push(c.display().to_string());
    }
    Err(format!(
        "this engine needs the {NAME} binary to run next to the sandbox, and none was found (tried {}); build it with `cargo build -p reeval-gateway` or install it with `cargo install --path reeval-gateway`, or set REEVAL_GATEWAY_BIN",
        tried.iter().take(4).cloned().collect::<Vec<_>>().join(", ")
    ))
}

/// The runner's own environment (its proxy variables).
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub(super) fn set_mode(path: &Path, mode: u32) -> std::result::Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// The host's IPv4 addresses (loopback aside): `docker0`'s, the primary one,
/// every bridge's. Read from the kernel's routing tables.
fn host_addresses() -> Vec<Ipv4Addr> {
    let text = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let mut found = Vec::new();
    let mut last: Option<Ipv4Addr> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(ip) = t.strip_prefix("|-- ").and_then(|a| a.parse::<Ipv4Addr>().ok()) {
            last = Some(ip);
        } else if t.contains("/32 host LOCAL")
            && let Some(ip) = last
            && !ip.is_loopback()
            && !found.contains(&ip)
        {
            found.push(ip);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_addresses_are_found() {
        let found = host_addresses();
        assert!(found.iter().all(|ip| !ip.is_loopback()));
        // Every Linux host with a network has at least one.
        assert!(!found.is_empty(), "no address in /proc/net/fib_trie");
    }
}
