//! The run's event stream. The dispatcher emits typed events as a run
//! goes; everything the runner prints or writes (the libtest lines, `-v`,
//! the records, the summary, the HTML report) is a [`crate::report::Reporter`]
//! on this stream. Every event's text was redacted where it was made. The
//! reporters own these types, and the runner depends on them, never the
//! reverse.

use std::path::PathBuf;

use tokio::sync::mpsc;

use crate::harness::AgentEvent;
use crate::outcome::Retry;
use crate::record::{Event, PhaseRecord, Record};

/// Which attempt an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AttemptId {
    /// The eval's name.
    pub eval: String,
    /// The harness spec.
    pub harness: String,
    /// The arm of a comparison.
    pub arm: Option<String>,
    /// 1-based trial.
    pub trial: u32,
    /// 1-based try of this trial.
    pub try_: u32,
}

/// One thing that happened in a run.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum RunEvent {
    /// Preflight passed; the run is about to start its attempts.
    Planned {
        /// The run id.
        run_id: String,
        /// Where the run is recorded.
        run_dir: PathBuf,
        /// The evals to run, in order.
        evals: Vec<String>,
        /// The evals among them that cannot run, and why: each of their
        /// cells ends as a config outcome, starting nothing.
        cannot_run: Vec<(String, String)>,
        /// Cells (eval × harness) to run.
        cells: usize,
        /// First tries planned (eval × harness × trial; trials a resumed run kept are not).
        attempts: usize,
    },
    /// An attempt got its slot and started.
    AttemptStarted(AttemptId),
    /// A phase of an attempt began (the live display names it).
    PhaseStarted {
        /// The attempt.
        attempt: AttemptId,
        /// The phase.
        phase: crate::phase::Phase,
    },
    /// A phase of an attempt ended.
    PhaseEnded {
        /// The attempt.
        attempt: AttemptId,
        /// The phase as recorded.
        phase: PhaseRecord,
    },
    /// Something worth knowing happened in an attempt (an OOM kill, a failed collection).
    AttemptNote {
        /// The attempt.
        attempt: AttemptId,
        /// What happened.
        event: Event,
    },
    /// An attempt ended with its record, and the retry policy's decision.
    AttemptEnded {
        /// The record (redacted).
        record: Box<Record>,
        /// Whether the trial is tried again.
        retry: Retry,
    },
    /// Every attempt of an eval ended.
    EvalEnded {
        /// The eval's name.
        eval: String,
        /// The final try of each of its trials.
        finals: Vec<Record>,
    },
    /// A turn began (`turn N started: "<the prompt's first 60 characters>"`).
    TurnStarted {
        /// The attempt.
        attempt: AttemptId,
        /// The 1-based turn number.
        index: u32,
        /// The prompt's first 60 characters (redacted).
        prompt: String,
    },
    /// The agent did something during a turn, as its harness reports it (`--stream`).
    AgentActed {
        /// The attempt.
        attempt: AttemptId,
        /// What it did (redacted).
        event: AgentEvent,
    },
    /// A second passed: for reporters that watch the clock (progress, slow attempts).
    Tick,
}

/// Where attempts send their events.
pub type EventSink = mpsc::UnboundedSender<RunEvent>;
