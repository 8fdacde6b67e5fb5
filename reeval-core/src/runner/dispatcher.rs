//! The dispatcher: owns the run's event loop. It spawns every trial the
//! scheduler planned on the executor, hands each event to the reporters
//! (what one fails to write becomes an error of the run), keeps each record
//! once, says when an eval's last trial ended, and a trial whose task died
//! is still a record. It prints and writes nothing itself; the run's end
//! (`ending.rs`) makes the summary.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::{Id, JoinError, JoinSet};

use super::executor::Executor;
use super::preflight::Preflighted;
use super::scheduler::{self, Schedule, Trial};
use super::{Runner, ending};
use crate::attempt::{AttemptPlan, CellPlan};
use crate::eval::Eval;
use crate::outcome::{Outcome, Retry};
use crate::record::Record;
use crate::report::events::{EventSink, RunEvent};
use crate::report::summary::final_tries;
use crate::report::{Reporter, RunReport};
use crate::sandbox::Sweep;

/// Runs every attempt of `evals` and reports as it goes.
pub(super) async fn dispatch(
    runner: &Runner,
    evals: Vec<Eval>,
    ready: Preflighted,
    harness_versions: BTreeMap<String, String>,
    reporters: &mut [Box<dyn Reporter>],
) -> RunReport {
    let config = &runner.config;
    let run_dir = config.settings.record_dir.join(&config.settings.run_id);
    let started = std::time::SystemTime::now();
    before_run(&ready).await;
    let ahead = scheduler::images_ahead(&ready.plans, &ready.pool);
    let schedule = scheduler::schedule(runner, &evals, &ready.plans, &run_dir);
    let executor = Arc::new(Executor::new(runner, ready.pool.clone()));
    let (tx, rx) = mpsc::unbounded_channel::<RunEvent>();
    let mut d = Dispatcher::new(runner, &evals, reporters);
    d.start(schedule, &ready, &executor, tx);
    d.event_loop(rx).await;
    ahead.abort();
    let Dispatcher { all, lost, .. } = d;
    let end = ending::End { runner, run_dir, started, engine: ready.engine, harness_versions };
    end.finish(&ready.pool, &executor, all, lost, reporters).await
}

/// Before the first attempt: git workspaces fetched on the host (an attempt
/// reports a failed fetch itself), and containers that killed runs left
/// behind removed.
async fn before_run(ready: &Preflighted) {
    let mut fetched = Vec::new();
    for plan in ready.plans.iter().flatten().filter(|p| p.cannot_run.is_none()) {
        if let Some(crate::environment::Workspace::Git { url, rev, .. }) = &plan.env.workspace
            && !fetched.contains(&(url, rev))
        {
            fetched.push((url, rev));
            let _ = crate::workspace::fetch_git(url, rev).await;
        }
    }
    for engine in ready.pool.engines() {
        if let Ok(n) = engine.backend.sweep(Sweep::Orphans).await
            && n > 0
        {
            crate::report::say(&format!(
                "reeval: removed {n} containers left on {} by runs that were killed\n",
                engine.name
            ));
        }
    }
}

/// The event loop's state: the reporters, the trials running, and the records heard.
struct Dispatcher<'a> {
    runner: &'a Runner,
    evals: &'a [Eval],
    reporters: &'a mut [Box<dyn Reporter>],
    /// The trials' tasks, each ending with its eval's index.
    set: JoinSet<usize>,
    /// Each task's trial, for the record of one that died.
    tasks: HashMap<Id, (usize, Arc<CellPlan>, u32)>,
    /// Per eval, its trials still running.
    pending: BTreeMap<usize, usize>,
    /// Each eval's records, as indices into `all` (one copy of each record:
    /// a run of many attempts with long final messages holds them all). A
    /// record reaches the dispatcher once, in its `AttemptEnded` event.
    results: BTreeMap<usize, Vec<usize>>,
    all: Vec<Record>,
    index_of: HashMap<&'a str, usize>,
    /// Every record, summary or report that could not be written: an error of the run.
    lost: Vec<String>,
}

impl<'a> Dispatcher<'a> {
    fn new(runner: &'a Runner, evals: &'a [Eval], reporters: &'a mut [Box<dyn Reporter>]) -> Self {
        Self {
            runner,
            evals,
            reporters,
            set: JoinSet::new(),
            tasks: HashMap::new(),
            pending: BTreeMap::new(),
            results: BTreeMap::new(),
            all: Vec::new(),
            index_of: evals.iter().enumerate().rev().map(|(i, e)| (e.name.as_str(), i)).collect(),
            lost: Vec::new(),
        }
    }

    /// Keeps what a resumed run kept, spawns every trial, says what the run
    /// planned, and ends the evals whose every trial was kept.
    fn start(
        &mut self,
        schedule: Schedule,
        ready: &Preflighted,
        executor: &Arc<Executor>,
        events: EventSink,
    ) {
        let Schedule { trials, kept, pending } = schedule;
        self.pending = pending;
        for (i, record) in kept {
            self.results.entry(i).or_default().push(self.all.len());
            self.all.push(record);
        }
        // One gateway for the run, started by the first attempt that needs a way out.
        let egress = Arc::new(crate::gateway::RunEgress::new(self.runner.config.egress.clone()));
        for trial in trials {
            let plan = self.attempt_plan(&trial, ready, &egress, &events);
            let (executor, events, i) = (executor.clone(), events.clone(), trial.eval);
            let task = self.set.spawn(async move {
                executor.run(plan, trial.ticket, events).await;
                i
            });
            self.tasks.insert(task.id(), (i, trial.cell, trial.trial));
        }
        let config = &self.runner.config;
        let planned = RunEvent::Planned {
            run_id: config.settings.run_id.clone(),
            run_dir: config.settings.record_dir.join(&config.settings.run_id),
            evals: self.evals.iter().map(|e| e.name.clone()).collect(),
            cannot_run: cannot_run(&ready.plans),
            cells: ready.plans.iter().map(Vec::len).sum(),
            attempts: self.set.len(),
        };
        self.report(&planned);
        drop(events);
        // Evals whose every trial a resumed run kept are done already.
        let done: Vec<usize> =
            self.pending.iter().filter(|(_, n)| **n == 0).map(|(i, _)| *i).collect();
        done.into_iter().for_each(|i| self.eval_ended(i));
    }

    /// The plan of `trial`'s first attempt.
    fn attempt_plan(
        &self,
        trial: &Trial,
        ready: &Preflighted,
        egress: &Arc<crate::gateway::RunEgress>,
        events: &EventSink,
    ) -> AttemptPlan {
        let config = &self.runner.config;
        AttemptPlan {
            cell: trial.cell.clone(),
            run_id: config.settings.run_id.clone(),
            run_dir: config.settings.record_dir.join(&config.settings.run_id),
            trial: trial.trial,
            try_: trial.try_,
            events: Some(events.clone()),
            preflight: ready.detail.clone(),
            redactor: ready.redactor.clone(),
            egress: egress.clone(),
            setup_cache: config.settings.setup_cache,
            ask_fill: None,
        }
    }

    /// Until every trial ended and every event was heard. Reporters that
    /// watch the clock (progress, slow attempts) hear from it every second.
    ///
    /// # Cancel safety
    /// Dropping it aborts the trials still running.
    async fn event_loop(&mut self, mut rx: mpsc::UnboundedReceiver<RunEvent>) {
        let mut ticks = tokio::time::interval(std::time::Duration::from_secs(1));
        let mut events_open = true;
        while !self.set.is_empty() || events_open {
            tokio::select! {
                _ = ticks.tick() => self.report(&RunEvent::Tick),
                event = rx.recv(), if events_open => match event {
                    Some(event) => self.hear(event),
                    None => events_open = false,
                },
                Some(joined) = self.set.join_next_with_id(), if !self.set.is_empty() => {
                    let i = match joined {
                        Ok((_, i)) => i,
                        Err(e) => self.died(e),
                    };
                    // The attempts' own events come first: drain what they sent before their end.
                    while let Ok(event) = rx.try_recv() {
                        self.hear(event);
                    }
                    let left = self.pending.get_mut(&i).expect("known eval");
                    *left -= 1;
                    if *left == 0 {
                        self.eval_ended(i);
                    }
                }
            }
        }
    }

    /// A trial whose task died (a bug of ours: the eval's panics are caught
    /// inside) is still a record, never a silent gap. Returns its eval's index.
    fn died(&mut self, e: JoinError) -> usize {
        let (i, cell, trial) = self.tasks.remove(&e.id()).expect("every task is known");
        let run_id = &self.runner.config.settings.run_id;
        let mut r = Record::new(run_id, &self.evals[i].name, &cell.harness_spec, trial, 1);
        r.arm = cell.arm.clone();
        r.outcome = Outcome::InfraError;
        r.message = Some(format!("failed to run the attempt: {e}"));
        self.hear(RunEvent::AttemptEnded { record: Box::new(r), retry: Retry::Final });
        i
    }

    /// Eval `i`'s last trial ended: its final tries go to the reporters.
    fn eval_ended(&mut self, i: usize) {
        let records = self.results.get(&i).map(Vec::as_slice).unwrap_or_default();
        let finals =
            final_tries(records.iter().map(|&k| &self.all[k])).into_iter().cloned().collect();
        self.report(&RunEvent::EvalEnded { eval: self.evals[i].name.clone(), finals });
    }

    /// `event` to the reporters, then the record an `AttemptEnded` event
    /// carries kept (moved, not copied) as one of its eval's records.
    fn hear(&mut self, event: RunEvent) {
        self.report(&event);
        if let RunEvent::AttemptEnded { record, .. } = event
            && let Some(&i) = self.index_of.get(record.eval.as_str())
        {
            self.results.entry(i).or_default().push(self.all.len());
            self.all.push(*record);
        }
    }

    /// Gives `event` to every reporter; what one fails to write is said at once
    /// and kept in `lost`, which makes it an error of the run.
    fn report(&mut self, event: &RunEvent) {
        for r in self.reporters.iter_mut() {
            if let Err(e) = r.event(event) {
                crate::report::say(&format!("reeval: {e}\n"));
                self.lost.push(e.to_string());
            }
        }
    }
}

/// Each eval whose cells cannot run, and why (once per eval).
fn cannot_run(plans: &[Vec<Arc<CellPlan>>]) -> Vec<(String, String)> {
    plans
        .iter()
        .filter_map(|cells| {
            let cell = cells.first()?;
            Some((cell.eval.clone(), cell.cannot_run.clone()?))
        })
        .collect()
}
