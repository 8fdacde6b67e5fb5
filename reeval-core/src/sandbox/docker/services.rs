//! A sandbox's services on a Docker engine (see `sandbox/service.rs`): an
//! internal network of the sandbox's own (`--internal` and `inhibit_ipv4`, as
//! the gateway's: no route out, no address of the engine's host), each
//! service a container on it under its names (network aliases), hardened
//! and limited as the sandbox is, labelled with the run, the attempt, the
//! owner and the service's name.
//!
//! `create` makes the network and the containers (not started) before the
//! sandbox; `start` starts them in dependency order, each once what it
//! depends on reached its condition; `ready`, after the sandbox started,
//! waits for each to be healthy (with a healthcheck) or running, and its
//! ports to accept a connection from the sandbox; `remove` removes them and
//! the network, after the sandbox. The run's sweep finds what is left by its
//! labels (containers by the run label, the network by `sweep_networks`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, EndpointSettings, HealthConfig, HealthStatusEnum, HostConfig,
    NetworkConnectRequest, NetworkCreateRequest, NetworkingConfig,
};
use bollard::query_parameters::{CreateContainerOptionsBuilder, LogsOptionsBuilder};
use futures_util::StreamExt;

use super::{DockerBackend, Flavor, InFlight, remove_container, ulimits};
use crate::exec::Command;
use crate::sandbox::service::{LABEL_SERVICE, start_order};
use crate::sandbox::{Condition, ExecRequest, NetworkSpec, Sandbox, SandboxError, ServiceStart};

/// How long a service without a healthcheck may take to open its ports.
const PORTS_LIMIT: Duration = Duration::from_secs(120);
/// Between two looks at a service's state.
const POLL: Duration = Duration::from_millis(250);

/// The services of one sandbox, created.
#[derive(Debug)]
pub(super) struct Services {
    docker: Docker,
    /// The network's id and name.
    network_id: String,
    pub(super) network: String,
    /// Each service with its container's id, in the order given.
    started: Vec<(ServiceStart, String)>,
}

/// Creates the services' network and containers (not started). On failure,
/// what was made is removed again.
///
/// # Cancel safety
/// Run to its end in a task of its own, counted as a create under way: a
/// dropped caller leaves labelled containers to the run's end sweep.
pub(super) async fn create(
    backend: &DockerBackend,
    services: &[ServiceStart],
    labels: &HashMap<String, String>,
) -> Result<Services, SandboxError> {
    let (docker, flavor, counted) =
        (backend.docker.clone(), backend.flavor, InFlight::new(&backend.creating));
    let (services, labels) = (services.to_vec(), labels.clone());
    let made = tokio::spawn(async move {
        let made = make(docker, flavor, services, labels).await;
        drop(counted);
        made
    });
    match made.await {
        Ok(made) => made,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(SandboxError::engine("create the services", e)),
    }
}

async fn make(
    docker: Docker,
    flavor: Flavor,
    services: Vec<ServiceStart>,
    labels: HashMap<String, String>,
) -> Result<Services, SandboxError> {
    let name = format!("reeval-svc-{}", unique());
    let network = docker
        .create_network(NetworkCreateRequest {
            name: name.clone(),
            driver: Some("bridge".into()),
            internal: Some(true),
            options: Some(HashMap::from([(
                "com.docker.network.bridge.inhibit_ipv4".to_string(),
                "true".to_string(),
            )])),
            labels: Some(labels.clone()),
            ..Default::default()
        })
        .await
        .map_err(|e| SandboxError::engine("create the services' network", e))?;
    let mut made = Services {
        docker: docker.clone(),
        network_id: network.id,
        network: name,
        started: Vec::new(),
    };
    for service in services {
        match create_one(&docker, flavor, &service, &made.network, &labels).await {
            Ok(id) => made.started.push((service, id)),
            Err(e) => {
                made.remove().await;
                return Err(e);
            }
        }
    }
    Ok(made)
}

/// A name no other sandbox's network has.
fn unique() -> String {
    use sha2::{Digest, Sha256};
    let seed = format!(
        "{}-{:?}-{:?}",
        super::owner_label(),
        std::time::SystemTime::now(),
        std::thread::current().id()
    );
    let hash = Sha256::digest(seed.as_bytes());
    hash[..5].iter().map(|b| format!("{b:02x}")).collect()
}

async fn create_one(
    docker: &Docker,
    flavor: Flavor,
    start: &ServiceStart,
    network: &str,
    labels: &HashMap<String, String>,
) -> Result<String, SandboxError> {
    let s = &start.service;
    let mut labels = labels.clone();
    labels.insert(LABEL_SERVICE.into(), s.name.clone());
    let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
    let healthcheck = s.healthcheck.as_ref().map(|h| HealthConfig {
        test: Some(h.test.clone()),
        interval: h.interval.map(nanos),
        timeout: h.timeout.map(nanos),
        retries: h.retries.map(i64::from),
        start_period: h.start_period.map(nanos),
        start_interval: None,
    });
    let endpoint = EndpointSettings { aliases: Some(s.names()), ..Default::default() };
    let body = ContainerCreateBody {
        image: Some(start.image.clone()),
        hostname: Some(s.name.chars().take(63).collect()),
        env: Some(s.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        entrypoint: s.entrypoint.clone(),
        cmd: s.command.clone(),
        working_dir: s.workdir.clone(),
        user: s.user.clone(),
        healthcheck,
        labels: Some(labels),
        networking_config: Some(NetworkingConfig {
            endpoints_config: Some(HashMap::from([(network.to_string(), endpoint)])),
        }),
        // As the sandbox: limited, capabilities dropped but those ordinary
        // entrypoints need (a database's chown and user switch), on its network only.
        host_config: Some(HostConfig {
            network_mode: Some(network.to_string()),
            memory: Some(s.limits.memory_bytes),
            memory_swap: Some(s.limits.memory_bytes),
            nano_cpus: Some(s.limits.nano_cpus),
            pids_limit: Some(s.limits.pids),
            init: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            cap_add: Some(
                ["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"]
                    .map(String::from)
                    .to_vec(),
            ),
            security_opt: Some(vec!["no-new-privileges".into()]),
            ulimits: (flavor == Flavor::Podman).then(ulimits),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = docker
        .create_container(Some(CreateContainerOptionsBuilder::default().build()), body)
        .await
        .map_err(|e| {
            SandboxError::engine(format!("create service {} from {}", s.name, start.image), e)
        })?;
    Ok(created.id)
}

impl Services {
    /// Puts the sandbox `id` (created, not started) on the services' network
    /// when it was created on its gateway's (a remote engine's); otherwise it
    /// was created on the services' network already.
    pub(super) async fn join(
        &self,
        docker: &Docker,
        id: &str,
        network: &NetworkSpec,
    ) -> Result<(), SandboxError> {
        if !matches!(network, NetworkSpec::Internal { .. }) {
            return Ok(());
        }
        let request = NetworkConnectRequest { container: id.to_string(), endpoint_config: None };
        docker
            .connect_network(&self.network_id, request)
            .await
            .map_err(|e| SandboxError::engine("connect the sandbox to its services' network", e))
    }

    /// Starts every service, each after those it depends on reached their conditions.
    pub(super) async fn start(&self) -> Result<(), SandboxError> {
        let services: Vec<_> = self.started.iter().map(|(s, _)| s.service.clone()).collect();
        let order = start_order(&services).unwrap_or_else(|| (0..services.len()).collect());
        for i in order {
            let (start, id) = &self.started[i];
            for (dep, condition) in &start.service.depends_on {
                let Some((_, dep_id)) = self.started.iter().find(|(s, _)| &s.service.name == dep)
                else {
                    continue;
                };
                self.reach(dep, dep_id, *condition).await?;
            }
            self.docker.start_container(id, None).await.map_err(|e| {
                SandboxError::engine(format!("start service {}", start.service.name), e)
            })?;
        }
        Ok(())
    }

    /// After the sandbox started: every service healthy (or running, or done
    /// when a one-shot job), and its ports open to the sandbox. Says what it waited for.
    pub(super) async fn ready(&self, sandbox: &dyn Sandbox) -> Result<(), SandboxError> {
        for (start, id) in &self.started {
            let s = &start.service;
            let one_shot = self.started.iter().any(|(o, _)| {
                o.service
                    .depends_on
                    .iter()
                    .any(|(d, c)| d == &s.name && *c == Condition::CompletedSuccessfully)
            });
            if one_shot {
                self.reach(&s.name, id, Condition::CompletedSuccessfully).await?;
                continue;
            }
            let condition =
                if s.healthcheck.is_some() { Condition::Healthy } else { Condition::Started };
            self.reach(&s.name, id, condition).await?;
            for port in &s.ports {
                self.port_open(sandbox, &s.name, *port).await?;
            }
        }
        Ok(())
    }

    /// Waits until service `name` reached `condition`.
    async fn reach(&self, name: &str, id: &str, condition: Condition) -> Result<(), SandboxError> {
        let limit = self
            .started
            .iter()
            .find(|(s, _)| s.service.name == name)
            .and_then(|(s, _)| s.service.healthcheck.as_ref().map(|h| h.limit()))
            .unwrap_or(PORTS_LIMIT)
            .max(PORTS_LIMIT);
        let began = Instant::now();
        loop {
            let inspected = self
                .docker
                .inspect_container(id, None)
                .await
                .map_err(|e| SandboxError::engine(format!("inspect service {name}"), e))?;
            let state = inspected.state.unwrap_or_default();
            let running = state.running == Some(true);
            let health = state.health.as_ref().and_then(|h| h.status);
            let exit = state.exit_code.unwrap_or(-1);
            let exited =
                !running && state.finished_at.as_deref().is_some_and(|t| !t.starts_with("0001-"));
            match condition {
                Condition::Started if running => return Ok(()),
                Condition::Healthy if health == Some(HealthStatusEnum::HEALTHY) => return Ok(()),
                Condition::CompletedSuccessfully if exited && exit == 0 => return Ok(()),
                // An exited container's health says unhealthy too: its exit is the news.
                _ if exited => {
                    return Err(self.failed(name, id, &format!("exited with {exit}")).await);
                }
                Condition::Healthy if health == Some(HealthStatusEnum::UNHEALTHY) => {
                    let last = state
                        .health
                        .and_then(|h| h.log)
                        .and_then(|l| l.last().and_then(|r| r.output.clone()))
                        .unwrap_or_default();
                    let why = format!("is unhealthy (its last check said: {})", last.trim());
                    return Err(self.failed(name, id, &why).await);
                }
                _ => {}
            }
            if began.elapsed() > limit {
                let what = match condition {
                    Condition::Started => "running",
                    Condition::Healthy => "healthy",
                    Condition::CompletedSuccessfully => "done",
                };
                let why = format!("was not {what} within {}s", limit.as_secs());
                return Err(self.failed(name, id, &why).await);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until `port` of service `name` accepts a connection from the sandbox.
    async fn port_open(
        &self,
        sandbox: &dyn Sandbox,
        name: &str,
        port: u16,
    ) -> Result<(), SandboxError> {
        let probe = Command::shell(PROBE)
            .args(["probe", name, &port.to_string()])
            .timeout(Duration::from_secs(5));
        let began = Instant::now();
        loop {
            let out = sandbox.exec(ExecRequest::plain(&probe, &[])).await?;
            match out.exit_code {
                0 => return Ok(()),
                // Neither bash, python3 nor nc in the sandbox's image: running must do.
                3 => return Ok(()),
                _ if began.elapsed() > PORTS_LIMIT => {
                    let why = format!(
                        "did not accept a connection on port {port} within {}s",
                        PORTS_LIMIT.as_secs()
                    );
                    let (_, id) =
                        self.started.iter().find(|(s, _)| s.service.name == name).expect("known");
                    return Err(self.failed(name, id, &why).await);
                }
                _ => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// The error of a service that did not come up, with the tail of its log.
    async fn failed(&self, name: &str, id: &str, why: &str) -> SandboxError {
        let mut logs = self.docker.logs(
            id,
            Some(LogsOptionsBuilder::default().stdout(true).stderr(true).tail("15").build()),
        );
        let mut tail = String::new();
        while let Some(Ok(chunk)) = logs.next().await {
            tail.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        let tail = tail.trim();
        let log =
            if tail.is_empty() { "no output".to_string() } else { format!("its log ends: {tail}") };
        SandboxError::engine_says(format!("start service {name}"), format!("it {why}; {log}"))
    }

    /// Removes every service's container, then the network. Missing is fine.
    ///
    /// # Cancel safety
    /// What a cancelled removal leaves, the run's end sweep removes.
    pub(super) async fn remove(&self) {
        for (_, id) in &self.started {
            let _ = remove_container(&self.docker, id).await;
        }
        let _ = self.docker.remove_network(&self.network_id).await;
    }
}

/// `sh -c PROBE probe HOST PORT`: exit 0 once HOST:PORT accepts a
/// connection, 1 when it does not yet, 3 when the image has no tool to try.
const PROBE: &str = r#"h=$1 p=$2
if command -v bash >/dev/null 2>&1; then
  exec bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$h" "$p" 2>/dev/null
elif command -v python3 >/dev/null 2>&1; then
  exec python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2)' "$h" "$p" 2>/dev/null
elif command -v nc >/dev/null 2>&1; then
  exec nc -z -w 2 "$h" "$p"
fi
exit 3"#;
