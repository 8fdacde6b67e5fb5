//! The setup cache's size cap against the real Docker engine: past the cap,
//! the least recently used cached setup is removed and the others are kept,
//! as the engine's image list shows. Its own test binary, so no other test of
//! this suite caches setups while the cap is small.
//!
//! The cap counts every cached setup on the engine, so the test re-tags the
//! ones it did not make (which only marks them as used) and sets the cap to
//! what is cached now plus one more image, less half of the image it expects
//! to go: only the least recently used one, its own, is then over the cap.

mod common;

use std::collections::HashMap;

use reeval::prelude::*;
use reeval::sandbox::DockerBackend;
use reeval::{Eval, Outcome, Record};

fn cached(name: &str, nonce: &str, step: &str) -> Eval {
    let env = Environment::new().env("CACHE_LRU_NONCE", nonce).setup(step.to_string());
    Eval::new(name, |c| {
        Box::pin(async move { expect(c.exec("cat built.txt").await?).to_succeed() })
    })
    .environment(move || env.clone())
}

fn detail<'a>(r: &'a Record, phase: &str) -> &'a str {
    r.phases.iter().find(|p| p.phase.as_str() == phase).map(|p| p.detail.as_str()).unwrap_or("")
}

/// Runs `eval` once with the cache's cap at `max_bytes`; its record and run id.
async fn run(eval: Eval, max_bytes: u64) -> (Record, String) {
    let report = common::runner_with("setup-cache-lru", |c| {
        c.settings.setup_cache = true;
        c.settings.setup_cache_max_bytes = max_bytes;
    })
    .run(vec![eval])
    .await
    .expect("preflight");
    let r = report.records[0].clone();
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    (r, report.run_id)
}

/// The digest a miss asked to be filled.
fn filled(r: &Record) -> String {
    let d = detail(r, "snapshot");
    d.split("setup cache miss, ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" is filled in the background"))
        .unwrap_or_else(|| panic!("a miss: {d}"))
        .to_string()
}

/// Every cached setup on the engine: reference → size.
async fn cached_images(docker: &bollard::Docker) -> HashMap<String, u64> {
    let filters = HashMap::from([("label", vec!["dev.reeval.setup"])]);
    let options =
        bollard::query_parameters::ListImagesOptionsBuilder::default().filters(&filters).build();
    let mut all = HashMap::new();
    for image in docker.list_images(Some(options)).await.expect("list images") {
        for tag in image.repo_tags.iter().filter(|t| t.starts_with("reeval/setup:")) {
            all.insert(tag.clone(), image.size.max(0) as u64);
        }
    }
    all
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn past_the_cap_the_least_recently_used_setup_is_evicted_and_the_others_kept() {
    require_docker!();
    let engine = DockerBackend::connect().await.expect("the engine answers");
    let docker = engine.client();
    let nonce = format!("{}-{}", std::process::id(), reeval::runner::new_run_id());
    let roomy = reeval::setup_cache::DEFAULT_MAX_BYTES;
    let a = || cached("lru_a", &nonce, "echo a > built.txt");
    let b = || cached("lru_b", &nonce, "echo b > built.txt");
    let c = || cached("lru_c", &nonce, "echo c > built.txt");

    // A, then B, are cached (each run waits for its fill); then A is used again.
    let (ra, run_a) = run(a(), roomy).await;
    let (rb, run_b) = run(b(), roomy).await;
    let (digest_a, digest_b) = (filled(&ra), filled(&rb));
    let (again, run_again) = run(a(), roomy).await;
    assert_eq!(detail(&again, "setup"), format!("setup cache hit {digest_a}"));

    // Setups cached by others are marked used now: B is the least recently used of all.
    let before = cached_images(docker).await;
    let (ref_a, ref_b) = (format!("reeval/setup:{digest_a}"), format!("reeval/setup:{digest_b}"));
    for other in before.keys().filter(|r| **r != ref_a && **r != ref_b) {
        let (repo, tag) = other.split_once(':').expect("repo:tag");
        let options = bollard::query_parameters::TagImageOptionsBuilder::default()
            .repo(repo)
            .tag(tag)
            .build();
        let _ = docker.tag_image(other, Some(options)).await;
    }
    let total: u64 = before.values().sum();
    let cap = total + before[&ref_a] - before[&ref_b] / 2;

    // C is cached under that cap: the cache is then over it by about half of B.
    let (rc, run_c) = run(c(), cap).await;
    let ref_c = format!("reeval/setup:{}", filled(&rc));
    let after = cached_images(docker).await;
    assert!(!after.contains_key(&ref_b), "the least recently used one went: {after:?}");
    assert!(after.contains_key(&ref_a), "the one used again stayed: {after:?}");
    assert!(after.contains_key(&ref_c), "the newest stayed: {after:?}");
    for other in before.keys().filter(|r| **r != ref_a && **r != ref_b) {
        assert!(after.contains_key(other), "{other}, cached by others, stayed");
    }

    for run_id in [run_a, run_b, run_again, run_c] {
        let _ = reeval::setup_cache::prune(&engine, Some(&run_id)).await;
    }
}
