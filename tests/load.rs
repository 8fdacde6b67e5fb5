//! The load test of the fault matrix (issue 19) at CI's size: 48 attempts at
//! concurrency 16 (three waves) with the shell harness against the real
//! engine, then the same while a sandbox of the run is killed every 3 s (the
//! scenario: `tests/common/load.rs`). Its full size, 200 attempts, is a
//! benchmark: `cargo bench --bench load` (figures in docs/performance.md).
//! `REEVAL_LOAD_ATTEMPTS` sets the size; `REEVAL_LOAD_KILL_EVERY_MS` the
//! kill interval (3000 by default).

mod common;

/// Attempts at CI's size: three waves at concurrency 16.
const CI_ATTEMPTS: u32 = 48;

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attempts_at_concurrency_16_with_and_without_killed_sandboxes() {
    require_docker!();
    common::load::scenario(common::load::attempts_or(CI_ATTEMPTS)).await;
}
