//! Outcomes, and the one place errors are classified into them.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::sandbox::SandboxError;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every check and verdict passed.
    Pass,
    /// The agent's work was judged and found wanting.
    Fail,
    /// The platform failed the attempt; not counted in pass rates, retried.
    InfraError,
}

/// Why an attempt did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A matcher failed, the eval panicked or returned an error of its own.
    Assertion,
    /// A verdict was below its threshold, or the judge could not give one.
    Judge,
    /// The budget ran out while the agent had been working.
    Timeout,
    /// The agent failed on its own.
    Agent,
    /// The platform failed.
    Infra,
    /// Something required was missing; the run stops.
    Config,
}

impl Kind {
    /// The kind's name as records and summaries spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Assertion => "assertion",
            Kind::Judge => "judge",
            Kind::Timeout => "timeout",
            Kind::Agent => "agent",
            Kind::Infra => "infra",
            Kind::Config => "config",
        }
    }
}

/// The outcome and kind for an error that ended an attempt.
pub fn classify(err: &Error) -> (Outcome, Kind) {
    match err {
        Error::Assertion(_) | Error::Other(_) => (Outcome::Fail, Kind::Assertion),
        Error::Judge { .. } => (Outcome::Fail, Kind::Judge),
        Error::Timeout { .. } => (Outcome::Fail, Kind::Timeout),
        Error::Agent { .. } => (Outcome::Fail, Kind::Agent),
        // A missing file is something a check may legitimately find: the agent did not make it.
        Error::Sandbox(SandboxError::NotFound { .. }) => (Outcome::Fail, Kind::Assertion),
        Error::Infra { .. } | Error::Sandbox(_) => (Outcome::InfraError, Kind::Infra),
        Error::Config(_) => (Outcome::InfraError, Kind::Config),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AssertionFailure;
    use std::time::Duration;

    #[test]
    fn each_error_maps_to_its_outcome() {
        let cases = [
            (Error::Assertion(AssertionFailure { message: "x".into(), location: None }), Outcome::Fail, Kind::Assertion),
            (Error::other("mine"), Outcome::Fail, Kind::Assertion),
            (Error::Judge { message: "low".into() }, Outcome::Fail, Kind::Judge),
            (Error::Timeout { elapsed: Duration::from_secs(1) }, Outcome::Fail, Kind::Timeout),
            (Error::Agent { harness: "h".into(), message: "m".into() }, Outcome::Fail, Kind::Agent),
            (Error::infra("start", "x"), Outcome::InfraError, Kind::Infra),
            (Error::Sandbox(SandboxError::NotFound { path: "p".into() }), Outcome::Fail, Kind::Assertion),
            (Error::Sandbox(SandboxError::EngineUnreachable { message: "m".into() }), Outcome::InfraError, Kind::Infra),
            (Error::Config("c".into()), Outcome::InfraError, Kind::Config),
        ];
        for (err, outcome, kind) in cases {
            assert_eq!(classify(&err), (outcome, kind), "{err}");
        }
    }
}
