//! The executor: one trial's tries. Each try waits for its slot (a container
//! may be made ahead meanwhile), then for an engine of the pool, runs with a
//! fresh sandbox (`crate::attempt::run`), hands its sandbox to the background
//! teardown, and the retry policy (`crate::outcome::retry`) decides whether
//! another try follows. Every try's record goes out in its `AttemptEnded` event.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::config_stops::{self, ConfigStops};
use super::pool::{Pool, Slot};
use super::prestart::Prestart;
use super::scheduler::Slots;
use super::setup_fill::{FillFrom, MAX_FILLS, SetupFills};
use super::teardown::{MAX_DESTROYS, Teardowns};
use super::{RunConfig, Runner};
use crate::attempt::{self, Ahead, AttemptPlan, Attempted};
use crate::harness::HarnessRegistry;
use crate::outcome::{Outcome, Retry};
use crate::record::Record;
use crate::report::events::{EventSink, RunEvent};

/// What every trial of the run shares: the slots, the engines, the work
/// left to the background, and the cells stopped by a config error.
pub(super) struct Executor {
    slots: Slots,
    pool: Arc<Pool>,
    harnesses: HarnessRegistry,
    shutdown: CancellationToken,
    retries: u32,
    teardowns: Teardowns,
    fills: Arc<SetupFills>,
    prestart: Prestart,
    /// Cells that found a config error: their remaining attempts do not run.
    config_stops: ConfigStops,
}

impl Executor {
    pub(super) fn new(runner: &Runner, pool: Arc<Pool>) -> Self {
        let config: &RunConfig = &runner.config;
        Self {
            slots: Slots::new(config.settings.test_threads),
            pool,
            harnesses: runner.harnesses.clone(),
            shutdown: runner.shutdown.clone(),
            retries: config.settings.infra_retries,
            teardowns: Teardowns::new(MAX_DESTROYS),
            fills: Arc::new(SetupFills::new(
                MAX_FILLS,
                config.settings.setup_cache_max_bytes,
                runner.shutdown.clone(),
            )),
            prestart: Prestart::new(config.settings.prestart),
            config_stops: ConfigStops::default(),
        }
    }

    /// Runs the trial at `ticket`: its tries, each one's record sent on `events`.
    pub(super) async fn run(&self, mut plan: AttemptPlan, ticket: u64, events: EventSink) {
        if let Some(r) = config_stops::cannot_run(&plan) {
            // It takes no slot, but its turn in the plan's order: later tries wait for it.
            self.slots.pass(ticket).await;
            let _ =
                events.send(RunEvent::AttemptEnded { record: Box::new(r), retry: Retry::Final });
            return;
        }
        // Tries of this process: a trial numbered on from an earlier process still gets its retries.
        let mut tried = 0;
        loop {
            tried += 1;
            let first = (tried == 1).then_some(ticket);
            if self.try_once(&plan, first, tried, &events).await != Retry::Again {
                return;
            }
            plan.try_ += 1;
        }
    }

    /// One try: a slot (the first try's in `ticket` order), an engine, the
    /// attempt; its record sent on `events`. Returns what the retry policy decided.
    async fn try_once(
        &self,
        plan: &AttemptPlan,
        ticket: Option<u64>,
        tried: u32,
        events: &EventSink,
    ) -> Retry {
        let ended = |record: Record, retry: Retry| {
            let _ = events.send(RunEvent::AttemptEnded { record: Box::new(record), retry });
            retry
        };
        let harness = self.harnesses.make(&plan.cell.harness_spec);
        // One of the attempts next in line that will wait for its slot may have
        // its container made meanwhile (a first try once it is among the next
        // `--prestart N` in ticket order, so the places ahead go in that order).
        let ahead = match self.pool.only_engine().filter(|_| self.prestart.lookahead() > 0) {
            Some(backend) => {
                if let Some(ticket) = ticket {
                    self.slots.near(ticket, self.prestart.lookahead()).await;
                }
                match self.slots.all_taken() && self.config_stops.stopped(plan).is_none() {
                    true => self.prestart.create(plan, harness.as_deref(), &backend).await,
                    false => None,
                }
            }
            None => None,
        };
        // Waiting for a slot spends no budget: the budget starts inside the attempt.
        let slot = match ticket {
            Some(ticket) => self.slots.first(ticket).await,
            None => self.slots.again().await,
        };
        let prestarted = ahead.map(|a| a.into_ahead());
        if let Some(r) = self.config_stops.stopped(plan) {
            self.destroy(prestarted);
            return ended(r, Retry::Final);
        }
        // Then a slot on the engine with the most free ones.
        let engine = match self.pool.acquire().await {
            Ok(engine) => engine,
            Err(e) => {
                self.destroy(prestarted);
                let mut r = plan.new_record();
                r.outcome = Outcome::InfraError;
                r.message = Some(e.to_string());
                return ended(r, Retry::Hopeless);
            }
        };
        let _ = events.send(RunEvent::AttemptStarted(plan.id()));
        let done = self.attempt(plan, &engine, harness, prestarted).await;
        if done.record.outcome == Outcome::InfraError {
            // An engine that stopped answering gets no more work; the retry goes elsewhere.
            self.pool.check(&engine.engine).await;
        }
        drop(engine);
        self.config_stops.remember(&done.record);
        let retry = crate::outcome::retry(
            done.record.outcome,
            done.cause.as_ref(),
            tried,
            self.retries,
            self.shutdown.is_cancelled(),
        );
        let retry = ended(done.record, retry);
        drop(slot);
        retry
    }

    /// The attempt of `plan` on `engine` (in the sandbox made ahead, if any);
    /// its sandbox handed to the background teardown.
    async fn attempt(
        &self,
        plan: &AttemptPlan,
        engine: &Slot,
        harness: Option<Box<dyn crate::harness::Harness>>,
        prestarted: Option<Ahead>,
    ) -> Attempted {
        // A miss of the setup cache is filled in the background, on this attempt's engine.
        let mut attempt_plan = plan.clone();
        let from = FillFrom {
            plan: plan.clone(),
            backend: engine.engine.backend.clone(),
            harnesses: self.harnesses.clone(),
        };
        let fills = self.fills.clone();
        attempt_plan.ask_fill =
            Some(attempt::AskFill::new(move |digest| fills.fill(digest, from.clone())));
        let mut done = attempt::run(
            attempt_plan,
            Some(engine.engine.backend.clone()),
            harness,
            self.shutdown.clone(),
            prestarted,
        )
        .await;
        done.record.engine = Some(engine.engine.name.clone());
        // The verdict is known and the workspace collected: the sandbox goes in the
        // background while this slot takes the next attempt.
        if let Some(sandbox) = done.to_destroy.take() {
            self.teardowns.destroy(sandbox);
        }
        done
    }

    /// A container made ahead for an attempt that does not run, destroyed in
    /// the background (its gateway closed first).
    fn destroy(&self, prestarted: Option<Ahead>) {
        if let Some(ahead) = prestarted {
            self.teardowns.discard(ahead);
        }
    }

    /// Waits for the background work of every trial: each sandbox destroyed
    /// (also when the run was interrupted), then the setup cache's fills (a
    /// later run may then hit what this one prepared).
    ///
    /// # Cancel safety
    /// Dropping it aborts what it waits for; their sandboxes are left to the next run's sweep.
    pub(super) async fn wait_background(&self) {
        self.teardowns.wait_all().await;
        self.fills.wait_all().await;
    }
}
