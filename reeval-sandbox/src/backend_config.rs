//! Which backend a run's sandboxes run on ([`BackendConfig`], one arm per
//! backend) and the one way to connect it into the run's engines
//! ([`BackendConfig::connect`]). The runner's pool and preflight see only
//! this, the traits and what a run asks of a backend before anything starts
//! (`needs.rs`): this file is the one place that matches on a backend.

use std::sync::Arc;

use super::docker::{self, EngineSpec};
use super::kubernetes::{self, KubernetesConfig};
use super::{Backend, Connected};

/// Which backend a run's sandboxes run on, with its settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum BackendConfig {
    /// Docker-API engines: with no `engines`, the one `DOCKER_HOST` names (the
    /// local socket by default; `tcp://`, `https://` or `ssh://` for a remote
    /// one; Podman through its Docker API); else a pool of those engines.
    Docker {
        /// The pool's engines (`REEVAL_ENGINES`); empty: the one of `DOCKER_HOST`.
        engines: Vec<EngineSpec>,
    },
    /// A Kubernetes cluster, a pod per attempt (needs the feature `kubernetes`).
    Kubernetes(Box<KubernetesConfig>),
    /// A backend already made: the in-memory fake of tests
    /// (`sandbox::fake`, feature `test-util`), or an embedder's own.
    Given(Arc<dyn Backend>),
}

impl Default for BackendConfig {
    /// The Docker engine `DOCKER_HOST` names.
    fn default() -> Self {
        BackendConfig::Docker { engines: Vec::new() }
    }
}

impl BackendConfig {
    /// The backends a run chooses by name (`REEVAL_BACKEND`, `backend` in
    /// `reeval.toml`; the settings check the name against these): the arms
    /// above but `Given`.
    pub const NAMES: &'static [&'static str] = &["docker", "kubernetes"];

    /// Connects to the engines of this backend. Each engine's errors name it
    /// (see [`SandboxError::on`](super::SandboxError::on)).
    ///
    /// # Errors
    /// One message per engine that cannot be used or does not answer, each a
    /// whole sentence naming what to fix (preflight lists them).
    ///
    /// # Cancel safety
    /// Safe: nothing is created.
    pub async fn connect(&self) -> Result<Vec<Connected>, Vec<String>> {
        let engines = match self {
            BackendConfig::Docker { engines } => docker::engines::connect(engines).await?,
            BackendConfig::Kubernetes(config) => kubernetes::connect(config).await?,
            BackendConfig::Given(backend) => vec![Connected {
                name: backend.name().to_string(),
                backend: backend.clone(),
                slots: None,
            }],
        };
        Ok(engines.into_iter().map(super::named::named).collect())
    }
}
