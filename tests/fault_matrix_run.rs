//! The fault matrix's rows about the run around the sandbox (issue 19): the
//! judge's API, the gateway's upstreams, signals to the runner and the record
//! directory. Each test injects one fault against the real engine and checks
//! the outcome and kind docs/outcomes.md promises (and the exit code, for a
//! suite binary run as a subprocess), that every record on disk is whole,
//! that nothing of the run is left on the engine, and that no secret's value
//! is in any file or output of the run; then its row of docs/faults.md
//! (`REEVAL_BLESS=1` rewrites a row that differs; review the diff). The
//! sandbox's own faults are in `tests/fault_matrix.rs`.

mod common;
mod model_server;
#[path = "../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

#[path = "fault_matrix_run/judge.rs"]
mod judge;
#[path = "fault_matrix_run/records.rs"]
mod records;
#[path = "fault_matrix_run/signals.rs"]
mod signals;
#[path = "fault_matrix_run/suite.rs"]
mod suite;
#[path = "fault_matrix_run/upstream.rs"]
mod upstream;

use std::path::Path;

use common::faults::{self, Row};
use reeval::{Outcome, RunReport};

/// A checks-only secret every row's eval reads in a check.
pub const SECRET: &str = "fault-run-secret-value-9d4a27";

/// Asserts that no file under `dir` holds `secret`.
pub fn assert_nowhere(dir: &Path, secret: &str) {
    for p in faults::files_under(dir) {
        let bytes = std::fs::read(&p).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds a secret's value",
            p.display()
        );
    }
}

/// Checks the promises of an in-process run of one attempt and its row:
/// outcome, message, a whole record, nothing left, none of `secrets` written.
pub async fn row(
    report: &RunReport,
    id: &str,
    fault: &str,
    at: &str,
    (outcome, says): (Outcome, &str),
    secrets: &[&str],
) {
    faults::assert_outcome(faults::only(report), outcome, says);
    row_as_seen(report, id, fault, at, says, secrets).await;
}

/// [`row`] once the caller has checked the outcome and where `says` is said.
pub async fn row_as_seen(
    report: &RunReport,
    id: &str,
    fault: &str,
    at: &str,
    says: &str,
    secrets: &[&str],
) {
    let r = faults::only(report);
    faults::assert_complete_and_clean(report, Some(SECRET));
    for s in secrets {
        assert_nowhere(&report.run_dir, s);
    }
    let left = faults::leftovers(&report.run_id, Some(&report.run_dir)).await;
    assert_eq!(left, "nothing", "nothing of the run is left");
    let (outcome, kind) = faults::outcome_of(r);
    faults::check_row(&Row { id, fault, at, outcome, kind, says, left });
}
