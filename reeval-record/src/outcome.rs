//! How an attempt ended: the outcome and the kind of a fail, as records
//! write them. Deciding the outcome of an error is `reeval_core::outcome`'s.

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
