//! Starting ahead against the real Docker engine: with `prestart`, attempts
//! waiting for a slot get their container made meanwhile, use it when their
//! slot comes (fresh, one each), and nothing is left behind, also when an
//! attempt never touches its sandbox.

mod common;

use reeval::prelude::*;
use reeval::{Eval, Outcome, Record};

/// The detail of `r`'s first phase named `phase` ("" when it has none).
fn detail<'a>(r: &'a Record, phase: &str) -> &'a str {
    r.phases.iter().find(|p| p.phase.as_str() == phase).map(|p| p.detail.as_str()).unwrap_or("")
}

fn container_detail(r: &Record) -> &str {
    detail(r, "container")
}

fn snapshot_detail(r: &Record) -> &str {
    detail(r, "snapshot")
}

/// Each attempt that used a container had its own.
fn assert_each_container_served_one_attempt(report: &reeval::RunReport) {
    let mut ids: Vec<&str> = report.records.iter().filter_map(|r| r.container.as_deref()).collect();
    let used = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), used, "no container served two attempts");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
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
        c.settings.test_threads = 1;
        c.settings.trials = Some(3);
        c.settings.prestart = 2;
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
    assert_each_container_served_one_attempt(&report);
    assert_eq!(
        common::containers_of_run(&report.run_id).await,
        0,
        "unused ones were destroyed too"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_image_built_ahead_of_the_attempts_is_said_built_by_the_attempt_that_waited() {
    require_docker!();
    // An image of its own (unique to this process), so it is built in this run:
    // ahead of the attempts, while the one slot runs an eval on the base image.
    let nonce = format!("{}-{}", std::process::id(), reeval::runner::new_run_id());
    let env = Environment::new()
        .image(reeval::Image::install("reeval/base:latest", [format!("echo {nonce} > /nonce")]));
    let first = Eval::new("on_the_base_image", |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    });
    let eval = Eval::new("built_ahead", |c| {
        Box::pin(async move { expect(c.exec("test -s /nonce").await?).to_succeed() })
    })
    .environment(move || env.clone());
    let report = common::runner_with("built-ahead", |c| {
        c.settings.test_threads = 1;
        c.settings.trials = Some(2);
    })
    .run(vec![first, eval])
    .await
    .expect("preflight");
    let image = |r: &Record| {
        r.phases.iter().find(|p| p.phase.as_str() == "image").map(|p| p.detail.clone()).unwrap()
    };
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    }
    let details: Vec<String> =
        report.records.iter().filter(|r| r.eval == "built_ahead").map(image).collect();
    // Built once, ahead of the attempts: exactly one record says so, with its build time.
    let built: Vec<&String> = details.iter().filter(|d| d.starts_with("built ")).collect();
    assert_eq!(built.len(), 1, "{details:?}");
    let said = regex::Regex::new(
        r"^built \S+ \(\S+\) in \d+\.\ds ahead of the attempts; this attempt waited \d+\.\ds for it$",
    )
    .unwrap();
    assert!(said.is_match(built[0]), "{details:?}");
    let reference = report.records.iter().find(|r| r.eval == "built_ahead").unwrap().image.clone();
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    docker
        .remove_image(
            &reference.unwrap(),
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await
        .expect("remove the test's image");
}

/// An attempt with a way out (an egress gateway, as every Harbor task with
/// its default `public` network has) starts ahead with its gateway, in
/// ticket order: with one slot and one place ahead, every attempt but the
/// first is made ahead. Each one's gateway phase still checks the relay's
/// report, its egress goes through its own gateway, and an attempt that never
/// touches its sandbox leaves nothing behind (its gateway closed, its
/// container removed).
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn attempts_with_a_gateway_start_ahead_with_it_in_ticket_order() {
    require_docker!();
    let env = || Environment::new().allow_any_egress(true);
    let out = Eval::new("goes_out", |c| {
        Box::pin(async move {
            // The relay is the way out: the proxy is set, and it answers.
            expect(c.exec("test -n \"$HTTP_PROXY$http_proxy\"").await?).to_succeed()?;
            expect(c.exec("test ! -e mine.txt && echo mine > mine.txt").await?).to_succeed()
        })
    })
    .environment(env);
    let never = Eval::new("never_touches", |_c| Box::pin(async move { expect(1).to_equal(1) }))
        .environment(env);
    let report = common::runner_with("start-ahead-gateway", |c| {
        c.settings.test_threads = 1;
        c.settings.trials = Some(3);
        c.settings.prestart = 1;
    })
    .run(vec![out, never])
    .await
    .expect("preflight");
    assert_eq!(report.records.len(), 6);
    let mut ahead = 0;
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}", r.eval, r.message);
        if r.eval != "goes_out" {
            continue;
        }
        let gateway = r.phases.iter().find(|p| p.phase.as_str() == "gateway").expect("gateway");
        assert!(gateway.detail.contains("isolation verified"), "{}", gateway.detail);
        let container = container_detail(r);
        assert!(container.contains("gateway"), "{container}");
        ahead += usize::from(container.ends_with("started ahead of its slot"));
    }
    // Tickets 1 and 2 of goes_out waited behind one slot each: made ahead. (Its
    // ticket 0 took a free slot; never_touches' tickets come after it.)
    assert_eq!(ahead, 2, "every goes_out attempt but the first started ahead");
    assert_each_container_served_one_attempt(&report);
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "nothing left behind");
}

/// Where nothing of the start writes the sandbox before its snapshot (an
/// image of the eval's own holds the workspace, as a Harbor task's does), a
/// container made ahead takes the snapshot ahead too: the agent user owns
/// what the image gave, and the turn's diff is the agent's work against the
/// workspace the image gave. Where the start writes files, the snapshot is
/// the attempt's own, after them.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_snapshot_is_taken_ahead_where_the_start_writes_nothing_before_it() {
    require_docker!();
    let image = || {
        reeval::Image::install(
            "reeval/base:latest",
            [
                "mkdir -p /workspace && echo given > /workspace/given.txt && echo kept > /workspace/kept.txt",
            ],
        )
    };
    // The agent owns what the image gave, deletes one file and writes another.
    const TURN: &str =
        "test \"$(stat -c %u given.txt)\" = 1000 && rm given.txt && echo mine > out.txt";
    let from_image = Eval::new("from_image", |c| {
        Box::pin(async move {
            let turn = c.send(TURN).await?;
            expect(turn.diff.paths().join(",")).to_equal("given.txt,out.txt")
        })
    })
    .environment(move || Environment::new().image(image()).allow_any_egress(true));
    let with_files = Eval::new("with_files", |c| {
        Box::pin(async move {
            let turn = c.send(TURN).await?;
            expect(turn.diff.paths().join(",")).to_equal("given.txt,out.txt")
        })
    })
    .environment(move || {
        Environment::new().image(image()).file("written.txt", "by the start").allow_any_egress(true)
    });
    let report = common::runner_with("snapshot-ahead", |c| {
        c.settings.test_threads = 1;
        c.settings.trials = Some(3);
        c.settings.prestart = 1;
        c.settings.harnesses = vec!["shell".into()];
    })
    .run(vec![from_image, with_files])
    .await
    .expect("preflight");
    assert_eq!(report.records.len(), 6);
    let (mut taken_ahead, mut started_ahead) = (0, 0);
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?} {:?}", r.eval, r.message, r.phases);
        let ahead = container_detail(r).ends_with("started ahead of its slot");
        started_ahead += usize::from(ahead);
        let snapshot = snapshot_detail(r);
        match r.eval.as_str() {
            // Made ahead: so was its snapshot (the workspace's two files).
            "from_image" if ahead => {
                assert_eq!(snapshot, "2 files, taken ahead of its slot");
                taken_ahead += 1;
            }
            // The files were written after the container: the snapshot is the attempt's.
            _ => assert!(!snapshot.contains("ahead"), "{}: {snapshot}", r.eval),
        }
    }
    assert!(taken_ahead >= 2, "from_image's waiting attempts took theirs ahead");
    assert!(started_ahead > taken_ahead, "with_files started ahead too, without the snapshot");
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "nothing left behind");
}

/// A snapshot taken ahead of a git repository's workspace, in an eval whose
/// first call is a check, not a `send`: the check sees the image's history,
/// and the turn's diff is the agent's file alone (`.git` left out).
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_git_workspace_taken_ahead_serves_a_check_first_then_the_turn() {
    require_docker!();
    let image = || {
        reeval::Image::install(
            "reeval/base:latest",
            ["mkdir -p /workspace && cd /workspace && git init -q && echo base > base.txt \
              && git add base.txt && git -c user.email=a@b -c user.name=a commit -qm base"],
        )
    };
    let eval = Eval::new("git_ahead", |c| {
        Box::pin(async move {
            expect(c.exec("git log --oneline | wc -l").await?).to_succeed()?;
            let turn = c
                .send("echo mine > mine.txt && git add mine.txt && git -c user.email=a@b -c user.name=a commit -qm mine")
                .await?;
            expect(turn.diff.paths().join(",")).to_equal("mine.txt")
        })
    })
    .environment(move || Environment::new().image(image()).allow_any_egress(true));
    let report = common::runner_with("snapshot-ahead-git", |c| {
        c.settings.test_threads = 1;
        c.settings.trials = Some(3);
        c.settings.prestart = 1;
        c.settings.harnesses = vec!["shell".into()];
    })
    .run(vec![eval])
    .await
    .expect("preflight");
    assert_eq!(report.records.len(), 3);
    let mut taken_ahead = 0;
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.phases);
        taken_ahead += usize::from(snapshot_detail(r).ends_with("taken ahead of its slot"));
    }
    assert_eq!(taken_ahead, 2, "every attempt but the first took its snapshot ahead");
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "nothing left behind");
}
