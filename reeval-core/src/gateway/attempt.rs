//! The attempt's egress: the gateway phase, the sandbox's only way out.
//!
//! An attempt whose harness or environment needs a way out (see
//! [`crate::egress`]) gets one; any other keeps no network at all. On a
//! local engine the sandbox runs with `network_mode: none` and a host
//! directory mounted read-only at `/run/reeval`, holding the gateway's unix
//! socket for this attempt, the static `reeval-relay` and (for TLS
//! interception) the run's CA. The relay is the sandbox's main process: it
//! probes the host's addresses (a listener of ours on 0.0.0.0, `docker0`
//! included), outside addresses and DNS, installs the CA, listens on
//! 127.0.0.1:3128, and reports to the gateway through the socket. The
//! gateway phase waits for that report: isolation that does not hold is an
//! infra error. The gateway itself is the run's (`run.rs`), with an
//! identity per attempt (the socket a connection comes in on, `socket.rs`);
//! on a remote engine the attempt gets a gateway container next to its
//! sandbox, on a cluster a process in the run's gateway pod. The backend
//! decides which (`Backend::place_gateway`): the attempt offers both, made
//! only when asked for, and drives whichever it got through the same
//! `GatewayContainer` calls, never asking which backend it is.
//!
//! The flow: [`plan`] before the container (what the attempt asks of the
//! gateway), [`prepare`] with it (the attempt's identity, what the sandbox
//! needs), [`AttemptEgress::verify`] once it started (the gateway phase), a
//! policy per phase (`for_setup`, `for_agent`, `for_check`), and
//! [`AttemptEgress::close`] at teardown (what went out, for the record).

use crate::sandbox::FileToWrite;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use reeval_gateway::relay::{self, RelayReport};
use reeval_gateway::{Binding, InternalRule, Policy};

use super::run::{OUTSIDE, RemoteGateway, RunEgress, set_mode};
use super::socket::SocketGateway;
use crate::egress::{BrokerRoute, Egress};
use crate::environment::Environment;
use crate::error::{Error, Result};
use crate::harness::Harness;
use crate::record::EgressRecord;
use crate::sandbox::{
    Backend, GatewayContainer, GatewayOffer, GatewayRequest, NetworkSpec, SandboxError,
};
use crate::secrets::{ExposeSecret, Secret, SecretScope};

/// How long the relay gets to report once the sandbox started.
const REPORT_WITHIN: Duration = Duration::from_secs(10);

/// What an attempt asks of the gateway.
#[derive(Debug)]
pub(crate) struct Plan {
    setup: Policy,
    agent: Policy,
    check: Policy,
    bindings: Vec<Binding>,
    /// The same bindings as a gateway container's configuration takes them (values apart).
    binding_configs: Vec<(serde_json::Value, reeval_gateway::SecretString)>,
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
    let agent_egress = if env.any_egress { Egress::Any } else { Egress::None }
        .to_gateway(&allowed)
        .map_err(config)?;
    let setup_egress = match &env.setup_network {
        Some(e) => e.to_gateway(&[]).map_err(config)?,
        None => agent_egress.clone(),
    };
    let check_egress =
        env.check_network.clone().unwrap_or(Egress::None).to_gateway(&[]).map_err(config)?;
    let internal = env
        .allow_internal
        .iter()
        .map(|e| InternalRule::parse(e).map_err(|e| config(format!("allow_internal: {e}"))))
        .collect::<Result<Vec<_>>>()?;
    let (mut bindings, mut agent_names, mut check_names) = (Vec::new(), Vec::new(), Vec::new());
    let mut binding_configs = Vec::new();
    let (mut base_urls, mut intercept, mut brokered) = (Vec::new(), false, Vec::new());
    for (name, broker) in from_harness.brokers.iter().chain(env.brokers.iter()) {
        // A credential preflight did not resolve (an in-process agent's) has
        // nothing to broker. (A judge's key is not among `secrets`: see `CellPlan::judge_keys`.)
        let Some(secret) = secrets.iter().find(|s| &s.name == name) else {
            continue;
        };
        let value = reeval_gateway::SecretString::from(secret.value.expose_secret().to_string());
        bindings.push(broker.binding(name, &secret.placeholder(), value.clone()).map_err(config)?);
        binding_configs.push((broker.config(name, &secret.placeholder()), value));
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
    let policy = |egress| Policy::new(egress).allow_internal(internal.iter().cloned());
    Ok(Some(Plan {
        setup: policy(setup_egress).activate(agent_names.clone()),
        agent: policy(agent_egress).activate(agent_names),
        check: policy(check_egress).activate(check_names),
        bindings,
        binding_configs,
        base_urls,
        intercept,
        brokered,
        hosts: allowed.len(),
    }))
}

impl Plan {
    /// Whether a setup step could receive a secret value: the gateway swaps one in during setup.
    pub(crate) fn secrets_reach_setup(&self) -> bool {
        !self.setup.active_bindings.is_empty()
    }

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

/// An attempt's gateway, wherever its backend placed it: the run's gateway in
/// this process with a socket mounted into the sandbox (`socket.rs`), or a
/// gateway next to the sandbox (a remote engine's container, a process in a
/// cluster's gateway pod).
#[derive(Debug)]
pub(crate) struct AttemptEgress {
    gateway: Box<dyn GatewayContainer>,
    /// Whether the backend runs it next to the sandbox (the phase's detail says where).
    beside: bool,
    /// This host's addresses the sandbox's relay probes.
    probes: usize,
    plan: Plan,
    /// Whether the relay installs certificates for the sandbox to trust.
    trusts: bool,
    /// The upstream proxy the run's gateway dials through, as shown (`` when none).
    proxy: String,
}

/// What went out, once the attempt's egress closed.
#[derive(Debug)]
pub(crate) struct Closed {
    /// As the record keeps it.
    pub(crate) records: Vec<EgressRecord>,
    /// `egress: N requests, M refused`, an event of the record.
    pub(crate) summary: String,
    /// What a failed attempt's message says of the refusals (`refused.rs`).
    pub(crate) refused: Option<String>,
}

/// What the sandbox needs from its gateway when it is created.
#[derive(Debug)]
pub(crate) struct ForSandbox {
    pub(crate) network: NetworkSpec,
    /// Its main process: the relay.
    pub(crate) main_process: Vec<String>,
    /// Files uploaded before it starts (the relay and the CA, where nothing is mounted).
    pub(crate) files: Vec<FileToWrite>,
}

/// What the attempt offers its backend (see [`Backend::place_gateway`]). An
/// error of ours is kept as it is (a config error stays one) and returned in
/// place of the backend's.
struct Offer<'a> {
    run: &'a RunEgress,
    plan: &'a Plan,
    labels: &'a BTreeMap<String, String>,
    /// The run's CA and binary, once a gateway next to the sandbox was asked for.
    remote: std::sync::OnceLock<Arc<RemoteGateway>>,
    failed: std::sync::Mutex<Option<Error>>,
}

impl Offer<'_> {
    fn keep(&self, e: Error) -> SandboxError {
        let message = e.to_string();
        *self.failed.lock().expect("offer lock") = Some(e);
        SandboxError::EngineConfig { message }
    }
}

#[async_trait::async_trait]
impl GatewayOffer for Offer<'_> {
    async fn in_process(&self) -> std::result::Result<Box<dyn GatewayContainer>, SandboxError> {
        socket(self.run, self.plan).await.map_err(|e| self.keep(e))
    }

    async fn beside(&self) -> std::result::Result<GatewayRequest, SandboxError> {
        let remote = self.run.remote().await.map_err(|e| self.keep(e))?;
        let request = container_request(self.run, self.plan, &remote, self.labels);
        let _ = self.remote.set(remote);
        Ok(request)
    }
}

/// Before the container: the attempt's gateway, where its backend places it,
/// and what the sandbox needs of it.
pub(crate) async fn prepare(
    run: &RunEgress,
    plan: Plan,
    backend: &dyn Backend,
    labels: &BTreeMap<String, String>,
) -> Result<(AttemptEgress, ForSandbox)> {
    let offer = Offer {
        run,
        plan: &plan,
        labels,
        remote: std::sync::OnceLock::new(),
        failed: std::sync::Mutex::new(None),
    };
    let placed = backend.place_gateway(&offer).await;
    let gateway = match (placed, offer.failed.lock().expect("offer lock").take()) {
        (Err(_), Some(ours)) => return Err(ours),
        (Err(e), None) => return Err(Error::from(e).in_phase(crate::phase::Phase::Gateway)),
        (Ok(gateway), _) => gateway,
    };
    let host_probes = gateway.probes();
    let mut probes = host_probes.clone();
    probes.extend(OUTSIDE);
    let trusts = plan.intercept || run.host_roots().count > 0;
    let mut main_process = relay::supervise_argv(&relay_in_sandbox(), &probes, true, trusts);
    // The relay reaches a gateway next to the sandbox over the network, not a socket.
    if let Some(at) = main_process.iter().position(|a| a == relay::SANDBOX_SOCKET_PATH) {
        main_process[at] = gateway.upstream();
    }
    // Where nothing is mounted, the relay last: a pod whose main process waits
    // for it then finds the CA complete.
    let mut files = Vec::new();
    if !gateway.mounted() {
        if trusts {
            let ca = offer.remote.get().filter(|_| plan.intercept).map(|r| r.ca.cert_pem());
            let pem = sandbox_trust(ca, run);
            files.push(FileToWrite::new(relay::SANDBOX_CA_SOURCE, pem, 0o644));
        }
        files.push(FileToWrite::new(relay_in_sandbox(), relay::RELAY_BINARY.to_vec(), 0o755));
    }
    let network = gateway.network();
    let beside = !gateway.mounted();
    drop(offer);
    let proxy = run.proxy_shown();
    Ok((
        AttemptEgress { gateway, beside, probes: host_probes.len(), plan, trusts, proxy },
        ForSandbox { network, main_process, files },
    ))
}

/// The run's gateway in this process, with a directory and a socket for this attempt.
async fn socket(run: &RunEgress, plan: &Plan) -> Result<Box<dyn GatewayContainer>> {
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
    if plan.intercept || run.host_roots().count > 0 {
        let ca = plan.intercept.then(|| gateway.gateway.ca_pem());
        std::fs::write(dir.join("ca.pem"), sandbox_trust(ca, run))
            .map_err(|e| fail("write the CA", &e))?;
    }
    let attempt = gateway
        .gateway
        .attempt(plan.setup.clone(), plan.bindings.clone())
        .map_err(|e| fail("set up its policy", &e))?;
    let serving = attempt
        .bind_unix(dir.join("gateway.sock"))
        .map_err(|e| fail("listen on its socket", &e))?;
    let canary_before = gateway.canary_hits.load(Ordering::SeqCst);
    Ok(Box::new(SocketGateway {
        gateway: attempt,
        serving: std::sync::Mutex::new(Some(serving)),
        dir,
        run: gateway,
        canary_before,
    }))
}

/// What the sandbox is made to trust besides its own store: the run's CA
/// (when the gateway intercepts TLS), and what this host trusts beyond the
/// public roots, so a tunnel through an intercepting proxy verifies as it
/// would on this host.
fn sandbox_trust(run_ca: Option<&str>, run: &RunEgress) -> String {
    let mut pem = run_ca.unwrap_or_default().to_string();
    if !pem.is_empty() && !pem.ends_with('\n') {
        pem.push('\n');
    }
    pem.push_str(&run.host_roots().pem);
    pem
}

fn relay_in_sandbox() -> String {
    format!("{}/reeval-relay", relay::SANDBOX_SOCKET_DIR)
}

/// Where the gateway container keeps its configuration.
const CONTAINER_DIR: &str = "/etc/reeval-gateway";
/// The port it listens on.
const CONTAINER_PORT: u16 = 3128;

/// What a gateway next to the sandbox needs: the binary, its configuration and CA, the secrets it swaps in.
fn container_request(
    run: &RunEgress,
    plan: &Plan,
    remote: &RemoteGateway,
    labels: &BTreeMap<String, String>,
) -> GatewayRequest {
    let mut files = vec![
        FileToWrite::new(format!("{CONTAINER_DIR}/ca.pem"), remote.ca.cert_pem().as_bytes(), 0o644),
        FileToWrite::new(
            format!("{CONTAINER_DIR}/ca.key"),
            remote.ca.key_pem().expose_secret().as_bytes(),
            0o600,
        ),
    ];
    let mut roots = Vec::new();
    let host_roots = Some(&run.host_roots().pem).filter(|p| !p.is_empty());
    for (i, pem) in run.settings.extra_roots_pem.iter().chain(host_roots).enumerate() {
        let path = format!("{CONTAINER_DIR}/root-{i}.pem");
        files.push(FileToWrite::new(path.clone(), pem.clone(), 0o644));
        roots.push(path);
    }
    let mut config = serde_json::json!({
        "listen": format!("tcp:0.0.0.0:{CONTAINER_PORT}"),
        "policyFromStdin": true,
        "ca": { "certFile": format!("{CONTAINER_DIR}/ca.pem"), "keyFile": format!("{CONTAINER_DIR}/ca.key") },
        "policy": plan.setup,
        "bindings": plan.binding_configs.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>(),
        "extraRootFiles": roots,
        "resolve": run.settings.resolve.iter().map(|(h, a)| serde_json::json!({ "host": h, "addr": a.to_string() })).collect::<Vec<_>>(),
        "allowPrivateUpstreams": run.settings.allow_private_upstreams,
    });
    let proxy = run.proxy_config();
    if !proxy.is_null() {
        config["upstreamProxy"] = proxy;
    }
    // Readable by the gateway only: a proxy URL may hold credentials.
    files.push(FileToWrite::new(format!("{CONTAINER_DIR}/config.json"), config.to_string(), 0o600));
    let env = plan
        .binding_configs
        .iter()
        .map(|(c, value)| {
            (
                c["secretEnv"].as_str().unwrap_or_default().to_string(),
                secrecy::SecretString::from(value.expose_secret().to_string()),
            )
        })
        .collect();
    GatewayRequest {
        labels: labels.clone(),
        binary: remote.binary.clone(),
        base_image: crate::environment::DEFAULT_IMAGE.into(),
        files,
        env,
        command: vec![
            "/usr/local/bin/reeval-gateway".into(),
            "--config".into(),
            format!("{CONTAINER_DIR}/config.json"),
        ],
        port: CONTAINER_PORT,
    }
}

impl AttemptEgress {
    /// After the container started: the relay's report, checked. The phase's detail.
    pub(crate) async fn verify(&self) -> Result<String> {
        let unenforced = self.gateway.unenforced();
        let report = self.gateway.isolation(REPORT_WITHIN).await?;
        let (leaks, hosts) = (self.gateway.leaks(), self.probes);
        // Where nothing enforces isolation (a test cluster), what the probes reached is told, not fatal.
        if let Some(why) = &unenforced {
            let mut found: Vec<String> =
                report.tcp.iter().filter(|t| t.connected).map(|t| t.addr.clone()).collect();
            found.extend(
                report
                    .dns
                    .iter()
                    .filter(|d| d.answered)
                    .map(|d| format!("a DNS server ({})", d.by.as_deref().unwrap_or("?"))),
            );
            let reached = if found.is_empty() {
                " (the probes reached nothing)".into()
            } else {
                format!(" (the probes reached {})", found.join(", "))
            };
            let mut checked = report.clone();
            checked.tcp.clear();
            checked.dns = None;
            if let Some(problem) = isolation_problem(&checked, leaks, self.trusts) {
                return Err(Error::infra("verify the sandbox's isolation", problem));
            }
            return Ok(format!(
                "started ({}){} · allows {} hosts · isolation NOT enforced: {why}{reached}",
                self.gateway.place(),
                self.detail(),
                self.plan.hosts
            ));
        }
        if let Some(why) = isolation_problem(&report, leaks, self.trusts) {
            return Err(Error::infra("verify the sandbox's isolation", why));
        }
        let brokers = self.detail();
        let place =
            if self.beside { format!(" ({})", self.gateway.place()) } else { String::new() };
        Ok(format!(
            "started{place}{brokers} · allows {} hosts · isolation verified: {hosts} host addresses, {} outside addresses and DNS unreachable",
            self.plan.hosts,
            OUTSIDE.len()
        ))
    }

    async fn switch(&self, policy: &Policy) -> Result<()> {
        let json = serde_json::to_string(policy)
            .map_err(|e| Error::infra("switch the egress policy", e))?;
        Ok(self.gateway.set_policy(&json).await?)
    }

    /// Setup steps run: what setup may reach.
    pub(crate) async fn for_setup(&self) -> Result<()> {
        self.switch(&self.plan.setup).await
    }

    /// The agent's turns, and the time between: the allowlist.
    pub(crate) async fn for_agent(&self) -> Result<()> {
        self.switch(&self.plan.agent).await
    }

    /// A check runs: what checks may reach, checks-only secrets swapped.
    pub(crate) async fn for_check(&self) -> Result<()> {
        self.switch(&self.plan.check).await
    }

    /// Whether `name`'s real value stays out of the sandbox (the gateway swaps it).
    pub(crate) fn brokers(&self, name: &str) -> bool {
        self.plan.brokers(name)
    }

    /// Teardown: no more egress, the gateway closed; what went out, as the record keeps it.
    pub(crate) async fn close(self, attempt_started_unix_ms: u64) -> Closed {
        let entries = self.gateway.close().await;
        let refused = entries.iter().filter(|e| !e.allowed).count();
        let summary = format!("egress: {} requests, {refused} refused", entries.len());
        let note = super::refused::note(&entries);
        let records = entries.into_iter().map(|e| record(e, attempt_started_unix_ms)).collect();
        Closed { records, summary, refused: note }
    }
}

impl AttemptEgress {
    /// ` · brokers NAME for host, … · opens internal 10.0.0.0/8 · through the
    /// upstream proxy http://…`, the parts there are.
    fn detail(&self) -> String {
        let mut out = String::new();
        if !self.plan.brokered.is_empty() {
            out.push_str(&format!(" · brokers {}", self.plan.brokered.join(", ")));
        }
        let internal = &self.plan.agent.allow_internal;
        if !internal.is_empty() {
            let shown: Vec<String> = internal.iter().map(ToString::to_string).collect();
            out.push_str(&format!(" · opens internal {}", shown.join(", ")));
        }
        if !self.proxy.is_empty() {
            out.push_str(&format!(" · through the upstream proxy {}", self.proxy));
        }
        out
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
        internal: e
            .internal
            .map(|g| crate::record::EgressInternal { addr: g.addr.to_string(), by: g.by }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
