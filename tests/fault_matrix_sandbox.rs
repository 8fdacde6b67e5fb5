//! The fault matrix's sandbox rows that `tests/fault_matrix.rs` has no room
//! for (docs/faults.md): the sandbox killed, paused or cut from its network
//! during a turn, a check or the final collection; an agent CLI printing
//! garbage; a hostile workspace at the final collection. Each test injects
//! the fault against the real engine, checks the outcome and kind, that the
//! record is complete, that nothing of the run is left on the engine and that
//! no secret's value reaches a file of the run, then checks its row of the
//! table (`REEVAL_BLESS=1` rewrites a row that differs; review the diff).

mod common;

use std::time::Duration;

use common::faults::{self, Row};
use common::inject::{Fault, container_of, docker, run_faulted};
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record, RunReport};

/// A checks-only secret every row's eval reads in a check, so its value would
/// show in the record if redaction failed anywhere on the fault's path.
const SECRET: &str = "fault-matrix-secret-value-7c2d41";

/// The environment of every row: the checks-only secret, plus `f`'s changes.
fn env(
    f: impl Fn(Environment) -> Environment + Send + Sync + 'static,
) -> impl Fn() -> Environment + Send + Sync + 'static {
    move || f(Environment::new().secret_for_checks("REEVAL_T_FAULT_SECRET"))
}

/// A runner whose run id is known beforehand, so a fault can find the attempt's container.
fn runner_for(tag: &str, vars: &[(&str, &str)]) -> (reeval::Runner, String) {
    let mut vars = vars.to_vec();
    vars.push(("REEVAL_T_FAULT_SECRET", SECRET));
    let env_file = common::env_file(tag, &vars);
    let run_id = format!("{tag}-{}", std::process::id());
    let id = run_id.clone();
    (
        common::runner_with(tag, |c| {
            c.settings.env_file = Some(env_file);
            c.settings.run_id = id;
        }),
        run_id,
    )
}

/// The check every row's eval runs: it reads the secret.
const READS_SECRET: &str = "echo $REEVAL_T_FAULT_SECRET >/dev/null";

/// Checks the promises of one attempt's row and its line in the table. `says`
/// is in the record's message, or (for an attempt graded before the fault) in
/// one of its events.
async fn row(report: &RunReport, id: &str, fault: &str, at: &str, outcome: Outcome, says: &str) {
    let r = faults::only(report);
    let message = r.message.as_deref().unwrap_or("");
    assert_eq!(r.outcome, outcome, "{message}\n  events: {:?}", events(r));
    assert!(
        message.contains(says) || events(r).iter().any(|e| e.contains(says)),
        "the record says {says:?}: {message}\n  events: {:?}",
        events(r)
    );
    faults::assert_complete_and_clean(report, Some(SECRET));
    let left = faults::leftovers(&report.run_id, Some(&report.run_dir)).await;
    assert_eq!(left, "nothing", "nothing of the run is left");
    let (outcome, kind) = faults::outcome_of(r);
    faults::check_row(&Row { id, fault, at, outcome, kind, says, left });
}

fn events(r: &Record) -> Vec<&str> {
    r.events.iter().map(|e| e.message.as_str()).collect()
}

/// An eval whose turn writes `work.txt` (so the workspace is listed, and the
/// final collection asks the in-sandbox helper), whose check passes, and
/// which then applies `fault` to its own container: the final collection meets it.
fn faults_itself_at_the_end(name: &'static str, run_id: String, fault: Fault) -> Eval {
    faults_itself_at_the_end_in(name, run_id, fault, |e| e)
}

/// [`faults_itself_at_the_end`] in the row's environment changed by `f`.
fn faults_itself_at_the_end_in(
    name: &'static str,
    run_id: String,
    fault: Fault,
    f: impl Fn(Environment) -> Environment + Send + Sync + 'static,
) -> Eval {
    Eval::new(name, move |c| {
        let run_id = run_id.clone();
        Box::pin(async move {
            c.send("echo work > work.txt").await?;
            expect(c.exec(format!("cat work.txt; {READS_SECRET}")).await?).to_succeed()?;
            let docker = docker().await;
            let attempt = format!("{name}.shell.t1.try1");
            let id = container_of(&docker, &run_id, &attempt).await.expect("its container");
            fault.apply(&docker, &id).await;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(f))
}

/// The agent's work is in the record although its sandbox was lost before
/// the final collection, and the record says how it was read; the collection
/// noticed the loss at once (a paused sandbox's helper never answers).
fn assert_collected_through_the_archive(report: &RunReport, state: &str) {
    let r = faults::only(report);
    eprintln!("collected {}, events {:?}", r.workspace_collected, events(r));
    assert!(r.workspace_collected, "{:?}", events(r));
    assert_eq!(r.final_diff.as_ref().expect("the final diff").paths(), ["work.txt"]);
    assert!(events(r).iter().any(|e| e.contains(state)), "{:?}", events(r));
    let teardown = r.phases.iter().find(|p| p.phase.as_str() == "teardown").expect("teardown");
    assert!(teardown.duration_ms < 30_000, "teardown took {} ms", teardown.duration_ms);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_killed_at_the_final_collection() {
    require_docker!();
    let (runner, run_id) = runner_for("f-killed-collect", &[]);
    let eval = faults_itself_at_the_end("killed_collect", run_id, Fault::Kill);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    assert_collected_through_the_archive(&report, "stopped (exit 137, container not running)");
    let says = "during teardown: the final workspace was read through the engine's archive";
    let what = "the sandbox is killed (docker kill) after the last check";
    row(&report, "sandbox-7-killed-collection", what, "final collection", Outcome::Pass, says)
        .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_paused_at_the_final_collection() {
    require_docker!();
    let (runner, run_id) = runner_for("f-paused-collect", &[]);
    let eval = faults_itself_at_the_end("paused_collect", run_id, Fault::Pause);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    assert_collected_through_the_archive(&report, "was paused");
    let says = "during teardown: the final workspace was read through the engine's archive";
    let what = "the sandbox is paused (docker pause) after the last check";
    row(&report, "sandbox-8-paused-collection", what, "final collection", Outcome::Pass, says)
        .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_paused_during_a_turn() {
    require_docker!();
    let (runner, run_id) = runner_for("f-paused-turn", &[]);
    let eval = Eval::new("paused_turn", |c| {
        Box::pin(async move {
            c.send("touch /tmp/in-turn; sleep 2; echo done > done.txt").await?;
            expect(c.exec(READS_SECRET).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(6))
    .environment(env(|e| e));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-turn", Fault::Pause).await;
    let says = "was paused (container paused, nothing in it runs)";
    let what = "the sandbox is paused (docker pause); the budget ends the frozen turn";
    row(&report, "sandbox-9-paused-turn", what, "turn", Outcome::InfraError, says).await;
}

/// On a local engine the sandbox's only network is `none` (the gateway is a
/// socket mounted into it): the fault disconnects it from that, and the
/// step goes on. The container phase says so, and the row holds it.
async fn network_row(report: &RunReport, id: &str, at: &str) {
    let r = faults::only(report);
    let container = r.phases.iter().find(|p| p.phase.as_str() == "container").expect("container");
    assert!(container.detail.ends_with("no network"), "{}", container.detail);
    let what = "the sandbox's network removed (docker network disconnect; locally its only network is `none`)";
    row(report, id, what, at, Outcome::Pass, "").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_network_removed_during_a_turn() {
    require_docker!();
    let (runner, run_id) = runner_for("f-net-turn", &[]);
    let eval = Eval::new("net_turn", |c| {
        Box::pin(async move {
            c.send("touch /tmp/in-turn; sleep 2; echo done > done.txt").await?;
            expect(c.exec(format!("cat done.txt; {READS_SECRET}")).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-turn", Fault::Disconnect).await;
    network_row(&report, "network-1-removed-turn", "turn").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_network_removed_during_a_check() {
    require_docker!();
    let (runner, run_id) = runner_for("f-net-check", &[]);
    let eval = Eval::new("net_check", |c| {
        Box::pin(async move {
            let check = format!("touch /tmp/in-check; sleep 2; {READS_SECRET}");
            expect(c.exec(check).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-check", Fault::Disconnect).await;
    network_row(&report, "network-2-removed-check", "check").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_network_removed_at_the_final_collection() {
    require_docker!();
    let (runner, run_id) = runner_for("f-net-collect", &[]);
    let eval = faults_itself_at_the_end("net_collect", run_id, Fault::Disconnect);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = faults::only(&report);
    assert!(r.workspace_collected, "{:?}", events(r));
    assert_eq!(r.final_diff.as_ref().expect("the final diff").paths(), ["work.txt"]);
    network_row(&report, "network-3-removed-collection", "final collection").await;
}

/// A claude-code CLI that prints junk on stdout and exits 0: a banner, an
/// escape sequence, binary bytes, a JSON array, a truncated event.
const GARBAGE_CLI: &str = r#"#!/bin/sh
printf 'Welcome to Claude Code!\n'
printf '\033[31m{not json at all\n'
printf '\001\002\377\376 binary junk\n'
printf '[1, 2, 3]\n'
printf '{"type": "result", "truncated'
exit 0
"#;

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_agent_cli_printing_garbage_on_stdout() {
    require_docker!();
    let key = ("ANTHROPIC_API_KEY", "sk-test-fault-garbage-0123456789");
    let (runner, _) = runner_for("f-agent-garbage", &[key]);
    let eval = Eval::new("garbage_cli", |c| {
        Box::pin(async move {
            c.send("SCENARIO:edit").await?;
            expect(c.exec(READS_SECRET).await?).to_succeed()
        })
    })
    .harness("claude-code:sonnet")
    .timeout(Duration::from_secs(60))
    .environment(env(|e| {
        e.image(reeval::Image::from("reeval/base:latest")).file_with_mode(
            "/usr/local/bin/claude",
            GARBAGE_CLI.as_bytes().to_vec(),
            0o755,
        )
    }));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = faults::only(&report);
    assert_eq!(r.turns[0].status, reeval::TurnStatus::Failed, "never a silent pass");
    for p in faults::files_under(&report.run_dir) {
        let text = std::fs::read(&p).unwrap_or_default();
        assert!(!text.windows(key.1.len()).any(|w| w == key.1.as_bytes()), "{}", p.display());
    }
    let says = "claude exited 0 without an event on stdout: 5 lines were not JSON events (the first: `Welcome to Claude Code!`)";
    let what = "an agent CLI prints garbage on stdout and exits 0 (claude-code)";
    row(&report, "agent-3-garbage-stdout", what, "turn", Outcome::InfraError, says).await;
}

/// What the agent puts in place of the in-sandbox diff helper (it runs as
/// root, the helper is root's): an answer naming paths out of the workspace.
const HOSTILE_HELPER: &str = r#"#!/usr/bin/env python3
import struct, sys
if sys.argv[1:2] == ["serve"]:
    sys.exit(1)
out = bytearray(b"reeval-diff 1\n")
def add(path, content, kind=b"f"):
    out.extend(b"+" + kind + struct.pack("<IQqIqI", 0o644, len(content), 1, 0, 1, 0))
    out.extend(struct.pack("<I", len(path)) + path)
    out.extend(b"\x01" + struct.pack("<Q", len(content)) + content)
for p in [b"../../escape-parent.txt", b"/tmp/reeval-fault-escape-absolute.txt",
          b"sub/../../escape-middle.txt", b"work.txt"]:
    add(p, b"pwned\n")
out.extend(b".\x00\x01")
sys.stdout.buffer.write(out)
"#;

/// Whether `path` names something inside the directory it is relative to.
fn inside(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_hostile_workspace_and_helper_at_the_final_collection() {
    require_docker!();
    // An engine reached over TCP: the helper is copied into the sandbox, where
    // root can replace it (a local engine's sandbox runs it from a read-only
    // mount, which root cannot write: see the test below).
    let (runner, _) = remote_runner_for("f-hostile-collect").await;
    let eval = Eval::new("hostile_collect", |c| {
        Box::pin(async move {
            c.send("echo work > work.txt").await?;
            // Links out of the workspace and a hard link, as the agent.
            c.send(
                "ln -s /etc/passwd passwd-link && ln -s ../../.. up && ln -s / root-link \
                 && ln work.txt hard && mkdir -p sub && ln -s /etc sub/etc-link",
            )
            .await?;
            // The helper replaced, as by an agent that gained root (the agent's
            // own user cannot: the helper's directory is root's, mode 700).
            // Its running session is ended, so the next listing runs the replacement.
            let replace = r#"for h in /var/lib/reeval-diff/reeval-diff-*; do
                   rm -f "$h"; printf '%s' "$HOSTILE" > "$h"; chmod 700 "$h"; done
                 for p in /proc/[0-9]*; do
                   case "$(tr '\0' ' ' < $p/cmdline 2>/dev/null)" in
                     /var/lib/reeval-diff/*serve*) kill -9 "${p#/proc/}" ;;
                   esac
                 done; ls /var/lib/reeval-diff/"#;
            expect(c.exec(replace).await?).to_succeed()?;
            expect(c.exec(READS_SECRET).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e.env("HOSTILE", HOSTILE_HELPER)));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = faults::only(&report);
    eprintln!("events {:?}\nfinal diff {:?}", events(r), r.final_diff.as_ref().map(|d| d.paths()));
    assert!(r.workspace_collected, "{:?}", events(r));
    let paths = r.final_diff.as_ref().expect("the final diff").paths();
    assert!(paths.iter().all(|p| inside(p)), "every path is in the workspace: {paths:?}");
    for want in ["work.txt", "passwd-link", "up", "root-link", "hard", "sub/etc-link"] {
        assert!(paths.contains(&want), "{want} in {paths:?}");
    }
    // The forged contents are not the workspace's either: it is read through the engine.
    let patch = &r.final_diff.as_ref().expect("the final diff").patch;
    assert!(!patch.contains("pwned"), "{patch}");
    for check in &r.checks {
        let changed = check.changes.as_ref().map(|d| d.paths()).unwrap_or_default();
        assert!(changed.iter().all(|p| inside(p)), "{}: {changed:?}", check.command);
    }
    for (i, turn) in r.turns.iter().enumerate() {
        let changed = turn.diff.paths();
        assert!(changed.iter().all(|p| inside(p)), "turn {}: {changed:?}", i + 1);
    }
    // Nothing of the answer reached the host, and the record keeps no link or escape.
    assert!(!std::path::Path::new("/tmp/reeval-fault-escape-absolute.txt").exists());
    for dir in report.run_dir.ancestors().take(3) {
        for name in ["escape-parent.txt", "escape-middle.txt"] {
            assert!(!dir.join(name).exists(), "{}", dir.join(name).display());
        }
    }
    for p in faults::files_under(&report.run_dir) {
        let meta = std::fs::symlink_metadata(&p).expect("metadata");
        assert!(!meta.file_type().is_symlink(), "{} is a link", p.display());
        if p.extension().is_some_and(|e| e == "tar") {
            let mut tar = tar::Archive::new(std::fs::File::open(&p).expect("open"));
            for entry in tar.entries().expect("a tar") {
                let entry = entry.expect("an entry");
                let name = entry.path().expect("a path").to_string_lossy().into_owned();
                assert!(inside(name.trim_end_matches('/')), "{}: {name}", p.display());
            }
        }
    }
    let what = "links out of the workspace and a hard link; the in-sandbox diff helper \
                replaced (as by an agent that gained root) by one answering `..` and absolute paths";
    row(&report, "collection-1-hostile", what, "final collection", Outcome::Pass, "").await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_mounted_helper_cannot_be_replaced_even_by_root() {
    require_docker!();
    let (runner, _) = runner_for("f-mounted-helper", &[]);
    let eval = Eval::new("mounted_helper", |c| {
        Box::pin(async move {
            c.send("echo work > work.txt").await?;
            // As root: the helper in place, its directory read-only.
            let replace = r#"ls /run/reeval-diff/reeval-diff-* >/dev/null || exit 3
                 for h in /run/reeval-diff/reeval-diff-*; do
                   printf x > "$h" 2>/dev/null && exit 4
                   rm -f "$h" 2>/dev/null; [ -x "$h" ] || exit 5
                 done
                 touch /run/reeval-diff/new 2>/dev/null && exit 6
                 mount -o remount,rw /run/reeval-diff 2>/dev/null && exit 7
                 [ ! -e /var/lib/reeval-diff/reeval-diff-* ]"#;
            expect(c.exec(replace).await?).to_succeed()?;
            c.send("echo more >> work.txt").await?;
            expect(c.exec(READS_SECRET).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e));
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = faults::only(&report);
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, events(r));
    assert_eq!(r.turns[1].diff.paths(), ["work.txt"]);
    assert_eq!(r.final_diff.as_ref().expect("the final diff").paths(), ["work.txt"]);
}

/// A runner on the local engine reached over TCP (see [`engine_over_tcp`]).
async fn remote_runner_for(tag: &str) -> (reeval::Runner, String) {
    let host = common::engine_over_tcp().await;
    let env_file = common::env_file(tag, &[("REEVAL_T_FAULT_SECRET", SECRET)]);
    let run_id = format!("{tag}-{}", std::process::id());
    let id = run_id.clone();
    let runner = common::runner_with(tag, |c| {
        c.settings.env_file = Some(env_file);
        c.settings.run_id = id;
        c.settings.backend = reeval::sandbox::BackendConfig::Docker {
            engines: vec![reeval::sandbox::docker::EngineSpec { host, slots: Some(1) }],
        };
    });
    (runner, run_id)
}

/// Through the gateway, a host off the allowlist is refused by the gateway
/// itself: a step reaches it before the fault (at `marker`) and cannot after.
fn reaches_the_gateway_around(marker: &str) -> String {
    let reach = "curl -s -m 5 http://elsewhere.test/ | grep -q allowlist";
    format!("{reach} && touch {marker} && sleep 3 && {reach}")
}

const REMOTE: &str = "the sandbox's network removed (docker network disconnect) on a remote \
                      engine: its gateway container is out of reach";

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_network_removed_during_a_turn_on_a_remote_engine() {
    require_docker!();
    let (runner, run_id) = remote_runner_for("f-net-remote-turn").await;
    let eval = Eval::new("net_remote_turn", |c| {
        Box::pin(async move {
            c.send(reaches_the_gateway_around("/tmp/in-turn")).await?;
            expect(c.exec(READS_SECRET).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e.allow_egress("plain.test")));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-turn", Fault::Disconnect).await;
    // Before the fix: fail/agent, "script exited 1".
    let says = "lost its network (disconnected from reeval-net-";
    row(&report, "network-4-removed-turn-remote", REMOTE, "turn", Outcome::InfraError, says).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_network_removed_during_a_check_on_a_remote_engine() {
    require_docker!();
    let (runner, run_id) = remote_runner_for("f-net-remote-check").await;
    let eval = Eval::new("net_remote_check", |c| {
        Box::pin(async move {
            let check = format!("{READS_SECRET}; {}", reaches_the_gateway_around("/tmp/in-check"));
            expect(c.exec(check).await?).to_succeed()
        })
    })
    .timeout(Duration::from_secs(60))
    .environment(env(|e| e.check_network(reeval::egress::Egress::allow(["plain.test"]))));
    let report = run_faulted(&runner, run_id, eval, "/tmp/in-check", Fault::Disconnect).await;
    let says = "lost its network (disconnected from reeval-net-";
    row(&report, "network-5-removed-check-remote", REMOTE, "check", Outcome::InfraError, says)
        .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_network_removed_at_the_final_collection_on_a_remote_engine() {
    require_docker!();
    let (runner, run_id) = remote_runner_for("f-net-remote-collect").await;
    let eval = faults_itself_at_the_end_in("net_remote_collect", run_id, Fault::Disconnect, |e| {
        e.allow_egress("plain.test")
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = faults::only(&report);
    let container = r.phases.iter().find(|p| p.phase.as_str() == "container").expect("container");
    assert!(container.detail.contains("network policy gateway"), "{}", container.detail);
    // The collection needs no network: the helper runs by exec, as before the fault.
    assert!(r.workspace_collected, "{:?}", events(r));
    assert_eq!(r.final_diff.as_ref().expect("the final diff").paths(), ["work.txt"]);
    let at = "final collection";
    row(&report, "network-6-removed-collection-remote", REMOTE, at, Outcome::Pass, "").await;
}
