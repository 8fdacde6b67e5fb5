//! The page: escaping and redaction, grouping, the order of steps, paths,
//! statistics, a stopped turn.

use super::*;

#[test]
fn report_escapes_and_shows_phases() {
    let mut r = Record::new("run-1", "evil<script>", "shell", 1, 1);
    r.timings.total_ms = 100;
    r.message = Some("<b>not bold</b>".into());
    r.phases.push(crate::record::PhaseRecord {
        phase: crate::Phase::Turn,
        start_ms: 10,
        duration_ms: 50,
        detail: "1 completed".into(),
    });
    let summary = crate::report::summary::summarize("run-1", std::slice::from_ref(&r));
    let html = render(&summary, &[r], &crate::secrets::Redactor::new(["not bold"])).unwrap();
    assert!(html.contains("evil&#60;script&#62;") || html.contains("evil&lt;script&gt;"), "{html}");
    assert!(!html.contains("not bold") && html.contains("[redacted]"));
    assert!(html.contains("class=\"bar p-turn\" style=\"left: 10.00%; width: 50.00%\""), "{html}");
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing from the network");
}

#[test]
fn a_long_final_message_shows_its_redacted_end_on_the_page() {
    // The secret straddles the page's cut: redaction comes first, so no half of it shows.
    let secret = "sk-live-0123456789abcdef";
    let long =
        format!("{}{secret}{}THE END", "a".repeat(5000), "b".repeat(PAGE_MESSAGE_LIMIT - 20));
    let shown = message_end(crate::secrets::Redactor::new([secret]).redact(&long).into_owned());
    assert!(shown.ends_with("THE END") && shown.starts_with("[… "), "{shown:.80}");
    assert!(shown.len() < PAGE_MESSAGE_LIMIT + 80);
    assert!(!shown.contains("0123456789") && !shown.contains("abcdef"), "{shown:.200}");
    assert_eq!(message_end("short".into()), "short");
}

#[test]
fn the_evals_output_shows_redacted_and_escaped() {
    let mut r = Record::new("run-1", "prints", "shell", 1, 1);
    r.output = Some("checking <b>things</b> with sk-live-secret\nall done\n".into());
    let summary = crate::report::summary::summarize("run-1", std::slice::from_ref(&r));
    let html = render(&summary, &[r], &Redactor::new(["sk-live-secret"])).unwrap();
    assert!(html.contains("the eval&#39;s output") || html.contains("the eval's output"), "{html}");
    assert!(html.contains("with [redacted]\nall done"), "{html}");
    assert!(!html.contains("sk-live-secret") && !html.contains("<b>things"), "{html}");
    // Without output, no block.
    let quiet = Record::new("run-1", "quiet", "shell", 1, 1);
    let summary = crate::report::summary::summarize("run-1", std::slice::from_ref(&quiet));
    let html = render(&summary, &[quiet], &Redactor::new(Vec::<&str>::new())).unwrap();
    assert!(!html.contains("output</summary>"), "{html}");
}

#[test]
fn a_cost_priced_from_partial_usage_is_a_lower_bound() {
    let whole = crate::turn::Usage { input: Some(10), output: Some(2), ..Default::default() };
    assert_eq!(cost_text(Some(0.5), &whole), "$0.5000");
    assert!(!usage_text(&whole).contains("partial"));
    let partial = crate::turn::Usage { partial: true, ..whole };
    assert_eq!(cost_text(Some(0.5), &partial), "at least $0.5000");
    assert!(usage_text(&partial).ends_with("(partial: a turn was cut short before its totals)"));
    assert_eq!(cost_text(None, &partial), "unknown");
}

#[test]
fn failures_come_first_and_tries_are_grouped() {
    let mut pass = Record::new("run", "a_passes", "shell", 1, 1);
    pass.outcome = Outcome::Pass;
    let mut tries = Vec::new();
    for t in 1..=2 {
        let mut r = Record::new("run", "z_fails", "shell", 1, t);
        r.outcome =
            if t == 1 { Outcome::InfraError } else { Outcome::Fail(crate::FailKind::Judge) };
        tries.push(r);
    }
    let records = [pass, tries[0].clone(), tries[1].clone()];
    let summary = crate::report::summary::summarize("run", &records);
    let html = render(&summary, &records, &Redactor::new(Vec::<&str>::new())).unwrap();
    let fail = html.find("z_fails #1 [shell]").unwrap();
    let ok = html.find("a_passes #1 [shell]").unwrap();
    assert!(fail < ok, "the failing attempt comes first");
    assert_eq!(
        html.matches("id=\"attempt-z_fails-shell-1\"").count(),
        1,
        "one attempt, tries inside"
    );
    assert!(html.contains("try 1") && html.contains("try 2"));
}

#[test]
fn ticks_are_round() {
    let t = ticks(4_500);
    assert_eq!(
        t.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(),
        ["0s", "1s", "2s", "3s", "4s"]
    );
    assert_eq!(ticks(80)[1].1, "20ms");
}

fn phase(phase: crate::Phase, start_ms: u64, detail: &str) -> crate::record::PhaseRecord {
    crate::record::PhaseRecord { phase, start_ms, duration_ms: 5, detail: detail.into() }
}

fn turn(status: crate::TurnStatus, error: Option<&str>) -> crate::Turn {
    let mut t = crate::lifecycle::turn::started("do it".into());
    (t.status, t.error, t.duration_ms) = (status, error.map(Into::into), 30_000);
    t
}

fn check(command: &str, exit_code: i64, duration_ms: u64) -> crate::record::CheckRecord {
    crate::record::CheckRecord {
        command: command.into(),
        exit_code,
        duration_ms,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        oom_killed: false,
        changes: None,
        sandbox: None,
        service: None,
        step: None,
    }
}

fn titles(r: &Record) -> Vec<String> {
    steps::steps(r, &|s: &str| s.to_string())
        .into_iter()
        .map(|s| format!("{} {}", s.at, s.title))
        .collect()
}

#[test]
fn turns_checks_and_judge_calls_are_listed_in_the_order_they_ran() {
    use crate::Phase::{Check, Judge, Setup, Turn};
    let mut r = Record::new("run", "e", "shell", 1, 1);
    r.turns =
        vec![turn(crate::TurnStatus::Completed, None), turn(crate::TurnStatus::Completed, None)];
    r.checks = vec![check("pytest -q", 1, 40), check("ls", 0, 3)];
    let verdict = serde_json::json!({
        "criterion": "tidy", "score": 0.9, "threshold": 0.5, "pass": true, "reasoning": "ok", "usage": {},
    });
    r.verdicts = vec![serde_json::from_value(verdict).unwrap()];
    // Phases are recorded as they end: the list is not in start order.
    r.phases = vec![
        phase(Setup, 0, "ok"),
        phase(Turn, 100, "1 completed in 30.0s, 0 files changed"),
        phase(Check, 1_500, "pytest -q exited 1 in 40ms"),
        phase(Check, 1_600, "failed to run the check: the sandbox went away"),
        phase(Judge, 3_000, "\"tidy\" passed with 0.90 by m"),
        phase(Turn, 2_000, "2 completed in 30.0s, 0 files changed"),
        phase(Check, 4_000, "ls exited 0 in 3ms"),
    ];
    assert_eq!(
        titles(&r),
        [
            "+0.10s turn 1 completed in 30.0s",
            "+1.50s check `pytest -q` exited 1 in 40ms",
            "+1.60s check did not finish",
            "+2.00s turn 2 completed in 30.0s",
            "+3.00s judge \"tidy\" passed with 0.90 (threshold 0.50)",
            "+4.00s check `ls` exited 0 in 3ms",
        ]
    );
    // A check that changed the workspace says how many files: its own, not the agent's.
    let pycache = crate::diff::Snapshot::default()
        .diff(&crate::diff::Snapshot::from_files([("__pycache__/a.pyc".to_string(), vec![0])]));
    r.checks[0].changes = Some(pycache);
    assert_eq!(
        titles(&r)[1],
        "+1.50s check `pytest -q` exited 1 in 40ms · changed 1 file (the check's own, not in the agent's diff)"
    );
    // A step of the eval's own machinery is shown by its name, as a step.
    r.checks[1].step = Some("copy tests/ into /tests".into());
    assert_eq!(titles(&r)[5], "+4.00s step copy tests/ into /tests: exited 0 in 3ms");
    r.checks[1].step = None;
    // A turn cut short by an interruption has no phase: it follows at the end.
    r.turns.push(turn(crate::TurnStatus::Interrupted, None));
    assert_eq!(titles(&r).last().unwrap(), " turn 3 interrupted after 30.0s");
}

#[test]
fn a_stopped_turn_says_so_and_not_its_harness_exit() {
    let mut r = Record::new("run", "e", "shell", 1, 1);
    r.turns = vec![turn(crate::TurnStatus::TimedOut, Some("script exited 143: "))];
    r.phases = vec![phase(crate::Phase::Turn, 10, "1 timed_out in 30.0s, 0 files changed")];
    let summary = crate::report::summary::summarize("run", std::slice::from_ref(&r));
    let html = render(&summary, &[r], &Redactor::new(Vec::<&str>::new())).unwrap();
    assert!(html.contains("turn 1 timed out after 30.0s"), "{html}");
    assert!(!html.contains("exited 143"), "{html}");
}

#[test]
fn paths_are_shown_byte_for_byte() {
    let mut r = Record::new("run", "e", "shell", 1, 1);
    let mut t = turn(crate::TurnStatus::Completed, None);
    let file = serde_json::json!({"path": "README.md", "change": "added"});
    t.diff.files = vec![serde_json::from_value(file).unwrap()];
    r.turns = vec![t];
    let summary = crate::report::summary::summarize("run", std::slice::from_ref(&r));
    let html = render(&summary, &[r], &Redactor::new(Vec::<&str>::new())).unwrap();
    assert!(html.contains("README.md (added)"), "{html}");
    assert!(!html.to_lowercase().contains("text-transform"), "no style changes the text's case");
}

#[test]
fn a_cells_statistics_are_one_line_each() {
    let records: Vec<Record> = (1..=3)
        .map(|trial| {
            let mut r = Record::new("run", "e", "shell", trial, 1);
            r.outcome =
                if trial == 3 { Outcome::Fail(crate::FailKind::Assertion) } else { Outcome::Pass };
            r
        })
        .collect();
    let summary = crate::report::summary::summarize("run", &records);
    let cell = cell_view(&summary.cells[0]);
    assert_eq!(cell.at_k, "0.67 · 1.00 · 1.00");
    assert_eq!(cell.k_title, "k = 1 … 3");
    let html = render(&summary, &records, &Redactor::new(Vec::<&str>::new())).unwrap();
    assert!(
        html.contains("<td class=\"nw\" title=\"pass@k, k = 1 … 3\">0.67 · 1.00 · 1.00</td>"),
        "{html}"
    );
    assert!(!html.contains("pass@1"), "no line per k");
}

#[test]
fn a_cells_mean_reward_and_each_attempts_rewards_are_shown() {
    let records: Vec<Record> = [1.0, 0.5, 0.0]
        .into_iter()
        .enumerate()
        .map(|(i, reward)| {
            let mut r = Record::new("run", "task", "shell", i as u32 + 1, 1);
            if reward < 1.0 {
                r.outcome = Outcome::Fail(crate::FailKind::Assertion);
            }
            r.reward = Some([("reward".to_string(), reward)].into());
            r.reward_threshold = Some(1.0);
            r.step_rewards = vec![crate::record::StepReward {
                step: "one".into(),
                reward: None,
                note: Some("the verifier timed out after 2s".into()),
            }];
            r
        })
        .collect();
    let summary = crate::report::summarize("run", &records);
    let html = render(&summary, &records, &Redactor::new(Vec::<&str>::new())).unwrap();
    assert!(html.contains("<th>mean reward <small>(95% interval)</small></th>"), "{html}");
    let [lo, hi] = summary.cells[0].reward.as_ref().unwrap().interval.unwrap();
    assert!(html.contains(&format!("0.50 <small>({lo:.2}–{hi:.2})</small>")), "{html}");
    assert!(html.contains("title=\"mean of 3 rewards; 95% Wilson score interval"), "{html}");
    assert!(
        html.contains("reward {&#34;reward&#34;:0.5} (passes at 1)")
            || html.contains("reward {&quot;reward&quot;:0.5} (passes at 1)"),
        "{html}"
    );
    assert!(html.contains("step one none (the verifier timed out after 2s)"), "{html}");

    // A run without rewards has no reward column.
    let plain = vec![Record::new("run", "task", "shell", 1, 1)];
    let summary = crate::report::summarize("run", &plain);
    let html = render(&summary, &plain, &Redactor::new(Vec::<&str>::new())).unwrap();
    assert!(!html.contains("mean reward"), "{html}");
}
