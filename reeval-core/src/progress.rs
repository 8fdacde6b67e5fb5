//! The phase log of one attempt: each phase and event into the record, and
//! onto the run's event stream as it happens (where `-v` prints it).

use std::time::Instant;

use crate::phase::Phase;
use crate::record::{Event, PhaseRecord};
use crate::report::events::{AttemptId, EventSink, RunEvent};
use crate::secrets::Redactor;

/// Collects phases and events for one attempt; all text through the run's redactor.
#[derive(Debug)]
pub(crate) struct PhaseLog {
    attempt: AttemptId,
    started: Instant,
    redactor: Redactor,
    sink: Option<EventSink>,
    pub(crate) phases: Vec<PhaseRecord>,
    pub(crate) events: Vec<Event>,
}

impl PhaseLog {
    /// A log for `attempt`, sending to `sink` when given.
    pub(crate) fn new(attempt: AttemptId, redactor: Redactor, sink: Option<EventSink>) -> Self {
        Self {
            attempt,
            started: Instant::now(),
            redactor,
            sink,
            phases: Vec::new(),
            events: Vec::new(),
        }
    }

    /// When the attempt started.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Milliseconds since the attempt started.
    pub(crate) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn send(&self, event: RunEvent) {
        if let Some(sink) = &self.sink {
            // A run that stopped listening drops its events; the record keeps them.
            let _ = sink.send(event);
        }
    }

    /// Says that `phase` begins (only on the event stream: the record has the phase when it ends).
    pub(crate) fn phase_started(&self, phase: Phase) {
        self.send(RunEvent::PhaseStarted { attempt: self.attempt.clone(), phase });
    }

    /// Records a phase that began at `begun` and ends now.
    pub(crate) fn phase(&mut self, phase: Phase, begun: Instant, detail: impl Into<String>) {
        self.phase_until(phase, begun, Instant::now(), detail);
    }

    /// Records a phase that began at `begun` and ended at `ended` (one that
    /// ran beside another, recorded once both ended).
    pub(crate) fn phase_until(
        &mut self,
        phase: Phase,
        begun: Instant,
        ended: Instant,
        detail: impl Into<String>,
    ) {
        let detail = self.redactor.redact(&detail.into()).into_owned();
        let start_ms = begun.saturating_duration_since(self.started).as_millis() as u64;
        let record = PhaseRecord {
            phase,
            start_ms,
            duration_ms: ended.saturating_duration_since(begun).as_millis() as u64,
            detail,
        };
        self.send(RunEvent::PhaseEnded { attempt: self.attempt.clone(), phase: record.clone() });
        self.phases.push(record);
    }

    /// Says that turn `index` began (only on the event stream: the record has the turn).
    pub(crate) fn turn_started(&self, index: u32, prompt_head: &str) {
        let prompt = self.redactor.redact(prompt_head).into_owned();
        self.send(RunEvent::TurnStarted { attempt: self.attempt.clone(), index, prompt });
    }

    /// Where the harness reports the agent's events: onto the stream, redacted and
    /// shortened to a line; `None` when nothing listens.
    pub(crate) fn agent_events(&self) -> Option<crate::harness::AgentEvents> {
        use crate::harness::AgentEvent;
        let (sink, redactor, attempt) =
            (self.sink.clone()?, self.redactor.clone(), self.attempt.clone());
        Some(crate::harness::AgentEvents::new(move |event| {
            let line = |s: &str| {
                let one = redactor.redact(s).split_whitespace().collect::<Vec<_>>().join(" ");
                match one.char_indices().nth(200) {
                    Some((at, _)) => format!("{}…", &one[..at]),
                    None => one,
                }
            };
            let event = match event {
                AgentEvent::ToolCall { name, input } => {
                    AgentEvent::ToolCall { name: line(&name), input: line(&input) }
                }
                AgentEvent::Edit { path } => AgentEvent::Edit { path: line(&path) },
                AgentEvent::Message { text } => AgentEvent::Message { text: line(&text) },
            };
            let _ = sink.send(RunEvent::AgentActed { attempt: attempt.clone(), event });
        }))
    }

    /// Records an event.
    pub(crate) fn event(&mut self, message: impl Into<String>) {
        let message = self.redactor.redact(&message.into()).into_owned();
        let event = Event { at_ms: self.now_ms(), message };
        self.send(RunEvent::AttemptNote { attempt: self.attempt.clone(), event: event.clone() });
        self.events.push(event);
    }
}
