//! The [`Sandbox`] of one pod: exec with killable process trees, files as tar
//! over exec (as `kubectl cp` does; archives from the pod are parsed in
//! memory, never unpacked on the host), port-forward, deletion.

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, AttachParams, DeleteParams};
use tokio::io::AsyncReadExt;

use super::exec::{self, ExecSpec, NO_SUCH_DIR, Stdin};
use super::names::CONTAINER;
use super::patience::patiently;
use super::pod;
use super::services_up::{Parts, PodSandbox};
use crate::exec::{BoundedBuffer, ExecOutput};
use crate::shell_exec::{self, PidFiles, Process, RunProcess};
use crate::{
    ExecRequest, ExecStream, PortStream, Sandbox, SandboxError, SandboxState, Signal, StdoutSink,
};

mod start;

/// How long a deleted pod may take to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(60);

/// One attempt's pod.
#[derive(Debug)]
pub struct KubeSandbox {
    pods: Api<Pod>,
    policies: Api<NetworkPolicy>,
    /// Its first pod's name: its id, its NetworkPolicy's name, the pod label the policy selects.
    first: String,
    /// The name of the pod made again as root under a new name, where the
    /// image's user was learned at start: a kubelet finds an exec's pod by
    /// name, and may find the first, still being torn down, for a while.
    again: std::sync::OnceLock<String>,
    ready_within: Duration,
    pids: PidFiles,
    /// Set once the pod is Ready and exec works (files may go in before the attempt starts it).
    started: tokio::sync::OnceCell<()>,
    /// Something to let go of once the pod is gone (the node network's relay port).
    held: std::sync::Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    /// How to wait for room on the cluster; `None`: a pod without room fails at once.
    room: Option<Room>,
    /// What the start waited for (room), for the container phase's detail.
    note: std::sync::Mutex<Option<String>>,
    /// The gateway pod it reaches the outside through, if any.
    gateway: Option<String>,
    /// Its pod's other containers: its services, its volumes' copies (`services_up.rs`).
    parts: Parts,
    /// The image's own user where it is not root (the container runs as root,
    /// `user.rs`): what a command that names no user runs as. Learned at
    /// start where the image's user was not known.
    user: std::sync::Mutex<Option<String>>,
}

/// What a pod needs to wait for room: its manifest, to create it again once
/// its node refused it, and the nodes, to tell a request none could ever fit.
#[derive(Debug)]
pub(super) struct Room {
    pub(super) manifest: Pod,
    pub(super) nodes: Api<Node>,
    pub(super) within: Duration,
}

impl KubeSandbox {
    /// Asks for the pod's deletion with no grace period (gone already is fine).
    pub(super) async fn delete_pod_now(&self) -> Result<(), SandboxError> {
        let now = DeleteParams::default().grace_period(0);
        match patiently(|| self.pods.delete(self.name(), &now)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(SandboxError::engine(format!("delete pod {}", self.name()), e)),
        }
    }

    pub(super) fn new(
        pods: Api<Pod>,
        policies: Api<NetworkPolicy>,
        name: String,
        ready_within: Duration,
    ) -> Self {
        Self {
            pods,
            policies,
            first: name,
            again: std::sync::OnceLock::new(),
            ready_within,
            pids: PidFiles::default(),
            started: tokio::sync::OnceCell::new(),
            held: std::sync::Mutex::new(None),
            room: None,
            note: std::sync::Mutex::new(None),
            gateway: None,
            parts: Parts::default(),
            user: std::sync::Mutex::new(None),
        }
    }

    /// Commands that name no user run as `user` (the image's, not root; its pod starts as root).
    pub(super) fn running_as(self, user: Option<String>) -> Self {
        *self.user.lock().expect("user lock") = user;
        self
    }

    /// What a command that names no user runs as; `None`: the container's own user.
    fn user(&self) -> Option<String> {
        self.user.lock().expect("user lock").clone()
    }

    /// Its pod's containers besides the sandbox's (see `services_up.rs`).
    pub(super) fn with_parts(mut self, parts: Parts) -> Self {
        self.parts = parts;
        self
    }

    /// Its way out is the gateway pod `name`: a sandbox whose gateway pod is gone is lost.
    pub(super) fn through_gateway(mut self, name: Option<String>) -> Self {
        self.gateway = name;
        self
    }

    /// Lets the pod wait for room (see `room.rs`).
    pub(super) fn with_room(mut self, room: Room) -> Self {
        self.room = Some(room);
        self
    }

    /// Keeps `permit` until [`Sandbox::destroy`] saw the pod gone (or this is dropped).
    pub(super) fn hold_until_gone(&mut self, permit: tokio::sync::OwnedSemaphorePermit) {
        *self.held.get_mut().expect("held lock") = Some(permit);
    }

    /// The pod's name: its first, or the one it was made again under (`start_again_as_root`).
    pub(super) fn name(&self) -> &str {
        self.again.get().unwrap_or(&self.first)
    }

    /// The pods API of its namespace.
    pub(super) fn pods(&self) -> &Api<Pod> {
        &self.pods
    }

    /// A fresh pid file for a killable process.
    pub(super) fn pid_file(&self) -> String {
        self.pids.next()
    }

    /// Signals the process trees of the pid files matching `pid_files` (a path or a glob).
    pub(super) async fn kill_matching(
        &self,
        pid_files: &str,
        signal: Signal,
    ) -> Result<(), SandboxError> {
        shell_exec::kill_matching(self, pid_files, signal).await
    }
}

#[async_trait]
impl RunProcess for KubeSandbox {
    async fn run_process(
        &self,
        process: Process<'_>,
        sink: Option<&StdoutSink>,
        out: &mut BoundedBuffer,
        err: &mut BoundedBuffer,
    ) -> Result<i64, SandboxError> {
        let Process { argv, env, workdir, user, stdin } = process;
        // A command that names no user runs as the image's (the container is root).
        let user = user.or_else(|| self.user());
        let stdin = stdin.map_or(Stdin::None, Stdin::Bytes);
        let spec = ExecSpec { argv, env, workdir, user, stdin, ..Default::default() };
        exec::run(&self.pods, self.name(), spec, sink, out, err).await
    }
}

#[async_trait]
impl Sandbox for KubeSandbox {
    fn id(&self) -> &str {
        // Its first pod's name, as recorded; its NetworkPolicy's name too.
        &self.first
    }

    async fn start(&self) -> Result<(), SandboxError> {
        // The pod was created (and so started) by `create`: wait until it can be used.
        self.started
            .get_or_try_init(|| async {
                self.start_pod().await?;
                self.parts.ready(self.as_pod()).await
            })
            .await
            .map(|_| ())
    }

    fn start_note(&self) -> Option<String> {
        self.note.lock().expect("note lock").clone()
    }

    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError> {
        // A launcher starts processes as Docker's exec does; a pod's exec sets a user up
        // otherwise (`exec.rs`), so every command runs through it.
        shell_exec::exec(self, &self.pids, ExecRequest { launcher: None, ..request }).await
    }

    async fn exec_in_service(
        &self,
        service: &str,
        command: &crate::exec::Command,
    ) -> Result<ExecOutput, SandboxError> {
        self.parts.exec(self.as_pod(), service, command).await
    }

    async fn kill(&self, signal: Signal) -> Result<(), SandboxError> {
        shell_exec::kill(self, signal).await
    }

    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        // Files may go in before the attempt starts the sandbox (the relay): the pod must be up.
        self.start().await?;
        // As root, so tar keeps the owners the archive names (as Docker's upload does).
        let argv =
            vec!["tar".into(), "-x".into(), "-f".into(), "-".into(), "--no-overwrite-dir".into()];
        let mut err = BoundedBuffer::new(4096);
        let process = Process {
            argv,
            workdir: Some(dir.to_string()),
            user: Some("0".into()),
            stdin: Some(&tar),
            ..Default::default()
        };
        match self.run_process(process, None, &mut BoundedBuffer::new(0), &mut err).await? {
            0 => Ok(()),
            NO_SUCH_DIR => Err(SandboxError::NotFound { path: dir.to_string() }),
            code => Err(SandboxError::engine_says(
                format!("upload files to {dir}"),
                format!("tar exited {code}: {}", err.into_string()),
            )),
        }
    }

    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError> {
        self.download_from(CONTAINER, path, limit).await
    }

    async fn download_from_service(
        &self,
        service: &str,
        path: &str,
        limit: u64,
    ) -> Result<Bytes, SandboxError> {
        let part = self.parts.of_service(service, &format!("read {path}"))?;
        self.download_from(&part.container.clone(), path, limit).await
    }

    async fn open_stream(&self, argv: Vec<String>) -> Result<ExecStream, SandboxError> {
        let params =
            AttachParams::default().container(CONTAINER).stdin(true).stdout(true).stderr(false);
        let mut attached = self.pods.exec(self.name(), argv, &params).await.map_err(|e| {
            SandboxError::engine(format!("start a relay exec in pod {}", self.name()), e)
        })?;
        let input = attached.stdin().expect("stdin requested");
        let stdout = attached.stdout().expect("stdout requested");
        // The status channel ends the stream too: a broken connection never closes the pipe.
        let ended = Box::pin(futures_util::FutureExt::fuse(
            attached.take_status().expect("status taken once"),
        ));
        // The stream owns the exec: dropping it closes the connection.
        let output = futures_util::stream::unfold(
            (stdout, attached, ended),
            |(mut stdout, attached, mut ended)| async move {
                let mut buf = vec![0u8; 64 << 10];
                let read = tokio::select! {
                    read = stdout.read(&mut buf) => read,
                    None = &mut ended => return None,
                };
                match read {
                    Ok(0) => None,
                    Ok(n) => {
                        buf.truncate(n);
                        Some((Ok(Bytes::from(buf)), (stdout, attached, ended)))
                    }
                    Err(e) => Some((
                        Err(SandboxError::engine("read relay output", e)),
                        (stdout, attached, ended),
                    )),
                }
            },
        )
        .boxed();
        Ok(ExecStream { input: Box::pin(input), output })
    }

    async fn connect_port(&self, port: u16) -> Result<Option<PortStream>, SandboxError> {
        let mut forwarder = self.pods.portforward(self.name(), &[port]).await.map_err(|e| {
            SandboxError::engine(format!("forward port {port} of pod {}", self.name()), e)
        })?;
        let stream = forwarder.take_stream(port).expect("the port asked for");
        Ok(Some(Box::pin(Forwarded { stream, forwarder })))
    }

    async fn state(&self) -> SandboxState {
        let own = match self.pods.get_opt(self.name()).await {
            Ok(Some(pod)) => pod_state(&pod),
            Ok(None) => SandboxState::Gone,
            Err(_) => SandboxState::Unknown,
        };
        let Some(gateway) = self.gateway.as_deref().filter(|_| own == SandboxState::Running) else {
            return own;
        };
        let how = match self.pods.get_opt(gateway).await {
            Ok(None) => format!("the run's gateway pod {gateway} is gone"),
            Ok(Some(pod)) => match pod_state(&pod) {
                SandboxState::Running | SandboxState::Unknown => return own,
                state => format!("the run's gateway pod {gateway} {state}"),
            },
            Err(_) => return own,
        };
        SandboxState::GatewayLost { how }
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        self.delete_pod_now().await?;
        let once = DeleteParams::default();
        match patiently(|| self.policies.delete(&self.first, &once)).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(SandboxError::engine(
                    format!("delete the NetworkPolicy of pod {}", self.name()),
                    e,
                ));
            }
        }
        pod::wait_gone(&self.pods, self.name(), GONE_WITHIN).await?;
        self.held.lock().expect("held lock").take();
        Ok(())
    }
}

/// A port-forwarded connection; the forwarder's task ends with it.
struct Forwarded {
    stream: tokio::io::DuplexStream,
    forwarder: kube::api::Portforwarder,
}

impl Drop for Forwarded {
    fn drop(&mut self) {
        self.forwarder.abort();
    }
}

impl tokio::io::AsyncRead for Forwarded {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Forwarded {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The sandbox's state from its pod's: a pod that is not running, or whose
/// container restarted (every process of the attempt died with it), is lost.
pub(super) fn pod_state(pod: &Pod) -> SandboxState {
    let Some(status) = &pod.status else { return SandboxState::Unknown };
    // Evicted by its node (out of memory or disk), or by the Eviction API (a drain, a
    // preemption) or deleted, which leaves it terminating until its containers are gone.
    if status.reason.as_deref() == Some("Evicted") {
        let message = status.message.as_deref().unwrap_or("no message");
        return SandboxState::Removed { how: format!("its pod was evicted: {message}") };
    }
    if pod.metadata.deletion_timestamp.is_some() {
        return SandboxState::Removed {
            how: "its pod is being deleted: deleted or evicted from outside".into(),
        };
    }
    // The sandbox's own container (statuses are sorted by name, services among them).
    let container = status.container_statuses.iter().flatten().find(|c| c.name == CONTAINER);
    let terminated = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .or_else(|| container.and_then(|c| c.last_state.as_ref()?.terminated.as_ref()));
    let stopped = || SandboxState::Stopped {
        exit_code: terminated.map(|t| i64::from(t.exit_code)),
        oom_killed: terminated.and_then(|t| t.reason.as_deref()) == Some("OOMKilled"),
    };
    if status.phase.as_deref() != Some("Running") {
        return stopped();
    }
    match container {
        Some(c) if c.state.as_ref().is_some_and(|s| s.running.is_none()) => stopped(),
        Some(c) if c.restart_count > 0 => {
            SandboxState::Restarted { how: format!("container restart count {}", c.restart_count) }
        }
        _ => SandboxState::Running,
    }
}

impl KubeSandbox {
    /// Itself as the parts of its pod see it.
    fn as_pod(&self) -> PodSandbox<'_> {
        PodSandbox { pods: self.pods(), name: self.name(), sandbox: self }
    }
}

impl KubeSandbox {
    /// A tar of `path` in the pod's container `container`, whose one top
    /// entry is the path's last component, as Docker's archive API gives;
    /// at most `limit` bytes.
    async fn download_from(
        &self,
        container: &str,
        path: &str,
        limit: u64,
    ) -> Result<Bytes, SandboxError> {
        // A tar whose one top entry is the path's last component, as Docker's archive API gives.

        let trimmed = path.trim_end_matches('/');
        let (parent, base) = match trimmed.rsplit_once('/') {
            Some(("", base)) => ("/", base),
            Some((parent, base)) => (parent, base),
            None => (".", trimmed),
        };
        let script = r#"[ -e "$0" ] || [ -L "$0" ] || exit 44; exec tar -c -f - -- "$0""#;
        let argv = vec!["/bin/sh".into(), "-c".into(), script.into(), base.to_string()];
        let params = AttachParams::default().container(container).stdout(true).stderr(true);
        let spec = ExecSpec { argv, workdir: Some(parent.to_string()), ..Default::default() };
        let mut attached =
            self.pods.exec(self.name(), spec.full_argv()?, &params).await.map_err(|e| {
                SandboxError::engine(format!("start an exec in pod {}", self.name()), e)
            })?;
        let status = attached.take_status().expect("status taken once");
        let mut stdout = attached.stdout().expect("stdout requested");
        let mut stderr = attached.stderr().expect("stderr requested");
        let mut bytes = Vec::new();
        let mut err = BoundedBuffer::new(4096);
        let read_out = async {
            let mut buf = vec![0u8; 64 << 10];
            loop {
                match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => return Ok(()),
                    Ok(n) if bytes.len() as u64 + n as u64 > limit => {
                        return Err(SandboxError::Archive {
                            message: format!("{path} is larger than {limit} bytes"),
                        });
                    }
                    Ok(n) => bytes.extend_from_slice(&buf[..n]),
                }
            }
        };
        let read_err = async {
            let mut buf = vec![0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf).await {
                err.push(&buf[..n]);
            }
        };
        // Over the limit: stop there (dropping the exec closes it).
        let io = futures_util::future::try_join(read_out, async {
            read_err.await;
            Ok(())
        });
        let io = async { io.await.map(|_| ()) };
        let status = exec::with_status(io, status).await?;
        match exec::outcome(status, self.name())? {
            exec::Outcome::Exited(0) => Ok(Bytes::from(bytes)),
            exec::Outcome::Exited(NO_SUCH_DIR) => {
                Err(SandboxError::NotFound { path: path.to_string() })
            }
            exec::Outcome::Exited(code) => Err(SandboxError::engine_says(
                format!("download {path}"),
                format!("tar exited {code}: {}", err.into_string()),
            )),
            exec::Outcome::NotFound(message) => {
                Err(SandboxError::engine_says(format!("download {path}"), message))
            }
        }
    }
}
