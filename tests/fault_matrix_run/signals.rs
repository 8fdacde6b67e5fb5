//! The runner signalled during an attempt's setup, its turn and its teardown
//! (the background destroy of a recorded attempt's sandbox): SIGTERM and
//! SIGINT end the run with exit 130, its records and summary whole and
//! nothing left; SIGKILL leaves the sandbox, which the next run removes.

use std::time::{Duration, Instant};

use crate::require_docker;
use crate::suite::{self, Suite};
use crate::{SECRET, common, faults};
use common::faults::Row;

#[derive(Debug, Clone, Copy)]
enum Phase {
    Setup,
    Turn,
    Teardown,
}

/// Starts the suite and signals it once its attempt is in `phase`; returns
/// the suite (ended or not) and the attempt that was in that phase.
async fn signal_in(phase: Phase, signal: &str, tag: &str) -> (Suite, String) {
    common::assert_signal_not_ignored(signal);
    let dir = common::temp_dir(tag);
    let run_id = format!("{tag}-{}", std::process::id());
    let (args, marker): (&[&str], _) = match phase {
        Phase::Setup => (&["--ignored", "in_setup", "--exact"], "/tmp/in-setup"),
        Phase::Turn => (&["--ignored", "in_turn", "--exact"], "/tmp/in-turn"),
        Phase::Teardown => {
            (&["slow_to_remove", "--exact", "--trials", "6", "--test-threads", "1"], "")
        }
    };
    let mut suite = Suite::spawn(args, &dir, &run_id);
    let attempt = match phase {
        Phase::Setup | Phase::Turn => {
            let name = if matches!(phase, Phase::Setup) { "in_setup" } else { "in_turn" };
            let attempt = format!("{name}.shell.t1.try1");
            suite::wait_for_marker(&mut suite, &attempt, marker).await;
            attempt
        }
        // Once a trial's record is written its sandbox is destroyed in the
        // background: catch one whose container is still there.
        Phase::Teardown => caught_in_teardown(&mut suite).await,
    };
    suite.signal(signal);
    (suite, attempt)
}

async fn caught_in_teardown(suite: &mut Suite) -> String {
    let began = Instant::now();
    for trial in 1..=6 {
        let attempt = format!("slow_to_remove.shell.t{trial}.try1");
        let record = suite.run_dir.join(format!("{attempt}.json"));
        while !record.exists() {
            assert!(began.elapsed() < Duration::from_secs(180), "no record of trial {trial}");
            assert!(!suite.ended(), "the suite ended before trial {trial}'s record");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if suite::containers_of_attempt(&suite.run_id, &attempt).await > 0 {
            return attempt;
        }
    }
    panic!("no recorded attempt's sandbox was still being destroyed");
}

/// SIGTERM or SIGINT in `phase`: exit 130, the attempt's record and the
/// summary whole, nothing left.
async fn interrupted(phase: Phase, signal: &str, id: &str, at: &str, says: &str) {
    let (suite, attempt) = signal_in(phase, signal, id).await;
    let (run_id, run_dir) = (suite.run_id.clone(), suite.run_dir.clone());
    let ended = suite.wait(Duration::from_secs(150));
    assert_eq!(ended.code, Some(130), "SIG{signal}: {}", ended.stderr);
    ended.assert_says_no(SECRET);
    assert!(ended.stderr.contains(&format!("--resume {run_id}")), "{}", ended.stderr);
    let files = suite::assert_whole(&run_dir);
    assert!(files.contains(&"summary.json".to_string()), "{files:?}");
    let summary = common::json(&run_dir.join("summary.json"));
    assert_eq!(summary["exitCode"], 130, "the summary says what the process exits with");
    let record = common::json(&run_dir.join(format!("{attempt}.json")));
    // The interrupted attempt's record says so; a recorded attempt (teardown) keeps its
    // outcome, and the summary says the run was interrupted.
    let message = record["message"].as_str().unwrap_or("");
    let reason = summary["exitReason"].as_str().unwrap_or("");
    assert!(reason.starts_with("interrupted; complete the run with --resume"), "{reason}");
    let said = if matches!(phase, Phase::Teardown) { reason } else { message };
    assert!(said.contains(says), "the record or summary says {says:?}: {said}");
    let parsed: reeval::Record = serde_json::from_value(record.clone()).expect("a record");
    let (outcome, kind) = faults::outcome_of(&parsed);
    if matches!(phase, Phase::Setup | Phase::Turn) {
        assert_eq!(record["interrupted"], true, "{record}");
    }
    crate::assert_nowhere(&run_dir, SECRET);
    let left = faults::leftovers(&run_id, Some(&run_dir)).await;
    assert_eq!(left, "nothing", "SIG{signal} left {left}");
    let fault = format!("the runner receives SIG{signal}");
    let outcome = format!("{outcome} (exit 130)");
    faults::check_row(&Row { id, fault: &fault, at, outcome, kind, says, left });
}

/// SIGKILL in `phase`: no teardown can run; what is left, the next run removes.
async fn killed(phase: Phase, id: &str, at: &str) {
    let (suite, attempt) = signal_in(phase, "KILL", id).await;
    let (run_id, run_dir) = (suite.run_id.clone(), suite.run_dir.clone());
    let ended = suite.wait(Duration::from_secs(30));
    assert_eq!(ended.code, None, "SIGKILL ended it");
    ended.assert_says_no(SECRET);
    suite::assert_whole(&run_dir);
    crate::assert_nowhere(&run_dir, SECRET);
    let before = common::containers_of_run(&run_id).await;
    if matches!(phase, Phase::Setup | Phase::Turn) {
        assert_eq!(before, 1, "a SIGKILLed runner leaves its sandbox");
    }
    // The next run of any suite sweeps the sandboxes of runners that are gone.
    let next_dir = common::temp_dir(&format!("{id}-next"));
    let next = Suite::spawn(&["no_sandbox", "--exact"], &next_dir, &format!("{run_id}-next"));
    let next = next.wait(Duration::from_secs(120));
    assert_eq!(next.code, Some(0), "{}", next.stderr);
    // A removal the killed runner had asked for goes on in the engine (3000 files take a
    // while): the next run's sweep finds it under way. Anything else stays, and fails here.
    let began = Instant::now();
    let left = loop {
        let left = faults::leftovers(&run_id, Some(&run_dir)).await;
        if left == "nothing" || began.elapsed() > Duration::from_secs(60) {
            break left;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert_eq!(left, "nothing", "the next run removed what SIGKILL left");
    // A recorded attempt (teardown) keeps its record; one killed in a step has none.
    let record = run_dir.join(format!("{attempt}.json"));
    let (outcome, kind) = match phase {
        Phase::Teardown => {
            let parsed: reeval::Record = serde_json::from_value(common::json(&record)).unwrap();
            let (outcome, kind) = faults::outcome_of(&parsed);
            (format!("{outcome} (killed)"), kind)
        }
        Phase::Setup | Phase::Turn => {
            assert!(!record.exists(), "no record of an attempt killed in a step");
            ("(killed: no record)".into(), String::new())
        }
    };
    faults::check_row(&Row {
        id,
        fault: "the runner receives SIGKILL",
        at,
        outcome,
        kind,
        says: "",
        left: "its sandboxes, until the next run removes them".into(),
    });
}

/// What the summary of a run interrupted between attempts says.
const RESUME: &str = "interrupted; complete the run with --resume";
/// What the record of an attempt interrupted in a step says.
const INTERRUPTED: &str = "failed to finish: the run was interrupted";
const IN_SETUP: &str = "setup (a step running)";
const IN_TURN: &str = "turn";
const IN_TEARDOWN: &str = "teardown (a recorded attempt's sandbox being destroyed)";

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigterm_during_setup() {
    require_docker!();
    interrupted(Phase::Setup, "TERM", "runner-1-setup-term", IN_SETUP, INTERRUPTED).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigint_during_setup() {
    require_docker!();
    interrupted(Phase::Setup, "INT", "runner-2-setup-int", IN_SETUP, INTERRUPTED).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigkill_during_setup() {
    require_docker!();
    killed(Phase::Setup, "runner-3-setup-kill", IN_SETUP).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigterm_during_a_turn() {
    require_docker!();
    interrupted(Phase::Turn, "TERM", "runner-4-turn-term", IN_TURN, INTERRUPTED).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigint_during_a_turn() {
    require_docker!();
    interrupted(Phase::Turn, "INT", "runner-5-turn-int", IN_TURN, INTERRUPTED).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigkill_during_a_turn() {
    require_docker!();
    killed(Phase::Turn, "runner-6-turn-kill", IN_TURN).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigterm_during_teardown() {
    require_docker!();
    interrupted(Phase::Teardown, "TERM", "runner-7-teardown-term", IN_TEARDOWN, RESUME).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigint_during_teardown() {
    require_docker!();
    interrupted(Phase::Teardown, "INT", "runner-8-teardown-int", IN_TEARDOWN, RESUME).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn sigkill_during_teardown() {
    require_docker!();
    killed(Phase::Teardown, "runner-9-teardown-kill", IN_TEARDOWN).await;
}
