//! A pod's containers besides the sandbox's, once it was created (see
//! `services.rs`, `volumes.rs`): what failed among them, as the pod's status
//! says, named with the tail of its log; each service ready before the
//! sandbox's first use (its healthcheck run in its container until it passes,
//! its ports open to the sandbox), as the Docker backend waits for them; and
//! commands run in a service's container (`Sandbox::exec_in_service`).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};

use super::exec::{self, ExecSpec};
use super::names::container_name;
use super::services::{in_order, test_argv};
use super::volumes::PodVolumes;
use crate::exec::{BoundedBuffer, CAPTURE_LIMIT, Command, ExecOutput};
use crate::service::wait_for_port;
use crate::{Healthcheck, Sandbox, SandboxError, SandboxSpec, ServiceStart};

/// The sandbox whose pod holds the parts: its pod by name, and exec in its
/// own container (the sandbox's `KubeSandbox`; a trait, so that this file
/// needs nothing of `sandbox.rs`, which holds the parts).
pub(super) trait PodSandbox: Sandbox {
    /// The pods API of its namespace.
    fn pods(&self) -> &Api<Pod>;
    /// Its pod's name.
    fn name(&self) -> &str;
}

/// Between two looks at a service.
const POLL: Duration = Duration::from_millis(500);

/// One container of the pod besides the sandbox's.
#[derive(Debug, Clone)]
pub(super) struct Part {
    /// Its name in the pod.
    pub(super) container: String,
    /// What it is, for messages: `service db`, `the copy of … into volume logs`.
    pub(super) what: String,
    /// An init container, which must exit 0 (a job, a volume's copy).
    once: bool,
    /// The service it runs, if it is one.
    service: Option<ServiceStart>,
}

/// The containers of an attempt's pod besides the sandbox's.
#[derive(Debug, Clone, Default)]
pub(super) struct Parts(Vec<Part>);

impl Parts {
    /// Service `name`'s container, or `what` failed: there is no such service.
    pub(super) fn of_service(&self, name: &str, what: &str) -> Result<&Part, SandboxError> {
        let found =
            self.0.iter().find(|p| p.service.as_ref().is_some_and(|s| s.service.name == name));
        found.ok_or_else(|| SandboxError::EngineConfig {
            message: format!("failed to {what} in service {name}: there is no such service"),
        })
    }

    /// Those of the pod `pod::manifest` makes of `spec`.
    pub(super) fn of(spec: &SandboxSpec) -> Self {
        let fills = PodVolumes::of(spec)
            .fills(&Default::default())
            .into_iter()
            .map(|(c, what)| Part { container: c.name, what, once: true, service: None });
        let (jobs, beside) = in_order(&spec.services);
        let service = |once: bool| {
            move |i: usize| {
                let start = spec.services[i].clone();
                Part {
                    container: container_name(i, &start.service),
                    what: format!("service {}", start.service.name),
                    once,
                    service: Some(start),
                }
            }
        };
        let jobs = jobs.into_iter().map(service(true));
        let beside = beside.into_iter().map(service(false));
        Self(fills.chain(jobs).chain(beside).collect())
    }

    /// The first of them that failed, as `pod`'s status says, with why: an
    /// init container that exited but 0, another that exited at all, one
    /// its runtime could not start.
    pub(super) fn failure(&self, pod: &Pod) -> Option<(&Part, String)> {
        let status = pod.status.as_ref()?;
        let statuses = status.init_container_statuses.iter().flatten();
        for c in statuses.chain(status.container_statuses.iter().flatten()) {
            let Some(part) = self.0.iter().find(|p| p.container == c.name) else { continue };
            let state = c.state.as_ref();
            if let Some(ended) = state.and_then(|s| s.terminated.as_ref()) {
                if part.once && ended.exit_code == 0 {
                    continue;
                }
                let said = ended.message.as_deref().map(str::trim).unwrap_or("");
                let why = match (said, ended.reason.as_deref()) {
                    ("", Some("OOMKilled")) => "was killed for lack of memory (OOMKilled)".into(),
                    ("", _) => format!("exited with {}", ended.exit_code),
                    (said, _) => said.to_string(),
                };
                return Some((part, why));
            }
            let waiting = state.and_then(|s| s.waiting.as_ref());
            let reason = waiting.and_then(|w| w.reason.as_deref()).unwrap_or("");
            if matches!(
                reason,
                "CreateContainerConfigError" | "CreateContainerError" | "RunContainerError"
            ) {
                let message = waiting.and_then(|w| w.message.as_deref()).unwrap_or("no message");
                return Some((part, format!("could not be started ({reason}: {message})")));
            }
        }
        None
    }

    /// The error of `part` that failed for `why`, with the tail of its log.
    pub(super) async fn failed(
        &self,
        pods: &Api<Pod>,
        pod: &str,
        part: &Part,
        why: &str,
    ) -> SandboxError {
        let params = LogParams {
            container: Some(part.container.clone()),
            tail_lines: Some(15),
            ..Default::default()
        };
        let log = match pods.logs(pod, &params).await {
            Ok(text) if !text.trim().is_empty() => format!("its log ends: {}", text.trim()),
            Ok(_) => "no output".to_string(),
            Err(e) => format!("its log could not be read: {e}"),
        };
        SandboxError::engine_says(format!("start {}", part.what), format!("it {why}; {log}"))
    }

    /// The services beside the sandbox.
    fn beside(&self) -> impl Iterator<Item = (&Part, &ServiceStart)> {
        self.0.iter().filter(|p| !p.once).filter_map(|p| Some((p, p.service.as_ref()?)))
    }

    /// Once the pod is Ready: every service healthy (with a healthcheck),
    /// and its ports accepting a connection from the sandbox.
    pub(super) async fn ready(&self, sandbox: &dyn PodSandbox) -> Result<(), SandboxError> {
        for (part, start) in self.beside() {
            if let Some(check) = &start.service.healthcheck {
                self.healthy(sandbox, part, check).await?;
            }
            for port in &start.service.ports {
                self.port_open(sandbox, part, *port).await?;
            }
        }
        Ok(())
    }

    /// Why `part` stopped, if it did.
    async fn stopped(&self, sandbox: &dyn PodSandbox, part: &Part) -> Option<String> {
        let pod = sandbox.pods().get(sandbox.name()).await.ok()?;
        let (failed, why) = self.failure(&pod)?;
        (failed.container == part.container).then_some(why)
    }

    /// Runs `check` in `part`'s container until it passes; unhealthy once it
    /// failed for longer than its start period and retries allow (counted in
    /// intervals since the first check), as reeval counts on Podman.
    async fn healthy(
        &self,
        sandbox: &dyn PodSandbox,
        part: &Part,
        check: &Healthcheck,
    ) -> Result<(), SandboxError> {
        let grace = check.start_period.unwrap_or_default()
            + check.interval.unwrap_or(Duration::from_secs(30)) * (check.retries.unwrap_or(3) + 1);
        let limit = check.timeout.unwrap_or(Duration::from_secs(30));
        let began = Instant::now();
        loop {
            if let Some(why) = self.stopped(sandbox, part).await {
                return Err(self.failed(sandbox.pods(), sandbox.name(), part, &why).await);
            }
            let spec = ExecSpec {
                argv: test_argv(check),
                container: Some(&part.container),
                plain: true,
                ..Default::default()
            };
            let (mut out, mut err) = (BoundedBuffer::new(4096), BoundedBuffer::new(4096));
            let run = exec::run(sandbox.pods(), sandbox.name(), spec, None, &mut out, &mut err);
            let code = tokio::time::timeout(limit, run).await;
            if let Ok(Ok(0)) = code {
                return Ok(());
            }
            if began.elapsed() > grace {
                let said = match code {
                    Ok(Ok(_)) => format!("{}{}", out.into_string(), err.into_string()),
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => format!("it did not end within {}s", limit.as_secs()),
                };
                let why = format!("is unhealthy (its last check said: {})", said.trim());
                return Err(self.failed(sandbox.pods(), sandbox.name(), part, &why).await);
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until `port` of `part`'s service accepts a connection from the sandbox.
    async fn port_open(
        &self,
        sandbox: &dyn PodSandbox,
        part: &Part,
        port: u16,
    ) -> Result<(), SandboxError> {
        let name = part.service.as_ref().map(|s| s.service.name.as_str()).unwrap_or_default();
        let stopped = || self.stopped(sandbox, part);
        let not_open = wait_for_port(sandbox, name, port, POLL, stopped).await?;
        let Some(why) = not_open else { return Ok(()) };
        Err(self.failed(sandbox.pods(), sandbox.name(), part, &why).await)
    }

    /// Runs `command` in service `name`'s container (see
    /// `Sandbox::exec_in_service`): as it is when it sets no variables,
    /// directory or user (the image may have no shell), else through the
    /// prologue; no stdin.
    pub(super) async fn exec(
        &self,
        sandbox: &dyn PodSandbox,
        name: &str,
        command: &Command,
    ) -> Result<ExecOutput, SandboxError> {
        let part = self.of_service(name, "run a command")?;
        let plain = command.env.is_empty() && command.workdir.is_none() && command.user.is_none();
        let spec = ExecSpec {
            argv: command.argv().to_vec(),
            env: command.env.clone(),
            workdir: command.workdir.clone(),
            user: command.user.clone(),
            container: Some(&part.container),
            plain,
            ..Default::default()
        };
        let began = Instant::now();
        let (mut out, mut err) =
            (BoundedBuffer::new(CAPTURE_LIMIT), BoundedBuffer::new(CAPTURE_LIMIT));
        let run = exec::run(sandbox.pods(), sandbox.name(), spec, None, &mut out, &mut err);
        let (exit_code, timed_out) = match command.timeout {
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(code) => (code?, false),
                Err(_) => (-1, true),
            },
            None => (run.await?, false),
        };
        Ok(ExecOutput {
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
}
