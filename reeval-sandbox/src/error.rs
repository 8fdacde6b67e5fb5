//! What a sandbox or its engine failed at: [`SandboxError`].

use std::fmt;

use crate::Lost;

/// A boxed cause, kept as an error's `source`.
pub type Cause = Box<dyn std::error::Error + Send + Sync>;

/// A failure of the sandbox or its engine. Always an infra error, except a
/// missing file, which a check may expect, and a sandbox no node has room
/// for, the eval's configuration fault (see `outcome::classify`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The engine did not answer.
    #[error("failed to reach {engine}: {message}")]
    EngineUnreachable {
        /// Which engine, as a phrase (`the Docker engine`, `the Kubernetes API server`).
        engine: String,
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
    /// No node of the cluster has room for the sandbox: none could ever fit
    /// what it requests, or none had room within the wait for it. The eval's
    /// (or task's) configuration fault, never retried.
    #[error("failed to place the sandbox: {message}")]
    NoRoom {
        /// What it requests and why no node takes it (`no node can fit 2 CPUs / 4 GiB: …`).
        message: String,
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
            message: with_causes(&err),
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

/// `err`'s words and those of the errors under it that it does not already
/// say (a client's "client error (SendRequest)" says nothing of the
/// connection that closed under it).
fn with_causes(err: &(dyn std::error::Error + 'static)) -> String {
    let mut message = err.to_string();
    for cause in std::iter::successors(err.source(), |e| e.source()) {
        let words = cause.to_string();
        if !message.contains(&words) {
            message.push_str(": ");
            message.push_str(&words);
        }
    }
    message
}
