//! reeval's per-attempt overhead against raw bollard cycles, and diff speed on
//! a large workspace. Run with `cargo bench --bench overhead` (needs Docker and
//! `reeval/base:latest`; `REEVAL_BENCH_N` sets the number of attempts, default 20).
//! Target: the attempt's median at most 1.10× the raw cycle's.
//!
//! 1. N raw cycles: create, start, exec `true`, remove, with the same container
//!    settings, each step timed.
//! 2. N reeval attempts of an eval that runs `exec("true")`, one at a time,
//!    interleaved with the raw cycles, each timed from the attempt's start to
//!    its record final (preflight excluded, being once per run; the
//!    container's removal runs after the record, in the background), each
//!    phase timed (its medians printed, and reeval's own time between phases).
//! 3. `Ctx::diff` on a 10,000-file workspace with five changed files.

use reeval::settings::Settings;
use std::time::{Duration, Instant};

use bollard::Docker;
use reeval::prelude::*;
use reeval::{Eval, Outcome, RunConfig, Runner};

mod common;
use common::{median, raw_cycle, raw_cycle_steps};

fn runner(dir: &std::path::Path) -> Runner {
    Runner::new(
        RunConfig::from(Settings {
            record_dir: dir.to_path_buf(),
            test_threads: 1,
            infra_retries: 0,
            ..Settings::default()
        }),
        reeval::harness_registry(),
    )
}

fn big_workspace() -> Environment {
    Environment::new().env("PYTHONDONTWRITEBYTECODE", "1").setup(
        "python3 -c \"import os\nfor d in range(100):\n  os.makedirs(f'src/m{d}', exist_ok=True)\n  for f in range(100):\n    open(f'src/m{d}/f{f}.txt','w').write(f'line {d} {f}\\\\n' * 20)\"",
    )
}

/// Each phase's time in one attempt (preflight, once per run, left out), and
/// the time between phases (reeval's own bookkeeping) as `(between)`.
fn by_phase(r: &reeval::Record) -> Vec<(String, u64)> {
    let mut phases: Vec<(String, u64)> = Vec::new();
    let mut end = r.phases.first().map_or(0, |p| p.start_ms);
    for p in r.phases.iter().filter(|p| p.phase != reeval::Phase::Preflight) {
        let name = p.phase.to_string();
        match phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, ms)) => *ms += p.duration_ms,
            None => phases.push((name, p.duration_ms)),
        }
        let gap = p.start_ms.saturating_sub(end);
        match phases.iter_mut().find(|(n, _)| n == "(between)") {
            Some((_, ms)) => *ms += gap,
            None => phases.push(("(between)".into(), gap)),
        }
        end = end.max(p.start_ms + p.duration_ms);
    }
    phases.push(("(after)".into(), r.timings.total_ms.saturating_sub(end)));
    phases
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("REEVAL_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let docker = Docker::connect_with_local_defaults()
        .expect("docker")
        .negotiate_version()
        .await
        .expect("docker answers");
    let dir = std::env::temp_dir().join(format!("reeval-bench-{}", std::process::id()));

    // Warm up both paths once (page cache, image layers).
    raw_cycle(&docker).await;
    let trivial = Eval::new("exec_true", |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    });
    runner(&dir).run(vec![trivial.clone()]).await.expect("preflight");

    let mut raw = Vec::with_capacity(n);
    let mut raw_steps: Vec<[(&str, Duration); 4]> = Vec::with_capacity(n);
    let mut ours = Vec::with_capacity(n);
    let mut phases: Vec<Vec<(String, u64)>> = Vec::with_capacity(n);
    // Interleave so drift on the machine hits both alike.
    for _ in 0..n {
        let steps = raw_cycle_steps(&docker).await;
        raw.push(steps.iter().map(|(_, d)| *d).sum());
        raw_steps.push(steps);
        let report = runner(&dir).run(vec![trivial.clone()]).await.expect("preflight");
        let r = &report.records[0];
        assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
        ours.push(Duration::from_millis(r.timings.total_ms));
        phases.push(by_phase(r));
    }
    let (raw_m, ours_m) = (median(raw), median(ours));
    println!("attempts: {n}");
    println!("raw bollard create/start/exec/remove: median {:.1} ms", raw_m.as_secs_f64() * 1e3);
    let steps: Vec<String> = (0..4)
        .map(|i| {
            let each: Vec<Duration> = raw_steps.iter().map(|s| s[i].1).collect();
            format!("{} {:.1}", raw_steps[0][i].0, median(each).as_secs_f64() * 1e3)
        })
        .collect();
    println!("  steps (medians, ms): {}", steps.join(", "));
    println!("reeval attempt (exec true):           median {:.1} ms", ours_m.as_secs_f64() * 1e3);
    let names: Vec<String> = phases[0].iter().map(|(n, _)| n.clone()).collect();
    let each: Vec<String> = names
        .iter()
        .map(|name| {
            let ms: Vec<Duration> = phases
                .iter()
                .map(|p| {
                    let ms = p.iter().find(|(n, _)| n == name).map_or(0, |(_, ms)| *ms);
                    Duration::from_millis(ms)
                })
                .collect();
            format!("{name} {}", median(ms).as_millis())
        })
        .collect();
    println!("  phases (medians, ms): {}", each.join(", "));
    println!("ratio: {:.3} (target <= 1.10)", ours_m.as_secs_f64() / raw_m.as_secs_f64());

    let diff_eval = Eval::new("diff_10k", |c| {
        Box::pin(async move {
            c.send("for i in 1 2 3 4 5; do echo changed >> src/m$i/f$i.txt; done").await?;
            let mut times = Vec::new();
            for _ in 0..5 {
                let began = Instant::now();
                let diff = c.diff().await?;
                times.push(began.elapsed());
                expect(diff.files.len()).to_equal(5)?;
            }
            let files = c.exec("find src -type f | wc -l").await?.stdout;
            println!(
                "diff of a {}-file workspace with 5 changes: median {:.1} ms",
                files.trim(),
                median(times).as_secs_f64() * 1e3
            );
            Ok(())
        })
    })
    .environment(big_workspace);
    let report = runner(&dir).run(vec![diff_eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    if let Some(t) = r.turns.first() {
        println!(
            "turn diff (snapshot of 10,000 files + diff) included in the turn's record: {} files changed",
            t.diff.files.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
