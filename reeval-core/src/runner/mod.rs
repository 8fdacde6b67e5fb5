//! The runner: selects evals ([`crate::settings`] parses the command line),
//! runs preflight once, and runs every attempt (eval × harness × trial,
//! infra errors retried with a fresh sandbox). What it prints and writes is
//! a reporter ([`crate::report`]) on its event stream
//! ([`crate::report::events`]). Shaped as nextest's runner is:
//!
//! - `run.rs`: [`Runner`] (built from a [`RunConfig`] and a harness
//!   registry) and a run's sequence: preflight, the reporters every run
//!   writes with, the dispatcher.
//! - `config.rs`: [`RunConfig`]: the run's `crate::settings::Settings` and what the run adds.
//! - `preflight/`: the checks before anything starts, each its own (the
//!   record directory, each eval, the engines); a config error stops the run
//!   before anything starts. They plan every cell once (`plan.rs`: the eval's
//!   environment built from its function once, the image spec, the harness's
//!   version, the secrets; one `attempt::CellPlan` shared by every attempt of
//!   the cell, the containers made ahead and the setup fills).
//! - `scheduler.rs`: what runs when: every trial in plan order (trials
//!   outside, cells inside), a resumed run's kept trials, the slots first
//!   tries take in that order, the images made ahead.
//! - `dispatcher.rs`: owns the event loop: spawns each scheduled trial,
//!   hands every event to the reporters, keeps each record once, says when
//!   an eval ended; then the run's end (`ending.rs`: the background work
//!   waited for, the summary, the reporters finished).
//! - `executor.rs`: one trial's tries: each waits for its slot and an
//!   engine, runs (`crate::attempt::run`), and the retry policy decides
//!   whether another follows.
//! - Beside them: `pool.rs` (the engines and their slots), `config_stops.rs`
//!   (a cell's config error stops its later attempts), `prestart.rs`
//!   (containers made ahead of their slot), `setup_fill.rs` (the setup cache
//!   filled in the background), `teardown.rs` (background destroys),
//!   `background.rs` (the bounded task set both use, which the run waits
//!   for), `provenance.rs` (the summary's), `part.rs` (a part of a
//!   partitioned run, an empty part recorded).
//! - `suite/`: the suite binary's `main` (`reeval::main!()`) as named steps:
//!   the command line, the selection, `--list`, `--resume`, `--regrade`,
//!   `--rerun-failed`, the partition, the reporters the flags ask for,
//!   signals and the exit code.
//!
//! What may depend on what: the runner sits at the top of the core. It uses
//! the attempt, the sandbox traits, settings, the reporters and the record's
//! types; nothing below it (the attempt, a backend, the record) calls back
//! into it. Settings sit below it and name nothing of it. The run's events
//! and what a run produced ([`crate::report::RunReport`], the summary's
//! counting) belong to the reporters. `scripts/import_cycles.py` (run in CI)
//! finds any import circle, and `scripts/fn_lengths.py` any function here
//! over 80 lines.

mod background;
mod config;
mod config_stops;
mod dispatcher;
mod ending;
mod executor;
mod given;
mod part;
pub(crate) mod plan;
mod pool;
mod preflight;
mod prestart;
mod provenance;
mod run;
mod scheduler;
mod setup_fill;
mod suite;
mod teardown;

#[cfg(test)]
mod fake_tests;
#[cfg(all(test, feature = "kubernetes"))]
mod kubernetes_tests;
#[cfg(test)]
mod record_shape_tests;
#[cfg(test)]
mod records_tests;

pub use config::{RunConfig, default_record_dir, new_run_id};
pub use given::{DEFAULT_HARNESS, Runner};
pub use preflight::PreflightError;
pub use suite::{main, main_with_args, main_with_reporters};
