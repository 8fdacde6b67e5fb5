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
//! What may depend on what: this crate sits below reeval-core and depends
//! only on reeval-gateway (the relay's report and the egress log a gateway
//! stream carries) among reeval's crates, so the compiler refuses an import of
//! an eval, a turn, a record, the runner, a reporter, the judge, compare or
//! replay. reeval-core re-exports it at `reeval_core::sandbox` and its
//! [`exec`] module at `reeval_core::exec`. Code above it (the attempt, the
//! runner's pool and preflight) sees the traits and [`BackendConfig`];
//! `archive.rs` and `shell_exec.rs` (the exec protocol: pid files, timeouts,
//! the kill of a process tree, bounded capture) are shared by the backends
//! that run commands through a shell. A backend is one folder (`docker/`,
//! `kubernetes/`, with its settings: [`KubernetesConfig`] is
//! `kubernetes/config.rs`, read whether or not the backend is built), one
//! arm of [`BackendConfig`] and a feature (docs/engines.md walks through
//! adding one). The types a backend is given are defined here: [`ImageSpec`]
//! and [`Image`] (`image_spec.rs`; the environment re-exports them), the exec
//! types ([`exec::Command`], [`exec::ExecOutput`], bounded capture) and
//! [`Cause`]. Docker's image building (`docker/image.rs`) and its setup
//! cache's storage on the engine (`docker/setup_cache.rs`) are in its folder;
//! the setup cache's key and quiescence, which read the eval's environment,
//! stay in reeval-core (`setup_key.rs`, `setup_cache.rs`).
//!
//! Files: `backend.rs` (the [`Backend`] trait and what it is given and
//! answers), `sandbox.rs` (the [`Sandbox`] trait, [`ExecRequest`],
//! [`Signal`]), `gateway.rs` (the network a sandbox gets, a gateway beside a
//! sandbox and the attempt's offer), `limits.rs` ([`Limits`]), `needs.rs`
//! (what a run asks of a backend before it starts, and the answer),
//! `error.rs` ([`SandboxError`]), `file_to_write.rs` ([`FileToWrite`]: a
//! file any layer writes into a sandbox, the one shape the tars are built from). No file imports one that imports it back
//! (`scripts/import_cycles.py`, in CI).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod archive;
mod backend_config;
pub mod docker;
pub mod exclude;
pub mod exec;
#[cfg(any(test, feature = "test-util"))]
pub mod fake;
mod file_to_write;
pub(crate) mod gateway_stream;
mod handle;
mod image_spec;
pub mod kubernetes;
mod launch;
mod limits;
pub mod mount;
mod named;
mod needs;
pub mod service;
pub(crate) mod shell_exec;
mod state;

mod backend;
mod error;
mod gateway;
mod sandbox;

pub use backend::{
    Backend, Capabilities, Capacity, Connected, EngineInfo, FoundSetup, HELPER_TOOLS, HelperTool,
    ReadyImage, SandboxSpec, Sweep,
};
pub use backend_config::BackendConfig;
pub use docker::DockerBackend;
pub use error::{Cause, SandboxError};
pub use file_to_write::FileToWrite;
pub use gateway::{GatewayContainer, GatewayOffer, GatewayRequest, NetworkSpec};
pub use handle::{AgentUser, READ_LIMIT, SandboxHandle, TreeArchiver};
pub use image_spec::{Image, ImageSpec};
pub use kubernetes::{GatewayAddress, KubernetesConfig};
pub use launch::{LaunchOutput, LaunchRequest, LaunchedProcess, ProcessLauncher};
pub use limits::Limits;
pub use mount::{LABEL_VOLUME, Mount, MountSource};
pub use needs::{CellNeeds, Preflight, RunNeeds};
pub use sandbox::{
    ExecRequest, ExecStream, PortIo, PortStream, ProcessGroup, Sandbox, Signal, StdoutSink,
    settled_state,
};
pub use service::{Condition, Healthcheck, LABEL_SERVICE, Service, ServiceStart};
pub use state::{Lost, SandboxState};

/// Label on every container of a run: the run id. The `dev.reeval.*` label
/// namespace is reserved for reeval: do not set such labels yourself.
pub const LABEL_RUN: &str = "dev.reeval.run";
/// Label on every container: the attempt id.
pub const LABEL_ATTEMPT: &str = "dev.reeval.attempt";
/// Label on every container: `<host>:<pid>:<process start ticks>` of the runner that owns it.
pub const LABEL_OWNER: &str = "dev.reeval.owner";
