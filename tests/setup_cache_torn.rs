//! The setup cache never stores or uses a torn image (issue 19): a setup
//! step that leaves a writer running is committed only once the writer is
//! done (or not at all, and the record says why), paused while it is; and a
//! cached image whose workspace is not the one it was committed with (here
//! tampered with under the same tag and labels) is detected on its hit,
//! removed and not used.
//!
//! Every eval carries a variable unique to this test process, so its key is
//! its own. Images are pruned by this test's run ids only.

mod common;

use std::time::Duration;

use bollard::Docker;
use reeval::prelude::*;
use reeval::sandbox::DockerBackend;
use reeval::{Eval, Outcome, Record};

fn nonce() -> String {
    format!("{}-{}", std::process::id(), reeval::runner::new_run_id())
}

fn detail<'a>(r: &'a Record, phase: &str) -> Vec<&'a str> {
    r.phases.iter().filter(|p| p.phase.as_str() == phase).map(|p| p.detail.as_str()).collect()
}

fn cached_as(r: &Record) -> Option<String> {
    detail(r, "snapshot").into_iter().find_map(|d| {
        Some(
            d.split("setup cache miss, ")
                .nth(1)?
                .strip_suffix(" is filled in the background")?
                .to_string(),
        )
    })
}

fn hit(r: &Record) -> bool {
    detail(r, "setup").iter().any(|d| d.starts_with("setup cache hit "))
}

async fn image_exists(digest: &str) -> bool {
    let docker = DockerBackend::connect().await.expect("the engine answers");
    docker.image_id(&format!("reeval/setup:{digest}")).await.expect("inspect").is_some()
}

async fn prune(run_id: &str) {
    let docker = DockerBackend::connect().await.expect("the engine answers");
    reeval::setup_cache::prune(&docker, Some(run_id)).await.expect("prune");
}

/// 300 files in `a/`, and a writer left running that moves them to `b/` one by one.
fn moving_writer(nonce: &str) -> Environment {
    Environment::new().env("CACHE_TEST_NONCE", nonce).setup(
        "mkdir a b && for i in $(seq 300); do echo $i > a/f$i; done && \
         ( sleep 1; for i in $(seq 300); do mv a/f$i b/; done ) >/dev/null 2>&1 &"
            .to_string(),
    )
}

/// Passes when the 300 files are all in one place. Trial 1 takes long
/// enough for the fill to end (the writer's second or so, or the settle
/// time under load, then the commit), so trial 2 hits or says why it cannot.
fn counts_files(name: &str, env: Environment) -> Eval {
    Eval::new(name, |c| {
        Box::pin(async move {
            if c.record().trial == 1 {
                c.exec("sleep 16").await?;
            }
            let out = c.exec("echo $(ls a | wc -l) $(ls b | wc -l)").await?;
            let counts = out.stdout.trim().to_string();
            expect(counts.as_str()).to_match("^(0 300|300 0)$")?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(120))
    .environment(move || env.clone())
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_setup_that_leaves_a_writer_running_is_cached_only_once_it_is_done() {
    require_docker!();
    let nonce = nonce();
    let env = moving_writer(&nonce);
    let report = common::runner_with("setup-torn", |c| {
        c.settings.setup_cache = true;
        c.settings.test_threads = 1;
        c.settings.trials = Some(2);
    })
    .run(vec![counts_files("torn", env)])
    .await
    .expect("preflight");
    let first = report.records.iter().find(|r| r.trial == 1).expect("trial 1");
    let digest = cached_as(first).expect("the miss asked for a fill");
    let second = report.records.iter().find(|r| r.trial == 2).expect("trial 2");
    assert_eq!(second.outcome, Outcome::Pass, "{:?}", second.message);
    if image_exists(&digest).await {
        // Committed after the writer ended: the hit has every file where the writer left it.
        assert!(hit(second), "{:?}", second.phases);
        assert_eq!(second.checks.last().unwrap().stdout_tail, "0 300\n");
    } else {
        // The writer outlived the settle time (a loaded machine): not cached, and said so.
        let said = second.events.iter().map(|e| e.message.as_str()).collect::<Vec<_>>();
        assert!(said.iter().any(|e| e.contains("its setup left processes running")), "{said:?}");
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
    prune(&report.run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_setup_that_leaves_a_process_running_for_ever_is_not_cached_and_the_record_says_why() {
    require_docker!();
    let nonce = nonce();
    let env = Environment::new()
        .env("CACHE_TEST_NONCE", nonce)
        .setup("echo ready > built.txt && (sleep 600 >/dev/null 2>&1 &)".to_string());
    // Trial 1 takes long enough for the fill to give up (its setup, then 10 s); trial 2 misses again.
    let eval = Eval::new("never_settles", |c| {
        Box::pin(async move {
            if c.record().trial == 1 {
                c.exec("sleep 16").await?;
            }
            expect(c.read_file("built.txt").await?).to_equal("ready\n")?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(120))
    .environment(move || env.clone());
    let report = common::runner_with("setup-never", |c| {
        c.settings.setup_cache = true;
        c.settings.test_threads = 1;
        c.settings.trials = Some(2);
    })
    .run(vec![eval])
    .await
    .expect("preflight");
    let digest = cached_as(&report.records[0]).expect("the miss asked for a fill");
    assert!(!image_exists(&digest).await, "a sandbox that never settled was not committed");
    let second = report.records.iter().find(|r| r.trial == 2).expect("trial 2");
    assert_eq!(second.outcome, Outcome::Pass, "{:?}", second.message);
    let said = second.events.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("\n");
    assert!(
        said.contains(&format!(
            "setup cache: {digest} is not cached: its setup left processes running"
        )) && said.contains("sleep"),
        "{said}"
    );
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
    prune(&report.run_id).await;
}

/// Replaces the image `reference` with one whose `built.txt` says "tampered",
/// under the same tag and with the same labels.
async fn tamper(reference: &str) {
    use bollard::query_parameters::{
        CommitContainerOptionsBuilder, CreateContainerOptionsBuilder,
        RemoveContainerOptionsBuilder, WaitContainerOptionsBuilder,
    };
    let docker = Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap();
    let name = format!("reeval-test-tamper-{}", std::process::id());
    let config = bollard::models::ContainerCreateBody {
        image: Some(reference.to_string()),
        cmd: Some(vec!["sh".into(), "-c".into(), "echo tampered > /workspace/built.txt".into()]),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::default().name(&name).build();
    docker.create_container(Some(options), config).await.expect("create");
    docker.start_container(&name, None).await.expect("start");
    use futures_util::StreamExt;
    let mut wait =
        docker.wait_container(&name, Some(WaitContainerOptionsBuilder::default().build()));
    while wait.next().await.is_some() {}
    let (repo, tag) = reference.split_once(':').unwrap();
    let options =
        CommitContainerOptionsBuilder::default().container(&name).repo(repo).tag(tag).build();
    docker
        .commit_container(options, bollard::models::ContainerConfig::default())
        .await
        .expect("commit");
    let options = RemoveContainerOptionsBuilder::default().force(true).build();
    docker.remove_container(&name, Some(options)).await.expect("remove");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_tampered_cached_image_is_detected_on_its_hit_removed_and_not_used() {
    require_docker!();
    let nonce = nonce();
    let env = Environment::new()
        .env("CACHE_TEST_NONCE", nonce)
        .setup("echo prepared > built.txt".to_string());
    let eval = || {
        let env = env.clone();
        Eval::new("tampered", |c| {
            Box::pin(async move {
                expect(c.read_file("built.txt").await?).to_equal("prepared\n")?;
                Ok(())
            })
        })
        .environment(move || env.clone())
    };
    let runner = || common::runner_with("setup-tampered", |c| c.settings.setup_cache = true);
    let first = runner().run(vec![eval()]).await.expect("preflight");
    let digest = cached_as(&first.records[0]).expect("the miss asked for a fill");
    let reference = format!("reeval/setup:{digest}");
    assert!(image_exists(&digest).await);
    tamper(&reference).await;

    let second = runner().run(vec![eval()]).await.expect("preflight");
    let r = &second.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "the tampered workspace was not used: {:?}", r.message);
    assert!(hit(r), "it hit first: {:?}", r.phases);
    let said = r.events.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("\n");
    assert!(
        said.contains(&format!(
            "the cached setup {digest} does not hold the workspace it was committed with"
        )),
        "{said}"
    );
    assert!(
        detail(r, "setup").iter().any(|d| !d.starts_with("setup cache hit")),
        "then ran the setup itself: {:?}",
        r.phases
    );
    assert!(!image_exists(&digest).await, "the tampered image was removed");
    assert_eq!(common::containers_of_run(&second.run_id).await, 0);
    prune(&first.run_id).await;
}
