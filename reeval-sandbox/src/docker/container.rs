//! A running Docker container: exec with bounded capture and killable
//! process trees, archives in and out, attached streams, removal.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bollard::Docker;
use bollard::body_full;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::{Flavor, is_not_found, remove_container};
use crate::exec::{BoundedBuffer, ExecOutput};
use crate::shell_exec::{self, PidFiles, Process, RunProcess};
use crate::{ExecRequest, ExecStream, Sandbox, SandboxError, SandboxState, Signal};

/// A running Docker container.
#[derive(Debug)]
pub struct DockerSandbox {
    docker: Docker,
    id: String,
    pids: PidFiles,
    flavor: Flavor,
    /// The internal network it was created on (its only way to its gateway), if any.
    network: Option<String>,
    /// Its services (`services.rs`): in its network namespace, started after it, removed before it.
    services: Option<super::services::Services>,
    /// Its volumes and copies of host paths (`volumes.rs`), removed after its containers.
    volumes: super::volumes::Made,
    /// The image's own user where it is not root (the container runs as root):
    /// what a command that names no user runs as.
    user: Option<String>,
    /// Its main process's stdin (see [`Sandbox::attach_main`]).
    main_stdin: std::sync::Mutex<MainStdin>,
}

type MainAttach = Result<bollard::container::AttachContainerResults, bollard::errors::Error>;

/// Where a sandbox's main process's stdin is.
#[derive(Debug)]
enum MainStdin {
    /// It has none of its own, or its one attach took it.
    Gone,
    /// It has one, not attached yet.
    Free,
    /// Its attach, begun beside the start (it takes 1 to 40 ms, which the
    /// first snapshot need not wait for): what the first attach takes.
    Attaching(tokio::task::JoinHandle<MainAttach>),
}

impl DockerSandbox {
    pub(super) fn new(
        docker: Docker,
        id: String,
        flavor: Flavor,
        network: Option<String>,
        user: Option<String>,
    ) -> Self {
        Self {
            docker,
            id,
            pids: PidFiles::default(),
            flavor,
            network,
            services: None,
            volumes: Default::default(),
            user,
            main_stdin: std::sync::Mutex::new(MainStdin::Gone),
        }
    }

    /// Attaches to the main process's stdin and stdout (see [`Sandbox::attach_main`]).
    fn attach(&self) -> impl std::future::Future<Output = MainAttach> + Send + 'static {
        let options = AttachContainerOptionsBuilder::default()
            .stdin(true)
            .stdout(true)
            .stderr(false)
            .stream(true)
            .logs(false)
            .build();
        let (docker, id) = (self.docker.clone(), self.id.clone());
        async move { docker.attach_container(&id, Some(options)).await }
    }

    /// It was made with its main process reading the container's stdin.
    pub(super) fn with_main_stdin(self, main_stdin: bool) -> Self {
        let main_stdin = if main_stdin { MainStdin::Free } else { MainStdin::Gone };
        Self { main_stdin: std::sync::Mutex::new(main_stdin), ..self }
    }

    fn main_stdin(&self) -> std::sync::MutexGuard<'_, MainStdin> {
        self.main_stdin.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn with_volumes(mut self, volumes: super::volumes::Made) -> Self {
        self.volumes = volumes;
        self
    }

    pub(super) fn with_services(mut self, services: Option<super::services::Services>) -> Self {
        self.services = services;
        self
    }

    /// Podman unpacks uploads as root and creates a missing directory: make it
    /// answer as Docker does (404 for a missing directory, owners kept).
    async fn upload_like_docker(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        let argv = vec!["test".into(), "-d".into(), dir.to_string()];
        if self
            .run_process(
                Process::root(argv),
                None,
                &mut BoundedBuffer::new(0),
                &mut BoundedBuffer::new(0),
            )
            .await?
            != 0
        {
            return Err(SandboxError::NotFound { path: dir.to_string() });
        }
        self.upload_as_is(dir, tar.clone()).await?;
        let owned = crate::archive::owners(&tar)?;
        for (owner, paths) in owned.into_iter().filter(|(owner, _)| *owner != (0, 0)) {
            let mut argv = vec![
                "chown".to_string(),
                "-h".into(),
                format!("{}:{}", owner.0, owner.1),
                "--".into(),
            ];
            argv.extend(
                paths.iter().map(|p| {
                    format!("{}/{}", dir.trim_end_matches('/'), p.trim_start_matches("./"))
                }),
            );
            let mut err = BoundedBuffer::new(4096);
            if self
                .run_process(Process::root(argv), None, &mut BoundedBuffer::new(0), &mut err)
                .await?
                != 0
            {
                return Err(SandboxError::engine_says(
                    format!("give uploaded files in {dir} their owners"),
                    err.into_string(),
                ));
            }
        }
        Ok(())
    }

    async fn upload_as_is(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        self.docker
            .upload_to_container(
                &self.id,
                Some(UploadToContainerOptionsBuilder::default().path(dir).copy_uidgid("1").build()),
                body_full(tar),
            )
            .await
            .map_err(|e| {
                if is_not_found(&e) {
                    SandboxError::NotFound { path: dir.to_string() }
                } else {
                    SandboxError::engine(format!("upload files to {dir}"), e)
                }
            })
    }
}

/// How long an exec's watch waits for the engine to say whether its container runs.
const STATE_WITHIN: Duration = Duration::from_secs(2);

#[async_trait]
impl RunProcess for DockerSandbox {
    async fn run_process(
        &self,
        process: Process<'_>,
        sink: Option<&mpsc::UnboundedSender<Bytes>>,
        out: &mut BoundedBuffer,
        err: &mut BoundedBuffer,
    ) -> Result<i64, SandboxError> {
        let Process { argv, env, workdir, user, stdin } = process;
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let created = self
            .docker
            .create_exec(
                &self.id,
                CreateExecOptions {
                    attach_stdin: Some(stdin.is_some()),
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    tty: Some(false),
                    env: Some(env),
                    cmd: Some(argv),
                    working_dir: workdir,
                    user: user.or_else(|| self.user.clone()),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| SandboxError::engine("create an exec", e))?;
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions { detach: false, tty: false, output_capacity: None }),
            )
            .await
            .map_err(|e| SandboxError::engine("start an exec", e))?;
        let StartExecResults::Attached { mut output, mut input } = started else {
            return Err(SandboxError::engine_says("start an exec", "engine detached the exec"));
        };
        if let Some(bytes) = stdin {
            // A command that never reads stdin must not block us: ignore write errors.
            let _ = input.write_all(bytes).await;
            let _ = input.shutdown().await;
        }
        drop(input);
        // When the stream last gave output (ms since `began`): after the process
        // exits, what is still in flight is read until the stream falls quiet.
        let began = Instant::now();
        let last_output = AtomicU64::new(0);
        let drain = async {
            while let Some(item) = output.next().await {
                last_output.store(began.elapsed().as_millis() as u64, Ordering::Relaxed);
                match item.map_err(|e| SandboxError::engine("read exec output", e))? {
                    LogOutput::StdOut { message } => {
                        out.push(&message);
                        if let Some(sink) = sink {
                            let _ = sink.send(message);
                        }
                    }
                    LogOutput::StdErr { message } => err.push(&message),
                    _ => {}
                }
            }
            Ok::<(), SandboxError>(())
        };
        tokio::pin!(drain);
        // The stream ends when every holder of the process's stdout is gone: a
        // background child the command left would hold it for ever. So past a
        // second, also watch the process itself, and stop reading soon after it exits.
        // The polls back off to every 2 s, so a long agent turn costs the engine little.
        // An exec started as its container was killed can be told running, its
        // stream open, for two minutes (Docker 20.10; seen in the load benchmark):
        // a container whose processes are all gone ends the watch too. The
        // engine may hold that question while it is busy with the container
        // (an exec starting in a frozen one): the watch then goes on as before.
        let exited = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut every = Duration::from_millis(250);
            loop {
                match self.docker.inspect_exec(&created.id).await {
                    Ok(i) if i.running == Some(false) => return,
                    Err(_) => return,
                    _ => {}
                }
                let state = tokio::time::timeout(STATE_WITHIN, self.state()).await;
                if state.is_ok_and(|s| s.processes_gone()) {
                    return;
                }
                tokio::time::sleep(every).await;
                every = (every * 2).min(Duration::from_secs(2));
            }
        };
        tokio::select! {
            r = &mut drain => r?,
            _ = exited => {
                // The process is gone, but its last megabytes may still be on their
                // way through the engine (under load, for longer than a moment): keep
                // reading while output keeps coming, and stop once the stream has been
                // quiet for 300 ms (a background child holding stdout open says
                // nothing), or after 5 s of a child that keeps printing.
                let quiet = Duration::from_millis(300);
                let until = Instant::now() + Duration::from_secs(5);
                loop {
                    match tokio::time::timeout(quiet, &mut drain).await {
                        Ok(r) => {
                            r?;
                            break;
                        }
                        Err(_) => {
                            let since = (began.elapsed().as_millis() as u64)
                                .saturating_sub(last_output.load(Ordering::Relaxed));
                            if since >= quiet.as_millis() as u64 || Instant::now() >= until {
                                break;
                            }
                        }
                    }
                }
            }
        }
        let inspected = self
            .docker
            .inspect_exec(&created.id)
            .await
            .map_err(|e| SandboxError::engine("inspect an exec", e))?;
        Ok(inspected.exit_code.unwrap_or(-1))
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    async fn start(&self) -> Result<(), SandboxError> {
        // The main process's attach begins with the start (a created container takes it, as
        // `docker run` attaches before it starts); dropped unused, it closes the stdin.
        {
            let mut main_stdin = self.main_stdin();
            if matches!(*main_stdin, MainStdin::Free) {
                *main_stdin = MainStdin::Attaching(tokio::spawn(self.attach()));
            }
        }
        self.docker
            .start_container(&self.id, None)
            .await
            .map_err(|e| SandboxError::engine("start the container", e))?;
        if let Some(services) = &self.services {
            services.start().await?;
            services.ready(self).await?;
        }
        Ok(())
    }

    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError> {
        // A launcher starts a process as Docker's exec does (its variables,
        // user and groups); another engine's exec may differ, so it runs them all.
        let launcher = request.launcher.filter(|_| self.flavor == Flavor::Docker);
        shell_exec::exec(self, &self.pids, ExecRequest { launcher, ..request }).await
    }

    async fn exec_in_service(
        &self,
        service: &str,
        command: &crate::exec::Command,
    ) -> Result<ExecOutput, SandboxError> {
        match &self.services {
            Some(services) => services.exec(service, command).await,
            None => Err(SandboxError::EngineConfig {
                message: format!(
                    "failed to run a command in service {service}: the sandbox has no services"
                ),
            }),
        }
    }

    async fn kill(&self, signal: Signal) -> Result<(), SandboxError> {
        shell_exec::kill(self, signal).await
    }

    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        match self.flavor {
            Flavor::Docker => self.upload_as_is(dir, tar).await,
            Flavor::Podman => self.upload_like_docker(dir, tar).await,
        }
    }

    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError> {
        download(&self.docker, &self.id, path, limit).await
    }

    async fn download_from_service(
        &self,
        service: &str,
        path: &str,
        limit: u64,
    ) -> Result<Bytes, SandboxError> {
        let what = format!("read {path}");
        let Some(services) = &self.services else {
            return Err(SandboxError::EngineConfig {
                message: format!(
                    "failed to {what} in service {service}: the sandbox has no services"
                ),
            });
        };
        download(&self.docker, services.container_of(service, &what)?, path, limit).await
    }

    async fn open_stream(&self, argv: Vec<String>) -> Result<ExecStream, SandboxError> {
        let created = self
            .docker
            .create_exec(
                &self.id,
                CreateExecOptions::<String> {
                    attach_stdin: Some(true),
                    attach_stdout: Some(true),
                    attach_stderr: Some(false),
                    tty: Some(false),
                    cmd: Some(argv),
                    user: self.user.clone(),
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| SandboxError::engine("create a relay exec", e))?;
        let started = self
            .docker
            .start_exec(
                &created.id,
                Some(StartExecOptions { detach: false, tty: false, output_capacity: None }),
            )
            .await
            .map_err(|e| SandboxError::engine("start a relay exec", e))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(SandboxError::engine_says(
                "start a relay exec",
                "engine detached the exec",
            ));
        };
        Ok(ExecStream { input, output: stdout_of(output, "read relay output") })
    }

    async fn attach_main(&self) -> Result<ExecStream, SandboxError> {
        let taken = std::mem::replace(&mut *self.main_stdin(), MainStdin::Gone);
        let attached = match taken {
            MainStdin::Gone => {
                return Err(SandboxError::EngineConfig {
                    message: "failed to attach to the sandbox's main process: it has no stdin of its own, or it was attached before".into(),
                });
            }
            MainStdin::Free => self.attach().await,
            MainStdin::Attaching(begun) => begun
                .await
                .map_err(|e| SandboxError::engine("attach to the sandbox's main process", e))?,
        };
        let attached = attached
            .map_err(|e| SandboxError::engine("attach to the sandbox's main process", e))?;
        let output = stdout_of(attached.output, "read the main process's output");
        Ok(ExecStream { input: attached.input, output })
    }

    async fn state(&self) -> SandboxState {
        let inspected = self
            .docker
            .inspect_container(&self.id, None::<bollard::query_parameters::InspectContainerOptions>)
            .await;
        match inspected {
            Ok(c) => match state_of(c.state.unwrap_or_default(), c.restart_count.unwrap_or(0)) {
                // Running, but cut from its gateway: nothing it asked of the network could succeed.
                SandboxState::Running => match &self.network {
                    Some(network)
                        if !c
                            .network_settings
                            .and_then(|n| n.networks)
                            .is_some_and(|n| n.contains_key(network)) =>
                    {
                        SandboxState::Disconnected { network: network.clone() }
                    }
                    _ => SandboxState::Running,
                },
                state => state,
            },
            Err(e) if is_not_found(&e) => SandboxState::Gone,
            Err(_) => SandboxState::Unknown,
        }
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        if let Some(services) = &self.services {
            services.remove().await;
        }
        let removed = remove_container(&self.docker, &self.id).await;
        self.volumes.remove(&self.docker).await;
        removed
    }
}

/// The stdout of an attached stream (stderr dropped); an engine error is
/// the stream's, as failing to `what`.
fn stdout_of(
    output: impl futures_util::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send + 'static,
    what: &'static str,
) -> futures_util::stream::BoxStream<'static, Result<Bytes, SandboxError>> {
    output
        .filter_map(move |item| async move {
            match item {
                Ok(LogOutput::StdOut { message }) => Some(Ok(message)),
                Ok(_) => None,
                Err(e) => Some(Err(SandboxError::engine(what, e))),
            }
        })
        .boxed()
}

/// The sandbox's state from the engine's. A container reeval started once and
/// that never stopped has no finish time: one that runs with a finish time, or
/// a restart count, was restarted (`docker restart`), and every process of the
/// attempt died with it.
fn state_of(state: bollard::models::ContainerState, restarts: i64) -> SandboxState {
    let never =
        |t: &Option<String>| t.as_deref().is_none_or(|t| t.is_empty() || t.starts_with("0001-"));
    if state.paused == Some(true) {
        SandboxState::Paused
    } else if state.running != Some(true) || state.restarting == Some(true) {
        SandboxState::Stopped {
            exit_code: state.exit_code,
            oom_killed: state.oom_killed == Some(true),
        }
    } else if restarts > 0 || !never(&state.finished_at) {
        SandboxState::Restarted {
            how: format!(
                "stopped at {}, started again at {}",
                state.finished_at.as_deref().unwrap_or("?"),
                state.started_at.as_deref().unwrap_or("?")
            ),
        }
    } else {
        SandboxState::Running
    }
}

/// A tar of `path` in container `id` (Docker's archive API), at most `limit` bytes.
async fn download(
    docker: &Docker,
    id: &str,
    path: &str,
    limit: u64,
) -> Result<Bytes, SandboxError> {
    let mut stream = docker.download_from_container(
        id,
        Some(DownloadFromContainerOptionsBuilder::default().path(path).build()),
    );
    let mut buf = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            if is_not_found(&e) {
                SandboxError::NotFound { path: path.to_string() }
            } else {
                SandboxError::engine(format!("download {path}"), e)
            }
        })?;
        if buf.len() as u64 + chunk.len() as u64 > limit {
            return Err(SandboxError::Archive {
                message: format!("{path} is larger than {limit} bytes"),
            });
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buf))
}
