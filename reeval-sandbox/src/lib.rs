//! Sandboxes and the engines that run them: the [`Backend`] trait (an engine:
//! ping, capabilities, images, create, sweep) and the [`Sandbox`] trait (one
//! running sandbox: exec, files, streams, destroy). Docker (local, or remote
//! by `DOCKER_HOST`) is one implementation, in [`docker`]; an in-memory fake
//! for tests is another, in `fake` (feature `test-util`); Kubernetes a third,
//! in [`kubernetes`] (its engine behind the feature `kubernetes`). Contexts and harnesses act through
//! a [`SandboxHandle`].
//!
//! Key types: `Backend` (create a sandbox from an image spec and limits;
//! sweep leftovers by owner label), `Sandbox` (one running sandbox),
//! `SandboxHandle` (the shared, cloneable handle the attempt, the harness and
//! the diff use: bounded reads, the agent's user), `SandboxError` (what an
//! engine said, which `outcome::classify` maps to infra or config).
//!
//! The flow: the run's [`BackendConfig`] (one arm per backend) connects its
//! engines (`backend_config.rs`, the one place that matches on a backend;
//! each engine's errors then name it, `named.rs`); preflight pings them and
//! asks each what it cannot run ([`Backend::check_run`]); the attempt's
//! container phase asks one for a sandbox; execs, uploads and downloads go
//! through the handle; teardown destroys it (in the background, off the
//! attempt's slot); the run's sweep removes what a killed runner left. After
//! a step failed, the attempt asks `Sandbox::state` (`state.rs`) whether the
//! sandbox was lost.
//!
//! What may depend on what: a backend knows images, containers, pods and
//! bytes, never evals, turns, records, the runner, reporters, the judge,
//! compare or replay. Code above it (the attempt, the runner's pool and
//! preflight) sees the traits and [`BackendConfig`]; `archive.rs` and
//! `shell_exec.rs` (the exec protocol: pid files, timeouts, the kill of a
//! process tree, bounded capture) are shared by the backends that run
//! commands through a shell. A backend is one folder (`docker/`,
//! `kubernetes/`, with its settings: [`KubernetesConfig`] is
//! `kubernetes/config.rs`, read whether or not the backend is built) and one
//! arm of [`BackendConfig`] (docs/backends.md walks through adding one). The
//! types a backend is given are defined here, not above it: [`ImageSpec`]
//! (`image_spec.rs`; the environment re-exports it) and [`Cause`]. Docker's
//! image building (`docker/image.rs`) and its setup cache on the engine
//! (`docker/setup_cache.rs`) are in its folder; besides itself this module
//! names only `crate::exec` and `crate::setup_cache` (the cache's labels
//! and size cap); the setup cache's key, which reads the eval's environment,
//! is `setup_key.rs`. Still in the way of a crate of its own: `ExecOutput`
//! must stay in the crate of `matchers.rs` (see docs/layout.md), and the
//! attempt, the pool and preflight reach `pub(crate)` items here.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod archive;
mod backend_config;
pub mod exec;
pub mod docker;
#[cfg(any(test, feature = "test-util"))]
pub mod fake;
pub(crate) mod gateway_stream;
mod handle;
mod image_spec;
pub mod kubernetes;
mod named;
pub mod service;
pub(crate) mod shell_exec;
mod state;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::exec::{Command, ExecOutput};

pub use backend_config::{BackendConfig, CellNeeds, Connected, Preflight, RunNeeds};
pub use docker::DockerBackend;
pub use handle::{AgentUser, READ_LIMIT, SandboxHandle};
pub use image_spec::{Image, ImageSpec};
pub use kubernetes::{GatewayAddress, KubernetesConfig};
pub use service::{Condition, Healthcheck, LABEL_SERVICE, Service, ServiceStart};
pub use state::{Lost, SandboxState};

/// A boxed cause, kept as an error's `source`.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// Label on every container of a run: the run id. The `dev.reeval.*` label
/// namespace is reserved for reeval: do not set such labels yourself.
pub const LABEL_RUN: &str = "dev.reeval.run";
/// Label on every container: the attempt id.
pub const LABEL_ATTEMPT: &str = "dev.reeval.attempt";
/// Label on every container: `<host>:<pid>:<process start ticks>` of the runner that owns it.
pub const LABEL_OWNER: &str = "dev.reeval.owner";

/// A failure of the sandbox or its engine. Always an infra error, except a
/// missing file, which a check may expect (see `outcome::classify`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The engine did not answer.
    #[error("failed to reach the Docker engine: {message}")]
    EngineUnreachable {
        /// The cause.
        message: String,
    },
    /// The engine's address or settings cannot be used (`DOCKER_HOST`, certificates).
    #[error("failed to use the engine's settings: {message}")]
    EngineConfig {
        /// What is wrong, naming the variable.
        message: String,
    },
    /// An engine call failed.
    #[error("failed to {op}: {message}")]
    Engine {
        /// What was being done (`create container`, `start exec`, …).
        op: String,
        /// The engine's answer.
        message: String,
        /// The engine client's error, with its HTTP status where there is one.
        #[source]
        source: Option<Cause>,
    },
    /// The image is not present and cannot be pulled or built here.
    #[error("failed to find image {image}: {hint}")]
    ImageMissing {
        /// The image reference.
        image: String,
        /// How to get it.
        hint: String,
    },
    /// The image build failed.
    #[error("failed to build image {image}: {message}")]
    ImageBuild {
        /// The image tag.
        image: String,
        /// The builder's output tail.
        message: String,
    },
    /// No such file or directory in the sandbox.
    #[error("failed to read {path} in the sandbox: no such file or directory")]
    NotFound {
        /// The path asked for.
        path: String,
    },
    /// An archive from the sandbox was unusable or unsafe.
    #[error("failed to read an archive from the sandbox: {message}")]
    Archive {
        /// What was wrong with it.
        message: String,
    },
    /// The sandbox was lost (removed, stopped, paused, restarted from outside)
    /// while a command ran in it: the platform's failure, whatever the command returned.
    #[error("{0}")]
    Lost(Box<Lost>),
}

impl SandboxError {
    /// An engine call that failed with `err`, kept as the source.
    pub fn engine(
        op: impl Into<String>,
        err: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        SandboxError::Engine {
            op: op.into(),
            message: err.to_string(),
            source: Some(Box::new(err)),
        }
    }

    /// An engine call that failed in a way the engine described in words.
    pub fn engine_says(op: impl Into<String>, message: impl fmt::Display) -> Self {
        SandboxError::Engine { op: op.into(), message: message.to_string(), source: None }
    }

    /// The HTTP status of the engine's answer, when the engine answered with one.
    pub fn status(&self) -> Option<u16> {
        let SandboxError::Engine { source: Some(source), .. } = self else { return None };
        match source.downcast_ref::<bollard::errors::Error>()? {
            bollard::errors::Error::DockerResponseServerError { status_code, .. } => {
                Some(*status_code)
            }
            _ => None,
        }
    }
}

/// Resource limits of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Memory in bytes (swap is disabled).
    pub memory_bytes: i64,
    /// CPUs, in billionths.
    pub nano_cpus: i64,
    /// Maximum processes.
    pub pids: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_bytes: 4 << 30, nano_cpus: 2_000_000_000, pids: 1024 }
    }
}

/// What network a sandbox gets. The sandbox never gets a network of its own
/// that reaches anything: its only way out is the egress gateway.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NetworkSpec {
    /// No network at all: only the loopback interface.
    #[default]
    None,
    /// No network, and a host directory holding the gateway's unix socket
    /// mounted read-only into the sandbox (a local engine only).
    GatewaySocket {
        /// The directory on the host.
        host_dir: PathBuf,
        /// Where it appears in the sandbox.
        sandbox_dir: String,
    },
    /// An internal network of the engine (no route out, no address on the
    /// host) that only the sandbox and its gateway container are on.
    Internal {
        /// The network's name.
        network: String,
    },
    /// Kubernetes: a NetworkPolicy that denies everything but egress to the
    /// pods with these labels (the run's gateway pod) on this TCP port.
    PodGateway {
        /// The gateway pod's labels.
        pod_labels: BTreeMap<String, String>,
        /// The port of this attempt's gateway process.
        port: u16,
    },
}

/// A gateway the backend runs next to a sandbox, for engines where a socket of
/// this host cannot be mounted into the sandbox: the `reeval-gateway` binary
/// in a container on the sandbox's internal network and on a normal one (a
/// remote Docker engine), or as a process in the run's gateway pod
/// (Kubernetes). See `egress/attempt.rs`.
#[derive(Debug, Clone)]
pub struct GatewayRequest {
    /// Labels (run, attempt); the backend adds its owner label.
    pub labels: BTreeMap<String, String>,
    /// The `reeval-gateway` executable, built for the engine's architecture.
    pub binary: Arc<Vec<u8>>,
    /// The image it is put in (it needs the C library the binary links).
    pub base_image: String,
    /// Files the gateway reads (its configuration, its CA), by absolute path.
    pub files: Vec<(String, Vec<u8>, u32)>,
    /// Its environment: the secrets it swaps in (they reach this container only).
    pub env: Vec<(String, secrecy::SecretString)>,
    /// Its command line.
    pub command: Vec<String>,
    /// The port it listens on.
    pub port: u16,
}

/// A running gateway container or process, attached (see [`Backend::start_gateway`]).
#[async_trait]
pub trait GatewayContainer: Send + Sync + fmt::Debug {
    /// The network the sandbox joins.
    fn network(&self) -> NetworkSpec;

    /// What the sandbox's relay connects to: `tcp:IP:PORT`.
    fn upstream(&self) -> String;

    /// Addresses of the engine's host the sandbox must not reach.
    fn probes(&self) -> Vec<std::net::SocketAddr>;

    /// Replaces the gateway's policy (a JSON object) and waits until it applies.
    ///
    /// # Errors
    /// [`SandboxError`] when the gateway does not acknowledge it.
    ///
    /// # Cancel safety
    /// A cancelled switch may still apply.
    async fn set_policy(&self, policy: &str) -> Result<(), SandboxError>;

    /// The isolation report the sandbox's relay sent to the gateway, waiting up to `within`.
    ///
    /// # Errors
    /// [`SandboxError`] when none arrived.
    ///
    /// # Cancel safety
    /// Safe.
    async fn isolation(
        &self,
        within: std::time::Duration,
    ) -> Result<reeval_gateway::relay::RelayReport, SandboxError>;

    /// Where it runs, for the gateway phase's detail.
    fn place(&self) -> &'static str {
        "a container next to the sandbox"
    }

    /// Whether the sandbox gets the gateway's directory mounted (the relay and
    /// the CA in it: nothing to upload), as the run's gateway in this process
    /// does; a gateway next to the sandbox is reached over the network.
    fn mounted(&self) -> bool {
        false
    }

    /// Connections to this host's canary listener since the attempt began,
    /// where the gateway has one (any is a leak).
    fn leaks(&self) -> u64 {
        0
    }

    /// `None` where the engine enforces the sandbox's isolation; otherwise
    /// why it does not (a Kubernetes test cluster on the host network): the
    /// relay's probes still run, and what they reach is reported instead of
    /// failing the attempt.
    fn unenforced(&self) -> Option<String> {
        None
    }

    /// Stops the gateway and removes it and the network; what went out.
    ///
    /// # Cancel safety
    /// A cancelled close leaves the container and network to the sweep.
    async fn close(&self) -> Vec<reeval_gateway::EgressEntry>;
}

/// The ways to the egress gateway the attempt offers a backend, which picks
/// one for its sandboxes ([`Backend::place_gateway`]): neither is made until asked for.
#[async_trait]
pub trait GatewayOffer: Send + Sync {
    /// The run's gateway in this process, with a socket for this attempt in
    /// a directory of this host that the sandbox gets mounted
    /// ([`NetworkSpec::GatewaySocket`]): for engines that can mount one.
    ///
    /// # Errors
    /// [`SandboxError`] when the gateway cannot start or take the attempt.
    ///
    /// # Cancel safety
    /// Safe: the attempt's directory is removed with the run's gateway.
    async fn in_process(&self) -> Result<Box<dyn GatewayContainer>, SandboxError>;

    /// What a gateway that the backend runs next to the sandbox needs (see
    /// [`Backend::start_gateway`]).
    ///
    /// # Errors
    /// [`SandboxError`] when its binary or CA cannot be had.
    ///
    /// # Cancel safety
    /// Safe.
    async fn beside(&self) -> Result<GatewayRequest, SandboxError>;
}

/// What a sandbox is created from.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The image reference (already present on the engine).
    pub image: String,
    /// Labels (run, attempt); the backend adds its owner label.
    pub labels: BTreeMap<String, String>,
    /// The workspace directory.
    pub workdir: String,
    /// Resource limits.
    pub limits: Limits,
    /// The network the sandbox gets.
    pub network: NetworkSpec,
    /// What the sandbox's main process runs; by default it sleeps for ever.
    /// (The gateway's relay supervises the sandbox when it has a way out.)
    pub main_process: Option<Vec<String>>,
    /// Services started beside it, in its network namespace (see [`Service`]).
    pub services: Vec<ServiceStart>,
}

/// The engine a backend talks to, as preflight reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    /// Which engine (`Docker Engine`, `Podman`).
    pub name: String,
    /// Its version.
    pub version: String,
    /// Its API version.
    pub api_version: String,
    /// Where it is (`unix:///var/run/docker.sock`, `tcp://host:2376`).
    pub host: String,
}

/// A tool an in-sandbox helper of reeval needs from the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelperTool {
    /// The program.
    pub program: &'static str,
    /// What needs it.
    pub used_by: &'static str,
    /// What happens without it.
    pub without: &'static str,
}

/// The tools reeval's in-sandbox helpers use, on every backend that acts through exec.
pub const HELPER_TOOLS: &[HelperTool] = &[
    HelperTool {
        program: "sh",
        used_by: "killable commands (a pid file per process group)",
        without: "turns and timed commands cannot run",
    },
    HelperTool {
        program: "cat",
        used_by: "incremental diffs (the first one puts the static reeval-diff helper in \
                  /var/lib/reeval-diff, with sh, mkdir, chmod and mv)",
        without: "every diff reads the whole workspace",
    },
    HelperTool {
        program: "python3",
        used_by: "Ctx::serve (the port relay)",
        without: "serve fails as an infra error",
    },
];

/// What a backend can do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Whether a host directory with the gateway's unix socket can be mounted ([`NetworkSpec::GatewaySocket`]).
    pub gateway_socket: bool,
    /// Whether the kernel's OOM kills can be counted inside the sandbox.
    pub oom_kills: bool,
    /// The tools the backend's in-sandbox helpers need from the image.
    pub helper_tools: &'static [HelperTool],
}

/// Which leftover sandboxes a [`Backend::sweep`] removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sweep<'a> {
    /// Every sandbox of this run that this process owns (the end of a run).
    OwnRun(&'a str),
    /// Sandboxes of runners on this host that are gone (killed with SIGKILL).
    Orphans,
}

/// An image ready for a container.
#[derive(Debug, Clone)]
pub struct ReadyImage {
    /// The reference containers are created from.
    pub reference: String,
    /// The engine's image id.
    pub id: String,
    /// `cache hit …` or `built … in …`, for `-v` and the record.
    pub detail: String,
}

/// A cached setup image (see [`Backend::find_setup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundSetup {
    /// The reference containers are created from.
    pub reference: String,
    /// The fingerprint of its workspace as committed (`None`: committed without one).
    pub snapshot: Option<String>,
}

/// An engine that runs sandboxes. The runner, the attempt and image building
/// hold an `Arc<dyn Backend>`.
#[async_trait]
pub trait Backend: Send + Sync + fmt::Debug {
    /// The backend's name (`docker`, `fake`).
    fn name(&self) -> &str;

    /// What it can do.
    fn capabilities(&self) -> Capabilities;

    /// Whether the engine answers, and what it is.
    ///
    /// # Errors
    /// [`SandboxError::EngineUnreachable`] when it does not answer.
    ///
    /// # Cancel safety
    /// Safe.
    async fn ping(&self) -> Result<EngineInfo, SandboxError>;

    /// Makes `spec` present on the engine, built once per content digest;
    /// `extra` goes into the digest (the harness's name and version).
    ///
    /// # Errors
    /// [`SandboxError::ImageMissing`] for an absent image that cannot be
    /// pulled or built here, [`SandboxError::ImageBuild`] when a build fails.
    ///
    /// # Cancel safety
    /// A cancelled build leaves at worst an untagged image.
    async fn ensure_image(&self, spec: &ImageSpec, extra: &str)
    -> Result<ReadyImage, SandboxError>;

    /// Creates a sandbox, not yet started: the caller keeps it (to destroy it
    /// whatever happens) before [`Sandbox::start`].
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// A cancelled create may leave a labelled sandbox, which the sweep at
    /// the end of the run, or the next run, removes.
    async fn create(&self, spec: &SandboxSpec) -> Result<Arc<dyn Sandbox>, SandboxError>;

    /// The backend's own preflight, given what the run will ask of it (the
    /// images, egress and brokered secrets of every cell): what it cannot
    /// run, and what a user should know. A backend that runs the gateway
    /// away from this process keeps the brokered secrets for it. The
    /// default finds nothing.
    ///
    /// # Cancel safety
    /// Safe: it starts nothing.
    async fn check_run(&self, _run: &RunNeeds) -> Preflight {
        Preflight::default()
    }

    /// Removes leftover sandboxes; returns how many.
    ///
    /// # Errors
    /// [`SandboxError`] when listing fails; single removals that fail are skipped.
    ///
    /// # Cancel safety
    /// Safe: what is not removed now is removed by a later sweep.
    async fn sweep(&self, scope: Sweep<'_>) -> Result<usize, SandboxError>;

    /// Whether this engine can start services beside a sandbox ([`Service`]);
    /// `Err` says why not, and preflight refuses an eval that has some.
    fn runs_services(&self) -> Result<(), String> {
        Err(format!("the {} backend cannot start services beside a sandbox", self.name()))
    }

    /// Whether this engine keeps a setup cache ([`Backend::find_setup`],
    /// [`Backend::commit_setup`]); without one, no attempt looks it up or fills it.
    fn caches_setups(&self) -> bool {
        false
    }

    /// The image of the cached setup `digest`, if this engine holds it (see
    /// `crate::setup_cache`); a found image is marked as just used.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails (the default: no cache, `None`).
    ///
    /// # Cancel safety
    /// Safe.
    async fn find_setup(&self, _digest: &str) -> Result<Option<FoundSetup>, SandboxError> {
        Ok(None)
    }

    /// Removes the cached setup `digest` (it did not match its own
    /// fingerprint); no attempt finds it again.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine refuses.
    ///
    /// # Cancel safety
    /// Safe: the image is removed or not.
    async fn forget_setup(&self, _digest: &str) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Commits the prepared sandbox `sandbox_id` as the cached setup
    /// `digest`, with these labels, then evicts the least recently used
    /// cached setups while the cache holds more than `max_bytes`.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine cannot (the default: this backend has no cache).
    ///
    /// # Cancel safety
    /// A cancelled commit may still create the image.
    async fn commit_setup(
        &self,
        _sandbox_id: &str,
        _digest: &str,
        _labels: &BTreeMap<String, String>,
        _max_bytes: u64,
    ) -> Result<(), SandboxError> {
        Err(SandboxError::EngineConfig {
            message: format!("the {} backend has no setup cache", self.name()),
        })
    }

    /// How this backend's sandboxes reach the egress gateway, from what the
    /// attempt `offer`s: the sandbox's network comes from the answer
    /// ([`GatewayContainer::network`]). The default: the run's gateway in this
    /// process where a host directory can be mounted
    /// ([`Capabilities::gateway_socket`]), else one next to the sandbox
    /// ([`Backend::start_gateway`]).
    ///
    /// # Errors
    /// [`SandboxError`] when the gateway cannot be started.
    ///
    /// # Cancel safety
    /// A cancelled placement may leave a gateway container to the sweep.
    async fn place_gateway(
        &self,
        offer: &dyn GatewayOffer,
    ) -> Result<Box<dyn GatewayContainer>, SandboxError> {
        if self.capabilities().gateway_socket {
            offer.in_process().await
        } else {
            self.start_gateway(&offer.beside().await?).await
        }
    }

    /// Starts a gateway container (or, on Kubernetes, a process in the run's
    /// gateway pod) for a sandbox (engines where [`Capabilities::gateway_socket`] is false).
    ///
    /// # Errors
    /// [`SandboxError`] when the engine cannot (the default: this backend has no such thing).
    ///
    /// # Cancel safety
    /// A cancelled start may leave the container and network to the sweep.
    async fn start_gateway(
        &self,
        _request: &GatewayRequest,
    ) -> Result<Box<dyn GatewayContainer>, SandboxError> {
        Err(SandboxError::EngineConfig {
            message: format!("the {} backend cannot run a gateway container", self.name()),
        })
    }
}

/// Whether an exec's processes can be signalled later as one tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessGroup {
    /// A plain command: it ends on its own (housekeeping, checks).
    Plain,
    /// Tracked by a pid file, so that [`Sandbox::kill`] (or the command's own
    /// timeout) reaches it and every process it started: agent turns.
    Killable,
}

/// A signal for [`Sandbox::kill`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask to stop.
    Term,
    /// Stop now.
    Kill,
}

impl Signal {
    /// The signal's name as `kill -s` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
        }
    }
}

/// Where an exec's stdout chunks are also sent as they come.
pub type StdoutSink = mpsc::UnboundedSender<Bytes>;

/// One command to run in a sandbox.
#[derive(Debug)]
pub struct ExecRequest<'a> {
    /// The command (argv, directory, user, stdin, timeout).
    pub command: &'a Command,
    /// Its environment, on top of the image's.
    pub env: &'a [(String, String)],
    /// Where stdout chunks are also sent as they come.
    pub stdout: Option<StdoutSink>,
    /// Whether its process tree can be signalled later.
    pub group: ProcessGroup,
}

impl<'a> ExecRequest<'a> {
    /// A plain command with this environment and no stream.
    pub fn plain(command: &'a Command, env: &'a [(String, String)]) -> Self {
        Self { command, env, stdout: None, group: ProcessGroup::Plain }
    }
}

/// A running sandbox. Implementations must never unpack an archive from the
/// sandbox onto the host: archives are untrusted.
#[async_trait]
pub trait Sandbox: Send + Sync + fmt::Debug {
    /// The backend's id of the sandbox (the container id).
    fn id(&self) -> &str;

    /// Starts the sandbox after [`Backend::create`].
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe: the caller destroys the sandbox at teardown either way.
    async fn start(&self) -> Result<(), SandboxError>;

    /// Runs a command. A command with a timeout, or a [`ProcessGroup::Killable`]
    /// one, is killed with its process tree when its time runs out.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails; a non-zero exit is not an error.
    ///
    /// # Cancel safety
    /// Dropping the future stops reading; the process goes on in the sandbox
    /// until [`Sandbox::kill`] (killable ones) or [`Sandbox::destroy`].
    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError>;

    /// Sends `signal` to every killable process tree that is still running.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Safe: a signal not sent is sent again by teardown's kill.
    async fn kill(&self, signal: Signal) -> Result<(), SandboxError>;

    /// Unpacks a tar archive (built by us) into `dir`, which must exist,
    /// keeping the owners its entries name.
    ///
    /// # Errors
    /// [`SandboxError::NotFound`] when `dir` does not exist, or an engine error.
    ///
    /// # Cancel safety
    /// Not atomic: a cancelled upload may have unpacked part of the archive.
    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError>;

    /// A tar archive of `path`, at most `limit` bytes (untrusted: parse, never unpack).
    ///
    /// # Errors
    /// [`SandboxError::NotFound`], [`SandboxError::Archive`] when over `limit`, or an engine error.
    ///
    /// # Cancel safety
    /// Safe: nothing changes in the sandbox.
    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError>;

    /// Starts `argv` with stdin and stdout attached as a byte stream: the
    /// relay under `Ctx::serve`. Stderr is dropped.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Dropping the stream closes the attach; the process ends when its stdin closes.
    async fn open_stream(&self, argv: Vec<String>) -> Result<ExecStream, SandboxError>;

    /// A connection to `port` inside the sandbox through the engine's own
    /// port forwarding (Kubernetes' port-forward API), or `None` where the
    /// engine has none and `Ctx::serve` relays through [`Sandbox::open_stream`].
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// Dropping the stream closes the connection.
    async fn connect_port(&self, _port: u16) -> Result<Option<PortStream>, SandboxError> {
        Ok(None)
    }

    /// What the engine says about the sandbox now (see [`SandboxState`]).
    /// The attempt asks only after a command failed, to decide whose failure
    /// it was; the default cannot tell ([`SandboxState::Unknown`]), which
    /// leaves the blame as the command's result says.
    ///
    /// # Cancel safety
    /// Safe: it only reads.
    async fn state(&self) -> SandboxState {
        SandboxState::Unknown
    }

    /// Removes the sandbox and everything in it. Idempotent.
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails.
    ///
    /// # Cancel safety
    /// A cancelled destroy may leave the sandbox, which the run's end sweep removes.
    async fn destroy(&self) -> Result<(), SandboxError>;
}

/// A byte stream to a port inside the sandbox (see [`Sandbox::connect_port`]).
pub type PortStream = std::pin::Pin<Box<dyn PortIo>>;

/// What a [`PortStream`] is: both directions of a connection.
pub trait PortIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send> PortIo for T {}

/// A process in the sandbox with its stdin and stdout attached.
pub struct ExecStream {
    /// Writes to the process's stdin.
    pub input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    /// The process's stdout.
    pub output: futures_util::stream::BoxStream<'static, Result<Bytes, SandboxError>>,
}

impl fmt::Debug for ExecStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExecStream")
    }
}
