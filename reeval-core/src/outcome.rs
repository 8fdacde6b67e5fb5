//! Outcomes, and the one place errors are classified into them.

use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::error::Error;
use crate::harness::ErrorClass;
use crate::sandbox::SandboxError;
use crate::turn::{TurnReport, TurnStatus};

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
        // A missing file, or one that is not a regular file or too large to read,
        // is something a check may legitimately find about the agent's work.
        Error::Sandbox(SandboxError::NotFound { .. } | SandboxError::Archive { .. }) => (Outcome::Fail, Kind::Assertion),
        Error::Infra { .. } | Error::Sandbox(_) => (Outcome::InfraError, Kind::Infra),
        Error::Config(_) => (Outcome::InfraError, Kind::Config),
    }
}

/// How an eval's future ended, as the attempt saw it.
#[derive(Debug)]
pub(crate) enum Ended {
    /// It returned (`Err` holds a panic's message).
    Returned(Result<crate::Result<()>, String>),
    /// The budget ran out; what it returned within the grace, if anything.
    BudgetRanOut(Option<Result<crate::Result<()>, String>>),
    /// The whole-attempt deadline passed.
    DeadlinePassed,
    /// The run was interrupted (Ctrl-C, SIGTERM).
    Interrupted,
}

/// The attempt's outcome, kind and message from how its eval ended and the
/// failures that did not stop it (verdicts under their threshold).
pub(crate) fn conclude(ended: Ended, soft_failures: &[Error], budget: Duration) -> (Outcome, Option<Kind>, Option<String>) {
    let from = |e: &Error| {
        let (o, k) = classify(e);
        (o, Some(k), Some(e.to_string()))
    };
    match ended {
        Ended::Returned(Ok(Ok(()))) => soft_failures.first().map(from).unwrap_or((Outcome::Pass, None, None)),
        Ended::Returned(Ok(Err(e))) => from(&e),
        Ended::Returned(Err(panic)) => (Outcome::Fail, Some(Kind::Assertion), Some(format!("the eval panicked: {panic}"))),
        // The platform's failure stays the platform's (a harness that never produced an event).
        Ended::BudgetRanOut(Some(Ok(Err(e)))) if classify(&e).0 == Outcome::InfraError => from(&e),
        Ended::BudgetRanOut(_) => from(&Error::Timeout { elapsed: budget }),
        Ended::DeadlinePassed => from(&Error::infra("finish the attempt", "its deadline passed (a wedged sandbox or setup?)")),
        Ended::Interrupted => from(&Error::infra("finish", "the run was interrupted")),
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

/// What a turn that ended with `status` means for the attempt. `report` is
/// `None` when the turn was stopped and its harness never reported.
pub fn turn_error(harness: &str, status: TurnStatus, report: Option<&TurnReport>, elapsed: Duration, spent: Duration) -> Option<Error> {
    let never_started = || Error::infra(format!("run harness {harness}"), format!("the harness produced no event in {:.1}s", elapsed.as_secs_f64()));
    match (status, report) {
        (TurnStatus::Completed | TurnStatus::TimedOut, _) => None,
        // The agent never had a fair try: the platform's failure, not a timeout.
        (TurnStatus::Aborted, Some(r)) if r.events == 0 => Some(never_started()),
        (TurnStatus::Aborted, _) => Some(Error::Timeout { elapsed: spent }),
        (TurnStatus::Failed, report) => {
            let report = report.cloned().unwrap_or_default();
            let message = report.error.clone().unwrap_or_else(|| "the agent reported a failure".into());
            let class = report.error_class.unwrap_or(ErrorClass::Agent);
            Some(match class {
                // A CLI that failed before its first event (not found, crashed) never started.
                ErrorClass::Agent if report.events == 0 => {
                    Error::infra(format!("run harness {harness}"), format!("the harness failed before its first event: {message}"))
                }
                class => harness_error(class, harness, message),
            })
        }
    }
}

/// Whether a final record is retried with a fresh sandbox: infra errors are, config errors and fails never.
pub fn is_retried(outcome: Outcome, kind: Option<Kind>) -> bool {
    outcome == Outcome::InfraError && kind != Some(Kind::Config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AssertionFailure;

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

    #[test]
    fn turns_that_never_started_are_the_platforms_failure() {
        let secs = Duration::from_secs(2);
        let silent = TurnReport { status: TurnStatus::Failed, events: 0, error: Some("exec: claude: not found".into()), ..TurnReport::default() };
        let e = turn_error("claude-code", TurnStatus::Failed, Some(&silent), secs, secs).unwrap();
        assert_eq!(classify(&e), (Outcome::InfraError, Kind::Infra), "{e}");
        let auth = TurnReport { error_class: Some(ErrorClass::Config), ..silent.clone() };
        assert_eq!(classify(&turn_error("c", TurnStatus::Failed, Some(&auth), secs, secs).unwrap()).1, Kind::Config);
        let agent = TurnReport { events: 3, ..silent.clone() };
        assert_eq!(classify(&turn_error("c", TurnStatus::Failed, Some(&agent), secs, secs).unwrap()).1, Kind::Agent);
        // Stopped: no events at all is infra; some events, or no report from an in-process agent, is a timeout.
        assert_eq!(classify(&turn_error("c", TurnStatus::Aborted, Some(&silent), secs, secs).unwrap()).1, Kind::Infra);
        assert_eq!(classify(&turn_error("c", TurnStatus::Aborted, Some(&agent), secs, secs).unwrap()).1, Kind::Timeout);
        assert_eq!(classify(&turn_error("openai", TurnStatus::Aborted, None, secs, secs).unwrap()).1, Kind::Timeout);
        assert!(turn_error("c", TurnStatus::TimedOut, None, secs, secs).is_none());
    }
}
