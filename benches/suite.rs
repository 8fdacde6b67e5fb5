//! One benchmark for the performance targets of issue 14, measured in one
//! run and printed as ratios: `cargo bench --bench suite` (needs Docker and
//! `reeval/base:latest`). `REEVAL_BENCH_ONLY=1,4` runs only some parts.
//!
//! 1. A trivial attempt (`exec true`) against the raw bollard cycle (create,
//!    start, exec, remove), interleaved; the attempt is timed from its start
//!    to its record (its destroy runs in the background). Target ≤ 1.0×.
//! 2. 40 trivial attempts at concurrency 8 against concurrency 1, wall time
//!    of the whole run (every destroy included). Target ≥ 3× faster.
//! 3. The second trial of an eval whose setup sleeps 20 s against its first:
//!    the setup phase on the cache hit. Target ≤ 1 s. The first trial's run
//!    fills the cache in the background (its attempt does not wait for the
//!    commit; the run does, before it ends), so the second trial is a later
//!    run's, as a second trial started at once in the same run would find the
//!    fill still running and prepare its own sandbox.
//! 4. `Ctx::diff` after a turn that changed 5 files, in a 10,000-file and a
//!    100,000-file workspace, against `git status --porcelain` run in the
//!    same sandbox, alternating. Targets ≤ 100 ms and ≤ 400 ms, and no
//!    slower than git.
//! 5. The process's peak RSS over 200 attempts at concurrency 16, each
//!    printing 5 MB (peak reset before, via `/proc/self/clear_refs`; run
//!    before part 4, whose 100,000-file snapshots leave the heap large).
//!    Target ≤ 100 MB.

use reeval::settings::Settings;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use reeval::prelude::*;
use reeval::{Eval, Outcome, RunConfig, Runner};

mod common;
use common::{median, raw_cycle};

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn runner(dir: &std::path::Path, threads: usize, trials: u32) -> Runner {
    Runner::new(
        RunConfig::from(Settings {
            record_dir: dir.to_path_buf(),
            test_threads: threads,
            trials: Some(trials),
            infra_retries: 0,
            ..Settings::default()
        }),
        reeval::harness_registry(),
    )
}

fn trivial() -> Eval {
    Eval::new("exec_true", |c| Box::pin(async move { expect(c.exec("true").await?).to_succeed() }))
}

fn wanted(part: u32) -> bool {
    match std::env::var("REEVAL_BENCH_ONLY") {
        Ok(list) if !list.is_empty() => list.split(',').any(|p| p.trim() == part.to_string()),
        _ => true,
    }
}

/// `files` files of 20 lines in 100 directories, in a git repository with one commit.
fn workspace_of(files: usize) -> Environment {
    let per_dir = files / 100;
    Environment::new().env("PYTHONDONTWRITEBYTECODE", "1").setup_cache(false).setup_with_timeout(
        format!(
            "python3 -c \"import os\nfor d in range(100):\n  os.makedirs(f'src/m{{d}}', exist_ok=True)\n  for f in range({per_dir}):\n    open(f'src/m{{d}}/f{{f}}.txt','w').write(f'line {{d}} {{f}}\\\\n' * 20)\" \
             && git init -q && git add -A && git -c user.email=b@b -c user.name=b commit -qm base"
        ),
        Duration::from_secs(900),
    )
}

async fn diff_against_git(dir: &std::path::Path, files: usize, out: Arc<Mutex<Vec<String>>>) {
    let eval = Eval::new("diff_vs_git", move |c| {
        let out = out.clone();
        Box::pin(async move {
            c.send("for i in 1 2 3 4 5; do echo changed >> src/m$i/f$i.txt; done").await?;
            let (mut ours, mut git) = (Vec::new(), Vec::new());
            for round in 0..6 {
                // Alternate which goes first, so neither always finds the caches warm.
                for first in [round % 2 == 0, round % 2 != 0] {
                    if first {
                        let began = Instant::now();
                        let diff = c.diff().await?;
                        ours.push(began.elapsed());
                        expect(diff.files.len()).to_equal(5)?;
                    } else {
                        let began = Instant::now();
                        let status = c.exec("git status --porcelain").await?;
                        git.push(began.elapsed());
                        expect(status.stdout.lines().count()).to_equal(5)?;
                    }
                }
            }
            let (ours, git) = (median(ours), median(git));
            let target = if files >= 100_000 { 400.0 } else { 100.0 };
            out.lock().unwrap().push(format!(
                "4. diff of {files} files, 5 changed: median {:.0} ms vs git status --porcelain {:.0} ms: {:.2}x git (target <= {target:.0} ms and <= 1.0x)",
                ms(ours),
                ms(git),
                ours.as_secs_f64() / git.as_secs_f64()
            ));
            Ok(())
        })
    })
    .environment(move || workspace_of(files));
    let report = runner(dir, 1, 1).run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let docker = Docker::connect_with_local_defaults()
        .expect("docker")
        .negotiate_version()
        .await
        .expect("docker answers");
    let dir = std::env::temp_dir().join(format!("reeval-bench-suite-{}", std::process::id()));
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let say = |line: String| {
        println!("{line}");
        lines.lock().unwrap().push(line);
    };

    if wanted(1) {
        raw_cycle(&docker).await;
        runner(&dir, 1, 1).run(vec![trivial()]).await.expect("preflight");
        let (mut raw, mut ours) = (Vec::new(), Vec::new());
        // Each phase's duration per attempt, to show where an attempt's time goes.
        let mut phases: Vec<(String, Vec<Duration>)> = Vec::new();
        for _ in 0..10 {
            raw.push(raw_cycle(&docker).await);
            let report = runner(&dir, 1, 1).run(vec![trivial()]).await.expect("preflight");
            let r = &report.records[0];
            assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
            ours.push(Duration::from_millis(r.timings.total_ms));
            for p in r.phases.iter().filter(|p| p.phase.as_str() != "preflight") {
                let took = Duration::from_millis(p.duration_ms);
                match phases.iter_mut().find(|(name, _)| name == p.phase.as_str()) {
                    Some((_, all)) => all.push(took),
                    None => phases.push((p.phase.as_str().to_string(), vec![took])),
                }
            }
        }
        let (raw, ours) = (median(raw), median(ours));
        say(format!(
            "1. trivial attempt {:.0} ms vs raw bollard cycle {:.0} ms: {:.2}x (target <= 1.0x)",
            ms(ours),
            ms(raw),
            ours.as_secs_f64() / raw.as_secs_f64()
        ));
        let by_phase: Vec<String> = phases
            .into_iter()
            .map(|(name, all)| format!("{name} {:.0}", ms(median(all))))
            .collect();
        println!("   the attempt's phases, medians in ms: {}", by_phase.join(", "));
    }

    if wanted(2) {
        let mut walls = Vec::new();
        for threads in [1, 8] {
            let began = Instant::now();
            let report = runner(&dir, threads, 40).run(vec![trivial()]).await.expect("preflight");
            assert!(report.records.iter().all(|r| r.outcome == Outcome::Pass));
            walls.push(began.elapsed());
        }
        say(format!(
            "2. 40 trivial attempts: concurrency 1 {:.1} s, concurrency 8 {:.1} s: {:.2}x faster (target >= 3x)",
            walls[0].as_secs_f64(),
            walls[1].as_secs_f64(),
            walls[0].as_secs_f64() / walls[1].as_secs_f64()
        ));
    }

    if wanted(3) {
        let nonce = format!("{}-{}", std::process::id(), reeval::runner::new_run_id());
        let eval = Eval::new("setup_sleeps_20s", |c| {
            Box::pin(async move { expect(c.exec("cat ready.txt").await?).to_succeed() })
        })
        .environment(move || {
            Environment::new()
                .env("BENCH_NONCE", nonce.clone())
                .setup("sleep 20 && echo ok > ready.txt")
        });
        let began = Instant::now();
        let first = runner(&dir, 1, 1).run(vec![eval.clone()]).await.expect("preflight");
        let first_run = began.elapsed();
        let second = runner(&dir, 1, 1).run(vec![eval]).await.expect("preflight");
        let phase = |r: &reeval::Record, name: &str| {
            assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
            let p = r.phases.iter().find(|p| p.phase.as_str() == name).expect("the phase");
            (p.duration_ms, p.detail.clone())
        };
        let (miss, hit) = (&first.records[0], &second.records[0]);
        let ((first, _), (second, detail)) = (phase(miss, "setup"), phase(hit, "setup"));
        let (snapshot, _) = phase(miss, "snapshot");
        say(format!(
            "3. setup sleeping 20 s: the miss {first} ms, a later run's trial {second} ms ({detail}): {:.3}x (target: <= 1000 ms on the hit)",
            second as f64 / first as f64
        ));
        println!(
            "   the miss: snapshot phase {snapshot} ms, attempt {} ms; its run, waiting for the fill, {} ms",
            miss.timings.total_ms,
            first_run.as_millis()
        );
        if let Ok(docker) = reeval::sandbox::DockerBackend::connect().await {
            let _ = reeval::setup_cache::prune(&docker, Some(&miss.run_id)).await;
        }
    }

    if wanted(5) {
        let print = Eval::new("prints_5mb", |c| {
            Box::pin(async move {
                let turn = c.send("yes 'a line of output from the agent, sixty-four bytes long......' | head -c 5000000").await?;
                expect(turn.status == reeval::TurnStatus::Completed).to_equal(true)
            })
        });
        // Reset the peak to now: the parts before must not count.
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        let before = peak_rss_kib();
        let began = Instant::now();
        let report = runner(&dir, 16, 200).run(vec![print]).await.expect("preflight");
        let passed = report.records.iter().filter(|r| r.outcome == Outcome::Pass).count();
        let peak = peak_rss_kib();
        say(format!(
            "5. 200 attempts at concurrency 16 printing 5 MB each ({passed} passed, {:.0} s): peak RSS {:.1} MB (at start {:.1} MB; target <= 100 MB)",
            began.elapsed().as_secs_f64(),
            peak as f64 / 1024.0,
            before as f64 / 1024.0
        ));
    }

    if wanted(4) {
        for files in [10_000, 100_000] {
            let out = Arc::new(Mutex::new(Vec::new()));
            diff_against_git(&dir, files, out.clone()).await;
            for line in out.lock().unwrap().drain(..) {
                say(line);
            }
        }
    }

    println!("\nsummary:");
    for line in lines.lock().unwrap().iter() {
        println!("  {line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
