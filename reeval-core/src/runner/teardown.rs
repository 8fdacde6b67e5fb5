//! Destroying sandboxes off the critical path. An attempt's slot is freed
//! once its verdict is known and its record is final (the final workspace
//! collected); removing its container then runs here, in the background,
//! a bounded number at once so destroys never crowd out the engine. The run
//! waits for every one before it ends, also when it was interrupted: a
//! Ctrl-C or SIGTERM still leaves nothing behind.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::sandbox::Sandbox;

/// Destroys running at once, at most.
pub(crate) const MAX_DESTROYS: usize = 4;
/// How long one destroy may take before it is given up to the run's end sweep
/// (removing a container of 100,000 files takes over a minute on fuse-overlayfs).
const DESTROY_LIMIT: Duration = Duration::from_secs(300);

/// The run's background destroys.
#[derive(Debug)]
pub(crate) struct Teardowns {
    limit: Arc<Semaphore>,
    running: Mutex<JoinSet<()>>,
}

impl Teardowns {
    pub(crate) fn new(max_at_once: usize) -> Self {
        Self {
            limit: Arc::new(Semaphore::new(max_at_once.max(1))),
            running: Mutex::new(JoinSet::new()),
        }
    }

    /// Destroys `sandbox` in the background; a failure is said on stderr and
    /// left to the run's end sweep (which removes every sandbox of the run).
    pub(crate) fn destroy(&self, sandbox: Arc<dyn Sandbox>) {
        let limit = self.limit.clone();
        let mut running = self.running.lock().expect("never poisoned: no panics under the lock");
        running.spawn(async move {
            let _permit = limit.acquire_owned().await.expect("the semaphore is never closed");
            let outcome =
                tokio::time::timeout(DESTROY_LIMIT, crate::lifecycle::teardown::destroy(&*sandbox))
                    .await;
            let why = match outcome {
                Ok(Ok(())) => return,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("it took longer than {}s", DESTROY_LIMIT.as_secs()),
            };
            eprintln!(
                "reeval: failed to destroy sandbox {}: {why}; the run's end sweep removes it",
                sandbox.id()
            );
        });
    }

    /// Waits until every destroy handed over so far has ended.
    ///
    /// # Cancel safety
    /// Dropping it aborts the destroys it was waiting for; their sandboxes
    /// are left to the next run's sweep.
    pub(crate) async fn wait_all(&self) {
        loop {
            let mut set = std::mem::take(
                &mut *self.running.lock().expect("never poisoned: no panics under the lock"),
            );
            if set.is_empty() {
                return;
            }
            while set.join_next().await.is_some() {}
        }
    }
}
