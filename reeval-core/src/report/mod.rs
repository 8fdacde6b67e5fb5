//! Reporters: everything a run prints or writes is a [`Reporter`] on the
//! runner's event stream ([`RunEvent`]): the console (libtest's lines, `-v`,
//! the closing summary), the live progress display, libtest's JSON event
//! stream, the JSON records and summary, each attempt's ATIF trajectory, the
//! HTML report and JUnit XML.
//! The events' text is redacted where it is made, so a new reporter cannot
//! write a secret.

mod atif;
pub mod combine;
pub mod compare;
mod console;
pub mod events;
mod files;
pub mod html;
pub mod junit;
mod libtest_json;
pub(crate) mod lines;
mod live;
pub mod runs;
pub(crate) mod summary;

use std::io;

pub use atif::AtifFiles;
pub use console::Console;
pub use files::JsonFiles;
pub use html::HtmlReport;
pub use junit::Junit;
pub use libtest_json::LibtestJson;
pub use lines::{Lines, say, stdout_closed};
pub use live::Progress;
pub use summary::{EXIT_INTERRUPTED, RunReport, summarize, summarize_priced};

use events::RunEvent;

/// A sink of the run's events.
pub trait Reporter: Send {
    /// One event, as it happens.
    ///
    /// # Errors
    /// An I/O error; the runner says so and goes on.
    fn event(&mut self, event: &RunEvent) -> io::Result<()>;

    /// The run ended: its records and summary.
    ///
    /// # Errors
    /// An I/O error; the runner says so and goes on.
    fn finish(&mut self, _report: &RunReport) -> io::Result<()> {
        Ok(())
    }
}

/// `harness`, or `harness, arm` in a comparison whose arm is not the harness.
pub(crate) fn arm_label(harness: &str, arm: Option<&str>) -> String {
    match arm {
        Some(arm) if arm != harness => format!("{harness}, {arm}"),
        _ => harness.to_string(),
    }
}
