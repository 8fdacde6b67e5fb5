//! An in-memory backend for tests that need no kernel (feature `test-util`).
//!
//! A fake sandbox is a map of files. Commands are answered by a script the
//! test gives ([`FakeBackend::on_exec`]; by default every command exits 0),
//! except reeval's own housekeeping, which the fake understands: the agent
//! user's setup, `mkdir -p`, reading a file as the agent, and the workspace
//! listing (answered "not found", so snapshots read the whole workspace by
//! archive, which the fake serves from its map). Every call is recorded, so a
//! test can assert what happened: which commands ran, how many sandboxes were
//! created and destroyed.

use crate::FileToWrite;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use sha2::Digest;
use tokio_util::sync::CancellationToken;

use super::archive::{self, Entry};
use super::{
    Backend, Capabilities, EngineInfo, ExecRequest, ExecStream, HELPER_TOOLS, ProcessGroup,
    ReadyImage, Sandbox, SandboxError, SandboxSpec, SandboxState, Signal, Sweep,
};
use crate::ImageSpec;
use crate::exec::ExecOutput;

/// One command a fake sandbox was asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeExec {
    /// The sandbox's id.
    pub sandbox: String,
    /// The argv.
    pub argv: Vec<String>,
    /// The user it runs as (`None`: root).
    pub user: Option<String>,
    /// Its environment.
    pub env: Vec<(String, String)>,
    /// Whether it is a killable process group (an agent's turn).
    pub killable: bool,
}

impl FakeExec {
    /// The argv joined with spaces, for matching.
    pub fn line(&self) -> String {
        self.argv.join(" ")
    }

    /// The value of a variable in its environment.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// How a fake command ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FakeReply {
    /// It exits at once.
    Exit {
        /// Exit code.
        code: i64,
        /// Standard output.
        stdout: String,
        /// Standard error.
        stderr: String,
    },
    /// It runs this long, then exits 0 (or until killed: exit 137).
    Sleep(Duration),
}

impl FakeReply {
    /// Exit 0 with this output.
    pub fn ok(stdout: impl Into<String>) -> Self {
        FakeReply::Exit { code: 0, stdout: stdout.into(), stderr: String::new() }
    }

    /// Exit `code` with this error output.
    pub fn fail(code: i64, stderr: impl Into<String>) -> Self {
        FakeReply::Exit { code, stdout: String::new(), stderr: stderr.into() }
    }
}

/// The files of a fake sandbox: absolute path → entry.
pub type FakeFiles = BTreeMap<String, Entry>;

type Handler = Arc<dyn Fn(&FakeExec, &mut FakeFiles) -> FakeReply + Send + Sync>;

/// Where the fake fails on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FakeFailure {
    /// `ensure_image` fails (an infra error in the image phase).
    Image,
    /// `create` fails.
    Create,
    /// `start` fails.
    Start,
    /// `upload` fails with an unreadable archive.
    Upload,
}

/// What the fake saw.
#[derive(Debug, Default)]
struct Seen {
    created: Vec<String>,
    started: Vec<String>,
    destroyed: Vec<String>,
    execs: Vec<FakeExec>,
    kills: Vec<(String, Signal)>,
    images: Vec<ImageSpec>,
    specs: Vec<SandboxSpec>,
    /// The paths read as archives (`download`), in order.
    downloads: Vec<String>,
}

/// The in-memory backend. Cloning shares it.
#[derive(Clone)]
pub struct FakeBackend {
    seen: Arc<Mutex<Seen>>,
    handler: Handler,
    failure: Option<FakeFailure>,
    /// Downloads (workspace reads) to slow down, once each, after `n` quick ones.
    slow_downloads: Arc<Mutex<Vec<(usize, std::time::Duration)>>>,
    /// What every sandbox's [`Sandbox::state`] answers (by default, running).
    state: Arc<Mutex<SandboxState>>,
    /// The `WORKDIR` an image of this reference says it has.
    image_workdirs: std::collections::BTreeMap<String, String>,
    /// The `USER` an image of this reference says it has.
    image_users: std::collections::BTreeMap<String, String>,
    /// What its `ping` says one sandbox can be given.
    capacity: Option<crate::Capacity>,
}

impl std::fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBackend").field("failure", &self.failure).finish_non_exhaustive()
    }
}

impl Default for FakeBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeBackend {
    /// A backend whose commands all exit 0 with no output.
    pub fn new() -> Self {
        Self {
            seen: Default::default(),
            handler: Arc::new(|_, _| FakeReply::ok("")),
            failure: None,
            slow_downloads: Default::default(),
            state: Arc::new(Mutex::new(SandboxState::Running)),
            image_workdirs: Default::default(),
            image_users: Default::default(),
            capacity: None,
        }
    }

    /// Its engine says one sandbox can be given at most `capacity`.
    pub fn capacity(mut self, capacity: crate::Capacity) -> Self {
        self.capacity = Some(capacity);
        self
    }

    /// The image `reference` (an `ImageSpec::From`, or `fake/built:1` for any
    /// built one) says its `WORKDIR` is `workdir`.
    pub fn image_workdir(mut self, reference: &str, workdir: &str) -> Self {
        self.image_workdirs.insert(reference.to_string(), workdir.to_string());
        self
    }

    /// The image `reference` (as for [`FakeBackend::image_workdir`]) says its `USER` is `user`.
    pub fn image_user(mut self, reference: &str, user: &str) -> Self {
        self.image_users.insert(reference.to_string(), user.to_string());
        self
    }

    /// From now on every sandbox reports `state` (a sandbox killed or paused
    /// from outside); a command handler may call it to lose the sandbox mid-command.
    pub fn set_state(&self, state: SandboxState) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = state;
    }

    /// Makes the download after `quick` more take `delay` (a workspace of many
    /// files, slow to read), once.
    pub fn slow_download(self, quick: usize, delay: std::time::Duration) -> Self {
        self.slow_downloads.lock().unwrap_or_else(|e| e.into_inner()).push((quick, delay));
        self
    }

    /// Commands (other than reeval's housekeeping) are answered by `handler`,
    /// which may change the sandbox's files.
    pub fn on_exec(
        mut self,
        handler: impl Fn(&FakeExec, &mut FakeFiles) -> FakeReply + Send + Sync + 'static,
    ) -> Self {
        self.handler = Arc::new(handler);
        self
    }

    /// Fails on purpose at `at`.
    pub fn failing(mut self, at: FakeFailure) -> Self {
        self.failure = Some(at);
        self
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sandboxes created.
    pub fn created(&self) -> usize {
        self.seen().created.len()
    }

    /// Sandboxes created and not destroyed.
    pub fn live(&self) -> usize {
        let seen = self.seen();
        seen.created.iter().filter(|id| !seen.destroyed.contains(id)).count()
    }

    /// Every command run, in order (housekeeping included).
    pub fn execs(&self) -> Vec<FakeExec> {
        self.seen().execs.clone()
    }

    /// Signals sent with `kill`.
    pub fn kills(&self) -> Vec<Signal> {
        self.seen().kills.iter().map(|(_, s)| *s).collect()
    }

    /// The specs sandboxes were created from.
    pub fn specs(&self) -> Vec<SandboxSpec> {
        self.seen().specs.clone()
    }

    /// The images asked for (`ensure_image`), in order.
    pub fn images(&self) -> Vec<ImageSpec> {
        self.seen().images.clone()
    }

    /// The paths read as archives (`download`: workspace reads, captures), in order.
    pub fn downloads(&self) -> Vec<String> {
        self.seen().downloads.clone()
    }
}

#[async_trait]
impl Backend for FakeBackend {
    fn name(&self) -> &str {
        "fake"
    }

    /// Mounts are taken, and kept in the spec a test reads ([`FakeBackend::specs`]); nothing is mounted.
    fn mounts(&self, _mounts: &[crate::Mount]) -> Result<(), String> {
        Ok(())
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            gateway_socket: false,
            oom_kills: false,
            helper_tools: HELPER_TOOLS,
            main_stdin: false,
        }
    }

    async fn ping(&self) -> Result<EngineInfo, SandboxError> {
        Ok(EngineInfo {
            name: "fake".into(),
            version: "0".into(),
            api_version: "0".into(),
            host: "memory".into(),
            capacity: self.capacity,
        })
    }

    async fn ensure_image(
        &self,
        spec: &ImageSpec,
        _extra: &str,
    ) -> Result<ReadyImage, SandboxError> {
        self.seen().images.push(spec.clone());
        if self.failure == Some(FakeFailure::Image) {
            return Err(SandboxError::ImageBuild {
                image: format!("{spec:?}"),
                message: "the fake fails here on purpose".into(),
            });
        }
        let reference = match spec {
            ImageSpec::From(r) => r.clone(),
            _ => "fake/built:1".into(),
        };
        // Named by what it is made of, as an engine's id is: two specs, two ids.
        let digest = sha2::Sha256::digest(format!("{spec:?}").as_bytes());
        let id =
            format!("sha256:{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let workdir = self.image_workdirs.get(&reference).cloned();
        let user = self.image_users.get(&reference).cloned();
        Ok(ReadyImage {
            detail: format!("cache hit {reference} (fake)"),
            reference,
            id,
            workdir,
            user,
        })
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        if self.failure == Some(FakeFailure::Create) {
            return Err(SandboxError::engine_says(
                "create a container",
                "the fake fails here on purpose",
            ));
        }
        let id = {
            let mut seen = self.seen();
            let id = format!("fake{:08}", seen.created.len() + 1);
            seen.created.push(id.clone());
            seen.specs.push(spec.clone());
            id
        };
        Ok(Arc::new(FakeSandbox {
            id,
            workdir: spec.workdir.clone(),
            backend: self.clone(),
            files: Mutex::new(FakeFiles::new()),
            kill: Mutex::new(CancellationToken::new()),
        }))
    }

    async fn sweep(&self, _scope: Sweep<'_>) -> Result<usize, SandboxError> {
        Ok(0)
    }
}

/// A fake sandbox.
pub struct FakeSandbox {
    id: String,
    workdir: String,
    backend: FakeBackend,
    files: Mutex<FakeFiles>,
    /// Fired by `kill`: running sleeps end as killed.
    kill: Mutex<CancellationToken>,
}

impl std::fmt::Debug for FakeSandbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeSandbox").field("id", &self.id).finish_non_exhaustive()
    }
}

impl FakeSandbox {
    fn files(&self) -> std::sync::MutexGuard<'_, FakeFiles> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// reeval's own housekeeping, answered by the fake itself.
    fn housekeeping(&self, exec: &FakeExec) -> Option<(FakeReply, Option<Vec<u8>>)> {
        let line = exec.line();
        if line.contains("/reeval-diff") {
            // No diff helper: snapshots read the whole workspace by archive.
            return Some((FakeReply::fail(127, "reeval-diff: not found"), None));
        }
        if line.contains("/sys/fs/cgroup") {
            return Some((FakeReply::fail(1, ""), None));
        }
        if line.contains("mkdir -p /home/agent") || exec.argv.first().is_some_and(|p| p == "mkdir")
        {
            return Some((FakeReply::ok(""), None));
        }
        if exec.argv.len() == 6 && exec.argv[2].contains("head -c") {
            // Reading a file as the agent: `sh -c <script> sh <path> <limit>`.
            return Some(match self.files().get(&exec.argv[4]) {
                Some(Entry::File { bytes, .. }) => (FakeReply::ok(""), Some(bytes.clone())),
                _ => (FakeReply::fail(44, ""), None),
            });
        }
        None
    }
}

#[async_trait]
impl Sandbox for FakeSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    async fn start(&self) -> Result<(), SandboxError> {
        if self.backend.failure == Some(FakeFailure::Start) {
            return Err(SandboxError::engine_says(
                "start the container",
                "the fake fails here on purpose",
            ));
        }
        self.backend.seen().started.push(self.id.clone());
        Ok(())
    }

    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError> {
        let mut env = request.env.to_vec();
        env.extend(request.command.env.iter().cloned());
        let exec = FakeExec {
            sandbox: self.id.clone(),
            argv: request.command.argv.clone(),
            user: request.command.user.clone(),
            env,
            killable: request.group == ProcessGroup::Killable,
        };
        self.backend.seen().execs.push(exec.clone());
        let (reply, stream) = match self.housekeeping(&exec) {
            Some(done) => done,
            None => {
                let handler = self.backend.handler.clone();
                let reply = handler(&exec, &mut self.files());
                (reply, None)
            }
        };
        if let (Some(bytes), Some(sink)) = (stream, &request.stdout) {
            let _ = sink.send(Bytes::from(bytes));
        }
        let (code, stdout, stderr, timed_out) = match reply {
            FakeReply::Exit { code, stdout, stderr } => (code, stdout, stderr, false),
            FakeReply::Sleep(d) => {
                let killed = self.kill.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let limit = request.command.timeout.unwrap_or(Duration::MAX);
                tokio::select! {
                    _ = tokio::time::sleep(d) => (0, String::new(), String::new(), false),
                    _ = killed.cancelled() => (137, String::new(), String::new(), false),
                    _ = tokio::time::sleep(limit) => (-1, String::new(), String::new(), true),
                }
            }
        };
        if let Some(sink) = &request.stdout
            && !stdout.is_empty()
        {
            let _ = sink.send(Bytes::from(stdout.clone().into_bytes()));
        }
        Ok(ExecOutput {
            command: request.command.display(),
            exit_code: code,
            stdout_bytes: stdout.len() as u64,
            stderr_bytes: stderr.len() as u64,
            stdout,
            stderr,
            duration_ms: 0,
            timed_out,
        })
    }

    async fn kill(&self, signal: Signal) -> Result<(), SandboxError> {
        self.backend.seen().kills.push((self.id.clone(), signal));
        let mut token = self.kill.lock().unwrap_or_else(|e| e.into_inner());
        token.cancel();
        *token = CancellationToken::new();
        Ok(())
    }

    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        if self.backend.failure == Some(FakeFailure::Upload) {
            return Err(SandboxError::Archive { message: "the fake fails here on purpose".into() });
        }
        let entries = archive::read_entries(&tar, false, |_| false)?;
        let mut files = self.files();
        for (path, entry) in entries {
            files.insert(format!("{}/{path}", dir.trim_end_matches('/')), entry);
        }
        Ok(())
    }

    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError> {
        self.backend.seen().downloads.push(path.to_string());
        let delay = {
            let mut slow = self.backend.slow_downloads.lock().unwrap_or_else(|e| e.into_inner());
            let due = slow.iter().position(|(quick, _)| *quick == 0);
            for (quick, _) in slow.iter_mut() {
                *quick = quick.saturating_sub(1);
            }
            due.map(|i| slow.remove(i).1)
        };
        if let Some(delay) = delay {
            tokio::time::sleep(delay).await;
        }
        let files = self.files();
        let prefix = format!("{}/", path.trim_end_matches('/'));
        let under: BTreeMap<String, Entry> = files
            .iter()
            .filter(|(p, _)| p.starts_with(&prefix))
            .map(|(p, e)| (p[prefix.len()..].to_string(), e.clone()))
            .collect();
        let top = path.trim_end_matches('/').rsplit('/').next().unwrap_or("root").to_string();
        if under.is_empty() {
            return match files.get(path) {
                // A file alone, named by its own name (as an engine's archive has it).
                Some(Entry::File { mode, bytes }) if path != self.workdir => {
                    archive::tar_of(&[FileToWrite::new(top, bytes.clone(), *mode)])
                }
                Some(entry) if path != self.workdir => {
                    archive::tar_of_tree("", &BTreeMap::from([(top, entry.clone())]))
                }
                _ if path == self.workdir => archive::tar_of_tree(&top, &BTreeMap::new()),
                _ => Err(SandboxError::NotFound { path: path.to_string() }),
            };
        }
        let tar = archive::tar_of_tree(&top, &under)?;
        if tar.len() as u64 > limit {
            return Err(SandboxError::Archive {
                message: format!("{path} is larger than {limit} bytes"),
            });
        }
        Ok(tar)
    }

    async fn open_stream(&self, _argv: Vec<String>) -> Result<ExecStream, SandboxError> {
        Err(SandboxError::engine_says("open a stream", "the fake backend has no streams"))
    }

    async fn state(&self) -> SandboxState {
        self.backend.state.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        let mut seen = self.backend.seen();
        if !seen.destroyed.contains(&self.id) {
            seen.destroyed.push(self.id.clone());
        }
        Ok(())
    }
}
