//! The gateway phase: the egress gateway, the sandbox's only way out.
//!
//! An attempt whose harness or environment needs a way out (see
//! [`crate::egress`]) gets one; any other keeps no network at all. On a
//! local engine the sandbox runs with `network_mode: none` and a host
//! directory mounted read-only at `/run/reeval`, holding the gateway's unix
//! socket for this attempt, the static `reeval-relay` and (for TLS
//! interception) the run's CA. The relay is the sandbox's main process: it
//! probes the host's addresses (a listener of ours on 0.0.0.0, `docker0`
//! included), outside addresses and DNS, installs the CA, listens on
//! 127.0.0.1:3128, and reports to the gateway through the socket. This phase
//! waits for that report: isolation that does not hold is an infra error.
//! The gateway itself runs in this process, one per run, with an identity per
//! attempt (the socket a connection comes in on).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reeval_gateway::relay::{self, RelayReport};
use reeval_gateway::{AttemptGateway, Binding, Gateway, GatewayOptions, Policy, Serving};

use crate::egress::{BrokerRoute, Egress, EgressSettings};
use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::harness::Harness;
use crate::record::EgressRecord;
use crate::sandbox::{Capabilities, NetworkSpec};
use crate::secrets::{ExposeSecret, Secret, SecretScope};

/// How long the relay gets to report once the sandbox started.
const REPORT_WITHIN: Duration = Duration::from_secs(10);
/// Outside addresses the sandbox must not reach.
const OUTSIDE: [SocketAddr; 2] = [
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(1, 1, 1, 1)), 443),
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(8, 8, 8, 8)), 53),
];

/// The run's gateway, started when the first attempt needs it.
#[derive(Debug, Default)]
pub(crate) struct RunEgress {
    settings: EgressSettings,
    gateway: tokio::sync::OnceCell<std::result::Result<Arc<RunGateway>, String>>,
    attempts: AtomicU64,
}

/// One run's gateway: the proxy and its CA, the host directory of the
/// attempts' sockets, the relay, and the addresses isolation is probed on.
#[derive(Debug)]
pub(crate) struct RunGateway {
    gateway: Gateway,
    dir: PathBuf,
    relay: PathBuf,
    /// The host's own addresses at the canary's port, then outside addresses.
    probes: Vec<SocketAddr>,
    /// Connections the canary listener (0.0.0.0) accepted: any is a leak.
    canary_hits: Arc<AtomicU64>,
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

    async fn gateway(&self) -> Result<Arc<RunGateway>> {
        let started = self
            .gateway
            .get_or_init(|| async { start_run_gateway(&self.settings).await.map(Arc::new) })
            .await;
        started.clone().map_err(|e| Error::infra("start the egress gateway", e))
    }
}

async fn start_run_gateway(settings: &EgressSettings) -> std::result::Result<RunGateway, String> {
    let mut options =
        GatewayOptions::default().allow_private_upstreams(settings.allow_private_upstreams);
    for pem in &settings.extra_roots_pem {
        options = options.extra_root_pem(pem.clone());
    }
    for (host, addr) in &settings.resolve {
        options = options.resolve(host.clone(), *addr);
    }
    let gateway = Gateway::new(options).map_err(|e| e.to_string())?;
    // Short: a unix socket's path has to fit in 108 bytes.
    let dir =
        std::env::temp_dir().join(format!("reeval-gw-{}-{:x}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    set_mode(&dir, 0o755)?;
    let relay = dir.join("reeval-relay");
    std::fs::write(&relay, relay::RELAY_BINARY)
        .map_err(|e| format!("write {}: {e}", relay.display()))?;
    set_mode(&relay, 0o755)?;
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

fn rand_suffix() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
    );
    h.finish() as u32
}

fn set_mode(path: &Path, mode: u32) -> std::result::Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// The host's IPv4 addresses (loopback aside): `docker0`'s, the primary one,
/// every bridge's. Read from the kernel's routing tables.
pub(crate) fn host_addresses() -> Vec<Ipv4Addr> {
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

/// What an attempt asks of the gateway.
#[derive(Debug)]
pub(crate) struct Plan {
    setup: Policy,
    agent: Policy,
    check: Policy,
    bindings: Vec<Binding>,
    /// `(variable, url)` for brokers on the base-url route.
    base_urls: Vec<(String, String)>,
    /// Whether any broker intercepts TLS (the sandbox must trust the CA).
    intercept: bool,
    /// `NAME for host`, for `-v`.
    brokered: Vec<String>,
    hosts: usize,
}

/// What the attempt's gateway should be, or `None` when it needs no way out.
pub(crate) fn plan(
    env: &Environment,
    harness: Option<&dyn Harness>,
    secrets: &[Secret],
) -> Result<Option<Plan>> {
    let from_harness = harness.map(|h| h.egress()).unwrap_or_default();
    if from_harness.is_empty() && !env.wants_egress() {
        return Ok(None);
    }
    let config = |e: String| Error::Config(format!("failed to set up the egress gateway: {e}"));
    let mut allowed = from_harness.hosts.clone();
    allowed.extend(env.allow_egress.iter().cloned());
    let agent_egress = Egress::None.to_gateway(&allowed).map_err(config)?;
    let setup_egress = match &env.setup_network {
        Some(e) => e.to_gateway(&[]).map_err(config)?,
        None => agent_egress.clone(),
    };
    let check_egress =
        env.check_network.clone().unwrap_or(Egress::None).to_gateway(&[]).map_err(config)?;
    let (mut bindings, mut agent_names, mut check_names) = (Vec::new(), Vec::new(), Vec::new());
    let (mut base_urls, mut intercept, mut brokered) = (Vec::new(), false, Vec::new());
    for (name, broker) in from_harness.brokers.iter().chain(env.brokers.iter()) {
        // A credential preflight did not resolve (an in-process agent's) has nothing to broker.
        let Some(secret) = secrets.iter().find(|s| &s.name == name) else { continue };
        let value = reeval_gateway::SecretString::from(secret.value.expose_secret().to_string());
        bindings.push(broker.binding(name, &secret.placeholder(), value).map_err(config)?);
        match secret.scope {
            SecretScope::Checks => check_names.push(name.clone()),
            _ => agent_names.push(name.clone()),
        }
        match &broker.route {
            BrokerRoute::Intercept => intercept = true,
            BrokerRoute::BaseUrl { env } => base_urls.push((
                env.clone(),
                reeval_gateway::base_url(relay::SANDBOX_PROXY_URL, broker.host()),
            )),
        }
        brokered.push(format!("{name} for {}", broker.host()));
    }
    Ok(Some(Plan {
        setup: Policy::new(setup_egress).activate(agent_names.clone()),
        agent: Policy::new(agent_egress).activate(agent_names),
        check: Policy::new(check_egress).activate(check_names),
        bindings,
        base_urls,
        intercept,
        brokered,
        hosts: allowed.len(),
    }))
}

impl Plan {
    /// Variables the sandbox gets: the proxy, the CA bundle, base URLs.
    pub(crate) fn variables(&self) -> Vec<(String, String)> {
        let mut vars: Vec<(String, String)> =
            relay::sandbox_env().into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        vars.extend(self.base_urls.iter().cloned());
        vars
    }

    /// Whether a brokered secret's real value must stay out of checks' environment.
    pub(crate) fn brokers(&self, name: &str) -> bool {
        self.bindings.iter().any(|b| b.name() == name)
    }
}

/// An attempt's gateway: its identity on the run's gateway, its socket, its policies.
#[derive(Debug)]
pub(crate) struct AttemptEgress {
    gateway: AttemptGateway,
    serving: Option<Serving>,
    dir: PathBuf,
    run: Arc<RunGateway>,
    plan: Plan,
    canary_before: u64,
}

/// Before the container: the attempt's socket and directory, the network
/// the sandbox gets and the relay it runs as its main process.
pub(crate) async fn prepare(
    run: &RunEgress,
    plan: Plan,
    capabilities: &Capabilities,
) -> Result<(AttemptEgress, NetworkSpec, Vec<String>)> {
    if !capabilities.gateway_socket {
        return Err(Error::Config(
            "failed to give the sandbox a way out: this engine cannot mount the egress gateway's socket (a remote engine); run on the local engine, or declare no egress".into(),
        ));
    }
    let gateway = run.gateway().await?;
    let n = run.attempts.fetch_add(1, Ordering::SeqCst);
    let dir = gateway.dir.join(n.to_string());
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        Error::infra(format!("prepare the egress gateway: {what}"), e)
    };
    std::fs::create_dir_all(&dir).map_err(|e| fail("create its directory", &e))?;
    set_mode(&dir, 0o755).map_err(|e| fail("make its directory readable", &e))?;
    // The relay is linked, not copied: one file per run.
    std::fs::hard_link(&gateway.relay, dir.join("reeval-relay"))
        .or_else(|_| std::fs::copy(&gateway.relay, dir.join("reeval-relay")).map(|_| ()))
        .map_err(|e| fail("place the relay", &e))?;
    if plan.intercept {
        std::fs::write(dir.join("ca.pem"), gateway.gateway.ca_pem())
            .map_err(|e| fail("write the CA", &e))?;
    }
    let attempt = gateway
        .gateway
        .attempt(plan.setup.clone(), plan.bindings.clone())
        .map_err(|e| fail("set up its policy", &e))?;
    let serving = attempt
        .bind_unix(dir.join("gateway.sock"))
        .map_err(|e| fail("listen on its socket", &e))?;
    let relay_in_sandbox = format!("{}/reeval-relay", relay::SANDBOX_SOCKET_DIR);
    let main = relay::supervise_argv(&relay_in_sandbox, &gateway.probes, true, plan.intercept);
    let network = NetworkSpec::GatewaySocket {
        host_dir: dir.clone(),
        sandbox_dir: relay::SANDBOX_SOCKET_DIR.into(),
    };
    let canary_before = gateway.canary_hits.load(Ordering::SeqCst);
    Ok((
        AttemptEgress {
            gateway: attempt,
            serving: Some(serving),
            dir,
            run: gateway,
            plan,
            canary_before,
        },
        network,
        main,
    ))
}

impl AttemptEgress {
    /// After the container started: the relay's report, checked. The phase's detail.
    pub(crate) async fn verify(&self) -> Result<String> {
        let report = self
            .gateway
            .isolation(REPORT_WITHIN)
            .await
            .map_err(|e| Error::infra("start the egress gateway", e))?;
        let leaks = self.run.canary_hits.load(Ordering::SeqCst) - self.canary_before;
        isolation_problem(&report, leaks, self.plan.intercept)
            .map_or(Ok(()), |why| Err(Error::infra("verify the sandbox's isolation", why)))?;
        let brokers = if self.plan.brokered.is_empty() {
            String::new()
        } else {
            format!(" · brokers {}", self.plan.brokered.join(", "))
        };
        let hosts = self.run.probes.len() - OUTSIDE.len();
        Ok(format!(
            "started{brokers} · allows {} hosts · isolation verified: {hosts} host addresses, {} outside addresses and DNS unreachable",
            self.plan.hosts,
            OUTSIDE.len()
        ))
    }

    /// Setup steps run: what setup may reach.
    pub(crate) fn for_setup(&self) {
        let _ = self.gateway.set_policy(self.plan.setup.clone());
    }

    /// The agent's turns, and the time between: the allowlist.
    pub(crate) fn for_agent(&self) {
        let _ = self.gateway.set_policy(self.plan.agent.clone());
    }

    /// A check runs: what checks may reach, checks-only secrets swapped.
    pub(crate) fn for_check(&self) {
        let _ = self.gateway.set_policy(self.plan.check.clone());
    }

    /// Whether `name`'s real value stays out of the sandbox (the gateway swaps it).
    pub(crate) fn brokers(&self, name: &str) -> bool {
        self.plan.brokers(name)
    }

    /// Teardown: no more egress, the socket closed; what went out, as the record keeps it.
    pub(crate) async fn close(
        mut self,
        attempt_started_unix_ms: u64,
    ) -> (Vec<EgressRecord>, String) {
        let _ = self.gateway.set_policy(Policy::deny_all());
        if let Some(serving) = self.serving.take() {
            serving.shutdown().await;
        }
        let counters = self.gateway.counters();
        let records = self
            .gateway
            .take_log()
            .into_iter()
            .map(|e| record(e, attempt_started_unix_ms))
            .collect();
        let _ = std::fs::remove_dir_all(&self.dir);
        (records, format!("egress: {} requests, {} refused", counters.requests, counters.refused))
    }
}

/// Why the report says the sandbox is not isolated, if it does.
fn isolation_problem(report: &RelayReport, canary_hits: u64, needs_ca: bool) -> Option<String> {
    if let Some(reached) = report.tcp.iter().find(|t| t.connected) {
        return Some(format!("the sandbox reached {} directly", reached.addr));
    }
    if let Some(dns) = report.dns.as_ref().filter(|d| d.answered) {
        return Some(format!(
            "a DNS server answered the sandbox ({})",
            dns.by.as_deref().unwrap_or("?")
        ));
    }
    if canary_hits > 0 {
        return Some(format!(
            "a listener on the host's 0.0.0.0 accepted {canary_hits} connections"
        ));
    }
    if report.socket.as_ref().is_some_and(|s| !s.connected) {
        return Some("the relay could not reach the gateway's socket".into());
    }
    if report.listening != Some(true) {
        return Some(format!(
            "the relay did not listen on {}: {}",
            relay::SANDBOX_PROXY_ADDR,
            report.error.as_deref().unwrap_or("no reason given")
        ));
    }
    if needs_ca && report.ca.as_ref().is_none_or(|c| !c.installed) {
        let why =
            report.ca.as_ref().and_then(|c| c.error.clone()).unwrap_or_else(|| "no answer".into());
        return Some(format!("the relay could not install the run's CA: {why}"));
    }
    None
}

fn record(e: reeval_gateway::EgressEntry, started_unix_ms: u64) -> EgressRecord {
    let route = serde_json::to_value(e.route)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    EgressRecord {
        at_ms: e.at_unix_ms.saturating_sub(started_unix_ms),
        host: e.host,
        port: e.port,
        method: e.method,
        path: e.path,
        status: e.status,
        bytes: e.bytes_up + e.bytes_down,
        bytes_up: e.bytes_up,
        bytes_down: e.bytes_down,
        duration_ms: e.duration_ms,
        allowed: e.allowed,
        route,
        brokered: e.brokered,
        error: e.error,
    }
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

    fn report(json: &str) -> RelayReport {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn isolation_that_does_not_hold_is_named() {
        let ok = report(
            r#"{"tcp":[{"addr":"172.17.0.1:1","connected":false}],"dns":{"answered":false},"listening":true}"#,
        );
        assert_eq!(isolation_problem(&ok, 0, false), None);
        assert!(isolation_problem(&ok, 1, false).unwrap().contains("0.0.0.0"));
        assert!(isolation_problem(&ok, 0, true).unwrap().contains("CA"));
        let leaky =
            report(r#"{"tcp":[{"addr":"172.17.0.1:1","connected":true}],"listening":true}"#);
        assert!(isolation_problem(&leaky, 0, false).unwrap().contains("172.17.0.1:1"));
        let dns =
            report(r#"{"tcp":[],"dns":{"answered":true,"by":"8.8.8.8:53"},"listening":true}"#);
        assert!(isolation_problem(&dns, 0, false).unwrap().contains("DNS"));
        let deaf = report(r#"{"tcp":[],"listening":false,"error":"bind failed"}"#);
        assert!(isolation_problem(&deaf, 0, false).unwrap().contains("bind failed"));
    }
}
