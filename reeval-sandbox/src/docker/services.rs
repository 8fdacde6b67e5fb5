//! A sandbox's services on a Docker engine (see `sandbox/service.rs`): each
//! a container in the sandbox's own network namespace (`--network
//! container:<sandbox>`), as the containers of a Kubernetes pod are, its
//! names in the sandbox's `/etc/hosts` as `127.0.0.1` (Docker shares that
//! file with the services, so they reach each other by name too; Podman
//! gives each its own and refuses entries in it, so there they reach each
//! other at `localhost`). A service thus reaches exactly what the sandbox reaches: no
//! network of its own, no address of the engine's host, and the way out the
//! sandbox has (its relay on 127.0.0.1, when the task gives it one), every
//! request through the gateway. Hardened and limited as the sandbox,
//! labelled with the run, the attempt, the owner and the service's name.
//!
//! (A network of its own per sandbox was tried first: on Podman, an
//! internal network keeps an address of the host on its bridge, and where
//! Docker runs beside Podman its `FORWARD DROP` policy drops the traffic
//! between the containers of Podman's internal bridges.)
//!
//! `create` makes the containers (not started) after the sandbox; `start`,
//! after the sandbox started, starts them in dependency order, each once
//! what it depends on reached its condition; `ready` waits for each to be
//! healthy (with a healthcheck) or running, and its ports to accept a
//! connection from the sandbox; `remove` removes them, before the sandbox
//! (Podman refuses to remove a container others share the namespace of).
//! The run's sweep finds what is left by the run label.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, ContainerState, HealthConfig, HealthStatusEnum, HostConfig,
};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, LogsOptionsBuilder, WaitContainerOptionsBuilder,
};
use futures_util::StreamExt;

use super::{DockerBackend, Flavor, InFlight, confined, remove_container};
use crate::exec::Command;
use crate::service::{LABEL_SERVICE, PORTS_LIMIT, start_order, wait_for_port};
use crate::{Condition, Sandbox, SandboxError, ServiceStart};

/// Between two looks at a service's state.
const POLL: Duration = Duration::from_millis(250);

/// The services of one sandbox, created.
#[derive(Debug)]
pub(super) struct Services {
    docker: Docker,
    /// Podman runs healthchecks from systemd timers, which a host without
    /// systemd never fires: there reeval runs each check itself.
    flavor: Flavor,
    /// Each service with its container's id, in the order given.
    started: Vec<(ServiceStart, String)>,
}

/// The sandbox's `/etc/hosts` entries: every service's names at 127.0.0.1.
pub(super) fn hosts(services: &[ServiceStart]) -> Vec<String> {
    services.iter().flat_map(|s| s.service.names()).map(|n| format!("{n}:127.0.0.1")).collect()
}

/// Creates the services' containers (not started) in the network namespace
/// of the sandbox `sandbox` (created). On failure, what was made is removed again.
///
/// # Cancel safety
/// Run to its end in a task of its own, counted as a create under way: a
/// dropped caller leaves labelled containers to the run's end sweep.
pub(super) async fn create(
    backend: &DockerBackend,
    services: &[ServiceStart],
    labels: &HashMap<String, String>,
    sandbox: &str,
    volumes: &super::volumes::Made,
) -> Result<Services, SandboxError> {
    let (docker, flavor, counted) =
        (backend.docker.clone(), backend.flavor, InFlight::new(&backend.creating));
    let (services, labels, sandbox) = (services.to_vec(), labels.clone(), sandbox.to_string());
    // Each service's mounts as the engine takes them (its volumes are the sandbox's).
    let mounts: Vec<_> =
        services.iter().map(|s| volumes.engine_mounts(&s.service.mounts)).collect();
    let made = tokio::spawn(async move {
        let made = make(docker, flavor, services, labels, sandbox, mounts).await;
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
    sandbox: String,
    mounts: Vec<Option<Vec<bollard::models::Mount>>>,
) -> Result<Services, SandboxError> {
    let mut made = Services { docker: docker.clone(), flavor, started: Vec::new() };
    for (service, mounts) in services.into_iter().zip(mounts) {
        match create_one(&docker, flavor, &service, &sandbox, &labels, mounts).await {
            Ok(id) => made.started.push((service, id)),
            Err(e) => {
                made.remove().await;
                return Err(e);
            }
        }
    }
    Ok(made)
}

async fn create_one(
    docker: &Docker,
    flavor: Flavor,
    start: &ServiceStart,
    sandbox: &str,
    labels: &HashMap<String, String>,
    mounts: Option<Vec<bollard::models::Mount>>,
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
    let body = ContainerCreateBody {
        image: Some(start.image.clone()),
        env: Some(s.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        entrypoint: s.entrypoint.clone(),
        cmd: s.command.clone(),
        working_dir: s.workdir.clone(),
        user: s.user.clone(),
        healthcheck,
        labels: Some(labels),
        // As the sandbox: limited, capabilities dropped but those ordinary
        // entrypoints need (a database's chown and user switch), in its network namespace.
        host_config: Some(HostConfig {
            network_mode: Some(format!("container:{sandbox}")),
            mounts,
            ..confined(&s.limits, flavor)
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
    /// Starts every service (after the sandbox, whose network namespace they
    /// join), each after those it depends on reached their conditions.
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
            let state = match self.docker.inspect_container(id, None).await {
                Ok(inspected) => inspected.state.unwrap_or_default(),
                // Podman says `stopped`, which the Docker API does not name: it exited.
                Err(bollard::errors::Error::JsonDataError { .. }) => ContainerState {
                    running: Some(false),
                    exit_code: Some(self.exit_code(id).await),
                    finished_at: Some("stopped".into()),
                    ..Default::default()
                },
                Err(e) => return Err(SandboxError::engine(format!("inspect service {name}"), e)),
            };
            let running = state.running == Some(true);
            let mut health = state.health.as_ref().and_then(|h| h.status);
            if self.flavor == Flavor::Podman && running && condition == Condition::Healthy {
                health = self.check_health(name, id, began.elapsed()).await;
            }
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
        let not_open = wait_for_port(sandbox, name, port, POLL, || async { None }).await?;
        let Some(why) = not_open else { return Ok(()) };
        let id = self.container_of(name, "wait for a port")?.to_string();
        Err(self.failed(name, &id, &why).await)
    }

    /// One run of service `name`'s healthcheck by reeval, in its container:
    /// healthy on exit 0; unhealthy once it failed after the start period
    /// for longer than its retries allow (counted in intervals since the start).
    async fn check_health(
        &self,
        name: &str,
        id: &str,
        since: Duration,
    ) -> Option<HealthStatusEnum> {
        let (start, _) = self.started.iter().find(|(s, _)| s.service.name == name)?;
        let check = start.service.healthcheck.as_ref()?;
        // As the engine does, the first check after one interval.
        if since < check.interval.unwrap_or(Duration::from_secs(30)) {
            return Some(HealthStatusEnum::STARTING);
        }
        let argv: Vec<String> = match check.test.first().map(String::as_str) {
            Some("CMD-SHELL") => {
                vec!["/bin/sh".into(), "-c".into(), check.test[1..].join(" ")]
            }
            _ => check.test[1..].to_vec(),
        };
        let exec = self
            .docker
            .create_exec(
                id,
                bollard::exec::CreateExecOptions {
                    cmd: Some(argv),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await
            .ok()?;
        let limit = check.timeout.unwrap_or(Duration::from_secs(30));
        let run = async {
            if let Ok(bollard::exec::StartExecResults::Attached { mut output, .. }) =
                self.docker.start_exec(&exec.id, None).await
            {
                while output.next().await.is_some() {}
            }
            self.docker.inspect_exec(&exec.id).await.ok().and_then(|i| i.exit_code)
        };
        let code = tokio::time::timeout(limit, run).await.ok().flatten();
        let grace = check.start_period.unwrap_or_default()
            + check.interval.unwrap_or(Duration::from_secs(30)) * (check.retries.unwrap_or(3) + 1);
        match code {
            Some(0) => Some(HealthStatusEnum::HEALTHY),
            _ if since > grace => Some(HealthStatusEnum::UNHEALTHY),
            _ => Some(HealthStatusEnum::STARTING),
        }
    }

    /// The exit status of a stopped container (-1 when the engine does not say).
    async fn exit_code(&self, id: &str) -> i64 {
        let options = WaitContainerOptionsBuilder::default().condition("not-running").build();
        match self.docker.wait_container(id, Some(options)).next().await {
            Some(Ok(done)) => done.status_code,
            Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
            _ => -1,
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

    /// Service `name`'s container id, or `what` failed: there is no such service.
    pub(super) fn container_of(&self, name: &str, what: &str) -> Result<&str, SandboxError> {
        let found = self.started.iter().find(|(s, _)| s.service.name == name);
        found.map(|(_, id)| id.as_str()).ok_or_else(|| SandboxError::EngineConfig {
            message: format!("failed to {what} in service {name}: there is no such service"),
        })
    }

    /// Runs `command` in service `name`'s container (see `Sandbox::exec_in_service`).
    pub(super) async fn exec(
        &self,
        name: &str,
        command: &Command,
    ) -> Result<crate::exec::ExecOutput, SandboxError> {
        let id = self.container_of(name, "run a command")?;
        let began = Instant::now();
        let created = self
            .docker
            .create_exec(
                id,
                bollard::exec::CreateExecOptions {
                    cmd: Some(command.argv().to_vec()),
                    env: Some(command.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
                    working_dir: command.workdir.clone(),
                    user: command.user.clone(),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| SandboxError::engine(format!("run a command in service {name}"), e))?;
        let (mut out, mut err) = (
            crate::exec::BoundedBuffer::new(crate::exec::CAPTURE_LIMIT),
            crate::exec::BoundedBuffer::new(crate::exec::CAPTURE_LIMIT),
        );
        let run = async {
            if let Ok(bollard::exec::StartExecResults::Attached { mut output, .. }) =
                self.docker.start_exec(&created.id, None).await
            {
                while let Some(Ok(chunk)) = output.next().await {
                    match chunk {
                        bollard::container::LogOutput::StdOut { message } => out.push(&message),
                        bollard::container::LogOutput::StdErr { message } => err.push(&message),
                        _ => {}
                    }
                }
            }
        };
        let timed_out = match command.timeout {
            Some(limit) => tokio::time::timeout(limit, run).await.is_err(),
            None => {
                run.await;
                false
            }
        };
        let exit_code = match timed_out {
            true => -1,
            false => self
                .docker
                .inspect_exec(&created.id)
                .await
                .ok()
                .and_then(|i| i.exit_code)
                .unwrap_or(-1),
        };
        Ok(crate::exec::ExecOutput {
            command: command.display(),
            exit_code,
            stdout_bytes: out.total(),
            stderr_bytes: err.total(),
            stdout: out.into_string(),
            stderr: err.into_string(),
            duration_ms: began.elapsed().as_millis() as u64,
            timed_out,
        })
    }

    /// Removes every service's container. Missing is fine.
    ///
    /// # Cancel safety
    /// What a cancelled removal leaves, the run's end sweep removes.
    pub(super) async fn remove(&self) {
        for (_, id) in &self.started {
            let _ = remove_container(&self.docker, id).await;
        }
    }
}
