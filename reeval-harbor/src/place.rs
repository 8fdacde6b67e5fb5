//! Where a verifier runs: the attempt's own sandbox (shared mode), or the
//! verifier's sandbox of its own (`verifier_env.rs`), each with its
//! workdir; the calls the verifier makes go to the one it runs in.

use reeval_core::capture::Artifact;
use reeval_core::error::Result;
use reeval_core::exec::{Command, ExecOutput};
use reeval_core::{Ctx, ExtraSandbox};

/// Where a verifier runs.
#[derive(Debug, Clone, Copy)]
pub(super) enum Place<'a> {
    /// The agent's sandbox.
    Shared,
    /// Its own sandbox.
    Separate {
        /// The sandbox.
        sandbox: &'a ExtraSandbox,
        /// Its workdir.
        workdir: &'a str,
        /// Whether its image holds `/tests` already.
        bundled_tests: bool,
    },
}

impl Place<'_> {
    /// A command there.
    pub(super) async fn exec(&self, c: &mut Ctx, cmd: Command) -> Result<ExecOutput> {
        match self {
            Place::Shared => c.exec(cmd).await,
            Place::Separate { sandbox, .. } => c.in_sandbox(sandbox).exec(cmd).await,
        }
    }

    /// A file's bytes there.
    pub(super) async fn read_bytes(&self, c: &mut Ctx, path: &str) -> Result<Vec<u8>> {
        match self {
            Place::Shared => c.read_bytes(path).await,
            Place::Separate { sandbox, .. } => c.in_sandbox(sandbox).read_bytes(path).await,
        }
    }

    /// Directories kept there (`(name, path)`): in the agent's sandbox, those
    /// of one parent with one read of it (`Ctx::capture_dirs`).
    pub(super) async fn capture_dirs(
        &self,
        c: &mut Ctx,
        dirs: Vec<(String, String)>,
    ) -> Result<()> {
        match self {
            Place::Shared => c.capture_dirs(dirs).await.map(|_| ()),
            Place::Separate { .. } => {
                for (name, path) in dirs {
                    self.capture(c, &name, Artifact::dir(path)).await?;
                }
                Ok(())
            }
        }
    }

    /// A capture of what is there.
    pub(super) async fn capture(&self, c: &mut Ctx, name: &str, what: Artifact) -> Result<()> {
        match self {
            Place::Shared => c.capture(name, what).await.map(|_| ()),
            Place::Separate { sandbox, .. } => {
                c.in_sandbox(sandbox).capture(name, what).await.map(|_| ())
            }
        }
    }
}
