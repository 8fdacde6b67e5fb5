//! Harbor tasks against their own work: reeval's wall time for the tasks of
//! `benches/harbor-floor/` run with the oracle, against what the tasks' own
//! commands take inside the container. Six small tasks (about 2 s of own
//! work each) and three of the size of a real Harbor task's (a package
//! built, installed and checked by a pytest suite; a `git bisect` over 240
//! commits, each step a pytest run; a vendored tree byte-compiled and
//! zipped), all offline, from `reeval/base:latest`. Run with `cargo bench --bench
//! harbor_floor` (needs Docker and `reeval/base:latest`;
//! `REEVAL_BENCH_ROUNDS` sets the rounds per concurrency, default 1).
//! Target (issue 29): reeval's wall time at most 1.3× the tasks' own work at
//! concurrency 1. As `reeval harbor run` does by default, the attempts next
//! in line start ahead, one per slot (`REEVAL_BENCH_PRESTART=N` sets another
//! N, 0 none): the wall time counts that work, an attempt's `totalMs` does not.
//!
//! Each task's `solve.sh` and `test.sh` time themselves (`date +%s%N` at
//! their start, and on exit, written to `/logs/agent/solve-ns` and
//! `/logs/verifier/verify-ns`); the bench reads those files from the log
//! directories the attempt captured. A task's own work is its solve plus its
//! verify; the run's floor is the sum of every task's own work divided by the
//! concurrency. Per task it prints the attempt's time (`totalMs`, from the
//! attempt's start to its record final) against its own work, and each of
//! the attempt's phases; for the run, the wall time around the whole run
//! (preflight, every attempt, the wait for every container's removal)
//! against the floor. A first run at concurrency 4, not counted, builds the
//! tasks' images.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reeval::settings::Settings;
use reeval::{Outcome, Record, RunConfig, Runner};

fn dataset() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/harbor-floor")
}

fn runner(dir: &Path, threads: usize) -> Runner {
    // As `reeval harbor run` starts ahead by default: one container per slot
    // (`REEVAL_BENCH_PRESTART` sets another N; 0 starts none ahead).
    let prestart =
        std::env::var("REEVAL_BENCH_PRESTART").ok().and_then(|v| v.parse().ok()).unwrap_or(threads);
    Runner::new(
        RunConfig::from(Settings {
            record_dir: dir.to_path_buf(),
            harnesses: vec!["oracle".into()],
            test_threads: threads,
            infra_retries: 0,
            prestart,
            ..Settings::default()
        }),
        reeval::harness_registry(),
    )
}

/// A file's text in one of the attempt's captures (`logs-agent`, `logs-verifier`).
fn captured(run_dir: &Path, r: &Record, capture: &str, file: &str) -> Option<String> {
    let listed = r.artifacts.iter().find(|a| a.contains(&format!("captures/{capture}")))?;
    let tar = std::fs::read(run_dir.join(r.artifacts_dir_name()).join(listed)).ok()?;
    let mut archive = tar::Archive::new(tar.as_slice());
    for entry in archive.entries().ok()? {
        let mut entry = entry.ok()?;
        let path = entry.path().ok()?.to_string_lossy().into_owned();
        if path.trim_end_matches('/').ends_with(&format!("/{file}")) || path == file {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).ok()?;
            return Some(text);
        }
    }
    None
}

/// The time a task's script measured of itself.
fn own(run_dir: &Path, r: &Record, capture: &str, file: &str) -> Duration {
    let text = captured(run_dir, r, capture, file)
        .unwrap_or_else(|| panic!("{}: no {file} in its {capture} capture", r.eval));
    Duration::from_nanos(text.trim().parse().expect("nanoseconds"))
}

/// One task's attempt: its time, its own work, and its phases.
struct Task {
    name: String,
    attempt: Duration,
    solve: Duration,
    verify: Duration,
    phases: String,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn phases(r: &Record) -> String {
    r.phases
        .iter()
        .filter(|p| p.phase != reeval::Phase::Preflight)
        .map(|p| format!("{} {}", p.phase, p.duration_ms))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One run of the dataset at `threads`; its wall time and its tasks.
async fn run(dir: &Path, threads: usize) -> (Duration, Vec<Task>) {
    let evals = reeval::harbor::tasks(dataset()).expect("the floor tasks load");
    let started = Instant::now();
    let report = runner(dir, threads).run(evals).await.expect("preflight passes");
    let wall = started.elapsed();
    let mut tasks = Vec::new();
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}", r.eval, r.message);
        tasks.push(Task {
            name: r.eval.clone(),
            attempt: Duration::from_millis(r.timings.total_ms),
            solve: own(&report.run_dir, r, "logs-agent", "solve-ns"),
            verify: own(&report.run_dir, r, "logs-verifier", "verify-ns"),
            phases: phases(r),
        });
    }
    tasks.sort_by(|a, b| a.name.cmp(&b.name));
    (wall, tasks)
}

fn print(threads: usize, round: usize, wall: Duration, tasks: &[Task]) {
    println!("\nconcurrency {threads}, round {round}:");
    println!(
        "  {:<18} {:>9} {:>9} {:>9} {:>9} {:>7}  phases (ms)",
        "task", "attempt", "solve", "verify", "extra", "ratio"
    );
    for t in tasks {
        let work = t.solve + t.verify;
        println!(
            "  {:<18} {:>7.0}ms {:>7.0}ms {:>7.0}ms {:>7.0}ms {:>6.2}×  {}",
            t.name,
            ms(t.attempt),
            ms(t.solve),
            ms(t.verify),
            ms(t.attempt) - ms(work),
            t.attempt.as_secs_f64() / work.as_secs_f64(),
            t.phases
        );
    }
    let work: Duration = tasks.iter().map(|t| t.solve + t.verify).sum();
    let floor = work / threads as u32;
    println!(
        "  run: wall {:.0} ms against the tasks' own work {:.0} ms / {threads} = {:.0} ms: {:.2}×",
        ms(wall),
        ms(work),
        ms(floor),
        wall.as_secs_f64() / floor.as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rounds: usize =
        std::env::var("REEVAL_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let dir = std::env::temp_dir().join(format!("reeval-bench-floor-{}", std::process::id()));
    // The images built (and the page cache warm), not counted.
    let (warm, _) = run(&dir, 4).await;
    println!("warm-up run (builds the tasks' images): {:.1} s", warm.as_secs_f64());
    for round in 1..=rounds {
        for threads in [1, 4] {
            let (wall, tasks) = run(&dir, threads).await;
            print(threads, round, wall, &tasks);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
