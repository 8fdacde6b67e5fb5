//! The Docker backend, on bollard. Works against API 1.41 (Docker 20.10).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bollard::Docker;
use bollard::body_full;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptionsBuilder, DownloadFromContainerOptionsBuilder, ListContainersOptionsBuilder, RemoveContainerOptionsBuilder,
    UploadToContainerOptionsBuilder,
};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::{ExecStream, LABEL_OWNER, LABEL_RUN, Sandbox, SandboxError, SandboxSpec};
use crate::exec::{BoundedBuffer, CAPTURE_LIMIT, Command, ExecOutput};

/// Where killable commands write their pid, inside the sandbox.
const PID_DIR: &str = "/tmp/.reeval-pids";

/// Records the pid of a killable command's parent shell, runs the command
/// (argv is untouched data), then removes the pid file.
const PID_WRAPPER: &str = r#"mkdir -p -m 1777 "${0%/*}" 2>/dev/null; echo $$ > "$0"; "$@"; rc=$?; rm -f "$0"; exit $rc"#;

/// Stops, then signals every process tree whose pid file matches the pattern
/// `$0` (one file, or the directory's `*.pid`), children first.
const KILL_SCRIPT: &str = r#"kt() { kill -s STOP "$1" 2>/dev/null; for c in $(pgrep -P "$1" 2>/dev/null); do kt "$c" "$2"; done; kill -s "$2" "$1" 2>/dev/null; kill -s CONT "$1" 2>/dev/null; }
for f in $0; do [ -f "$f" ] || continue; p=$(cat "$f"); [ -n "$p" ] && kt "$p" "$1"; done; true"#;

/// A Docker engine, shared by every sandbox of a run.
#[derive(Debug, Clone)]
pub struct DockerBackend {
    docker: Docker,
}

fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(err, bollard::errors::Error::DockerResponseServerError { status_code: 404, .. })
}

impl DockerBackend {
    /// Connects to the local engine (or `DOCKER_HOST`) and negotiates the API version.
    ///
    /// # Errors
    /// [`SandboxError::EngineUnreachable`] when the engine does not answer.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn connect() -> Result<Self, SandboxError> {
        let unreachable = |e: bollard::errors::Error| SandboxError::EngineUnreachable { message: e.to_string() };
        let docker = Docker::connect_with_local_defaults().map_err(unreachable)?;
        let docker = docker.negotiate_version().await.map_err(unreachable)?;
        Ok(Self { docker })
    }

    /// The bollard client, for callers that need the raw API.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// Whether `image` is present on the engine.
    ///
    /// # Errors
    /// An engine error other than "not found".
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn image_id(&self, image: &str) -> Result<Option<String>, SandboxError> {
        match self.docker.inspect_image(image).await {
            Ok(info) => Ok(info.id),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(SandboxError::engine(format!("inspect image {image}"), e)),
        }
    }

    /// Creates a sandbox, not yet started: the caller keeps it (to destroy it
    /// whatever happens) before [`DockerSandbox::start`].
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// A cancelled create may leave a labelled container, which
    /// [`DockerBackend::remove_own`] at the end of the run, or the next run, removes.
    pub async fn create(&self, spec: &SandboxSpec) -> Result<Arc<DockerSandbox>, SandboxError> {
        let mut labels: HashMap<String, String> = spec.labels.clone().into_iter().collect();
        labels.insert(LABEL_OWNER.into(), owner_label());
        let body = ContainerCreateBody {
            image: Some(spec.image.clone()),
            cmd: Some(vec!["sleep".into(), "infinity".into()]),
            labels: Some(labels),
            working_dir: Some(spec.workdir.clone()),
            network_disabled: None,
            host_config: Some(HostConfig {
                network_mode: Some("none".into()),
                memory: Some(spec.limits.memory_bytes),
                memory_swap: Some(spec.limits.memory_bytes),
                nano_cpus: Some(spec.limits.nano_cpus),
                pids_limit: Some(spec.limits.pids),
                init: Some(true),
                // Everything dropped, then only what ordinary tools (package
                // installs, chown in build scripts, kill) need as root inside.
                cap_drop: Some(vec!["ALL".into()]),
                cap_add: Some(["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"].map(String::from).to_vec()),
                security_opt: Some(vec!["no-new-privileges".into()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = self.docker.create_container(Some(CreateContainerOptionsBuilder::default().build()), body).await.map_err(|e| {
            if is_not_found(&e) {
                SandboxError::ImageMissing { image: spec.image.clone(), hint: "build it first (scripts/build-base-image.sh builds reeval/base)".into() }
            } else {
                SandboxError::engine(format!("create a container from {}", spec.image), e)
            }
        })?;
        Ok(Arc::new(DockerSandbox { docker: self.docker.clone(), id: created.id, next_pid: AtomicU64::new(0) }))
    }

    /// Containers labelled with `label=value` (all states).
    ///
    /// # Errors
    /// An engine error.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn containers_labelled(&self, label: &str, value: Option<&str>) -> Result<Vec<(String, HashMap<String, String>)>, SandboxError> {
        let filter = match value {
            Some(v) => format!("{label}={v}"),
            None => label.to_string(),
        };
        let filters = HashMap::from([("label", vec![filter])]);
        let list = self
            .docker
            .list_containers(Some(ListContainersOptionsBuilder::default().all(true).filters(&filters).build()))
            .await
            .map_err(|e| SandboxError::engine("list containers", e))?;
        Ok(list.into_iter().filter_map(|c| Some((c.id?, c.labels.unwrap_or_default()))).collect())
    }

    /// Removes containers left by runners that are gone (killed with SIGKILL):
    /// those whose owner label names a process of this host that no longer runs.
    ///
    /// # Errors
    /// An engine error while listing; failures to remove single containers are ignored.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn remove_leftovers(&self) -> Result<usize, SandboxError> {
        let mut removed = 0;
        for (id, labels) in self.containers_labelled(LABEL_RUN, None).await? {
            let owner = labels.get(LABEL_OWNER).map(String::as_str).unwrap_or("");
            if owner_is_gone(owner) && self.remove(&id).await.is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes every container of `run_id` owned by this process: the sweep at
    /// the end of a run, for sandboxes whose attempt lost track of them.
    ///
    /// # Errors
    /// An engine error while listing.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn remove_own(&self, run_id: &str) -> Result<usize, SandboxError> {
        let me = owner_label();
        let mut removed = 0;
        for (id, labels) in self.containers_labelled(LABEL_RUN, Some(run_id)).await? {
            if labels.get(LABEL_OWNER) == Some(&me) && self.remove(&id).await.is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Force-removes a container and its anonymous volumes. Missing is fine.
    ///
    /// # Errors
    /// An engine error.
    ///
    /// # Cancel safety
    /// Safe.
    pub async fn remove(&self, id: &str) -> Result<(), SandboxError> {
        remove_container(&self.docker, id).await
    }
}

async fn remove_container(docker: &Docker, id: &str) -> Result<(), SandboxError> {
    match docker.remove_container(id, Some(RemoveContainerOptionsBuilder::default().force(true).v(true).build())).await {
        Ok(()) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        // 409: removal already in progress.
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 409, .. }) => Ok(()),
        Err(e) => Err(SandboxError::engine(format!("remove container {}", short(id)), e)),
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// `(start ticks)` of a process, from field 22 of `/proc/<pid>/stat`.
fn start_ticks(pid: &str) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces; fields after ')' are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19).map(str::to_string)
}

/// `<host>:<pid>:<start ticks>` of this process.
fn owner_label() -> String {
    let pid = std::process::id().to_string();
    format!("{}:{}:{}", hostname(), pid, start_ticks(&pid).unwrap_or_default())
}

/// Whether the runner named by an owner label is gone. Containers of other
/// hosts, or with no owner, are never touched.
fn owner_is_gone(owner: &str) -> bool {
    let mut parts = owner.splitn(3, ':');
    let (Some(host), Some(pid), Some(ticks)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host != hostname() || pid.is_empty() {
        return false;
    }
    start_ticks(pid).as_deref() != Some(ticks)
}

/// One exec's process: argv (data, never a shell string of ours), environment, directory, user, stdin.
struct ExecSpec<'a> {
    argv: Vec<String>,
    env: &'a [(String, String)],
    workdir: Option<String>,
    user: Option<String>,
    stdin: Option<&'a [u8]>,
}

impl ExecSpec<'_> {
    /// A plain command as the container's own user (root), for reeval's housekeeping.
    fn root(argv: Vec<String>) -> Self {
        ExecSpec { argv, env: &[], workdir: None, user: None, stdin: None }
    }
}

/// A running Docker container.
#[derive(Debug)]
pub struct DockerSandbox {
    docker: Docker,
    id: String,
    next_pid: AtomicU64,
}

impl DockerSandbox {
    /// Starts the container.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe: the caller destroys the sandbox at teardown either way.
    pub async fn start(&self) -> Result<(), SandboxError> {
        self.docker.start_container(&self.id, None).await.map_err(|e| SandboxError::engine("start the container", e))
    }

    async fn run_exec(
        &self,
        spec: ExecSpec<'_>,
        sink: Option<&mpsc::UnboundedSender<Bytes>>,
        out: &mut BoundedBuffer,
        err: &mut BoundedBuffer,
    ) -> Result<i64, SandboxError> {
        let ExecSpec { argv, env, workdir, user, stdin } = spec;
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
                    user,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| SandboxError::engine("create an exec", e))?;
        let started = self
            .docker
            .start_exec(&created.id, Some(StartExecOptions { detach: false, tty: false, output_capacity: None }))
            .await
            .map_err(|e| SandboxError::engine("start an exec", e))?;
        let StartExecResults::Attached { mut output, mut input } = started else {
            return Err(SandboxError::engine("start an exec", "engine detached the exec"));
        };
        if let Some(bytes) = stdin {
            // A command that never reads stdin must not block us: ignore write errors.
            let _ = input.write_all(bytes).await;
            let _ = input.shutdown().await;
        }
        drop(input);
        let drain = async {
            while let Some(item) = output.next().await {
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
        let exited = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut every = Duration::from_millis(250);
            loop {
                match self.docker.inspect_exec(&created.id).await {
                    Ok(i) if i.running == Some(false) => return,
                    Err(_) => return,
                    _ => {
                        tokio::time::sleep(every).await;
                        every = (every * 2).min(Duration::from_secs(2));
                    }
                }
            }
        };
        tokio::select! {
            r = &mut drain => r?,
            _ = exited => {
                if let Ok(r) = tokio::time::timeout(Duration::from_millis(300), &mut drain).await {
                    r?;
                }
            }
        }
        let inspected = self.docker.inspect_exec(&created.id).await.map_err(|e| SandboxError::engine("inspect an exec", e))?;
        Ok(inspected.exit_code.unwrap_or(-1))
    }
}

#[async_trait]
impl Sandbox for DockerSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    async fn exec(&self, cmd: &Command, env: &[(String, String)], stdout: Option<mpsc::UnboundedSender<Bytes>>) -> Result<ExecOutput, SandboxError> {
        let started = Instant::now();
        let killable = stdout.is_some() || cmd.timeout.is_some();
        let pid_file = format!("{PID_DIR}/{}.pid", self.next_pid.fetch_add(1, Ordering::Relaxed));
        let mut argv = Vec::with_capacity(cmd.argv.len() + 4);
        if killable {
            argv.extend(["/bin/sh".to_string(), "-c".into(), PID_WRAPPER.into(), pid_file.clone()]);
        }
        argv.extend(cmd.argv.iter().cloned());
        let mut env = env.to_vec();
        env.extend(cmd.env.iter().cloned());
        let mut out = BoundedBuffer::new(CAPTURE_LIMIT);
        let mut err = BoundedBuffer::new(CAPTURE_LIMIT);
        let spec = ExecSpec { argv, env: &env, workdir: cmd.workdir.clone(), user: cmd.user.clone(), stdin: cmd.stdin.as_deref() };
        let run = self.run_exec(spec, stdout.as_ref(), &mut out, &mut err);
        let (exit_code, timed_out) = match cmd.timeout {
            None => (run.await?, false),
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(code) => (code?, false),
                Err(_) => {
                    self.kill_matching(&pid_file, "KILL").await?;
                    (-1, true)
                }
            },
        };
        Ok(ExecOutput {
            command: cmd.display(),
            exit_code,
            stdout_bytes: out.total(),
            stderr_bytes: err.total(),
            stdout: out.into_string(),
            stderr: err.into_string(),
            duration_ms: started.elapsed().as_millis() as u64,
            timed_out,
        })
    }

    async fn kill(&self, signal: &str) -> Result<(), SandboxError> {
        self.kill_matching(&format!("{PID_DIR}/*.pid"), signal).await
    }

    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        self.docker
            .upload_to_container(&self.id, Some(UploadToContainerOptionsBuilder::default().path(dir).copy_uidgid("1").build()), body_full(tar))
            .await
            .map_err(|e| {
                if is_not_found(&e) { SandboxError::NotFound { path: dir.to_string() } } else { SandboxError::engine(format!("upload files to {dir}"), e) }
            })
    }

    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError> {
        let mut stream = self.docker.download_from_container(&self.id, Some(DownloadFromContainerOptionsBuilder::default().path(path).build()));
        let mut buf = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                if is_not_found(&e) { SandboxError::NotFound { path: path.to_string() } } else { SandboxError::engine(format!("download {path}"), e) }
            })?;
            if buf.len() as u64 + chunk.len() as u64 > limit {
                return Err(SandboxError::Archive { message: format!("{path} is larger than {limit} bytes") });
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Bytes::from(buf))
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
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| SandboxError::engine("create a relay exec", e))?;
        let started = self
            .docker
            .start_exec(&created.id, Some(StartExecOptions { detach: false, tty: false, output_capacity: None }))
            .await
            .map_err(|e| SandboxError::engine("start a relay exec", e))?;
        let StartExecResults::Attached { output, input } = started else {
            return Err(SandboxError::engine("start a relay exec", "engine detached the exec"));
        };
        let output = output
            .filter_map(|item| async move {
                match item {
                    Ok(LogOutput::StdOut { message }) => Some(Ok(message)),
                    Ok(_) => None,
                    Err(e) => Some(Err(SandboxError::engine("read relay output", e))),
                }
            })
            .boxed();
        Ok(ExecStream { input, output })
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        remove_container(&self.docker, &self.id).await
    }
}

impl DockerSandbox {
    /// Signals the process trees of the pid files matching `pid_files` (a path or a glob).
    async fn kill_matching(&self, pid_files: &str, signal: &str) -> Result<(), SandboxError> {
        // Our own paths, without spaces: the pattern is expanded by the shell on purpose.
        let argv = vec!["/bin/sh".into(), "-c".into(), KILL_SCRIPT.into(), pid_files.to_string(), signal.to_string()];
        self.run_exec(ExecSpec::root(argv), None, &mut BoundedBuffer::new(0), &mut BoundedBuffer::new(4096)).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_is_not_gone_and_dead_pid_is() {
        assert!(!owner_is_gone(&owner_label()));
        assert!(owner_is_gone(&format!("{}:999999999:1", hostname())));
        assert!(!owner_is_gone("other-host:1:1"));
        assert!(!owner_is_gone(""));
    }
}
