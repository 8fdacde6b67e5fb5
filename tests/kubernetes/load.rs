//! The load scenario (`tests/common/load.rs`) on the test cluster, at the size
//! its one two-core node holds: `REEVAL_LOAD_ATTEMPTS` attempts (24 by
//! default) at 8 at once with the shell harness, quiet, then while a pod of
//! the run is deleted (grace 0) every `REEVAL_LOAD_KILL_EVERY_MS` (4000). Every
//! record is on disk, nothing of the run is left on the cluster, every trial
//! passes in the end, and only tries the platform lost are retried. Prints
//! the figures (docs/performance.md, "The load test").

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use kube::api::{DeleteParams, ListParams};
use reeval::RunReport;
use reeval::sandbox::kubernetes::kube;

use super::faults::{left_on_the_cluster, pods};
use super::*;

const CONCURRENCY: usize = 8;

fn attempts() -> u32 {
    std::env::var("REEVAL_LOAD_ATTEMPTS").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

fn kill_every() -> Duration {
    let ms = std::env::var("REEVAL_LOAD_KILL_EVERY_MS").ok().and_then(|v| v.parse().ok());
    Duration::from_millis(ms.unwrap_or(4000))
}

/// A turn that works for a moment and leaves a file; a check that reads it.
fn busy_eval() -> Eval {
    Eval::new("kube_load", |c| {
        Box::pin(async move {
            c.send("sleep 1; echo done > out.txt").await?;
            expect(c.exec("cat out.txt").await?).to_succeed()?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(120))
}

/// The run's attempt pods that are running (not its gateway's), each with
/// its trial (the attempt's label without its `.tryN`).
async fn running_attempt_pods(run_id: &str) -> Vec<(String, String)> {
    let list = ListParams::default().labels(&format!("dev.reeval.run={run_id}"));
    let Ok(found) = pods().await.list(&list).await else { return Vec::new() };
    found
        .items
        .into_iter()
        .filter(|p| p.data["status"]["phase"] == "Running")
        .filter_map(|p| {
            let attempt = p.metadata.labels.as_ref()?.get("dev.reeval.attempt")?;
            let trial = attempt.rsplit_once(".try").map_or(attempt.as_str(), |(t, _)| t);
            Some((p.metadata.name?, trial.to_string()))
        })
        .filter(|(n, _)| !n.contains("gateway"))
        .collect()
}

/// Runs `trials` trials at concurrency 8, with a pod deleted every `kill`
/// when given; returns the report, its wall time and the pods deleted.
async fn run(
    tag: &str,
    trials: u32,
    retries: u32,
    kill: Option<Duration>,
) -> (RunReport, Duration, usize) {
    let run_id = format!("{tag}-{}", std::process::id());
    let id = run_id.clone();
    let runner = common::runner_with(tag, |c| {
        c.settings.run_id = id;
        c.settings.backend = reeval::sandbox::BackendConfig::Kubernetes(Box::new(config()));
        c.settings.test_threads = CONCURRENCY;
        c.settings.trials = Some(trials);
        c.settings.infra_retries = retries;
    });
    let kills = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(tokio::sync::Notify::new());
    let killer = kill.map(|every| {
        let (run_id, kills, stop) = (run_id.clone(), kills.clone(), stop.clone());
        tokio::spawn(async move {
            let mut n = 0usize;
            let mut hit = std::collections::HashSet::new();
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = stop.notified() => return,
                }
                // Once per trial: at the run's end the last trial's retried pod is
                // often the only one running, and deleting it each time would spend
                // every retry of that one trial (a CI run saw it: 4 tries, 4 deletions).
                let running: Vec<_> = running_attempt_pods(&run_id)
                    .await
                    .into_iter()
                    .filter(|(_, trial)| !hit.contains(trial))
                    .collect();
                if running.is_empty() {
                    continue;
                }
                // A different pod each time, by a simple walk over the list.
                let (victim, trial) = &running[n % running.len()];
                hit.insert(trial.clone());
                n += 1;
                let delete = DeleteParams::default().grace_period(0);
                if pods().await.delete(victim, &delete).await.is_ok() {
                    kills.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    });
    let began = Instant::now();
    let report = runner.run(vec![busy_eval()]).await.expect("preflight passes");
    let wall = began.elapsed();
    stop.notify_one();
    if let Some(k) = killer {
        k.await.expect("killer");
    }
    (report, wall, kills.load(Ordering::Relaxed))
}

/// What every load run holds: each record on disk and whole, nothing left.
async fn assert_complete(report: &RunReport) {
    common::faults::assert_complete_and_clean(report, None);
    assert!(report.run_dir.join("summary.json").exists(), "the summary is written");
    assert_eq!(left_on_the_cluster(&report.run_id).await, "nothing", "nothing of the run is left");
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn load_on_the_cluster_with_pods_deleted() {
    let Some(_cluster) = shared().await else { return };
    let trials = attempts();

    let (report, wall, _) = run("kube-load-quiet", trials, 0, None).await;
    eprintln!(
        "kube load without faults: {trials} attempts at concurrency {CONCURRENCY}: wall {:.1} s, {} records",
        wall.as_secs_f64(),
        report.records.len()
    );
    assert_complete(&report).await;
    assert_eq!(report.records.len(), trials as usize, "one try per trial");
    let failed: Vec<_> =
        report.records.iter().filter(|r| r.outcome != Outcome::Pass).map(|r| &r.message).collect();
    assert!(failed.is_empty(), "every attempt passes: {failed:?}");

    let (report, wall, kills) = run("kube-load-kills", trials, 3, Some(kill_every())).await;
    let retried = report.records.iter().filter(|r| r.try_ > 1).count();
    eprintln!(
        "kube load with pods deleted: {trials} attempts at concurrency {CONCURRENCY}: wall {:.1} s, \
         {} records, {kills} pods deleted, {retried} tries retried",
        wall.as_secs_f64(),
        report.records.len()
    );
    assert_complete(&report).await;
    assert!(kills > 0, "the killer deleted a pod");
    common::load::every_trial_passes_after_lost_tries(&report, trials);
    // A deletion can land on a pod whose attempt already has its record.
    assert!(retried <= kills, "{retried} retries but only {kills} pods deleted");
    assert_eq!(report.exit_code(), 0, "every lost attempt was retried and passed");
}
