//! A turn started by the diff helper's session in the sandbox (issue 29):
//! on a local Docker Engine, the session that prepared the sandbox (on its
//! main process's stdin with a gateway, in the snapshot's exec without one)
//! starts the agent's command (`diff/launch.rs`, diff-helper/run.rs) instead
//! of an engine exec. What the command sees is
//! what an exec of it would see (the same command run both ways in one
//! sandbox, compared); the sandbox's kill, a timeout and a background child
//! end it as they end an exec; the session serves the turn's diff after it.
//! Seen from the engine's own events: no exec runs the turn.

mod common;

use std::time::{Duration, Instant};

use reeval::prelude::*;
use reeval::sandbox::{SandboxHandle, Signal};
use reeval::{Eval, Outcome};

/// What a command can tell of how it was started; each line the same for
/// an exec of it and a start by the session. `$PPID` is the pid file's
/// wrapper, which an exec makes a session's leader.
const FACTS: &str = r#"id; pwd; umask; ulimit -n; ulimit -u
env | sort
grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|CapInh|CapPrm|CapEff|CapBnd|CapAmb):' /proc/self/status
[ "$(cut -d' ' -f6 /proc/$PPID/stat)" = "$PPID" ] && echo wrapper leads its session
ls -l /proc/self/fd/ | awk 'NR > 1 {print $9, $10, $11}' | grep -v '^255 ' | sed 's/[0-9][0-9]*/N/g'
echo "stdin: $(cat)"; echo to-stderr >&2; sleep 1; exit 3"#;

/// A runner whose run id is known beforehand (its engine events are looked
/// up by it, and a fault finds its container), and when it began.
fn runner_for(tag: &str) -> (reeval::Runner, String, u64) {
    let run_id = format!("turn-in-session-{tag}-{}", std::process::id());
    let since = common::events_since_now();
    let id = run_id.clone();
    (common::runner_with("turn-in-session", |c| c.settings.run_id = id), run_id, since)
}

/// Runs `body` in an eval with a gateway or without, after a first turn
/// (so the session runs and starts turns); the record and the run's execs.
async fn in_sandbox<F>(tag: &str, gateway: bool, body: F) -> (reeval::Record, Vec<String>)
where
    F: Fn(SandboxHandle) -> futures_util::future::BoxFuture<'static, reeval::Result<()>>
        + Send
        + Sync
        + Clone
        + 'static,
{
    let (runner, _, since) = runner_for(&format!("{tag}-{gateway}"));
    let eval = Eval::new(tag, move |c| {
        let body = body.clone();
        Box::pin(async move {
            let turn = c.send("echo first > first.txt").await?;
            expect(turn.diff.paths()).to_equal(vec!["first.txt"])?;
            let handle = c.sandbox_handle().await?;
            body(handle.as_agent()).await?;
            // The session serves the next listing after the commands it started.
            let turn = c.send("echo second > second.txt").await?;
            expect(turn.diff.paths()).to_equal(vec!["second.txt"])?;
            Ok(())
        })
    })
    // A file in the workspace: the start reads it (the session waiting in the sandbox lists it).
    .environment(move || {
        let env = Environment::new().file("given.txt", "given\n");
        if gateway { env.allow_egress("nothing.test") } else { env }
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let record = report.records[0].clone();
    let events: Vec<&str> = record.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(record.outcome, Outcome::Pass, "{:?} {events:?}", record.message);
    (record, common::execs_of_run(&report.run_id, since))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_turn_started_by_the_session_sees_what_an_exec_would() {
    require_docker!();
    for gateway in [true, false] {
        facts_alike(gateway).await;
    }
}

/// Two turns of the same command at once, one started by the session and
/// one by an exec, see the same; the turns before and after run in the session.
async fn facts_alike(gateway: bool) {
    let (_, execs) = in_sandbox("facts", gateway, |handle| {
        Box::pin(async move {
            // Two at once: the session starts one, and is busy, so the engine runs the other.
            let turn = |marker: &'static str| {
                let handle = handle.clone();
                async move {
                    let cmd = Command::new("bash")
                        .args(["-c", FACTS, marker])
                        .env("TURN_VAR", "from the turn")
                        .stdin("the prompt");
                    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
                    let out = handle.exec_turn(cmd, tx).await.expect("the turn runs");
                    let mut streamed = Vec::new();
                    while let Ok(chunk) = rx.try_recv() {
                        streamed.extend_from_slice(&chunk);
                    }
                    assert_eq!(String::from_utf8_lossy(&streamed), out.stdout, "{marker}");
                    (out.stdout, out.stderr, out.exit_code)
                }
            };
            let (a, b) = tokio::join!(turn("first-of-two"), turn("second-of-two"));
            let differ: Vec<_> = a.0.lines().zip(b.0.lines()).filter(|(x, y)| x != y).collect();
            assert_eq!(a, b, "one started by the session, one by an exec; differ: {differ:?}");
            assert_eq!((a.1.as_str(), a.2), ("to-stderr\n", 3));
            for line in
                ["uid=1000 gid=1000 groups=1000", "TURN_VAR=from the turn", "stdin: the prompt"]
            {
                assert!(a.0.contains(line), "{line} in {}", a.0);
            }
            assert!(a.0.contains("wrapper leads its session"), "{}", a.0);
            Ok(())
        })
    })
    .await;
    // Of the two, one exec; the turns before and after: none.
    let turns: Vec<_> =
        execs.iter().filter(|e| e.contains("-of-two") || e.contains(".txt")).collect();
    assert_eq!(turns.len(), 1, "one of the two by an exec, no other turn ({gateway}): {turns:#?}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_sandboxs_kill_a_timeout_and_a_background_child_end_it_as_an_exec() {
    require_docker!();
    let (_, execs) = in_sandbox("ends", true, |handle| {
        Box::pin(async move {
            let run = |cmd: Command| {
                let handle = handle.clone();
                async move {
                    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
                    let began = Instant::now();
                    let out = handle.exec_turn(cmd, tx).await.expect("the turn runs");
                    (out, began.elapsed())
                }
            };
            // The sandbox's kill reaches it through its pid file.
            let killer = handle.clone();
            let kill = async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                killer.sandbox().kill(Signal::Kill).await.expect("the kill runs");
            };
            let ((out, took), ()) = tokio::join!(run(Command::new("sleep").arg("30")), kill);
            assert_eq!(out.exit_code, 137, "{out:?}");
            assert!(took < Duration::from_secs(10), "killed in {took:?}");
            // Its timeout kills its tree.
            let cmd = Command::new("bash").args(["-c", "echo begun; sleep 30"]);
            let (out, took) = run(cmd.timeout(Duration::from_secs(1))).await;
            assert!(out.timed_out && out.stdout == "begun\n", "{out:?}");
            assert!(took < Duration::from_secs(10), "timed out in {took:?}");
            // A child left running with the output open does not hold the turn.
            let cmd = Command::new("bash").args(["-c", "sleep 30 & echo left"]);
            let (out, took) = run(cmd).await;
            assert_eq!((out.exit_code, out.stdout.as_str()), (0, "left\n"), "{out:?}");
            assert!(took < Duration::from_secs(3), "ended in {took:?}");
            // Megabytes of output, every byte.
            let cmd = Command::new("bash").args(["-c", "head -c 5000000 /dev/zero | tr '\\0' x"]);
            let (out, _) = run(cmd).await;
            assert_eq!(out.stdout_bytes, 5_000_000);
            // A signal's exit code.
            let (out, _) = run(Command::new("bash").args(["-c", "kill -TERM $$"])).await;
            assert_eq!(out.exit_code, 143);
            Ok(())
        })
    })
    .await;
    let turns: Vec<_> = execs
        .iter()
        .filter(|e| e.contains("sleep") || e.contains(".txt") || e.contains("head -c"))
        .collect();
    assert!(turns.is_empty(), "no turn by an exec: {turns:#?}");
}

/// The sandbox killed during a turn the session started: the platform's, as
/// for a turn an exec runs (`fault_matrix::the_sandbox_killed_during_a_turn`),
/// never the agent's; nothing of the run is left.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_sandbox_killed_during_a_turn_the_session_started_is_the_platforms() {
    require_docker!();
    use common::inject::{Fault, run_faulted};
    let (runner, run_id, since) = runner_for("killed");
    let eval = Eval::new("killed", |c| {
        Box::pin(async move {
            c.send("touch /tmp/in-turn; sleep 30").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(|| Environment::new().file("given.txt", "given\n").allow_egress("nothing.test"));
    let report = run_faulted(&runner, run_id.clone(), eval, "/tmp/in-turn", Fault::Kill).await;
    let r = common::faults::only(&report);
    common::faults::assert_outcome(
        r,
        Outcome::InfraError,
        "stopped (exit 137, container not running) during turn 1",
    );
    let left = common::faults::leftovers(&report.run_id, Some(&report.run_dir)).await;
    assert_eq!(left, "nothing", "nothing of the run is left");
    let turns: Vec<_> = common::execs_of_run(&run_id, since)
        .into_iter()
        .filter(|e| e.contains("sleep 30"))
        .collect();
    assert!(turns.is_empty(), "the session started the turn: {turns:#?}");
}

/// An eval whose start writes nothing in the workspace: before its first
/// turn the session still prepares the agent user and lists the (empty)
/// workspace, then starts the turns and answers their diffs. With a gateway
/// the run has no exec at all; without, the session's own.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_start_before_a_turn_is_prepared_by_the_session_too() {
    require_docker!();
    for gateway in [true, false] {
        let (runner, run_id, since) = runner_for(&format!("empty-{gateway}"));
        let eval = Eval::new("empty", |c| {
            Box::pin(async move {
                let turn = c.send("echo hi > a.txt && stat -c %u a.txt .").await?;
                expect(turn.diff.paths()).to_equal(vec!["a.txt"])?;
                expect(turn.final_message.as_deref()).to_equal(Some("1000\n1000"))?;
                let turn = c.send("rm a.txt").await?;
                expect(turn.diff.paths()).to_equal(vec!["a.txt"])?;
                Ok(())
            })
        })
        .environment(move || {
            if gateway {
                Environment::new().allow_egress("nothing.test")
            } else {
                Environment::new()
            }
        });
        let report = runner.run(vec![eval]).await.expect("preflight passes");
        let r = &report.records[0];
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
        let execs = common::execs_of_run(&run_id, since);
        let expected = if gateway { 0 } else { 1 };
        assert_eq!(execs.len(), expected, "gateway {gateway}: {execs:#?}");
        if !gateway {
            assert!(execs[0].contains("reeval-prepared"), "the session's: {}", execs[0]);
        }
    }
}
