//! The dispatcher: schedules every attempt (eval × harness × trial) on the
//! run's slots, owns retries (the one policy in `outcome::retry`) and the
//! run's shutdown signal, and turns what happens into [`RunEvent`]s for the
//! reporters. It prints and writes nothing itself.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use super::config_stops::ConfigStops;
use super::preflight::Preflighted;
use super::prestart::Prestart;
use super::setup_fill::{FillFrom, MAX_FILLS, SetupFills};
use super::teardown::{MAX_DESTROYS, Teardowns};
use super::{RunReport, Runner, final_tries, summarize_priced};
use crate::attempt::{self, AttemptPlan, CellPlan};
use crate::eval::Eval;
use crate::outcome::{Outcome, Retry};
use crate::record::Record;
use crate::report::Reporter;
use crate::report::events::{EventSink, RunEvent};
use crate::sandbox::Sweep;

/// Runs every attempt of `evals` and reports as it goes.
pub(crate) async fn dispatch(
    runner: &Runner,
    evals: Vec<Eval>,
    ready: Preflighted,
    harness_versions: BTreeMap<String, String>,
    reporters: &mut [Box<dyn Reporter>],
) -> RunReport {
    let config = &runner.config;
    let run_dir = config.record_dir.join(&config.run_id);
    let Preflighted { pool, plans, redactor, detail, engine } = ready;
    let started = std::time::SystemTime::now();
    let (tx, mut rx) = mpsc::unbounded_channel::<RunEvent>();
    // One gateway for the run, started by the first attempt that needs a way out.
    let egress = Arc::new(crate::egress::RunEgress::new(config.egress.clone()));

    // Fetch git workspaces on the host before the run; an attempt reports a failed fetch itself.
    let mut fetched = Vec::new();
    for plan in plans.iter().flatten().filter(|p| p.cannot_run.is_none()) {
        if let Some(crate::environment::Workspace::Git { url, rev, .. }) = &plan.env.workspace
            && !fetched.contains(&(url, rev))
        {
            fetched.push((url, rev));
            let _ = crate::workspace::fetch_git(url, rev).await;
        }
    }
    for engine in pool.engines() {
        if let Ok(n) = engine.backend.sweep(Sweep::Orphans).await
            && n > 0
        {
            crate::report::say(&format!(
                "reeval: removed {n} containers left on {} by runs that were killed\n",
                engine.name
            ));
        }
    }

    let ahead = ensure_images_ahead(&plans, &pool);
    let slots = Arc::new(Semaphore::new(config.threads.max(1)));
    let turnstile = Arc::new(Turnstile::default());
    let mut next_ticket = 0;
    let teardowns = Arc::new(Teardowns::new(MAX_DESTROYS));
    let fills =
        Arc::new(SetupFills::new(MAX_FILLS, config.setup_cache_max_bytes, runner.shutdown.clone()));
    let prestart = Prestart::new(config.prestart);
    let config_stops = Arc::new(ConfigStops::default());
    let mut set: JoinSet<usize> = JoinSet::new();
    let mut pending: BTreeMap<usize, usize> = BTreeMap::new();
    let mut tasks = HashMap::new();
    // Each eval's records, as indices into `all` (one copy of each record:
    // a run of many attempts with long final messages holds them all). A
    // record reaches dispatch once, in its `AttemptEnded` event.
    let mut results: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut all: Vec<Record> = Vec::new();
    let index_of: HashMap<&str, usize> =
        evals.iter().enumerate().rev().map(|(i, e)| (e.name.as_str(), i)).collect();
    // Every record, summary or report that could not be written: an error of the run.
    let mut lost: Vec<String> = Vec::new();
    for (i, eval) in evals.iter().enumerate() {
        let trials = config.trials.unwrap_or(eval.options.trials).max(1);
        let cells = &plans[i];
        pending.insert(i, cells.len() * trials as usize);
        // Trials outside, cells (harnesses, arms) inside: a comparison's arms
        // take turns, so that a provider drifting over the run hits both alike.
        for trial in 1..=trials {
            for cell in cells {
                let (spec, arm) = (&cell.harness_spec, cell.arm.as_deref());
                // A resumed run keeps the trials it recorded.
                let kept: Vec<Record> = runner
                    .kept
                    .iter()
                    .filter(|r| {
                        r.eval == eval.name
                            && r.harness == *spec
                            && r.arm.as_deref() == arm
                            && r.trial == trial
                    })
                    .cloned()
                    .collect();
                if !kept.is_empty() {
                    results.entry(i).or_default().extend(all.len()..all.len() + kept.len());
                    all.extend(kept);
                    *pending.get_mut(&i).expect("planned above") -= 1;
                    continue;
                }
                // A trial recorded before in this run (nextest's --retries runs the process
                // again; --resume completes the run) is numbered on, never overwritten.
                let try_ = crate::report::runs::next_try(&run_dir, &eval.name, spec, arm, trial);
                let plan = AttemptPlan {
                    cell: cell.clone(),
                    run_id: config.run_id.clone(),
                    run_dir: run_dir.clone(),
                    trial,
                    try_,
                    events: Some(tx.clone()),
                    preflight: detail.clone(),
                    redactor: redactor.clone(),
                    egress: egress.clone(),
                    setup_cache: config.setup_cache,
                    ask_fill: None,
                };
                let trial_run = TrialRun {
                    slots: slots.clone(),
                    turnstile: turnstile.clone(),
                    ticket: next_ticket,
                    pool: pool.clone(),
                    harnesses: runner.harnesses.clone(),
                    shutdown: runner.shutdown.clone(),
                    retries: config.infra_retries,
                    events: tx.clone(),
                    teardowns: teardowns.clone(),
                    fills: fills.clone(),
                    prestart: prestart.clone(),
                    config_stops: config_stops.clone(),
                };
                next_ticket += 1;
                let task = set.spawn(async move {
                    trial_run.run(plan).await;
                    i
                });
                tasks.insert(task.id(), (i, spec.clone(), cell.arm.clone(), trial));
            }
        }
    }
    let planned = set.len();
    let cells: usize = plans.iter().map(Vec::len).sum();
    report_all(
        reporters,
        &mut lost,
        &RunEvent::Planned {
            run_id: config.run_id.clone(),
            run_dir: run_dir.clone(),
            evals: evals.iter().map(|e| e.name.clone()).collect(),
            cannot_run: cannot_run(&plans),
            cells,
            attempts: planned,
        },
    );
    drop(tx);
    // Evals whose every trial a resumed run kept are done already.
    for (&i, left) in &pending {
        if *left == 0 {
            let finals =
                final_tries(results[&i].iter().map(|&k| &all[k])).into_iter().cloned().collect();
            report_all(
                reporters,
                &mut lost,
                &RunEvent::EvalEnded { eval: evals[i].name.clone(), finals },
            );
        }
    }

    // Reporters that watch the clock (progress, slow attempts) hear from it every second.
    let mut ticks = tokio::time::interval(std::time::Duration::from_secs(1));
    let mut events_open = true;
    while !set.is_empty() || events_open {
        tokio::select! {
            _ = ticks.tick() => report_all(reporters, &mut lost, &RunEvent::Tick),
            event = rx.recv(), if events_open => match event {
                Some(event) => {
                    report_all(reporters, &mut lost, &event);
                    keep(event, &index_of, &mut results, &mut all);
                }
                None => events_open = false,
            },
            Some(joined) = set.join_next_with_id(), if !set.is_empty() => {
                let i = match joined {
                    Ok((_, i)) => i,
                    Err(e) => {
                        // A bug of ours (the eval's panics are caught inside): still a record, never a silent gap.
                        let (i, spec, arm, trial) = tasks.remove(&e.id()).expect("every task is known");
                        let mut r = Record::new(&config.run_id, &evals[i].name, &spec, trial, 1);
                        r.arm = arm;
                        r.outcome = Outcome::InfraError;
                        r.message = Some(format!("failed to run the attempt: {e}"));
                        let event = RunEvent::AttemptEnded { record: Box::new(r), retry: Retry::Final };
                        report_all(reporters, &mut lost, &event);
                        keep(event, &index_of, &mut results, &mut all);
                        i
                    }
                };
                // The attempts' own events come first: drain what they sent before their end.
                while let Ok(event) = rx.try_recv() {
                    report_all(reporters, &mut lost, &event);
                    keep(event, &index_of, &mut results, &mut all);
                }
                let left = pending.get_mut(&i).expect("known eval");
                *left -= 1;
                if *left == 0 {
                    let finals = final_tries(results[&i].iter().map(|&k| &all[k])).into_iter().cloned().collect();
                    report_all(reporters, &mut lost, &RunEvent::EvalEnded { eval: evals[i].name.clone(), finals });
                }
            }
        }
    }
    ahead.abort();
    // Every sandbox destroyed in the background is gone before the run ends,
    // also when it was interrupted.
    teardowns.wait_all().await;
    // The setup cache's fills too: a later run may then hit what this one prepared.
    fills.wait_all().await;
    // Sandboxes whose attempt lost track of them (a create cut short, an engine
    // that went away and came back) go now, not at the next run.
    for engine in pool.engines() {
        let _ = engine.backend.sweep(Sweep::OwnRun(&config.run_id)).await;
    }
    missing_records(&run_dir, &all, &mut lost);
    let mut summary = summarize_priced(&config.run_id, &all, &config.prices);
    summary.comparison = runner.comparison(&all);
    summary.provenance = super::provenance::of_run(started, engine, harness_versions);
    summary.suite = config.suite.clone();
    summary.partition = config.partition.map(|p| p.to_string());
    let interrupted = runner.shutdown.is_cancelled();
    let counted = (summary.exit_code, summary.exit_reason.clone());
    super::settle_exit(&mut summary, &counted, interrupted, &lost);
    if !lost.is_empty() {
        // The summary lists the records that are there, not those a full disk lost.
        summary.records.retain(|f| run_dir.join(f).is_file());
    }
    let mut report = RunReport { run_id: config.run_id.clone(), run_dir, records: all, summary };
    // The files first (report.html before the summary, which then knows whether it was
    // written), the console last: each hears of what the ones before it failed to write.
    for r in reporters.iter_mut() {
        if let Err(e) = r.finish(&report) {
            crate::report::say(&format!("reeval: {e}\n"));
            lost.push(e.to_string());
            super::settle_exit(&mut report.summary, &counted, interrupted, &lost);
        }
    }
    report
}

/// Makes every image the run's attempts need present on every engine, one
/// after the other, while the first attempts run and the others wait for a
/// slot: an attempt whose image is ready skips the wait in its image phase.
/// Failures are left to the attempts, which report them. Images are built
/// once per digest (a lock per digest), so an attempt that needs an image
/// being built here waits for that build.
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

fn ensure_images_ahead(
    plans: &[Vec<Arc<CellPlan>>],
    pool: &Arc<super::pool::Pool>,
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

/// A record that was written but is gone at the end (its directory removed
/// during the run, the writer then making it again for later records) is lost
/// as surely as one a full disk refused: said with its path and attempt, and
/// counted in `lost`, so the run is no success.
fn missing_records(run_dir: &std::path::Path, records: &[Record], lost: &mut Vec<String>) {
    for r in records {
        let path = run_dir.join(r.file_name());
        let named = path.display().to_string();
        if path.is_file() || lost.iter().any(|l| l.contains(&named)) {
            continue;
        }
        let e = format!(
            "failed to keep the record {named} of attempt {}: it was removed during the run",
            r.attempt_label()
        );
        crate::report::say(&format!("reeval: {e}\n"));
        lost.push(e);
    }
}

/// Keeps the record an `AttemptEnded` event carries (moved, not copied), as
/// one of its eval's records.
fn keep(
    event: RunEvent,
    index_of: &HashMap<&str, usize>,
    results: &mut BTreeMap<usize, Vec<usize>>,
    all: &mut Vec<Record>,
) {
    if let RunEvent::AttemptEnded { record, .. } = event
        && let Some(&i) = index_of.get(record.eval.as_str())
    {
        results.entry(i).or_default().push(all.len());
        all.push(*record);
    }
}

/// Gives `event` to every reporter; what one fails to write is said at once
/// and kept in `lost`, which makes it an error of the run.
fn report_all(reporters: &mut [Box<dyn Reporter>], lost: &mut Vec<String>, event: &RunEvent) {
    for r in reporters.iter_mut() {
        if let Err(e) = r.event(event) {
            crate::report::say(&format!("reeval: {e}\n"));
            lost.push(e.to_string());
        }
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

/// One trial's tries: each waits for a slot, runs with a fresh sandbox, and
/// the retry policy decides whether another try follows.
struct TrialRun {
    slots: Arc<Semaphore>,
    /// First tries queue for a slot in the order they were planned.
    turnstile: Arc<Turnstile>,
    /// This trial's place in that order.
    ticket: u64,
    pool: Arc<super::pool::Pool>,
    harnesses: crate::harness::HarnessRegistry,
    shutdown: tokio_util::sync::CancellationToken,
    retries: u32,
    events: EventSink,
    teardowns: Arc<Teardowns>,
    fills: Arc<SetupFills>,
    prestart: Prestart,
    /// Cells that found a config error: their remaining attempts do not run.
    config_stops: Arc<ConfigStops>,
}

impl TrialRun {
    /// Runs the trial's tries; each one's record goes out in its `AttemptEnded` event.
    async fn run(self, mut plan: AttemptPlan) {
        if let Some(r) = super::config_stops::cannot_run(&plan) {
            // It takes no slot, but its turn in the plan's order: later tries wait for it.
            self.turnstile.wait_for(self.ticket).await;
            self.turnstile.advance();
            let _ = self
                .events
                .send(RunEvent::AttemptEnded { record: Box::new(r), retry: Retry::Final });
            return;
        }
        // Tries of this process: a trial numbered on from an earlier process still gets its retries.
        let mut tried = 0;
        loop {
            tried += 1;
            // An attempt that will wait for its slot may have its container made meanwhile.
            let ahead = match self.pool.only_engine() {
                Some(backend)
                    if self.slots.available_permits() == 0
                        && self.config_stops.stopped(&plan).is_none() =>
                {
                    self.prestart.create(&plan, &backend).await
                }
                _ => None,
            };
            // Waiting for a slot spends no budget: the budget starts inside the attempt.
            // A first try queues in plan order (the runtime polls spawned tasks in
            // an order of its own); a retry queues when it is decided.
            let slot = if tried == 1 {
                self.turnstile.wait_for(self.ticket).await;
                let slot = self.slots.acquire().await;
                self.turnstile.advance();
                slot
            } else {
                self.slots.acquire().await
            }
            .expect("the semaphore is never closed");
            let prestarted = ahead.map(|a| a.into_sandbox());
            if let Some(r) = self.config_stops.stopped(&plan) {
                if let Some((sandbox, _)) = prestarted {
                    self.teardowns.destroy(sandbox);
                }
                let _ = self
                    .events
                    .send(RunEvent::AttemptEnded { record: Box::new(r), retry: Retry::Final });
                return;
            }
            // Then a slot on the engine with the most free ones.
            let engine = match self.pool.acquire().await {
                Ok(slot) => slot,
                Err(e) => {
                    if let Some((sandbox, _)) = prestarted {
                        self.teardowns.destroy(sandbox);
                    }
                    let mut r = plan.new_record();
                    r.outcome = Outcome::InfraError;
                    r.message = Some(e.to_string());
                    let _ = self.events.send(RunEvent::AttemptEnded {
                        record: Box::new(r),
                        retry: Retry::Hopeless,
                    });
                    return;
                }
            };
            let _ = self.events.send(RunEvent::AttemptStarted(plan.id()));
            let harness = self.harnesses.make(&plan.cell.harness_spec);
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
            let _ =
                self.events.send(RunEvent::AttemptEnded { record: Box::new(done.record), retry });
            drop(slot);
            if retry != Retry::Again {
                return;
            }
            plan.try_ += 1;
        }
    }
}
