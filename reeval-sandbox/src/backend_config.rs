//! Which backend a run's sandboxes run on ([`BackendConfig`], one arm per
//! backend) and the one way to connect it into the run's engines
//! ([`BackendConfig::connect`]), and what a run asks of a backend before
//! anything starts ([`RunNeeds`], which [`Backend::check_run`] answers with a
//! [`Preflight`]). The runner's pool and preflight see only these and the
//! traits: this file is the one place that matches on a backend.

use std::collections::BTreeMap;
use std::sync::Arc;

use secrecy::SecretString;

use super::docker::{self, EngineSpec};
use super::kubernetes::{self, KubernetesConfig};
use super::{Backend, ImageSpec};

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

impl BackendConfig {
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

/// What a run asks of its engines, for their own preflight ([`Backend::check_run`]).
#[derive(Debug, Clone, Default)]
pub struct RunNeeds {
    /// Every cell (an eval × a harness) that will run.
    pub cells: Vec<CellNeeds>,
}

/// What one cell's attempts ask of an engine.
#[derive(Debug, Clone)]
pub struct CellNeeds {
    /// The eval's name.
    pub eval: String,
    /// The images its attempts may use (the eval's, else its harness's).
    pub images: Vec<ImageSpec>,
    /// Whether its attempts need a way out through the egress gateway.
    pub egress: bool,
    /// The real values of the secrets its gateway swaps in, by the
    /// gateway's variable (`REEVAL_GW_SECRET_<NAME>`), for engines that run
    /// the gateway away from this process.
    pub brokered: BTreeMap<String, SecretString>,
}

/// What a backend's own preflight found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// Misses that stop the run, each a whole sentence naming what to fix.
    pub missing: Vec<String>,
    /// Things a user should know, that do not stop it.
    pub warnings: Vec<String>,
}
