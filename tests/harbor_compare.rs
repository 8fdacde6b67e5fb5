//! A comparison on Harbor tasks, against the real Docker engine: the tasks
//! under `tests/harbor/compare/` run with the scripted shell agent in a
//! baseline (`control`) and in a variant that adds the file the tasks need
//! (`NOTES.md`, as a `#[reeval::variant]` adding a skill or a file would). One
//! task is solved only with the file (reward 0 → 1), the other gets partial
//! credit without it (a multi-key `reward.json`, 0.25 → 1). The paired
//! verdict on pass/fail and the one on rewards both say **helped**, and each
//! cell reports its mean reward with its interval beside its pass rate.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use reeval::compare::{Arms, Variant};
use reeval::stats::paired::Verdict;
use reeval::{Outcome, Record};

const NOTES: &str = "answer: 42\nfact: beta\nfact: gamma\nfact: delta\n";
const TRIALS: u32 = 4;

fn tasks_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/compare")
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_variant_that_adds_the_needed_file_helped() {
    require_docker!();
    let evals = reeval::harbor::tasks(tasks_dir()).expect("the compare tasks load");
    let with_notes = Variant::new("with_notes", |env| env.file("NOTES.md", NOTES));
    let runner = common::runner_with("harbor-compare", |c| {
        c.settings.harnesses = vec!["shell".into()];
        c.settings.trials = Some(TRIALS);
        c.settings.test_threads = 4;
        c.compare = Some(Arms::Variants(Variant::control(), with_notes));
    });
    let report = runner.run(evals).await.expect("preflight passes");
    assert_eq!(report.records.len(), 2 * 2 * TRIALS as usize, "no retries, nothing left out");

    // The attempts: the file made the difference, reward by reward.
    let reward = |r: &Record| -> f64 {
        let reward =
            r.reward.as_ref().unwrap_or_else(|| panic!("{}: {:?}", r.attempt_label(), r.message));
        reward["reward"]
    };
    for r in &report.records {
        let (arm, eval) = (r.arm.as_deref().unwrap(), r.eval.as_str());
        let want = match (eval, arm) {
            ("needs-notes", "control") => 0.0,
            ("partial-notes", "control") => 0.25,
            (_, "with_notes") => 1.0,
            other => panic!("unexpected cell {other:?}"),
        };
        assert_eq!(reward(r), want, "{}: {:?}", r.attempt_label(), r.reward);
        let passed =
            if want >= 1.0 { Outcome::Pass } else { Outcome::Fail(reeval::FailKind::Assertion) };
        assert_eq!(r.outcome, passed, "{}: {:?}", r.attempt_label(), r.message);
        assert_eq!(r.reward_threshold, Some(1.0), "the threshold is recorded");
    }

    // Each cell: its mean reward with an interval beside its pass rate.
    let cells: BTreeMap<(String, String), &reeval::record::CellSummary> = report
        .summary
        .cells
        .iter()
        .map(|c| ((c.eval.clone(), c.arm.clone().unwrap_or_default()), c))
        .collect();
    let cell = |eval: &str, arm: &str| cells[&(eval.to_string(), arm.to_string())];
    let partial = cell("partial-notes", "control").reward.clone().expect("a mean reward");
    assert_eq!((partial.n, partial.unrewarded), (TRIALS, 0));
    assert!((partial.mean - 0.25).abs() < 1e-9, "{partial:?}");
    assert_eq!(partial.method, reeval::stats::reward::BOUNDED_WILSON);
    let [lo, hi] = partial.interval.expect("an interval");
    assert!(lo < 0.25 && hi > 0.25 && lo >= 0.0 && hi <= 1.0, "{lo} {hi}");
    assert_eq!(partial.keys["facts"].mean, 1.0, "every key of the multi-key reward is kept");
    let solved = cell("needs-notes", "with_notes").reward.clone().unwrap();
    assert_eq!(solved.mean, 1.0);
    assert_eq!(
        solved.interval,
        reeval::stats::wilson_interval(TRIALS, TRIALS),
        "rewards of 1 have the pass rate's own interval"
    );
    assert_eq!(cell("needs-notes", "with_notes").pass_rate, Some(1.0));

    // The summary on disk says the same.
    let summary = common::json(&report.run_dir.join("summary.json"));
    let on_disk = summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["eval"] == "partial-notes" && c["arm"] == "control")
        .unwrap();
    assert_eq!(on_disk["reward"]["mean"], 0.25);
    assert!(on_disk["reward"]["interval"].is_array(), "{on_disk:#}");

    // The comparison: helped, on pass/fail and on rewards.
    let cmp = report.summary.comparison.as_ref().expect("a comparison");
    assert_eq!(cmp.overall.verdict, Verdict::Helped, "{}", reeval::report::compare::table(cmp));
    let overall = cmp.overall.reward.as_ref().expect("rewards compared");
    assert_eq!(overall.verdict, Verdict::Helped, "{overall:?}");
    assert_eq!((overall.pairs, overall.unrewarded), (2 * TRIALS, 0));
    assert!((overall.difference - 0.875).abs() < 1e-9, "{overall:?}");
    // Rewards of 0 and 1: the rewards' interval is the pass/fail row's own (Newcombe's).
    let needs_row = cmp.evals.iter().find(|r| r.eval == "needs-notes").unwrap();
    let [lo, hi] = needs_row.reward.as_ref().unwrap().interval.unwrap();
    let [plo, phi] = needs_row.interval.unwrap();
    assert!((lo - plo).abs() < 1e-12 && (hi - phi).abs() < 1e-12, "{lo} {hi} vs {plo} {phi}");
    let partial_row = cmp.evals.iter().find(|r| r.eval == "partial-notes").unwrap();
    let row_reward = partial_row.reward.as_ref().unwrap();
    assert!((row_reward.control_mean - 0.25).abs() < 1e-9);
    assert_eq!(row_reward.treatment_mean, 1.0);
    assert_eq!(partial_row.control.mean_reward, Some(0.25));
    let table = reeval::report::compare::table(cmp);
    eprintln!("{table}");
    assert!(table.contains("mean reward 0.25 → 1.00, difference +0.75"), "{table}");
    assert_eq!(summary["comparison"]["overall"]["reward"]["verdict"], "helped");
}
