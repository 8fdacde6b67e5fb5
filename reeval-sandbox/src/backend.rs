//! The [`Backend`] trait (an engine: ping, capabilities, images, create,
//! sweep, its setup cache, its gateway) and what a backend is given and answers.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::{
    GatewayContainer, GatewayOffer, GatewayRequest, ImageSpec, Limits, Mount, NetworkSpec,
    Preflight, RunNeeds, Sandbox, SandboxError, ServiceStart,
};

/// What a sandbox is created from.
#[derive(Debug, Clone, Default)]
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
    /// Whether the main process reads the sandbox's own stdin, written
    /// through [`Sandbox::attach_main`](crate::Sandbox::attach_main) (only
    /// where [`Capabilities::main_stdin`]; elsewhere its stdin is empty).
    pub main_stdin: bool,
    /// Services started beside it, in its network namespace (see [`Service`](crate::Service)).
    pub services: Vec<ServiceStart>,
    /// Its mounts (see [`Mount`]): volumes it shares by name with its services, host paths.
    pub mounts: Vec<Mount>,
    /// The image's own `USER` ([`ReadyImage::user`]; `None`: root, or not
    /// known): what a command that names no user runs as. Where it is not
    /// root, the sandbox is still started as root, so that a command run as
    /// root has root's capabilities (under `no-new-privileges` an exec as root
    /// in a container started as another user has none).
    pub user: Option<String>,
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
    /// The most one sandbox can be given there, when the engine says.
    pub capacity: Option<Capacity>,
}

/// The most one sandbox can be given on an engine: its host's CPUs and
/// memory (a cluster's largest node's allocatable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capacity {
    /// CPUs, in billionths.
    pub nano_cpus: i64,
    /// Memory in bytes.
    pub memory_bytes: i64,
}

impl Capacity {
    /// What of `limits` this capacity cannot give (`4 CPUs`, `8 GiB of memory`), if anything.
    pub fn lacks(&self, limits: &Limits) -> Vec<String> {
        let mut out = Vec::new();
        if limits.nano_cpus > self.nano_cpus {
            out.push(format!(
                "{} CPUs (it has {})",
                limits.nano_cpus as f64 / 1e9,
                self.nano_cpus as f64 / 1e9
            ));
        }
        if limits.memory_bytes > self.memory_bytes {
            out.push(format!(
                "{} of memory (it has {})",
                mib(limits.memory_bytes),
                mib(self.memory_bytes)
            ));
        }
        out
    }
}

/// `4096 MiB`.
fn mib(bytes: i64) -> String {
    format!("{} MiB", bytes >> 20)
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
    /// Whether a sandbox's main process can be given the sandbox's own stdin
    /// ([`SandboxSpec::main_stdin`], [`Sandbox::attach_main`](crate::Sandbox::attach_main)).
    pub main_stdin: bool,
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
    /// The image's own `WORKDIR` (`None`: it sets none, or the backend cannot
    /// say before a sandbox runs it, as for an image left to a cluster to pull).
    pub workdir: Option<String>,
    /// The image's own `USER` (`None`: root, or not known).
    pub user: Option<String>,
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

    /// Whether this engine can start these services beside a sandbox
    /// ([`Service`](crate::Service)); `Err` says why not (all of it), and
    /// preflight refuses an eval that has them.
    fn runs_services(&self, _services: &[crate::Service]) -> Result<(), String> {
        Err(format!("the {} backend cannot start services beside a sandbox", self.name()))
    }

    /// Whether this engine can give a sandbox (or its services) these
    /// [`Mount`]s; `Err` says why not, and preflight refuses an eval that has
    /// them. The default: no mounts at all.
    fn mounts(&self, mounts: &[Mount]) -> Result<(), String> {
        match mounts.first() {
            None => Ok(()),
            Some(m) => Err(format!(
                "the {} backend cannot mount volumes or host paths into a sandbox ({})",
                self.name(),
                m.describe()
            )),
        }
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

/// One engine of a run, connected.
#[derive(Debug)]
pub struct Connected {
    /// Where it is, as records name it (`unix:///var/run/docker.sock`).
    pub name: String,
    /// The engine.
    pub backend: Arc<dyn Backend>,
    /// Attempts it runs at once; `None`: as many as the run's threads.
    pub slots: Option<usize>,
}
