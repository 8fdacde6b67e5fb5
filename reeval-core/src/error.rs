//! The errors an eval can end with. [`crate::outcome::classify`] is the one
//! place that maps them to outcomes.

use std::time::Duration;

use crate::harness::HarnessError;
use crate::phase::Phase;
use crate::sandbox::SandboxError;
use crate::turn::ErrorClass;

use crate::sandbox::Cause;

/// `Result` with reeval's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A failed matcher: what was expected, what was there, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssertionFailure {
    /// The full, multi-line message (expected, actual, output tail).
    pub message: String,
    /// `file:line` of the `expect(..)` call.
    pub location: Option<String>,
}

impl std::fmt::Display for AssertionFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.location {
            Some(loc) => write!(f, "{}\n  at {loc}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Why an attempt ended early.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A matcher failed or the eval panicked.
    #[error("{0}")]
    Assertion(AssertionFailure),
    /// A verdict was below its threshold, or the judge could not give one.
    #[error("judge: {message}")]
    Judge {
        /// The verdict's reasoning or the judge's failure.
        message: String,
    },
    /// The attempt's budget ran out.
    #[error("timed out after {:.1}s of the eval's own work", elapsed.as_secs_f64())]
    Timeout {
        /// Budget spent.
        elapsed: Duration,
    },
    /// The agent failed on its own (harness exited non-zero, reported an error).
    #[error("agent {harness} failed the task: {message}")]
    Agent {
        /// The harness name.
        harness: String,
        /// What the agent reported.
        message: String,
    },
    /// The platform failed the attempt (image, container, setup, engine, provider overload).
    #[error("failed to {action}: {message}")]
    Infra {
        /// What was being done, as "failed to …" reads.
        action: String,
        /// The cause, as the message shows it.
        message: String,
        /// The underlying error, when there is one (an I/O or HTTP error with its status).
        #[source]
        source: Option<Cause>,
    },
    /// The sandbox failed.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// Something is missing or invalid in the configuration.
    #[error("{0}")]
    Config(String),
    /// An error of the eval's own code (`?` on its own errors).
    #[error(transparent)]
    Other(Cause),
    /// An error tagged with the lifecycle phase it happened in; its message is the error's.
    #[error("{source}")]
    InPhase {
        /// The phase.
        phase: Phase,
        /// The error.
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    /// Wraps an error of the eval's own code; it fails the attempt like an assertion.
    pub fn other(err: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Error::Other(err.into())
    }

    /// A failed assertion that no matcher made: what the agent left is not what
    /// a step of the eval needs (a page nothing serves, a file that is not
    /// text), or the eval gave a matcher something invalid (a regex that does
    /// not compile). Fails the attempt as `assertion`, as a matcher would.
    pub fn assertion(message: impl Into<String>) -> Self {
        Error::Assertion(AssertionFailure { message: message.into(), location: None })
    }

    /// An infra error: "failed to {action}: {message}".
    pub fn infra(action: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Error::Infra { action: action.into(), message: message.to_string(), source: None }
    }

    /// An infra error that keeps `source` as its cause: "failed to {action}: {source}".
    pub fn infra_from(
        action: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Infra {
            action: action.into(),
            message: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// Tags the error with the phase it happened in; an error already tagged keeps its first phase.
    pub fn in_phase(self, phase: Phase) -> Self {
        match self {
            tagged @ Error::InPhase { .. } => tagged,
            other => Error::InPhase { phase, source: Box::new(other) },
        }
    }

    /// The phase the error happened in, when it happened in one.
    pub fn phase(&self) -> Option<Phase> {
        match self {
            Error::InPhase { phase, .. } => Some(*phase),
            _ => None,
        }
    }

    /// The error without its phase tag.
    pub fn root(&self) -> &Error {
        match self {
            Error::InPhase { source, .. } => source.root(),
            other => other,
        }
    }
}

impl From<HarnessError> for Error {
    fn from(err: HarnessError) -> Self {
        match err {
            HarnessError::Sandbox(e) => Error::Sandbox(e),
            HarnessError::Failed { harness, message, class } => {
                harness_error(class, &harness, message)
            }
        }
    }
}

/// The error for a harness failure of `class`.
pub fn harness_error(class: ErrorClass, harness: &str, message: String) -> Error {
    match class {
        ErrorClass::Agent => Error::Agent { harness: harness.to_string(), message },
        ErrorClass::Infra => Error::infra(format!("run harness {harness}"), message),
        ErrorClass::Config => Error::Config(format!("failed to run harness {harness}: {message}")),
    }
}
