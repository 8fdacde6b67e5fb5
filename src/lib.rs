//! reeval: evaluate AI coding agents with async Rust evals.
//!
//! An eval is an async function written against a [`Ctx`]: it sends prompts to
//! an agent (`send`), runs checks in the sandbox (`exec`), reads and writes
//! files, and looks at the workspace diff. The sandbox, a Docker container,
//! starts on the first call that needs it. `#[reeval::eval]` registers evals
//! and `reeval::main!()` turns a `harness = false` test target into a suite
//! that `cargo test` and cargo-nextest run.
//!
//! ```no_run
//! use reeval::prelude::*;
//!
//! #[reeval::eval(timeout = "2m", harness = "shell")]
//! async fn writes_hello(c: &mut Ctx) -> reeval::Result<()> {
//!     c.send("echo hello > hello.txt").await?;
//!     expect(c.read_file("hello.txt").await?).to_contain("hello")?;
//!     Ok(())
//! }
//!
//! reeval::main!();
//! ```
//!
//! Embedding without the macro: build an [`Eval`] and run it with a [`Runner`].
//!
//! The reference (options, the record, outcomes, the security model, engines,
//! Kubernetes, compare, performance, testing) is [the book](book): one page
//! per topic, the markdown files of the repository's `docs/`.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod book;

/// For implementing [`Harness`]: `#[reeval::async_trait] impl Harness for MyAgent { .. }`.
pub use async_trait::async_trait;
/// The cancellation token of `Ctx::signal`.
pub use reeval_core::CancellationToken;
pub use reeval_core::judge::{self, Judge, JudgeResult};
pub use reeval_core::{
    Artifact, AssertionFailure, Backend, Capture, Change, Command, Ctx, Diff, EditKind,
    Environment, Error, ErrorClass, Eval, EvalOptions, ExecOutput, Expectation, FailKind,
    FileChange, FileEdit, FileKind, Harness, HarnessError, HarnessRegistry, Image, ImageSpec, Kind,
    McpServer, Outcome, Phase, Record, Reporter, Result, RunConfig, RunEvent, RunReport, Runner,
    Sandbox, SandboxError, SandboxHandle, SessionSetup, SetupCache, Skill, Snapshot, Summary,
    ToolCall, Turn, TurnContext, TurnOptions, TurnReport, TurnStatus, Usage, Verdict, Workspace,
    expect,
};
// The modules behind the names above, for what is less often needed. Each is
// one concern a user reaches for by name (public-api.txt lists every item;
// tests/public_api.rs keeps the surface from growing by accident).
pub use reeval_core::{
    compare, egress, environment, harness, image_map, matchers, prices, record, report, runner,
    sandbox, settings, setup_cache, stats,
};
/// Harbor tasks and datasets as evals (the `reeval-harbor` crate).
pub use reeval_harbor as harbor;
pub use reeval_harness as harnesses;
pub use reeval_macros::{eval, main, variant};
/// The JSON library reeval's records and tool calls use (a harness of your own
/// builds tool-call inputs with `reeval::serde_json::json!`), so a suite needs no
/// dependency of its own for it.
pub use serde_json;

/// What an eval file needs: `use reeval::prelude::*;`.
pub mod prelude {
    pub use reeval_core::judge::Judge;
    pub use reeval_core::{
        Artifact, Command, Ctx, Environment, Image, McpServer, TurnOptions, Workspace, expect,
    };
}

/// A registry with the built-in harnesses and those registered in this binary.
pub fn harness_registry() -> HarnessRegistry {
    reeval_harness::registry()
}

/// Registers a harness of your own under a name, for `harness = "name"` and `--harness name`.
///
/// ```ignore
/// reeval::register_harness!("my-agent", |model| Box::new(MyAgent::new(model)));
/// ```
#[macro_export]
macro_rules! register_harness {
    ($name:expr, $make:expr) => {
        $crate::__private::inventory::submit! {
            $crate::__private::HarnessRegistration { name: $name, make: $make }
        }
    };
}

#[doc(hidden)]
pub mod __private {
    pub use futures_util::future::BoxFuture;
    pub use inventory;
    pub use reeval_core::compare::VariantRegistration;
    pub use reeval_core::eval::{EvalRegistration, registered_evals};
    pub use reeval_core::harness::HarnessRegistration;

    /// The body of `reeval::main!()`.
    pub fn main() -> ! {
        let code = reeval_core::runner::main(
            reeval_core::eval::registered_evals(),
            crate::harness_registry(),
        );
        std::process::exit(code)
    }
}
