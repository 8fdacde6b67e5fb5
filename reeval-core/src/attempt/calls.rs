//! Where an eval's calls come from, so that a failure names a line of the
//! eval: every `Ctx` call records its caller (`#[track_caller]`) while it
//! runs, and the call whose error ended the attempt, or that was running
//! when the budget ran out, is the record's `location`. A panic's own
//! location is taken by a panic hook on the thread that panicked.

use std::cell::RefCell;
use std::fmt;
use std::panic::Location;

use crate::error::Result;

/// One `Ctx` call: what it was and where the eval made it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallSite {
    pub(crate) what: &'static str,
    pub(crate) at: &'static Location<'static>,
}

impl fmt::Display for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c.{}() at {}:{}:{}", self.what, self.at.file(), self.at.line(), self.at.column())
    }
}

/// The call running now, and the last call that failed.
#[derive(Debug, Default)]
pub(crate) struct Calls {
    pub(crate) in_flight: Option<CallSite>,
    pub(crate) failed: Option<CallSite>,
}

impl Calls {
    pub(crate) fn began(&mut self, what: &'static str, at: &'static Location<'static>) {
        self.in_flight = Some(CallSite { what, at });
    }

    /// The call returned `result`: a failure is remembered, a success forgets an earlier one.
    pub(crate) fn ended<T>(&mut self, result: Result<T>) -> Result<T> {
        let site = self.in_flight.take();
        self.failed = if result.is_err() { site } else { None };
        result
    }
}

thread_local! {
    static PANICKED_AT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Chains a hook that remembers where a panic happened on this thread
/// (whatever hook was installed keeps printing it). Installed once.
pub(crate) fn remember_panic_locations() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Some(at) = info.location() {
                let at = format!("{}:{}:{}", at.file(), at.line(), at.column());
                PANICKED_AT.with(|slot| *slot.borrow_mut() = Some(at));
            }
            previous(info);
        }));
    });
}

/// Where the last panic on this thread happened, once.
pub(crate) fn take_panic_location() -> Option<String> {
    PANICKED_AT.with(|slot| slot.borrow_mut().take())
}
