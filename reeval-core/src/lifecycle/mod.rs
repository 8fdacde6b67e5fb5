//! The attempt's phases, one file each, in lifecycle order (the order of
//! `crate::phase::Phase` and of a record's `phases`, docs/records.md). Each file is one step: it gets what it needs and
//! returns what it made; the attempt (`crate::attempt`) runs each through
//! `Phases::run` (`phases.rs`, here so that a phase's file names nothing of
//! the attempt) and is the only one that keeps the results.
//!
//! The lazy start runs image → container → gateway → env → workspace → files
//! → setup → snapshot on the first call that needs the sandbox (the gateway
//! phase, 03, is the attempt's egress and lives in `crate::gateway`); the harness
//! session starts on the first turn; turns, checks, verdicts, serves and
//! captures are the eval's own work; teardown runs whatever happened.

#[path = "14_capture.rs"]
pub(crate) mod capture;
#[path = "11_check.rs"]
pub(crate) mod check;
#[path = "02_container.rs"]
pub(crate) mod container;
#[path = "04_env.rs"]
pub(crate) mod env;
#[path = "06_files.rs"]
pub(crate) mod files;
#[path = "09_harness.rs"]
pub(crate) mod harness;
#[path = "01_image.rs"]
pub(crate) mod image;
#[path = "12_judge.rs"]
pub(crate) mod judge;
#[path = "13_serve.rs"]
pub(crate) mod serve;
#[path = "07_setup.rs"]
pub(crate) mod setup;
#[path = "08_snapshot.rs"]
pub(crate) mod snapshot;
#[path = "15_teardown.rs"]
pub(crate) mod teardown;
#[path = "10_turn.rs"]
pub(crate) mod turn;
#[path = "05_workspace.rs"]
pub(crate) mod workspace;

mod phases;

pub(crate) use phases::{ABORT_GRACE, Paused, Phases, TurnUnsettled};
