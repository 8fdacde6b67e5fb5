//! The attempt's budget: a clock that only the eval's own work runs, and the
//! signal that fires when it runs out.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
struct State {
    spent: Duration,
    running_since: Option<Instant>,
    /// Nested pauses (a lazy start inside a paused section still resumes once).
    pauses: u32,
}

/// A pausable countdown. Cloning shares it.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    limit: Duration,
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
    signal: CancellationToken,
}

impl Budget {
    /// A budget of `limit`, paused until [`Budget::start`].
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            limit,
            state: Arc::new(Mutex::new(State {
                spent: Duration::ZERO,
                running_since: None,
                pauses: 1,
            })),
            changed: Arc::new(Notify::new()),
            signal: CancellationToken::new(),
        }
    }

    /// The token that fires when the budget runs out.
    pub(crate) fn signal(&self) -> CancellationToken {
        self.signal.clone()
    }

    /// Budget spent so far.
    pub(crate) fn spent(&self) -> Duration {
        let s = self.state.lock().expect("budget lock");
        s.spent + s.running_since.map(|t| t.elapsed()).unwrap_or_default()
    }

    /// Starts the clock and the watcher task that fires the signal.
    pub(crate) fn start(&self) {
        self.resume();
        let this = self.clone();
        tokio::spawn(async move { this.watch().await });
    }

    /// Stops the clock (slot waits, image builds, setup do not spend the budget).
    pub(crate) fn pause(&self) {
        let mut s = self.state.lock().expect("budget lock");
        s.pauses += 1;
        if let Some(t) = s.running_since.take() {
            s.spent += t.elapsed();
        }
        drop(s);
        self.changed.notify_one();
    }

    /// Restarts the clock after a [`Budget::pause`].
    pub(crate) fn resume(&self) {
        let mut s = self.state.lock().expect("budget lock");
        s.pauses = s.pauses.saturating_sub(1);
        if s.pauses == 0 && s.running_since.is_none() {
            s.running_since = Some(Instant::now());
        }
        drop(s);
        self.changed.notify_one();
    }

    /// Stops the watcher for good (the attempt is over).
    pub(crate) fn finish(&self) {
        self.pause();
        self.state.lock().expect("budget lock").pauses = u32::MAX / 2;
        self.changed.notify_one();
    }

    async fn watch(self) {
        loop {
            let (remaining, running, done) = {
                let s = self.state.lock().expect("budget lock");
                let spent = s.spent + s.running_since.map(|t| t.elapsed()).unwrap_or_default();
                (
                    self.limit.saturating_sub(spent),
                    s.running_since.is_some(),
                    s.pauses >= u32::MAX / 4,
                )
            };
            if done {
                return;
            }
            if running && remaining.is_zero() {
                self.signal.cancel();
                return;
            }
            if running {
                tokio::select! {
                    _ = tokio::time::sleep(remaining) => {}
                    _ = self.changed.notified() => {}
                }
            } else {
                self.changed.notified().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paused_time_is_not_spent() {
        let b = Budget::new(Duration::from_millis(200));
        b.start();
        b.pause();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!b.signal().is_cancelled(), "fired while paused");
        b.resume();
        tokio::time::timeout(Duration::from_secs(2), b.signal().cancelled())
            .await
            .expect("fires after resume");
        assert!(b.spent() >= Duration::from_millis(200));
    }
}
