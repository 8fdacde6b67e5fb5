//! The phases every attempt goes through, in order (a record's `phases`,
//! docs/records.md). A phase knows whether it spends the attempt's budget; the
//! attempt runs each one through one path (`lifecycle::Phases::run`) that times
//! it, logs it, pauses the budget by this policy and tags its errors.

use serde::{Deserialize, Serialize};

/// One phase of an attempt. The order of the variants is the lifecycle's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Phase {
    /// Secrets, credentials and the engine checked before anything starts (once per run).
    Preflight,
    /// The sandbox's image found or built.
    Image,
    /// A fresh container with its limits and no network of its own.
    Container,
    /// The egress gateway started and the sandbox's isolation verified.
    Gateway,
    /// The sandbox's environment variables (placeholders for secrets).
    Env,
    /// The workspace unpacked.
    Workspace,
    /// Files and the rules file written.
    Files,
    /// The setup steps.
    Setup,
    /// The workspace as the agent finds it: every diff starts here.
    Snapshot,
    /// The agent's session started (on the first turn).
    Harness,
    /// One agent turn and its diff.
    Turn,
    /// One `exec` check.
    Check,
    /// One judge verdict.
    Judge,
    /// A port made reachable from the host.
    Serve,
    /// An artifact kept.
    Capture,
    /// Session closed, final workspace collected, sandbox destroyed.
    Teardown,
}

impl Phase {
    /// Every phase, in lifecycle order.
    pub const ALL: [Phase; 16] = [
        Phase::Preflight,
        Phase::Image,
        Phase::Container,
        Phase::Gateway,
        Phase::Env,
        Phase::Workspace,
        Phase::Files,
        Phase::Setup,
        Phase::Snapshot,
        Phase::Harness,
        Phase::Turn,
        Phase::Check,
        Phase::Judge,
        Phase::Serve,
        Phase::Capture,
        Phase::Teardown,
    ];

    /// The phase's name as records, logs and `-v` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::Image => "image",
            Phase::Container => "container",
            Phase::Gateway => "gateway",
            Phase::Env => "env",
            Phase::Workspace => "workspace",
            Phase::Files => "files",
            Phase::Setup => "setup",
            Phase::Snapshot => "snapshot",
            Phase::Harness => "harness",
            Phase::Turn => "turn",
            Phase::Check => "check",
            Phase::Judge => "judge",
            Phase::Serve => "serve",
            Phase::Capture => "capture",
            Phase::Teardown => "teardown",
        }
    }

    /// Whether time spent in this phase counts toward the attempt's timeout.
    /// Only the eval's own work does: turns, checks, verdicts, serving and
    /// capturing. Building images, starting the container, setup and the
    /// harness session never spend it.
    pub fn spends_budget(self) -> bool {
        matches!(self, Phase::Turn | Phase::Check | Phase::Judge | Phase::Serve | Phase::Capture)
    }

    /// Whether this phase prepares the sandbox before the eval's own work:
    /// a failure here is the platform's, never the agent's.
    pub fn prepares(self) -> bool {
        matches!(
            self,
            Phase::Preflight
                | Phase::Image
                | Phase::Container
                | Phase::Gateway
                | Phase::Env
                | Phase::Workspace
                | Phase::Files
                | Phase::Setup
                | Phase::Snapshot
                | Phase::Harness
        )
    }

    /// Which part of the record's `timings` this phase's time adds to.
    pub fn timing(self) -> Timing {
        match self {
            Phase::Preflight => Timing::None,
            Phase::Image
            | Phase::Container
            | Phase::Gateway
            | Phase::Env
            | Phase::Workspace
            | Phase::Files
            | Phase::Setup
            | Phase::Snapshot
            | Phase::Harness => Timing::Setup,
            Phase::Turn => Timing::Agent,
            Phase::Check => Timing::Checks,
            Phase::Judge => Timing::Judge,
            Phase::Serve | Phase::Capture => Timing::None,
            Phase::Teardown => Timing::Teardown,
        }
    }
}

/// The `timings` field a phase's duration is added to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// In no part of `timings` (preflight, serve, capture).
    None,
    /// `setupMs`.
    Setup,
    /// `agentMs`.
    Agent,
    /// `checksMs`.
    Checks,
    /// `judgeMs`.
    Judge,
    /// `teardownMs`.
    Teardown,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for Phase {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Phase {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_listed_in_lifecycle_order() {
        let mut sorted = Phase::ALL;
        sorted.sort();
        assert_eq!(sorted, Phase::ALL);
        assert_eq!(Phase::ALL.first(), Some(&Phase::Preflight));
        assert_eq!(Phase::ALL.last(), Some(&Phase::Teardown));
    }

    #[test]
    fn only_the_evals_own_work_spends_the_budget() {
        let spending: Vec<&str> =
            Phase::ALL.iter().filter(|p| p.spends_budget()).map(|p| p.as_str()).collect();
        assert_eq!(spending, ["turn", "check", "judge", "serve", "capture"]);
        assert!(Phase::ALL.iter().all(|p| !(p.spends_budget() && p.prepares())));
    }

    #[test]
    fn names_round_trip_through_json() {
        for phase in Phase::ALL {
            let json = serde_json::to_string(&phase).unwrap();
            assert_eq!(json, format!("\"{}\"", phase.as_str()));
            assert_eq!(serde_json::from_str::<Phase>(&json).unwrap(), phase);
        }
    }
}
