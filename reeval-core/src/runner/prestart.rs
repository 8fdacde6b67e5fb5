//! Starting ahead (`--prestart N`): while an attempt waits for its slot, its
//! container is created and started, up to N at once across the run, for
//! the N attempts next in line (`Slots::near`). A prestarted container is
//! fresh (made for that attempt, with its labels and limits, and its gateway
//! when it has a way out: `crate::attempt::Ahead`), never reused, and counted
//! in no budget: the attempt's clock has not started. The attempt takes it
//! over when its sandbox starts (its gateway phase still checks the relay's
//! report); if it never starts one, or the run ends first, the container is
//! destroyed like any other at teardown and its gateway closed. Where the
//! start writes nothing before its snapshot, the snapshot is taken ahead
//! too (after the relay's report, within 30 s, else left to the attempt).
//! Only
//! attempts on a pool of one engine, whose sandbox has no services or
//! mounts, start ahead: an attempt's engine is chosen only when it gets its
//! slot, and services and mounts start with the sandbox.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::attempt::{Ahead, AttemptPlan};
use crate::harness::Harness;
use crate::sandbox::Backend;

/// A container made ahead of its slot, and the permit it holds until then.
#[derive(Debug)]
pub(crate) struct Prestarted {
    pub(crate) ahead: Ahead,
    permit: OwnedSemaphorePermit,
}

impl Prestarted {
    /// Its slot came: it no longer counts as ahead.
    pub(crate) fn into_ahead(self) -> Ahead {
        drop(self.permit);
        self.ahead
    }
}

/// The run's allowance of containers ahead.
#[derive(Debug, Clone)]
pub(crate) struct Prestart {
    ahead: Arc<Semaphore>,
    /// How many attempts ahead of their slot may have one (the N of `--prestart N`).
    n: usize,
}

impl Prestart {
    pub(crate) fn new(n: usize) -> Self {
        Self { ahead: Arc::new(Semaphore::new(n)), n }
    }

    /// How many attempts next in line may start ahead.
    pub(crate) fn lookahead(&self) -> usize {
        self.n
    }

    /// Creates and starts `plan`'s container on `backend` when a place ahead is
    /// free and the attempt can use it; `None` otherwise, or when anything fails
    /// (the attempt then makes its own).
    ///
    /// # Cancel safety
    /// A cancelled call may leave a labelled container to the run's end sweep.
    pub(crate) async fn create(
        &self,
        plan: &AttemptPlan,
        harness: Option<&dyn Harness>,
        backend: &Arc<dyn Backend>,
    ) -> Option<Prestarted> {
        let permit = self.ahead.clone().try_acquire_owned().ok()?;
        let ahead = Ahead::make(plan, harness, backend).await?;
        Some(Prestarted { ahead, permit })
    }
}
