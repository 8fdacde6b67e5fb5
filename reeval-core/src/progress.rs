//! The phase log of one attempt: each phase into the record, and with `-v`
//! one line each on stderr as it happens.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::record::{Event, PhaseRecord};

/// Collects phases and events for one attempt.
#[derive(Debug)]
pub struct PhaseLog {
    prefix: String,
    verbose: bool,
    started: Instant,
    redactor: crate::secrets::Redactor,
    pub(crate) phases: Vec<PhaseRecord>,
    pub(crate) events: Vec<Event>,
}

/// `HH:MM:SS` of now, UTC.
pub fn clock() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0) % 86_400;
    format!("{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60)
}

impl PhaseLog {
    /// A log for `[<eval>#<trial> <harness>]`.
    pub fn new(eval: &str, trial: u32, harness: &str, verbose: bool, redactor: crate::secrets::Redactor) -> Self {
        Self { prefix: format!("[{eval}#{trial} {harness}]"), verbose, started: Instant::now(), redactor, phases: Vec::new(), events: Vec::new() }
    }

    /// When the attempt started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Milliseconds since the attempt started.
    pub fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn print(&self, what: &str) {
        if self.verbose {
            eprintln!("{} {} {}", self.prefix, clock(), self.redactor.redact(what));
        }
    }

    /// Records a phase that began at `begun` and ends now.
    pub fn phase(&mut self, phase: crate::phase::Phase, begun: Instant, detail: impl Into<String>) {
        let detail = self.redactor.redact(&detail.into()).into_owned();
        let start_ms = begun.saturating_duration_since(self.started).as_millis() as u64;
        let duration_ms = begun.elapsed().as_millis() as u64;
        self.print(format!("{phase} {detail}").trim_end());
        self.phases.push(PhaseRecord { phase, start_ms, duration_ms, detail });
    }

    /// Records an event.
    pub fn event(&mut self, message: impl Into<String>) {
        let message = self.redactor.redact(&message.into()).into_owned();
        self.print(&format!("event {message}"));
        self.events.push(Event { at_ms: self.now_ms(), message });
    }
}
