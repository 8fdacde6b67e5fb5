//! Where the console's lines go: stdout (and stderr for `-v`), around the
//! progress display when there is one, and quietly nowhere once stdout is
//! closed (`… | head`): the run goes on, tears down and records, and exits
//! non-zero because part of its output was lost.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use indicatif::ProgressBar;

/// Set once a write to stdout found it closed.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether stdout was closed while the run printed to it.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::SeqCst)
}

/// Writes `text` to stderr, best effort: a closed stderr (a hung-up terminal)
/// loses it rather than ending the run, as `eprintln!` would by panicking.
pub fn say(text: &str) {
    let mut err = io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}

/// Prints whole lines without garbling the progress display.
#[derive(Debug, Default, Clone)]
pub struct Lines {
    progress: Option<ProgressBar>,
}

impl Lines {
    /// Lines printed around `progress` (cleared while a line is written, then redrawn).
    pub fn around(progress: Option<ProgressBar>) -> Self {
        Self { progress }
    }

    fn suspended<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.progress {
            Some(p) => p.suspend(f),
            None => f(),
        }
    }

    /// Writes `text` to stdout. A stdout that cannot be written (closed, or a
    /// terminal that hung up) is not an error: it is remembered, and nothing more
    /// is written there.
    ///
    /// # Errors
    /// None today; the signature keeps a reporter's.
    pub fn out(&self, text: &str) -> io::Result<()> {
        if stdout_closed() {
            return Ok(());
        }
        let written = self.suspended(|| {
            let mut out = io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()
        });
        // A pipe closed (`| head`) or a terminal gone (EIO after a hang-up): the output
        // is lost either way, which the exit code says; the run goes on to its records.
        if written.is_err() {
            STDOUT_CLOSED.store(true, Ordering::SeqCst);
        }
        Ok(())
    }

    /// Writes `text` to stderr, best effort (a closed stderr loses it).
    pub fn err(&self, text: &str) {
        self.suspended(|| {
            let mut err = io::stderr().lock();
            let _ = err.write_all(text.as_bytes());
            let _ = err.flush();
        });
    }
}
