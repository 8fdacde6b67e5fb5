//! Starting ahead against the real Docker engine: with `prestart`, attempts
//! waiting for a slot get their container made meanwhile, use it when their
//! slot comes (fresh, one each), and nothing is left behind, also when an
//! attempt never touches its sandbox.

mod common;

use reeval::prelude::*;
use reeval::{Eval, Outcome, Record};

fn container_detail(r: &Record) -> &str {
    r.phases
        .iter()
        .find(|p| p.phase.as_str() == "container")
        .map(|p| p.detail.as_str())
        .unwrap_or("")
}

#[tokio::test]
async fn waiting_attempts_start_ahead_and_leave_nothing_behind() {
    require_docker!();
    let touches = Eval::new("touches", |c| {
        Box::pin(async move {
            // Fresh: nothing an earlier attempt wrote is here.
            expect(c.exec("test ! -e mine.txt && echo mine > mine.txt").await?).to_succeed()
        })
    });
    let never = Eval::new("never_touches", |_c| Box::pin(async move { expect(1).to_equal(1) }));
    let report = common::runner_with("start-ahead", |c| {
        c.threads = 1;
        c.trials = Some(3);
        c.prestart = 2;
    })
    .run(vec![touches, never])
    .await
    .expect("preflight");
    assert_eq!(report.records.len(), 6);
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}", r.eval, r.message);
    }
    let ahead = report
        .records
        .iter()
        .filter(|r| container_detail(r).ends_with("started ahead of its slot"))
        .count();
    assert!(ahead >= 1, "some attempt waited and started ahead");
    // Each attempt that used a container had its own.
    let mut ids: Vec<&str> = report.records.iter().filter_map(|r| r.container.as_deref()).collect();
    let used = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), used, "no container served two attempts");
    assert_eq!(
        common::containers_of_run(&report.run_id).await,
        0,
        "unused ones were destroyed too"
    );
}
