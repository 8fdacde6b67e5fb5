//! The setup cache against the real Docker engine: a hit gives the same
//! snapshot, diff and check results as a miss; a setup a secret could reach
//! is not cached (unless the eval says so); changing any input misses; the
//! cache survives across runs and `reeval images prune` removes it.
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

fn cached_as(r: &Record) -> Option<&str> {
    detail(r, "snapshot").split("setup cached as ").nth(1)
}

fn hit(r: &Record) -> Option<&str> {
    detail(r, "setup").strip_prefix("setup cache hit ")
}

async fn prune(run_id: &str) -> Vec<String> {
    let docker = DockerBackend::connect().await.expect("the engine answers");
    let (removed, kept) =
        reeval::setup_cache::prune(docker.client(), Some(run_id)).await.expect("prune");
    assert!(kept.is_empty(), "{kept:?}");
    removed
}

#[tokio::test]
async fn a_hit_behaves_like_a_miss_survives_the_run_and_is_pruned() {
    require_docker!();
    let nonce = nonce();
    let env = environment(&nonce, "sleep 2 && echo prepared > built.txt", "given\n");
    // One run, two trials one after the other: a miss that caches, then a hit.
    let first = common::runner_with("setup-cache-a", |c| {
        c.threads = 1;
        c.trials = Some(2);
        c.setup_cache = true;
    });
    let report = first.run(vec![prepared("cached_setup", env.clone())]).await.expect("preflight");
    let (miss, hit1) = (&report.records[0], &report.records[1]);
    for r in [miss, hit1] {
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    }
    let digest = cached_as(miss).expect("the miss cached its setup").to_string();
    assert_eq!(hit(miss), None);
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
    // The same snapshot, the same diffs, the same check results.
    assert_eq!(detail(miss, "snapshot").split(';').next(), Some(detail(hit1, "snapshot")));
    assert_eq!(miss.turns[0].diff, hit1.turns[0].diff);
    assert_eq!(miss.final_diff, hit1.final_diff);
    assert_eq!(miss.checks[0].stdout_tail, "prepared\nmore\ngiven\n");
    assert_eq!(miss.checks[0].stdout_tail, hit1.checks[0].stdout_tail);
    assert_eq!(miss.checks[0].exit_code, hit1.checks[0].exit_code);

    // A later run hits the same image.
    let second = common::runner_with("setup-cache-b", |c| c.setup_cache = true);
    let again = second.run(vec![prepared("cached_setup", env.clone())]).await.expect("preflight");
    assert_eq!(hit(&again.records[0]), Some(digest.as_str()));
    assert_eq!(again.records[0].turns[0].diff, miss.turns[0].diff);

    // `reeval images prune` (here for the run that made it) removes it; the next run misses.
    assert_eq!(prune(&report.run_id).await, [format!("reeval/setup:{digest}")]);
    let third = common::runner_with("setup-cache-c", |c| c.setup_cache = true);
    let after = third.run(vec![prepared("cached_setup", env)]).await.expect("preflight");
    assert_eq!(hit(&after.records[0]), None);
    assert_eq!(cached_as(&after.records[0]), Some(digest.as_str()));
    prune(&after.run_id).await;
}

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
        c.threads = 1;
        c.setup_cache = true;
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
    let none = common::runner_with("setup-cache-off", |c| c.setup_cache = false)
        .run(vec![prepared("base", base)])
        .await
        .expect("preflight");
    assert_eq!((hit(&none.records[0]), cached_as(&none.records[0])), (None, None));
    prune(&report.run_id).await;
}

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
        c.threads = 1;
        c.setup_cache = true;
        c.env_file = Some(key_file.clone());
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
