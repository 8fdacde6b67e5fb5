//! A bounded set of background tasks that the run waits for before it ends:
//! the destroys of `teardown.rs` and the fills of `setup_fill.rs`.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

#[derive(Debug)]
pub(crate) struct Background {
    limit: Arc<Semaphore>,
    running: Mutex<JoinSet<()>>,
}

impl Background {
    /// At most `max_at_once` tasks run at once (at least one).
    pub(crate) fn new(max_at_once: usize) -> Self {
        Self {
            limit: Arc::new(Semaphore::new(max_at_once.max(1))),
            running: Mutex::new(JoinSet::new()),
        }
    }

    /// Runs `task` once a slot is free; never, when `cancel` fires first.
    pub(crate) fn spawn(
        &self,
        cancel: CancellationToken,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let limit = self.limit.clone();
        let mut running = self.running.lock().expect("never poisoned: no panics under the lock");
        running.spawn(async move {
            let _permit = tokio::select! {
                permit = limit.acquire_owned() => permit.expect("the semaphore is never closed"),
                _ = cancel.cancelled() => return,
            };
            task.await;
        });
    }

    /// Waits until every task spawned so far (and any spawned meanwhile) has ended.
    ///
    /// # Cancel safety
    /// Dropping it aborts the tasks it was waiting for.
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
