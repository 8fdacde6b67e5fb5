//! The eval's own output (`println!`, `eprintln!`, a subprocess it runs),
//! captured as libtest captures a test's: kept in the attempt's record
//! (`output`), shown under its failure, echoed live with `--nocapture`, and
//! never mixed into the reporters' streams (`--format json` stays JSON).
//!
//! How: the suite binary ([`install`]) keeps the real stdout and stderr for
//! the reporters (duplicated descriptors) and points descriptors 1 and 2 at
//! one pipe, read by a thread. Stable Rust cannot capture `println!` per
//! thread (libtest uses std's internal `set_output_capture`), and an eval is
//! an async task that moves between worker threads, so attribution is by
//! time: every poll of an eval's body ([`Output::around`]) holds one lock, so
//! the bodies' polls never overlap, marks its attempt as the current one, and
//! before it returns flushes stdout and drains the pipe. What the body wrote
//! during its own polls is therefore its attempt's, exactly, whatever the
//! concurrency.
//!
//! What it cannot attribute: output written outside a body's poll, by a task
//! or thread the eval spawned or by a subprocess writing on its own time. That
//! goes to whichever body is being polled when it arrives, or, when none is,
//! to the real stderr (never lost, never on stdout).
//!
//! What is shown live (`--nocapture`, and output no body was polled for) is
//! shown a line at a time, each redacted whole: a read of the pipe can end in
//! the middle of a secret, and two halves redacted apart would each show.
//! A partial line waits for its end at most about 50 ms (or 64 KiB), and an
//! attempt's is shown when the attempt ends; a line cut that way (a long
//! line without a newline, a slow writer) may still cut a secret in two.
//! Output no body claimed that is still held when the process exits (at most
//! the last 50 ms of a partial line) is not shown. The cost: eval
//! bodies are polled one at a time, so a body that blocks its thread (a
//! `std::process::Command::output()`, a `std::thread::sleep`) holds up the
//! other attempts' bodies too; blocking work belongs in `spawn_blocking`.

use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll};

use crate::report::lines::{self, Lines};

/// The most of an attempt's output its record keeps: the tail, as libtest keeps a panic's end.
pub(crate) const OUTPUT_LIMIT: usize = 64 * 1024;

/// Whatever the pipe holds is drained at the end of a poll up to this much;
/// the rest (a subprocess flooding the pipe) goes to the next reader.
const DRAIN_LIMIT: usize = 1 << 20;

static CAPTURE: OnceLock<Capture> = OnceLock::new();
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The process's capture, once [`install`]ed.
struct Capture {
    /// The pipe's read end (non-blocking); descriptors 1 and 2 are its write end.
    read: OwnedFd,
    state: Mutex<State>,
    /// Held through every poll of an eval's body: the bodies' polls never overlap.
    polls: Mutex<()>,
    /// `--nocapture`: also echo each attempt's output as it arrives.
    echo: OnceLock<Echo>,
}

/// Where `--nocapture` echoes: the real stdout around the progress display,
/// or the real stderr when stdout carries `--format json`.
struct Echo {
    lines: Lines,
    to_stderr: bool,
}

#[derive(Default)]
struct State {
    /// The attempt whose body is being polled.
    current: Option<u64>,
    tails: HashMap<u64, Tail>,
    /// Echoed text not shown yet, by attempt ([`UNATTRIBUTED`]: no attempt's):
    /// a line is shown once it ends, so that a secret a read cut in two is
    /// redacted whole (see [`Capture::hold`]).
    held: HashMap<u64, Held>,
}

/// A partial line waiting for its end, and since when.
struct Held {
    bytes: Vec<u8>,
    since: std::time::Instant,
}

/// The key of [`State::held`] for output no eval body was polled for (ids start at 1).
const UNATTRIBUTED: u64 = 0;

/// A line held back longer than this is shown anyway: a stream without newlines is not held for ever.
const HOLD_LIMIT: usize = 64 * 1024;

/// How long a partial line waits for its end before it is shown as it is.
const HOLD_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The last [`OUTPUT_LIMIT`] bytes of an attempt's output, and how many came before.
#[derive(Default)]
struct Tail {
    bytes: Vec<u8>,
    cut: usize,
}

impl Tail {
    fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
        // Trimmed in batches, so a chatty eval is not copied on every line.
        if self.bytes.len() > 2 * OUTPUT_LIMIT {
            let over = self.bytes.len() - OUTPUT_LIMIT;
            self.bytes.drain(..over);
            self.cut += over;
        }
    }

    fn text(self) -> Option<String> {
        let keep = self.bytes.len().saturating_sub(OUTPUT_LIMIT);
        let cut = self.cut + keep;
        let text = String::from_utf8_lossy(&self.bytes[keep..]);
        match (cut, text.is_empty()) {
            (0, true) => None,
            (0, false) => Some(text.into_owned()),
            (cut, _) => Some(format!("[{cut} earlier bytes not kept]\n{text}")),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Captures the process's descriptors 1 and 2 from now on (once; later calls do nothing).
///
/// # Errors
/// An I/O error when a descriptor cannot be duplicated, the pipe made or the
/// reader started; nothing is redirected then.
pub(crate) fn install() -> io::Result<()> {
    if CAPTURE.get().is_some() {
        return Ok(());
    }
    use rustix::io::fcntl_dupfd_cloexec;
    let real_out = File::from(fcntl_dupfd_cloexec(rustix::stdio::stdout(), 3)?);
    let real_err = File::from(fcntl_dupfd_cloexec(rustix::stdio::stderr(), 3)?);
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    rustix::io::ioctl_fionbio(&read, true)?;
    let capture = Capture {
        read,
        state: Mutex::new(State::default()),
        polls: Mutex::new(()),
        echo: OnceLock::new(),
    };
    if CAPTURE.set(capture).is_err() {
        return Ok(());
    }
    // The real stdout and stderr, for the reporters (`report/lines.rs` writes to them).
    lines::keep_real(real_out, real_err);
    std::thread::Builder::new().name("reeval-eval-output".into()).spawn(read_forever)?;
    // Last, so a failure above leaves the descriptors as they were. Subprocesses
    // inherit the pipe as their stdout and stderr (dup2 clears close-on-exec).
    let _ = io::stdout().flush();
    rustix::stdio::dup2_stdout(&write)?;
    rustix::stdio::dup2_stderr(&write)?;
    Ok(())
}

/// `--nocapture`: echo each attempt's output as it arrives, to `lines`'s stdout
/// (or its stderr with `to_stderr`, when stdout carries `--format json`).
pub(crate) fn echo_live(lines: Lines, to_stderr: bool) {
    if let Some(c) = CAPTURE.get() {
        let _ = c.echo.set(Echo { lines, to_stderr });
    }
}

/// The reader: waits for the pipe, then reads it under the state lock, so a
/// chunk goes to the attempt that was current when it was read.
fn read_forever() {
    let Some(c) = CAPTURE.get() else { return };
    let mut buf = vec![0u8; 64 * 1024];
    let wait = rustix::event::Timespec { tv_sec: 0, tv_nsec: HOLD_WAIT.as_nanos() as _ };
    loop {
        // Woken at least every HOLD_WAIT: a partial line held back that long is
        // shown as it is, whoever held it (a body's drain holds text too, which
        // the pipe never tells this thread about).
        {
            let mut state = lock(&c.state);
            let due: Vec<u64> = state
                .held
                .iter()
                .filter(|(_, held)| held.since.elapsed() >= HOLD_WAIT)
                .map(|(key, _)| *key)
                .collect();
            for key in due {
                c.show_held(&mut state, key);
            }
        }
        let mut fds = [rustix::event::PollFd::new(&c.read, rustix::event::PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(0) => continue,
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => return,
        }
        let mut state = lock(&c.state);
        match rustix::io::read(&c.read, &mut buf) {
            Ok(0) => return,
            Ok(n) => c.take(&mut state, &buf[..n]),
            Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
            Err(_) => return,
        }
    }
}

impl Capture {
    /// A chunk read from the pipe: the current attempt's (and echoed under
    /// `--nocapture`), or, when no eval body is being polled, the real stderr's.
    fn take(&self, state: &mut State, chunk: &[u8]) {
        match state.current.filter(|id| state.tails.contains_key(id)) {
            Some(id) => {
                if let Some(tail) = state.tails.get_mut(&id) {
                    tail.push(chunk);
                }
                if self.echo.get().is_some() {
                    self.hold(state, id, chunk);
                }
            }
            None => self.hold(state, UNATTRIBUTED, chunk),
        }
    }

    /// Adds `chunk` to `key`'s held text and shows what of it ends a line
    /// (all of it past [`HOLD_LIMIT`]): a secret within a line is shown
    /// whole, so redacted whole, and so is a character. A line cut by force
    /// (past the limit, or waiting past [`HOLD_WAIT`]) can still be cut in one.
    fn hold(&self, state: &mut State, key: u64, chunk: &[u8]) {
        let since = std::time::Instant::now();
        let held = state.held.entry(key).or_insert_with(|| Held { bytes: Vec::new(), since });
        let ready = ended_lines(&mut held.bytes, chunk);
        // Only a partial line is held; its wait starts when it does.
        if held.bytes.is_empty() {
            state.held.remove(&key);
        } else if ready.is_some() {
            held.since = since;
        }
        if let Some(ready) = ready {
            self.show(key == UNATTRIBUTED, &ready);
        }
    }

    /// Shows all of `key`'s held text (its line did not end in time, or its attempt ended).
    fn show_held(&self, state: &mut State, key: u64) {
        if let Some(held) = state.held.remove(&key) {
            self.show(key == UNATTRIBUTED, &held.bytes);
        }
    }

    /// Shows text, redacted: an attempt's on the echo's stream, other output on the real stderr.
    fn show(&self, unattributed: bool, bytes: &[u8]) {
        let text = crate::secrets::redact_output(&String::from_utf8_lossy(bytes));
        match self.echo.get() {
            Some(e) if !unattributed && !e.to_stderr => {
                let _ = e.lines.out(&text);
            }
            Some(e) => e.lines.err(&text),
            None => {
                if let Some(mut err) = lines::real_stderr() {
                    let _ = err.write_all(text.as_bytes());
                }
            }
        }
    }

    /// Reads what the pipe holds now, under the state lock, into the current attempt.
    fn drain(&self, state: &mut State) {
        let mut buf = vec![0u8; 16 * 1024];
        let mut drained = 0;
        while drained < DRAIN_LIMIT {
            match rustix::io::read(&self.read, &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    drained += n;
                    self.take(state, &buf[..n]);
                }
            }
        }
    }
}

/// Adds `chunk` to `held`; takes out and returns what of it ends a line (all
/// of it past [`HOLD_LIMIT`]), or `None` while it is one partial line.
fn ended_lines(held: &mut Vec<u8>, chunk: &[u8]) -> Option<Vec<u8>> {
    held.extend_from_slice(chunk);
    let cut = match held.iter().rposition(|&b| b == b'\n') {
        Some(at) => at + 1,
        None if held.len() >= HOLD_LIMIT => held.len(),
        None => return None,
    };
    let rest = held.split_off(cut);
    Some(std::mem::replace(held, rest))
}

/// One attempt's output: made before its body runs, read after.
#[derive(Debug)]
pub(crate) struct Output {
    id: u64,
}

impl Output {
    pub(crate) fn begin() -> Self {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        if let Some(c) = CAPTURE.get() {
            lock(&c.state).tails.insert(id, Tail::default());
        }
        Self { id }
    }

    /// `body`, polled as this attempt's: what it prints while polled is this attempt's output.
    pub(crate) fn around<F: Future>(&self, body: F) -> Captured<F> {
        Captured { id: self.id, body: Box::pin(body) }
    }

    /// What the attempt printed (its last [`OUTPUT_LIMIT`] bytes), if anything.
    pub(crate) fn finish(self) -> Option<String> {
        let c = CAPTURE.get()?;
        let mut state = lock(&c.state);
        c.show_held(&mut state, self.id);
        state.tails.remove(&self.id)?.text()
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(c) = CAPTURE.get() {
            let mut state = lock(&c.state);
            c.show_held(&mut state, self.id);
            state.tails.remove(&self.id);
        }
    }
}

/// An eval's body whose polls are its attempt's (see the module's notes).
pub(crate) struct Captured<F> {
    id: u64,
    body: Pin<Box<F>>,
}

/// Ends a poll: flushes what the body left in stdout's buffer, drains the
/// pipe into the attempt, and clears the current attempt, even on a panic.
struct PollEnd(&'static Capture);

impl Drop for PollEnd {
    fn drop(&mut self) {
        let _ = io::stdout().flush();
        let mut state = lock(&self.0.state);
        self.0.drain(&mut state);
        state.current = None;
    }
}

impl<F: Future> Future for Captured<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let Some(c) = CAPTURE.get() else {
            return self.body.as_mut().poll(cx);
        };
        let _turn = lock(&c.polls);
        {
            // What arrived before this poll is not this attempt's.
            let mut state = lock(&c.state);
            c.drain(&mut state);
            state.current = Some(self.id);
        }
        let _end = PollEnd(c);
        self.body.as_mut().poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_cut_by_a_read_is_shown_whole_and_so_redacted() {
        let secret = "sk-live-0123456789";
        let redactor = crate::secrets::Redactor::new([secret]);
        let mut held = Vec::new();
        let mut shown = Vec::new();
        // The pipe's reads cut the line mid-secret, and a character mid-way.
        for chunk in
            [&b"first line\nthe key is sk-live-0123"[..], b"456789 \xc3", b"\xa9\n", b"tail"]
        {
            if let Some(ready) = ended_lines(&mut held, chunk) {
                shown.push(redactor.redact(&String::from_utf8_lossy(&ready)).into_owned());
            }
        }
        assert_eq!(shown, ["first line\n", "the key is [redacted] é\n"]);
        assert_eq!(held, b"tail", "a partial line waits for its end");
        // Redacted chunk by chunk, as before, the secret showed in two halves.
        let naive: String = [&b"the key is sk-live-0123"[..], b"456789\n"]
            .iter()
            .map(|c| redactor.redact(&String::from_utf8_lossy(c)).into_owned())
            .collect();
        assert!(naive.contains("0123456789"), "{naive}");
        // A stream without newlines is shown once it is long.
        let mut held = Vec::new();
        assert!(ended_lines(&mut held, &vec![b'x'; HOLD_LIMIT - 1]).is_none());
        assert_eq!(ended_lines(&mut held, b"x").map(|r| r.len()), Some(HOLD_LIMIT));
        assert!(held.is_empty());
    }

    #[test]
    fn a_tail_keeps_the_last_bytes_and_counts_the_rest() {
        let mut t = Tail::default();
        for _ in 0..5 {
            t.push(&[b'x'; OUTPUT_LIMIT]);
        }
        t.push(b"end\n");
        let text = t.text().unwrap();
        assert!(text.starts_with(&format!("[{} earlier bytes not kept]\n", 4 * OUTPUT_LIMIT + 4)));
        assert!(text.ends_with("xend\n"));
        assert_eq!(text.lines().nth(1).unwrap().len(), OUTPUT_LIMIT - 1);
        assert_eq!(Tail::default().text(), None);
    }
}
