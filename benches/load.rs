//! The load test at its full size, as a benchmark: 200 attempts at
//! concurrency 16 with the shell harness against the real engine, then the
//! same 200 while a sandbox of the run is killed every 3 s, with every
//! promise of `tests/load.rs` checked (the scenario: `tests/common/load.rs`)
//! and the figures printed: `cargo bench --bench load` (needs Docker and
//! `reeval/base:latest`). `REEVAL_LOAD_ATTEMPTS` and
//! `REEVAL_LOAD_KILL_EVERY_MS` change the size and the kill interval.

#[path = "../tests/common/mod.rs"]
mod common;

/// The full size.
const ATTEMPTS: u32 = 200;

fn main() {
    // `cargo bench` passes `--bench`; nothing else is taken.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        assert!(common::docker_ready().await);
        common::load::scenario(common::load::attempts_or(ATTEMPTS)).await;
    });
}
