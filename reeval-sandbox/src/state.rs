//! What the engine says about a sandbox that was started: running, or lost
//! (removed, stopped, paused, restarted, cut from its network). A command
//! that failed in a lost sandbox is the platform's failure, never the agent's
//! or the eval's: the attempt asks [`Sandbox::state`](super::Sandbox::state)
//! only after a command failed, so a passing attempt pays nothing for it.

use std::fmt;

/// The state of a sandbox that was started, as its engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SandboxState {
    /// Running as it was started.
    Running,
    /// The backend cannot tell (it has no probe, or the engine did not answer).
    Unknown,
    /// The container (or pod) no longer exists.
    Gone,
    /// Its main process is no longer running.
    Stopped {
        /// Its exit code, when the engine knows it.
        exit_code: Option<i64>,
        /// Whether the engine says the kernel's OOM killer stopped it.
        oom_killed: bool,
    },
    /// It is frozen (`docker pause`): nothing in it runs.
    Paused,
    /// It was restarted since it was started (every process of the attempt is gone).
    Restarted {
        /// What the engine says (a restart count, a new start time).
        how: String,
    },
    /// It is being removed, or was, from outside (a pod deleted or evicted):
    /// every process of the attempt goes with it.
    Removed {
        /// What the engine says (`its pod was evicted: …`).
        how: String,
    },
    /// It runs, but the gateway it reaches the outside through is gone (the
    /// run's gateway pod deleted or evicted): its only way out is cut.
    GatewayLost {
        /// What the engine says (`the run's gateway pod reeval-gw-… is gone`).
        how: String,
    },
    /// It runs, but is no longer on the network it was created on (`docker
    /// network disconnect`): its gateway, its only way out, is out of reach.
    Disconnected {
        /// The network's name.
        network: String,
    },
}

impl SandboxState {
    /// Whether a command that failed in it failed because of it: the sandbox
    /// is gone, stopped, paused, restarted or cut from its network. An OOM
    /// stop is not lost: the agent's memory use is named as such (see the
    /// attempt's OOM event).
    pub fn is_lost(&self) -> bool {
        match self {
            SandboxState::Running | SandboxState::Unknown => false,
            SandboxState::Stopped { oom_killed, .. } => !oom_killed,
            SandboxState::Gone
            | SandboxState::Paused
            | SandboxState::Restarted { .. }
            | SandboxState::Removed { .. }
            | SandboxState::GatewayLost { .. }
            | SandboxState::Disconnected { .. } => true,
        }
    }

    /// Whether no process of the sandbox can still run: it is gone, stopped
    /// or being removed (paused processes, ones cut from the network, and
    /// ones started after a restart still exist).
    pub(crate) fn processes_gone(&self) -> bool {
        matches!(
            self,
            SandboxState::Gone | SandboxState::Stopped { .. } | SandboxState::Removed { .. }
        )
    }
}

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SandboxState::Running => f.write_str("is running"),
            SandboxState::Unknown => f.write_str("is in a state its engine does not report"),
            SandboxState::Gone => f.write_str("was removed (container gone)"),
            SandboxState::Stopped { exit_code, oom_killed } => {
                f.write_str("stopped (")?;
                if let Some(code) = exit_code {
                    write!(f, "exit {code}, ")?;
                }
                if *oom_killed {
                    f.write_str("out of memory, ")?;
                }
                f.write_str("container not running)")
            }
            SandboxState::Paused => {
                f.write_str("was paused (container paused, nothing in it runs)")
            }
            SandboxState::Restarted { how } => write!(f, "was restarted ({how})"),
            SandboxState::Removed { how } => write!(f, "was removed ({how})"),
            SandboxState::GatewayLost { how } => write!(f, "lost its gateway ({how})"),
            SandboxState::Disconnected { network } => {
                write!(f, "lost its network (disconnected from {network}, its gateway's)")
            }
        }
    }
}

/// A step that failed because its sandbox was lost (see [`SandboxError::Lost`](super::SandboxError::Lost)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// What was being done, as "failed to …" reads (`run the turn`).
    pub action: String,
    /// The sandbox's short id.
    pub sandbox: String,
    /// What its engine says about it.
    pub state: SandboxState,
    /// The step it happened in (`turn 1`, ``the check `pytest` ``).
    pub during: String,
}

impl fmt::Display for Lost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Lost { action, sandbox, state, during } = self;
        write!(f, "failed to {action}: the sandbox {sandbox} {state} during {during}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_states_say_what_happened() {
        let killed = SandboxState::Stopped { exit_code: Some(137), oom_killed: false };
        assert!(killed.is_lost());
        assert_eq!(killed.to_string(), "stopped (exit 137, container not running)");
        let oom = SandboxState::Stopped { exit_code: Some(137), oom_killed: true };
        assert!(!oom.is_lost(), "OOM stays the agent's, named as such");
        assert!(SandboxState::Paused.is_lost());
        assert!(SandboxState::Gone.is_lost());
        assert!(SandboxState::Restarted { how: "restart count 1".into() }.is_lost());
        assert!(SandboxState::Removed { how: "its pod was evicted".into() }.is_lost());
        assert!(SandboxState::GatewayLost { how: "its pod is gone".into() }.is_lost());
        let cut = SandboxState::Disconnected { network: "reeval-net-1a2b".into() };
        assert!(cut.is_lost());
        assert_eq!(
            cut.to_string(),
            "lost its network (disconnected from reeval-net-1a2b, its gateway's)"
        );
        assert!(!SandboxState::Running.is_lost());
        assert!(!SandboxState::Unknown.is_lost(), "without a probe, blame stays as it was");
    }
}
