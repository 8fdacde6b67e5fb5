//! The core of reeval: the context evals are written against, the
//! environment, the attempt lifecycle, the sandbox backends, outcomes,
//! records, matchers, the judge and the test-style runner. Most users depend
//! on the `reeval` facade instead, which re-exports what they need.
//!
//! Where things are:
//! - `attempt/`: one attempt as a state machine; [`Ctx`] is its facade.
//! - `lifecycle/`: one file per phase, in phase order ([`Phase`]).
//! - [`egress`]: what a sandbox may reach; the run's gateway service and the attempt's egress.
//! - [`outcome`]: outcomes and the one place errors are classified and retries decided.
//! - [`sandbox`]: the [`Backend`] and [`Sandbox`] traits, Docker, Kubernetes, the fake (the `reeval-sandbox` crate, re-exported).
//! - [`secrets`]: secret values and the one redactor every sink writes through.
//! - [`llm`]: the model-API client and agent tools shared by the judge and the built-in agent.
//! - [`runner`]: settings, preflight, the dispatcher and its event stream; [`report`]: the reporters.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

// The record's data lives in `reeval-record` (the bottom of the workspace);
// its modules keep their paths here (`crate::record::Record`, `reeval::record`).
pub use reeval_record::{comparison, phase, prices, record, stats, turn};

pub mod atif;
mod attempt;
mod budget;
pub mod capture;
pub mod compare;
pub mod diff;
pub mod egress;
pub mod environment;
pub mod error;
pub mod eval;
pub(crate) mod eval_output;
pub(crate) mod gateway;
/// Commands run in the sandbox and what they return (from `reeval-sandbox`).
pub use reeval_sandbox::exec;
pub mod git_archive;
pub mod harness;
mod host_dir;
// The image phase's building and tar helpers: the Docker backend's (reeval-sandbox/src/docker/image.rs).
pub(crate) use sandbox::docker::image;
pub mod image_map;
pub mod judge;
pub(crate) mod lifecycle;
pub mod llm;
pub mod matchers;
pub mod oracle;
pub mod outcome;
pub mod partition;
mod progress;
pub mod replay;
pub mod report;
pub mod runner;
pub mod sandbox;
pub mod secrets;
pub mod settings;
pub mod setup_cache;
mod setup_key;
pub mod suggest;
pub mod turn_archive;
mod workspace;

// The surface most code needs, by name; the modules above hold the rest.
pub use attempt::{Ctx, ExtraSandbox, InSandbox};
pub use capture::{Artifact, Capture};
pub use diff::{Change, Diff, FileChange, FileKind, Snapshot};
pub use environment::{Environment, Image, ImageSpec, McpServer, Skill, Workspace};
pub use error::{AssertionFailure, Error, Result};
pub use eval::{Eval, EvalOptions};
pub use exec::{Command, ExecOutput};
pub use harness::{Harness, HarnessError, HarnessRegistry, SessionSetup, TurnContext};
pub use judge::{Judge, JudgeResult};
pub use matchers::{Expectation, expect};
pub use outcome::{FailKind, Kind, Outcome};
pub use phase::Phase;
pub use record::{Record, Summary, Verdict};
pub use report::Reporter;
pub use report::RunReport;
pub use report::events::RunEvent;
pub use runner::{RunConfig, Runner};
pub use sandbox::{Backend, Sandbox, SandboxError, SandboxHandle};
pub use setup_cache::SetupCache;
pub use turn::{
    EditKind, ErrorClass, FileEdit, ToolCall, Turn, TurnOptions, TurnReport, TurnStatus, Usage,
};

/// The cancellation token of [`Ctx::signal`].
pub use tokio_util::sync::CancellationToken;

/// Records for unit tests.
#[cfg(test)]
pub(crate) mod test_records {
    /// A shell-harness record of run `run` with this outcome, for unit tests.
    pub(crate) fn test_record(
        eval: &str,
        trial: u32,
        try_: u32,
        outcome: crate::outcome::Outcome,
    ) -> crate::record::Record {
        let mut r = crate::record::Record::new("run", eval, "shell", trial, try_);
        r.outcome = outcome;
        r
    }
}
