//! Where the console's lines go: stdout (and stderr for `-v`), around the
//! progress display when there is one, and quietly nowhere once stdout is
//! closed (`… | head`): the run goes on, tears down and records, and exits
//! non-zero because part of its output was lost.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use indicatif::ProgressBar;

/// The real stdout and stderr once the eval's output is captured
/// (`crate::eval_output`): duplicates of descriptors 1 and 2 kept for the reporters.
static REAL: OnceLock<(Mutex<File>, Mutex<File>)> = OnceLock::new();

/// Keeps the real stdout and stderr (`crate::eval_output::install`, once; later calls do nothing).
pub(crate) fn keep_real(out: File, err: File) {
    let _ = REAL.set((Mutex::new(out), Mutex::new(err)));
}

/// The real stdout once the eval's output is captured; `None` when descriptor 1 is still it.
pub(crate) fn real_stdout() -> Option<MutexGuard<'static, File>> {
    REAL.get().map(|(out, _)| out.lock().unwrap_or_else(PoisonError::into_inner))
}

/// The real stderr once the eval's output is captured; `None` when descriptor 2 is still it.
pub(crate) fn real_stderr() -> Option<MutexGuard<'static, File>> {
    REAL.get().map(|(_, err)| err.lock().unwrap_or_else(PoisonError::into_inner))
}

/// A handle on the real stderr that outlives the call (for a progress display).
///
/// # Errors
/// An I/O error when the descriptor cannot be duplicated.
pub(crate) fn real_stderr_file() -> io::Result<File> {
    match real_stderr() {
        Some(err) => err.try_clone(),
        None => Ok(File::from(rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stderr(), 3)?)),
    }
}

/// Set once a write to stdout found it closed.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether stdout was closed while the run printed to it.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::SeqCst)
}

/// Writes `text` to stderr, best effort: a closed stderr (a hung-up terminal)
/// loses it rather than ending the run, as `eprintln!` would by panicking.
pub fn say(text: &str) {
    let _ = to_stderr(text);
}

/// Writes `text` to the real stdout: descriptor 1, or, once the eval's output is
/// captured (`crate::eval_output`), the duplicate kept for the reporters.
fn to_stdout(text: &str) -> io::Result<()> {
    match real_stdout() {
        Some(mut out) => out.write_all(text.as_bytes()).and_then(|()| out.flush()),
        None => {
            let mut out = io::stdout().lock();
            out.write_all(text.as_bytes()).and_then(|()| out.flush())
        }
    }
}

/// Writes `text` to the real stderr (see [`to_stdout`]).
fn to_stderr(text: &str) -> io::Result<()> {
    match real_stderr() {
        Some(mut err) => err.write_all(text.as_bytes()).and_then(|()| err.flush()),
        None => {
            let mut err = io::stderr().lock();
            err.write_all(text.as_bytes()).and_then(|()| err.flush())
        }
    }
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
        let written = self.suspended(|| to_stdout(text));
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
            let _ = to_stderr(text);
        });
    }
}
