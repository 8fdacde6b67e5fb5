//! What the egress gateway costs, in one run (`cargo bench --bench egress`;
//! needs Docker and `reeval/base:latest`; `REEVAL_BENCH_N` attempts per arm, default 10):
//!
//! 1. container start with the gateway against without: the attempts'
//!    `container` + `gateway` phases, arms interleaved, medians compared;
//! 2. the gateway's own overhead on loopback: p50 and p99 of a proxied
//!    request against a direct one (plain HTTP, and HTTPS intercepted with a
//!    key swapped), and SSE time to first byte (the gateway crate's bench).

#[path = "../reeval-gateway/benches/gateway.rs"]
mod gateway_bench;

use reeval::settings::Settings;
use std::time::Duration;

use reeval::prelude::*;
use reeval::{Eval, Outcome, Record, RunConfig, Runner};

fn median(mut v: Vec<u64>) -> u64 {
    v.sort();
    v[v.len() / 2]
}

/// Milliseconds the attempt spent starting its sandbox: the container and gateway phases.
fn start_ms(r: &Record) -> u64 {
    r.phases
        .iter()
        .filter(|p| p.phase == "container" || p.phase == "gateway")
        .map(|p| p.duration_ms)
        .sum()
}

async fn one(dir: &std::path::Path, gateway: bool) -> Record {
    let eval = Eval::new(if gateway { "with_gateway" } else { "without" }, |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    })
    .environment(move || {
        if gateway { Environment::new().allow_egress("example.com") } else { Environment::new() }
    });
    let config = RunConfig::from(Settings {
        record_dir: dir.to_path_buf(),
        test_threads: 1,
        infra_retries: 0,
        ..Settings::default()
    });
    let report =
        Runner::new(config, reeval::harness_registry()).run(vec![eval]).await.expect("preflight");
    let r = report.records.into_iter().next().expect("a record");
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    r
}

fn main() {
    let n: usize = std::env::var("REEVAL_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let dir = std::env::temp_dir().join(format!("reeval-bench-egress-{}", std::process::id()));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        // Warm-up: images, the first gateway.
        one(&dir, false).await;
        one(&dir, true).await;
        let (mut without, mut with, mut gateway_phase) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            without.push(start_ms(&one(&dir, false).await));
            let r = one(&dir, true).await;
            with.push(start_ms(&r));
            gateway_phase.push(
                r.phases.iter().find(|p| p.phase == "gateway").map(|p| p.duration_ms).unwrap_or(0),
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (a, b) = (median(without), median(with));
        println!("sandbox start ({n} attempts per arm, interleaved):");
        println!("  without gateway (container):            median {a} ms");
        println!("  with gateway (container + gateway):     median {b} ms");
        println!("  gateway phase alone (isolation report): median {} ms", median(gateway_phase));
        println!(
            "  the gateway adds:                        {} ms (target <= 30 ms)",
            b as i64 - a as i64
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
    drop(rt);
    gateway_bench::main();
}
