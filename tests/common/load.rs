//! The load scenario of the fault matrix (issue 19), shared by `tests/load.rs`
//! (CI's size) and `benches/load.rs` (its full size, 200 attempts): attempts
//! at concurrency 16 with the shell harness against the real engine, every
//! record written and nothing left on the engine; then the same while a
//! sandbox of the run is killed every few seconds, every killed attempt
//! retried with a fresh sandbox and the rest untouched. Prints the figures
//! (attempts, concurrency, wall time, peak RSS of this process, records,
//! leftovers). `REEVAL_LOAD_KILL_EVERY_MS` sets the kill interval (3000 by default).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record, RunReport};

const CONCURRENCY: usize = 16;

fn kill_every() -> Duration {
    let ms = std::env::var("REEVAL_LOAD_KILL_EVERY_MS").ok().and_then(|v| v.parse().ok());
    Duration::from_millis(ms.unwrap_or(3000))
}

/// A turn that works for a moment and leaves a file; a check that reads it.
fn busy_eval() -> Eval {
    Eval::new("load", |c| {
        Box::pin(async move {
            c.send("sleep 1; echo done > out.txt").await?;
            expect(c.exec("cat out.txt").await?).to_succeed()?;
            Ok(())
        })
    })
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Running containers of the run: the attempts' sandboxes (and any gateway).
async fn running_of_run(docker: &Docker, run_id: &str) -> Vec<String> {
    let filters = HashMap::from([
        ("label", vec![format!("dev.reeval.run={run_id}")]),
        ("status", vec!["running".to_string()]),
    ]);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(opts))
        .await
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

/// Networks labelled with the run id (a gateway's), left after the run.
async fn networks_of_run(docker: &Docker, run_id: &str) -> usize {
    let filters = HashMap::from([("label", vec![format!("dev.reeval.run={run_id}")])]);
    let opts =
        bollard::query_parameters::ListNetworksOptionsBuilder::default().filters(&filters).build();
    docker.list_networks(Some(opts)).await.map(|n| n.len()).unwrap_or(0)
}

struct Figures {
    wall: Duration,
    peak_mb: f64,
    records: usize,
    on_disk: usize,
    leftover_containers: usize,
    leftover_networks: usize,
}

/// Runs `trials` trials of the busy eval at concurrency 16, optionally with
/// a killer, and checks what every load run must hold.
async fn run_load(
    tag: &str,
    trials: u32,
    infra_retries: u32,
    kill: Option<Duration>,
) -> (RunReport, Figures, usize) {
    let run_id = format!("load-{tag}-{}", std::process::id());
    let runner = super::runner_with(tag, |c| {
        c.settings.run_id = run_id.clone();
        c.settings.test_threads = CONCURRENCY;
        c.settings.trials = Some(trials);
        c.settings.infra_retries = infra_retries;
    });
    let docker = super::inject::docker().await;
    let kills = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let killer = kill.map(|every| {
        let (docker, run_id, kills, stop) =
            (docker.clone(), run_id.clone(), kills.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0usize;
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.notified() => return,
                }
                let running = running_of_run(&docker, &run_id).await;
                if running.is_empty() {
                    continue;
                }
                // A different sandbox each time, by a simple walk over the list.
                let victim = &running[n % running.len()];
                n += 1;
                let opts = bollard::query_parameters::KillContainerOptionsBuilder::default()
                    .signal("SIGKILL")
                    .build();
                if docker.kill_container(victim, Some(opts)).await.is_ok() {
                    kills.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    });

    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let began = Instant::now();
    let report = runner.run(vec![busy_eval()]).await.expect("preflight passes");
    let wall = began.elapsed();
    let peak_mb = peak_rss_kib() as f64 / 1024.0;
    stop.notify_one();
    if let Some(k) = killer {
        k.await.expect("killer");
    }

    let on_disk = std::fs::read_dir(&report.run_dir)
        .expect("run dir")
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.ends_with(".json") && !name.starts_with("summary")
        })
        .map(|e| {
            let bytes = std::fs::read(e.path()).expect("read record");
            let _: Record = serde_json::from_slice(&bytes)
                .unwrap_or_else(|err| panic!("{} does not parse: {err}", e.path().display()));
        })
        .count();
    let figures = Figures {
        wall,
        peak_mb,
        records: report.records.len(),
        on_disk,
        leftover_containers: super::containers_of_run(&run_id).await,
        leftover_networks: networks_of_run(&docker, &run_id).await,
    };
    (report, figures, kills.load(Ordering::Relaxed))
}

fn print_figures(what: &str, trials: u32, f: &Figures, extra: &str) {
    eprintln!(
        "load {what}: {trials} attempts at concurrency {CONCURRENCY}: wall {:.1} s, peak RSS {:.1} MB, \
         {} records ({} on disk), leftovers: {} containers, {} networks{extra}",
        f.wall.as_secs_f64(),
        f.peak_mb,
        f.records,
        f.on_disk,
        f.leftover_containers,
        f.leftover_networks
    );
}

fn assert_complete(report: &RunReport, f: &Figures) {
    assert_eq!(f.records, f.on_disk, "every record is on disk");
    assert_eq!(f.leftover_containers, 0, "no container of the run is left");
    assert_eq!(f.leftover_networks, 0, "no network of the run is left");
    assert!(
        !report
            .run_dir
            .read_dir()
            .expect("run dir")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
    );
    assert!(report.run_dir.join("summary.json").exists(), "the summary is written");
}

/// `REEVAL_LOAD_ATTEMPTS`, else `default`.
pub fn attempts_or(default: u32) -> u32 {
    std::env::var("REEVAL_LOAD_ATTEMPTS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Both runs of `trials` attempts, quiet and with kills, and what each must hold.
pub async fn scenario(trials: u32) {
    // Quiet: every attempt passes, once.
    let (report, f, _) = run_load("quiet", trials, 0, None).await;
    print_figures("without faults", trials, &f, "");
    assert_complete(&report, &f);
    assert_eq!(f.records, trials as usize, "one try per trial");
    let failed: Vec<_> = report.records.iter().filter(|r| r.outcome != Outcome::Pass).collect();
    assert!(
        failed.is_empty(),
        "every attempt passes: {:?}",
        failed.iter().map(|r| &r.message).collect::<Vec<_>>()
    );
    assert_eq!(report.exit_code(), 0);

    // A sandbox of the run killed every few seconds: each killed attempt is an
    // infra error retried with a fresh sandbox; no trial fails.
    let (report, f, kills) = run_load("kills", trials, 3, Some(kill_every())).await;
    let retried = report.records.iter().filter(|r| r.try_ > 1).count();
    print_figures(
        "with killed sandboxes",
        trials,
        &f,
        &format!(", {kills} sandboxes killed, {retried} tries retried"),
    );
    assert_complete(&report, &f);
    assert!(kills > 0, "the killer killed something");
    every_trial_passes_after_lost_tries(&report, trials);
    // A kill can land on a sandbox whose attempt already has its record
    // (teardown runs in the background), so retries never exceed kills.
    assert!(retried <= kills, "{retried} retries but only {kills} kills");
    assert_eq!(report.exit_code(), 0, "every killed attempt was retried and passed");
}

/// Every one of `trials` trials has records, its final try passed, and each
/// earlier try it was retried after was an infra error (the platform's loss).
pub fn every_trial_passes_after_lost_tries(report: &RunReport, trials: u32) {
    let mut by_trial: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for r in &report.records {
        by_trial.entry(r.trial).or_default().push(r);
    }
    assert_eq!(by_trial.len(), trials as usize, "every trial has records");
    for (trial, tries) in &by_trial {
        let last = tries.iter().max_by_key(|r| r.try_).expect("a try");
        assert_eq!(
            last.outcome,
            Outcome::Pass,
            "trial {trial}'s final try passes: {:?}",
            last.message
        );
        for earlier in tries.iter().filter(|r| r.try_ < last.try_) {
            assert_eq!(
                earlier.outcome,
                Outcome::InfraError,
                "trial {trial} try {} was retried, so it was the platform's: {:?}",
                earlier.try_,
                earlier.message
            );
        }
    }
}
