//! The quickstart suite (`examples/quickstart.rs`, compiled into this test
//! binary) on the test cluster with its settings, 8 attempts at a time: every
//! attempt passes on its first try, `serve` and `capture` included.

use super::*;

/// Trials of each eval: enough attempts to keep 8 pods going at once. The
/// test cluster's pods share the node's network, where two trials of
/// `serves_a_page` at once would share its port 8000: it runs once.
const TRIALS: u32 = 3;

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn the_quickstart_suite_passes_on_the_cluster_8_at_a_time() {
    let Some(_cluster) = shared().await else { return };
    let evals: Vec<Eval> = reeval::__private::registered_evals()
        .into_iter()
        .map(|e| {
            let trials = if e.name().ends_with("serves_a_page") { 1 } else { TRIALS };
            e.trials(trials)
        })
        .collect();
    let names: Vec<String> = evals.iter().map(|e| e.name().to_string()).collect();
    assert!(
        names.iter().any(|n| n.ends_with("serves_a_page")) && names.len() >= 5,
        "the quickstart's evals: {names:?}"
    );
    let runner = common::runner_with("kube-quickstart", |c| {
        c.settings.backend = reeval::sandbox::BackendConfig::Kubernetes(Box::new(config()));
        c.settings.test_threads = 8;
    });
    let began = std::time::Instant::now();
    let report = runner.run(evals).await.expect("preflight passes");
    eprintln!(
        "the quickstart suite, {} attempts: {:.1}s",
        report.records.len(),
        began.elapsed().as_secs_f64()
    );
    let failed: Vec<String> = report
        .records
        .iter()
        .filter(|r| r.outcome != Outcome::Pass)
        .map(|r| format!("{} t{}: {:?} {:?}", r.eval, r.trial, r.outcome, r.message))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed:\n{}",
        failed.len(),
        report.records.len(),
        failed.join("\n")
    );
    assert_eq!(report.records.len(), (names.len() - 1) * TRIALS as usize + 1, "one try each");
    for r in report.records.iter().filter(|r| r.eval.ends_with("serves_a_page")) {
        let dir = report.run_dir.join(r.artifacts_dir_name());
        let page = std::fs::read_to_string(dir.join("captures/home.http.txt")).expect("the page");
        assert!(page.contains("<h1>It works</h1>"), "{page}");
    }
    no_pod_left(&report.run_id).await;
}
