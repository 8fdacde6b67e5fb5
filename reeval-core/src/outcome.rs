//! Outcomes, and the one place errors are classified into them. The
//! outcome itself (with its fail kind) is record data: `reeval_record::outcome`.

use std::time::Duration;

use crate::error::Error;
use crate::error::harness_error;
use crate::phase::Phase;
use crate::sandbox::SandboxError;
use crate::turn::ErrorClass;
use crate::turn::{TurnReport, TurnStatus};

pub use reeval_record::outcome::{FailKind, Kind, Outcome};

/// The outcome for an error that ended an attempt, from the error and the
/// phase it happened in. The one place blame is decided.
pub fn classify(err: &Error) -> Outcome {
    let phase = err.phase();
    match err.root() {
        Error::Assertion(_) | Error::Other(_) => Outcome::Fail(FailKind::Assertion),
        Error::Judge { .. } => Outcome::Fail(FailKind::Judge),
        Error::Timeout { .. } => Outcome::Fail(FailKind::Timeout),
        Error::Agent { .. } => Outcome::Fail(FailKind::Agent),
        // A missing file, or one that is not a regular file or too large to read,
        // is something a check may legitimately find about the agent's work; while
        // the platform prepares the sandbox or tears it down, it is the platform's.
        Error::Sandbox(SandboxError::NotFound { .. } | SandboxError::Archive { .. }) => match phase
        {
            Some(p) if p.prepares() || p == Phase::Teardown => Outcome::InfraError,
            _ => Outcome::Fail(FailKind::Assertion),
        },
        // A sandbox no node can take (or had room for within its wait) is the
        // eval's configuration on this cluster: another try fails the same way.
        Error::Sandbox(SandboxError::NoRoom { .. }) | Error::Config(_) => Outcome::Config,
        Error::Infra { .. } | Error::Sandbox(_) => Outcome::InfraError,
        Error::InPhase { .. } => unreachable!("root() unwraps phase tags"),
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

/// How an attempt concluded: its outcome, the message its record shows, and
/// the error that caused it (for the retry policy).
#[derive(Debug)]
pub(crate) struct Conclusion {
    pub(crate) outcome: Outcome,
    pub(crate) message: Option<String>,
    pub(crate) cause: Option<Error>,
}

/// The attempt's conclusion from how its eval ended and the failures that
/// did not stop it (verdicts under their threshold).
pub(crate) fn conclude(
    ended: Ended,
    soft_failures: &mut Vec<Error>,
    budget: Duration,
) -> Conclusion {
    let from = |e: Error| Conclusion {
        outcome: classify(&e),
        message: Some(e.to_string()),
        cause: Some(e),
    };
    match ended {
        Ended::Returned(Ok(Ok(()))) => {
            if soft_failures.is_empty() {
                Conclusion { outcome: Outcome::Pass, message: None, cause: None }
            } else {
                from(soft_failures.remove(0))
            }
        }
        Ended::Returned(Ok(Err(e))) => from(e),
        Ended::Returned(Err(panic)) => Conclusion {
            outcome: Outcome::Fail(FailKind::Assertion),
            message: Some(format!("the eval panicked: {panic}")),
            cause: None,
        },
        // The platform's failure stays the platform's (a harness that never produced an event).
        Ended::BudgetRanOut(Some(Ok(Err(e)))) if classify(&e).is_infra() => from(e),
        Ended::BudgetRanOut(_) => from(Error::Timeout { elapsed: budget }),
        Ended::DeadlinePassed => from(Error::infra(
            "finish the attempt",
            "its deadline passed (a wedged sandbox or setup?)",
        )),
        Ended::Interrupted => from(Error::infra("finish", "the run was interrupted")),
    }
}

/// What a turn that ended with `status` means for the attempt. `report` is
/// `None` when the turn was stopped and its harness never reported.
pub fn turn_error(
    harness: &str,
    status: TurnStatus,
    report: Option<&TurnReport>,
    elapsed: Duration,
    spent: Duration,
) -> Option<Error> {
    let never_started = || {
        Error::infra(
            format!("run harness {harness}"),
            format!("the harness produced no event in {:.1}s", elapsed.as_secs_f64()),
        )
    };
    match (status, report) {
        (TurnStatus::Completed | TurnStatus::TimedOut, _) => None,
        (TurnStatus::Interrupted, _) => {
            Some(Error::infra("finish the turn", "the run was interrupted"))
        }
        // The agent never had a fair try: the platform's failure, not a timeout.
        (TurnStatus::Aborted, Some(r)) if r.events == 0 => Some(never_started()),
        (TurnStatus::Aborted, _) => Some(Error::Timeout { elapsed: spent }),
        (TurnStatus::Failed, report) => {
            let report = report.cloned().unwrap_or_default();
            let message =
                report.error.clone().unwrap_or_else(|| "the agent reported a failure".into());
            let class = report.error_class.unwrap_or(ErrorClass::Agent);
            Some(match class {
                // A CLI that failed before its first event (not found, crashed) never started.
                ErrorClass::Agent if report.events == 0 => Error::infra(
                    format!("run harness {harness}"),
                    format!("the harness failed before its first event: {message}"),
                ),
                class => harness_error(class, harness, message),
            })
        }
    }
}

/// Whether an attempt is tried again with a fresh sandbox, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Try again: the platform failed and may not fail the next time.
    Again,
    /// Keep this try: a pass, a fail (a sample, never retried), a config error.
    Final,
    /// The platform failed in a way another try cannot mend (a missing image).
    Hopeless,
    /// The tries allowed are spent.
    Exhausted,
    /// The run is being stopped.
    Stopping,
}

/// The one retry policy: from the attempt's outcome, the error that caused
/// it, the try it was (1-based), the retries allowed and whether the run is stopping.
pub fn retry(
    outcome: Outcome,
    cause: Option<&Error>,
    try_: u32,
    retries: u32,
    stopping: bool,
) -> Retry {
    if outcome != Outcome::InfraError {
        return Retry::Final;
    }
    if stopping {
        return Retry::Stopping;
    }
    // An image that is not on the engine and cannot be pulled will not appear by itself.
    if matches!(cause.map(Error::root), Some(Error::Sandbox(SandboxError::ImageMissing { .. }))) {
        return Retry::Hopeless;
    }
    if try_ > retries { Retry::Exhausted } else { Retry::Again }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::AssertionFailure;
    use crate::phase::Phase;

    const ASSERTION: Outcome = Outcome::Fail(FailKind::Assertion);

    #[test]
    fn classification_by_error_and_phase() {
        let not_found = || Error::Sandbox(SandboxError::NotFound { path: "p".into() });
        let archive = || Error::Sandbox(SandboxError::Archive { message: "too large".into() });
        let cases: Vec<(Error, Option<Phase>, Outcome)> = vec![
            (
                Error::Assertion(AssertionFailure { message: "x".into(), location: None }),
                None,
                ASSERTION,
            ),
            (Error::other("mine"), None, ASSERTION),
            (
                Error::Judge { message: "low".into() },
                Some(Phase::Judge),
                Outcome::Fail(FailKind::Judge),
            ),
            (
                Error::Timeout { elapsed: Duration::from_secs(1) },
                Some(Phase::Turn),
                Outcome::Fail(FailKind::Timeout),
            ),
            (
                Error::Agent { harness: "h".into(), message: "m".into() },
                Some(Phase::Turn),
                Outcome::Fail(FailKind::Agent),
            ),
            (Error::infra("start", "x"), Some(Phase::Container), Outcome::InfraError),
            (
                Error::Sandbox(SandboxError::EngineUnreachable {
                    engine: "e".into(),
                    message: "m".into(),
                }),
                None,
                Outcome::InfraError,
            ),
            // An exec whose outcome is unknown (Kubernetes' socket closed without a status).
            (
                Error::Sandbox(SandboxError::engine_says("run a command in pod p", "no status")),
                Some(Phase::Check),
                Outcome::InfraError,
            ),
            (Error::Config("c".into()), Some(Phase::Judge), Outcome::Config),
            // A pod no node can take is the eval's configuration fault, wherever it shows.
            (
                Error::Sandbox(SandboxError::NoRoom { message: "no node can fit 4 CPUs".into() }),
                Some(Phase::Container),
                Outcome::Config,
            ),
            // What a check finds about the agent's work is the agent's...
            (not_found(), None, ASSERTION),
            (not_found(), Some(Phase::Check), ASSERTION),
            (archive(), Some(Phase::Capture), ASSERTION),
            // ...while the platform prepares the workspace or collects it, it is the platform's.
            (archive(), Some(Phase::Setup), Outcome::InfraError),
            (archive(), Some(Phase::Snapshot), Outcome::InfraError),
            (not_found(), Some(Phase::Workspace), Outcome::InfraError),
            (archive(), Some(Phase::Teardown), Outcome::InfraError),
        ];
        for (err, phase, outcome) in cases {
            let shown = err.to_string();
            let err = match phase {
                Some(p) => err.in_phase(p),
                None => err,
            };
            assert_eq!(err.to_string(), shown, "a phase tag does not change the message");
            assert_eq!(classify(&err), outcome, "{shown} in {phase:?}");
        }
    }

    #[test]
    fn the_first_phase_tag_wins() {
        let e = Error::infra("x", "y").in_phase(Phase::Setup).in_phase(Phase::Turn);
        assert_eq!(e.phase(), Some(Phase::Setup));
    }

    #[test]
    fn retry_decisions() {
        let infra = Error::infra("start", "x");
        let missing =
            Error::Sandbox(SandboxError::ImageMissing { image: "i".into(), hint: "h".into() });
        assert_eq!(retry(Outcome::InfraError, Some(&infra), 1, 2, false), Retry::Again);
        assert_eq!(retry(Outcome::InfraError, Some(&infra), 2, 2, false), Retry::Again);
        assert_eq!(retry(Outcome::InfraError, Some(&infra), 3, 2, false), Retry::Exhausted);
        assert_eq!(retry(Outcome::InfraError, Some(&infra), 1, 2, true), Retry::Stopping);
        assert_eq!(
            retry(Outcome::InfraError, Some(&missing.in_phase(Phase::Image)), 1, 2, false),
            Retry::Hopeless
        );
        assert_eq!(retry(Outcome::Config, None, 1, 2, false), Retry::Final);
        let no_room = Error::Sandbox(SandboxError::NoRoom { message: "m".into() });
        assert_eq!(
            retry(classify(&no_room), Some(&no_room), 1, 2, false),
            Retry::Final,
            "a pod no node can take is never retried"
        );
        assert_eq!(
            retry(Outcome::Fail(FailKind::Timeout), None, 1, 2, false),
            Retry::Final,
            "fails are samples"
        );
        assert_eq!(retry(Outcome::Pass, None, 1, 2, false), Retry::Final);
    }

    #[test]
    fn turns_that_never_started_are_the_platforms_failure() {
        let secs = Duration::from_secs(2);
        let kind = |e: Option<Error>| classify(&e.expect("an error")).kind();
        let silent = TurnReport {
            status: TurnStatus::Failed,
            events: 0,
            error: Some("exec: claude: not found".into()),
            ..TurnReport::default()
        };
        assert_eq!(
            kind(turn_error("claude-code", TurnStatus::Failed, Some(&silent), secs, secs)),
            Some(Kind::Infra)
        );
        let auth = TurnReport { error_class: Some(ErrorClass::Config), ..silent.clone() };
        assert_eq!(
            kind(turn_error("c", TurnStatus::Failed, Some(&auth), secs, secs)),
            Some(Kind::Config)
        );
        let agent = TurnReport { events: 3, ..silent.clone() };
        assert_eq!(
            kind(turn_error("c", TurnStatus::Failed, Some(&agent), secs, secs)),
            Some(Kind::Agent)
        );
        // Stopped: no events at all is infra; some events, or no report from an in-process agent, is a timeout.
        assert_eq!(
            kind(turn_error("c", TurnStatus::Aborted, Some(&silent), secs, secs)),
            Some(Kind::Infra)
        );
        assert_eq!(
            kind(turn_error("c", TurnStatus::Aborted, Some(&agent), secs, secs)),
            Some(Kind::Timeout)
        );
        assert_eq!(
            kind(turn_error("openai", TurnStatus::Aborted, None, secs, secs)),
            Some(Kind::Timeout)
        );
        assert!(turn_error("c", TurnStatus::TimedOut, None, secs, secs).is_none());
        assert_eq!(
            kind(turn_error("c", TurnStatus::Interrupted, Some(&agent), secs, secs)),
            Some(Kind::Infra),
            "an interrupted turn is nobody's fail"
        );
    }
}
