//! Outcomes, and the one place errors are classified into them.

use serde::{Deserialize, Serialize};

use std::time::Duration;

use crate::error::Error;
use crate::harness::ErrorClass;
use crate::phase::Phase;
use crate::sandbox::SandboxError;
use crate::turn::{TurnReport, TurnStatus};

/// How an attempt ended, with the kind of a fail: impossible pairs (a pass
/// with a kind, a fail without one) cannot be written down. In a record it is
/// two keys, `outcome` (`pass`, `fail`, `infra_error`) and `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "OutcomeRepr", into = "OutcomeRepr")]
pub enum Outcome {
    /// Every check and verdict passed.
    Pass,
    /// The agent's work was judged and found wanting.
    Fail(FailKind),
    /// The platform failed the attempt; not counted in pass rates, retried.
    InfraError,
    /// Something required was missing or rejected (a key, a credential): the
    /// run is misconfigured. Recorded as `infra_error` of kind `config`; never retried.
    Config,
}

/// Why a graded attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailKind {
    /// A matcher failed, the eval panicked or returned an error of its own.
    Assertion,
    /// A verdict was below its threshold, or the judge could not give one.
    Judge,
    /// The budget ran out while the agent had been working.
    Timeout,
    /// The agent failed on its own.
    Agent,
}

/// Why an attempt did not pass, as one flat name (the record's `kind`, the
/// summary's keys, JUnit's failure types).
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

impl From<FailKind> for Kind {
    fn from(kind: FailKind) -> Self {
        match kind {
            FailKind::Assertion => Kind::Assertion,
            FailKind::Judge => Kind::Judge,
            FailKind::Timeout => Kind::Timeout,
            FailKind::Agent => Kind::Agent,
        }
    }
}

impl Outcome {
    /// The record's `outcome` key: `pass`, `fail` or `infra_error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::InfraError | Outcome::Config => "infra_error",
        }
    }

    /// The record's `kind` key.
    pub fn kind(self) -> Option<Kind> {
        match self {
            Outcome::Pass => None,
            Outcome::Fail(kind) => Some(kind.into()),
            Outcome::InfraError => Some(Kind::Infra),
            Outcome::Config => Some(Kind::Config),
        }
    }

    /// Whether the attempt was graded and failed.
    pub fn is_fail(self) -> bool {
        matches!(self, Outcome::Fail(_))
    }

    /// Whether the platform or the configuration failed the attempt (not counted in pass rates).
    pub fn is_infra(self) -> bool {
        matches!(self, Outcome::InfraError | Outcome::Config)
    }
}

/// The two keys of a record, as written.
#[derive(Serialize, Deserialize)]
struct OutcomeRepr {
    outcome: OutcomeName,
    kind: Option<Kind>,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum OutcomeName {
    Pass,
    Fail,
    InfraError,
}

impl From<Outcome> for OutcomeRepr {
    fn from(o: Outcome) -> Self {
        let outcome = match o {
            Outcome::Pass => OutcomeName::Pass,
            Outcome::Fail(_) => OutcomeName::Fail,
            Outcome::InfraError | Outcome::Config => OutcomeName::InfraError,
        };
        OutcomeRepr { outcome, kind: o.kind() }
    }
}

impl TryFrom<OutcomeRepr> for Outcome {
    type Error = String;

    fn try_from(r: OutcomeRepr) -> Result<Self, String> {
        Ok(match (r.outcome, r.kind) {
            (OutcomeName::Pass, None) => Outcome::Pass,
            (OutcomeName::Fail, Some(Kind::Assertion)) => Outcome::Fail(FailKind::Assertion),
            (OutcomeName::Fail, Some(Kind::Judge)) => Outcome::Fail(FailKind::Judge),
            (OutcomeName::Fail, Some(Kind::Timeout)) => Outcome::Fail(FailKind::Timeout),
            (OutcomeName::Fail, Some(Kind::Agent)) => Outcome::Fail(FailKind::Agent),
            (OutcomeName::InfraError, Some(Kind::Infra)) => Outcome::InfraError,
            (OutcomeName::InfraError, Some(Kind::Config)) => Outcome::Config,
            (_, kind) => {
                return Err(format!(
                    "failed to read an outcome: kind {kind:?} does not go with it"
                ));
            }
        })
    }
}

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
        Error::Infra { .. } | Error::Sandbox(_) => Outcome::InfraError,
        Error::Config(_) => Outcome::Config,
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
                Error::Sandbox(SandboxError::EngineUnreachable { message: "m".into() }),
                None,
                Outcome::InfraError,
            ),
            (Error::Config("c".into()), Some(Phase::Judge), Outcome::Config),
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
    fn outcomes_keep_the_records_two_keys() {
        for (outcome, json) in [
            (Outcome::Pass, r#"{"outcome":"pass","kind":null}"#),
            (Outcome::Fail(FailKind::Timeout), r#"{"outcome":"fail","kind":"timeout"}"#),
            (Outcome::InfraError, r#"{"outcome":"infra_error","kind":"infra"}"#),
            (Outcome::Config, r#"{"outcome":"infra_error","kind":"config"}"#),
        ] {
            assert_eq!(serde_json::to_string(&outcome).unwrap(), json);
            assert_eq!(serde_json::from_str::<Outcome>(json).unwrap(), outcome);
        }
        assert!(serde_json::from_str::<Outcome>(r#"{"outcome":"pass","kind":"judge"}"#).is_err());
        assert!(serde_json::from_str::<Outcome>(r#"{"outcome":"fail","kind":null}"#).is_err());
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
