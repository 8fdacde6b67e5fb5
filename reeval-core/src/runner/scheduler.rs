//! What runs when: every trial of the run in plan order (trials outside,
//! cells inside: a comparison's arms take turns, so that a provider drifting
//! over the run hits both alike), the trials a resumed run kept, the run's
//! slots that first tries take in that order, and the images made ahead
//! while the first attempts run.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use tokio::sync::{Semaphore, SemaphorePermit, watch};

use super::Runner;
use super::pool::Pool;
use crate::attempt::CellPlan;
use crate::eval::Eval;
use crate::record::Record;

/// One trial to run: its cell, its number, its first try's number and its place in the order.
pub(super) struct Trial {
    /// Its eval, by index.
    pub(super) eval: usize,
    pub(super) cell: Arc<CellPlan>,
    pub(super) trial: u32,
    /// A trial recorded before in this run (nextest's --retries runs the process
    /// again; --resume completes the run) is numbered on, never overwritten.
    pub(super) try_: u32,
    /// Its place in the order first tries take their slots.
    pub(super) ticket: u64,
}

/// The run's trials in the order they start, and what a resumed run kept.
pub(super) struct Schedule {
    pub(super) trials: Vec<Trial>,
    /// The records of the trials a resumed run kept, with their eval's index, in plan order.
    pub(super) kept: Vec<(usize, Record)>,
    /// Per eval, its trials still to run.
    pub(super) pending: BTreeMap<usize, usize>,
}

/// Every trial of `evals`' cells (`plans`, in the same order), but those
/// the runner's resumed records already finished.
pub(super) fn schedule(
    runner: &Runner,
    evals: &[Eval],
    plans: &[Vec<Arc<CellPlan>>],
    run_dir: &Path,
) -> Schedule {
    let mut schedule = Schedule { trials: Vec::new(), kept: Vec::new(), pending: BTreeMap::new() };
    for (i, eval) in evals.iter().enumerate() {
        let trials = runner.config.settings.trials.unwrap_or(eval.options.trials).max(1);
        let pending = schedule.pending.entry(i).or_default();
        for trial in 1..=trials {
            for cell in &plans[i] {
                let kept = kept_of(&runner.kept, cell, trial);
                if !kept.is_empty() {
                    schedule.kept.extend(kept.into_iter().map(|r| (i, r)));
                    continue;
                }
                let arm = cell.arm.as_deref();
                let try_ = crate::report::runs::next_try(
                    run_dir,
                    &eval.name,
                    &cell.harness_spec,
                    arm,
                    trial,
                );
                let ticket = schedule.trials.len() as u64;
                schedule.trials.push(Trial { eval: i, cell: cell.clone(), trial, try_, ticket });
                *pending += 1;
            }
        }
    }
    schedule
}

/// The records a resumed run kept of `cell`'s trial `trial`.
fn kept_of(kept: &[Record], cell: &CellPlan, trial: u32) -> Vec<Record> {
    kept.iter()
        .filter(|r| {
            r.eval == cell.eval
                && r.harness == cell.harness_spec
                && r.arm == cell.arm
                && r.trial == trial
        })
        .cloned()
        .collect()
}

/// The run's slots (`--test-threads`): first tries take them in ticket
/// order (the runtime polls spawned tasks in an order of its own); a retry
/// queues when it is decided.
#[derive(Debug)]
pub(super) struct Slots {
    slots: Semaphore,
    turnstile: Turnstile,
}

impl Slots {
    pub(super) fn new(n: usize) -> Self {
        Self { slots: Semaphore::new(n.max(1)), turnstile: Turnstile::default() }
    }

    /// Whether every slot is taken: an attempt asking now waits.
    pub(super) fn all_taken(&self) -> bool {
        self.slots.available_permits() == 0
    }

    /// A slot for the first try of the trial at `ticket`, after every earlier ticket's.
    pub(super) async fn first(&self, ticket: u64) -> SemaphorePermit<'_> {
        self.turnstile.wait_for(ticket).await;
        let slot = self.slots.acquire().await;
        self.turnstile.advance();
        slot.expect("the semaphore is never closed")
    }

    /// Until the first try of the trial at `ticket` is among the next `n` in
    /// line for a slot (every ticket more than `n` before it took its slot).
    pub(super) async fn near(&self, ticket: u64, n: usize) {
        self.turnstile.wait_for(ticket.saturating_sub(n.saturating_sub(1) as u64)).await;
    }

    /// A slot for a retry.
    pub(super) async fn again(&self) -> SemaphorePermit<'_> {
        self.slots.acquire().await.expect("the semaphore is never closed")
    }

    /// The turn of `ticket` taken without a slot (a trial that cannot run):
    /// later tickets wait for it as for any other.
    pub(super) async fn pass(&self, ticket: u64) {
        self.turnstile.wait_for(ticket).await;
        self.turnstile.advance();
    }
}

/// Lets tasks through one at a time in ticket order: task `n` passes once
/// `n` tasks have advanced it. Every planned task reaches its turn (none ends
/// before its first slot), so no ticket is skipped.
#[derive(Debug, Default)]
struct Turnstile {
    next: watch::Sender<u64>,
}

impl Turnstile {
    async fn wait_for(&self, ticket: u64) {
        let mut next = self.next.subscribe();
        // The sender lives in self, so the channel cannot close while we wait.
        let _ = next.wait_for(|n| *n >= ticket).await;
    }

    fn advance(&self) {
        self.next.send_modify(|n| *n += 1);
    }
}

/// Makes every image the run's attempts need present on every engine, one
/// after the other, while the first attempts run and the others wait for a
/// slot: an attempt whose image is ready skips the wait in its image phase.
/// Failures are left to the attempts, which report them. Images are built
/// once per digest (a lock per digest), so an attempt that needs an image
/// being built here waits for that build.
pub(super) fn images_ahead(
    plans: &[Vec<Arc<CellPlan>>],
    pool: &Arc<Pool>,
) -> tokio::task::JoinHandle<()> {
    let mut wanted: Vec<(crate::environment::ImageSpec, String)> = Vec::new();
    for plan in plans.iter().flatten().filter(|p| p.cannot_run.is_none()) {
        if !wanted.iter().any(|(i, _)| *i == plan.image) {
            wanted.push((plan.image.clone(), plan.image_key.clone()));
        }
    }
    let pool = pool.clone();
    tokio::spawn(async move {
        for (image, key) in wanted {
            for engine in pool.engines() {
                crate::lifecycle::image::ensure_ahead(engine.backend.as_ref(), &image, &key).await;
            }
        }
    })
}
