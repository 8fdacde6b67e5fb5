//! The setup cache against the real Docker engine: a miss ends without
//! waiting for its setup's commit (a fill in the background commits a sandbox
//! of its own, and the run waits for it); a later run hits, with the same
//! snapshot, diff and check results as the miss; a setup a secret could reach
//! is not cached (unless the eval says so); changing any input misses; the
//! cache survives across runs and `reeval images prune` removes it; an
//! interruption during a fill's commit leaves no container and no image
//! that is not whole.
//!
//! Every eval here carries a variable unique to this test process, so its
//! key is its own and nothing cached by another run is hit. Images are
//! pruned by this test's run ids only.

mod common;

use reeval::prelude::*;
use reeval::sandbox::DockerBackend;
use reeval::{Eval, Outcome, Record, SetupCache};

fn nonce() -> String {
    format!("{}-{}", std::process::id(), reeval::runner::new_run_id())
}

fn environment(nonce: &str, step: &str, file: &str) -> Environment {
    Environment::new()
        .env("CACHE_TEST_NONCE", nonce)
        .file("given.txt", file.to_string())
        .setup(step.to_string())
}

fn prepared(name: &str, env: Environment) -> Eval {
    Eval::new(name, |c| {
        Box::pin(async move {
            c.send("echo more >> built.txt; echo new > new.txt").await?;
            expect(c.exec("cat built.txt given.txt").await?).to_succeed()?;
            Ok(())
        })
    })
    .environment(move || env.clone())
}

fn detail<'a>(r: &'a Record, phase: &str) -> &'a str {
    r.phases.iter().find(|p| p.phase.as_str() == phase).map(|p| p.detail.as_str()).unwrap_or("")
}

/// The digest a miss asked to be filled in the background.
fn cached_as(r: &Record) -> Option<&str> {
    detail(r, "snapshot")
        .split("setup cache miss, ")
        .nth(1)?
        .strip_suffix(" is filled in the background")
}

async fn image_exists(digest: &str) -> bool {
    let docker = DockerBackend::connect().await.expect("the engine answers");
    docker.image_id(&format!("reeval/setup:{digest}")).await.expect("inspect").is_some()
}

fn hit(r: &Record) -> Option<&str> {
    detail(r, "setup").strip_prefix("setup cache hit ")
}

async fn prune(run_id: &str) -> Vec<String> {
    let docker = DockerBackend::connect().await.expect("the engine answers");
    let (removed, kept) = reeval::setup_cache::prune(&docker, Some(run_id)).await.expect("prune");
    assert!(kept.is_empty(), "{kept:?}");
    removed
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_miss_ends_before_its_fill_and_a_later_run_hits_the_same_workspace() {
    require_docker!();
    let nonce = nonce();
    let env = environment(&nonce, "sleep 2 && echo prepared > built.txt", "given\n");
    // The miss: its record is final while the fill still prepares and commits.
    let dir = common::temp_dir("setup-cache-a");
    let first = common::runner_with("setup-cache-a", |c| {
        c.settings.record_dir = dir.clone();
        c.settings.test_threads = 1;
        c.settings.trials = Some(1);
        c.settings.setup_cache = true;
    });
    let run = {
        let (first, env) = (first.clone(), env.clone());
        tokio::spawn(async move { first.run(vec![prepared("cached_setup", env)]).await })
    };
    let record_file = |dir: &std::path::Path| {
        std::fs::read_dir(dir).ok()?.flatten().find_map(|run| {
            let file = run.path().join("cached_setup.shell.t1.try1.json");
            file.exists().then_some(file)
        })
    };
    let began = std::time::Instant::now();
    let written = loop {
        if let Some(file) = record_file(&dir) {
            break file;
        }
        assert!(began.elapsed() < std::time::Duration::from_secs(120), "no record");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let recorded: Record =
        serde_json::from_slice(&std::fs::read(&written).unwrap()).expect("a record");
    let digest = cached_as(&recorded).expect("the miss asked for a fill").to_string();
    assert!(
        !image_exists(&digest).await,
        "the miss's record was written before its setup's image existed"
    );
    let report = run.await.unwrap().expect("preflight");
    let miss = &report.records[0];
    assert_eq!(miss.outcome, Outcome::Pass, "{:?}", miss.message);
    assert_eq!(hit(miss), None);
    assert!(image_exists(&digest).await, "the run waited for its fill");
    // The fill's sandbox is gone too.
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);

    // A later run hits: the same snapshot, the same diffs, the same check results.
    let second = common::runner_with("setup-cache-b", |c| c.settings.setup_cache = true);
    let again = second.run(vec![prepared("cached_setup", env.clone())]).await.expect("preflight");
    let hit1 = &again.records[0];
    assert_eq!(hit1.outcome, Outcome::Pass, "{:?}", hit1.message);
    assert_eq!(hit(hit1), Some(digest.as_str()), "{:?}", hit1.phases);
    // A hit skips workspace, files and setup steps, and spends no time on them.
    let names: Vec<&str> = hit1.phases.iter().map(|p| p.phase.as_str()).collect();
    assert!(!names.contains(&"files"), "{names:?}");
    let setup_ms =
        |r: &Record| r.phases.iter().find(|p| p.phase.as_str() == "setup").unwrap().duration_ms;
    assert!(
        setup_ms(miss) >= 2000 && setup_ms(hit1) < 1000,
        "{} {}",
        setup_ms(miss),
        setup_ms(hit1)
    );
    assert_eq!(detail(miss, "snapshot").split(';').next(), Some(detail(hit1, "snapshot")));
    assert_eq!(miss.turns[0].diff, hit1.turns[0].diff);
    assert_eq!(miss.final_diff, hit1.final_diff);
    assert_eq!(miss.checks[0].stdout_tail, "prepared\nmore\ngiven\n");
    assert_eq!(miss.checks[0].stdout_tail, hit1.checks[0].stdout_tail);
    assert_eq!(miss.checks[0].exit_code, hit1.checks[0].exit_code);

    // `reeval images prune` (here for the run that made it) removes it; the next run misses.
    assert_eq!(prune(&report.run_id).await, [format!("reeval/setup:{digest}")]);
    let third = common::runner_with("setup-cache-c", |c| c.settings.setup_cache = true);
    let after = third.run(vec![prepared("cached_setup", env)]).await.expect("preflight");
    assert_eq!(hit(&after.records[0]), None);
    assert_eq!(cached_as(&after.records[0]), Some(digest.as_str()));
    prune(&after.run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn changing_any_input_misses_and_the_cache_can_be_turned_off() {
    require_docker!();
    let nonce = nonce();
    let base = environment(&nonce, "echo one > built.txt", "a\n");
    let evals = vec![
        prepared("base", base.clone()),
        prepared("other_step", environment(&nonce, "echo two > built.txt", "a\n")),
        prepared("other_file", environment(&nonce, "echo one > built.txt", "b\n")),
        prepared("one_more_step", base.clone().setup("true")),
        prepared("off_per_environment", base.clone().setup_cache(false)),
    ];
    let report = common::runner_with("setup-cache-keys", |c| {
        c.settings.test_threads = 1;
        c.settings.setup_cache = true;
    })
    .run(evals)
    .await
    .expect("preflight");
    let by_name = |n: &str| report.records.iter().find(|r| r.eval == n).unwrap();
    let mut digests = Vec::new();
    for name in ["base", "other_step", "other_file", "one_more_step"] {
        let r = by_name(name);
        assert_eq!(r.outcome, Outcome::Pass, "{name}: {:?}", r.message);
        assert_eq!(hit(r), None, "{name} must miss");
        digests.push(cached_as(r).unwrap_or_else(|| panic!("{name} cached")).to_string());
    }
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), 4, "each input gives its own key");
    let off = by_name("off_per_environment");
    assert_eq!((hit(off), cached_as(off)), (None, None));

    // `--no-setup-cache` (RunConfig::setup_cache) neither hits nor caches.
    let none = common::runner_with("setup-cache-off", |c| c.settings.setup_cache = false)
        .run(vec![prepared("base", base)])
        .await
        .expect("preflight");
    assert_eq!((hit(&none.records[0]), cached_as(&none.records[0])), (None, None));
    prune(&report.run_id).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_setup_a_secret_could_reach_is_not_cached_unless_the_eval_says_so() {
    require_docker!();
    let nonce = nonce();
    let key_file = common::env_file("setup-cache-secret", &[("CACHE_TEST_KEY", "sk-real-value-1")]);
    let with_secret = |cache: SetupCache| {
        environment(&nonce, "echo prepared > built.txt", "x\n")
            .secret("CACHE_TEST_KEY")
            .broker(
                "CACHE_TEST_KEY",
                reeval::egress::Broker::header("api.example.com", "x-api-key"),
            )
            .setup_cache(cache)
    };
    let report = common::runner_with("setup-cache-secret", |c| {
        c.settings.test_threads = 1;
        c.settings.setup_cache = true;
        c.settings.env_file = Some(key_file.clone());
    })
    .run(vec![
        prepared("secret_default", with_secret(SetupCache::On)),
        prepared("secret_included", with_secret(SetupCache::IncludingSecrets)),
    ])
    .await
    .expect("preflight");
    let by_name = |n: &str| report.records.iter().find(|r| r.eval == n).unwrap();
    let default = by_name("secret_default");
    assert_eq!(default.outcome, Outcome::Pass, "{:?}", default.message);
    assert_eq!(cached_as(default), None, "{:?}", default.phases);
    assert!(
        default
            .events
            .iter()
            .any(|e| e.message.contains("setup not cached: a secret could reach it")),
        "{:?}",
        default.events
    );
    let included = by_name("secret_included");
    assert_eq!(included.outcome, Outcome::Pass, "{:?}", included.message);
    assert!(cached_as(included).is_some(), "{:?}", included.phases);
    prune(&report.run_id).await;
}

/// Runs `argv` in container `id`; its exit code.
async fn exec_in(id: &str, argv: &[&str]) -> Option<i64> {
    use bollard::exec::{CreateExecOptions, StartExecResults};
    let docker = DockerBackend::connect().await.expect("the engine answers");
    let docker = docker.client();
    let options = CreateExecOptions::<String> {
        cmd: Some(argv.iter().map(|a| a.to_string()).collect()),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        ..Default::default()
    };
    let exec = docker.create_exec(id, options).await.ok()?;
    if let Ok(StartExecResults::Attached { mut output, .. }) =
        docker.start_exec(&exec.id, None).await
    {
        use futures_util::StreamExt;
        while output.next().await.is_some() {}
    }
    docker.inspect_exec(&exec.id).await.ok()?.exit_code
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_interruption_during_a_fills_commit_leaves_no_container_and_no_half_image() {
    require_docker!();
    let nonce = nonce();
    // Enough files that the commit takes seconds here; built.txt is the setup's last file.
    let step = "mkdir many && (cd many && seq 1 3000 | xargs touch) && echo prepared > built.txt";
    let env = environment(&nonce, step, "given\n");
    let run_id = format!("setup-cache-interrupted-{}", std::process::id());
    let runner = common::runner_with("setup-cache-interrupted", |c| {
        c.settings.run_id = run_id.clone();
        c.settings.test_threads = 1;
        c.settings.trials = Some(1);
        c.settings.setup_cache = true;
    });
    let shutdown = runner.shutdown_token();
    let run = {
        let env = env.clone();
        tokio::spawn(async move { runner.run(vec![prepared("interrupted_fill", env)]).await })
    };
    // The fill's sandbox is try 0 of the trial; once its setup is done, its commit follows.
    let docker = DockerBackend::connect().await.expect("the engine answers");
    let began = std::time::Instant::now();
    'found: loop {
        assert!(began.elapsed() < std::time::Duration::from_secs(180), "no fill was seen");
        let fills = docker
            .containers_labelled("dev.reeval.attempt", Some("interrupted_fill.shell.t1.try0"))
            .await
            .expect("list containers");
        for (id, _) in fills {
            if exec_in(&id, &["test", "-f", "/workspace/built.txt"]).await == Some(0) {
                break 'found;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // What the suite's SIGTERM and Ctrl-C handler does.
    shutdown.cancel();
    let report = run.await.unwrap().expect("preflight");
    let digest = cached_as(&report.records[0]).expect("the miss asked for a fill").to_string();
    assert_eq!(common::containers_of_run(&run_id).await, 0, "no container is left");
    // The engine tags an image only once its commit is whole: if there is one, a
    // later run hits it and finds everything the setup made.
    if image_exists(&digest).await {
        let later =
            common::runner_with("setup-cache-after-interrupt", |c| c.settings.setup_cache = true)
                .run(vec![prepared("interrupted_fill", env)])
                .await
                .expect("preflight");
        let r = &later.records[0];
        assert_eq!(hit(r), Some(digest.as_str()), "{:?}", r.phases);
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
        assert_eq!(r.checks[0].stdout_tail, "prepared\nmore\ngiven\n");
    }
    prune(&run_id).await;
}

/// A sandbox with a way out runs the gateway's relay, whose serving processes
/// are started through `/proc/self/exe` (so the kernel names them `exe`): the
/// fill's check for what a setup left running must know them as the relay's,
/// or no environment with egress and a setup step is ever cached.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_setup_with_egress_is_cached_despite_the_relays_processes() {
    require_docker!();
    let nonce = nonce();
    let env =
        environment(&nonce, "echo prepared > built.txt", "given\n").allow_egress("example.invalid");
    let first = common::runner_with("setup-cache-egress-a", |c| c.settings.setup_cache = true);
    let report = first.run(vec![prepared("egress_setup", env.clone())]).await.expect("preflight");
    let miss = &report.records[0];
    assert_eq!(miss.outcome, Outcome::Pass, "{:?}", miss.message);
    let digest = cached_as(miss).expect("the miss asked for a fill").to_string();
    assert!(
        image_exists(&digest).await,
        "the fill was not committed (see the run's events.jsonl in {})",
        report.run_dir.display()
    );
    let second = common::runner_with("setup-cache-egress-b", |c| c.settings.setup_cache = true);
    let again = second.run(vec![prepared("egress_setup", env)]).await.expect("preflight");
    assert_eq!(hit(&again.records[0]), Some(digest.as_str()), "{:?}", again.records[0].phases);
    prune(&report.run_id).await;
}
