//! The core of reeval: the context evals are written against, the
//! environment, the attempt lifecycle, the Docker sandbox, outcomes, records,
//! matchers and the test-style runner. Most users depend on the `reeval`
//! facade instead, which re-exports what they need.
#![forbid(unsafe_code)]

mod attempt;
pub mod budget;
pub mod capture;
pub mod diff;
pub mod environment;
pub mod error;
pub mod eval;
pub mod exec;
pub mod harness;
pub mod image;
pub mod judge;
pub(crate) mod lifecycle;
pub mod llm;
pub mod matchers;
pub mod outcome;
pub mod phase;
pub mod progress;
pub mod record;
pub mod report;
pub mod runner;
pub mod sandbox;
pub mod secrets;
pub mod settings;
pub mod turn;
pub mod workspace;

pub use capture::Artifact;
pub use attempt::Ctx;
pub use capture::Capture;
pub use turn::TurnOptions;
pub use diff::{Change, Diff, FileChange, Snapshot};
pub use environment::{Environment, Image, ImageSpec, McpServer, Skill, Workspace};
pub use error::{AssertionFailure, Error, Result};
pub use eval::{Eval, EvalOptions};
pub use exec::{Command, ExecOutput};
pub use harness::{ErrorClass, Harness, HarnessError, HarnessRegistry, SessionSetup, TurnContext};
pub use judge::{Judge, JudgeResult};
pub use matchers::{Expectation, expect};
pub use outcome::{FailKind, Kind, Outcome};
pub use phase::Phase;
pub use record::{Record, Summary, Verdict};
pub use runner::{RunConfig, RunReport, Runner};
pub use sandbox::{Sandbox, SandboxError, SandboxHandle};
pub use turn::{EditKind, FileEdit, ToolCall, Turn, TurnReport, TurnStatus, Usage};

/// Re-exported for the macros and for users who drop down to the Docker API.
pub use bollard;
pub use tokio_util::sync::CancellationToken;
