//! Destroying sandboxes off the critical path. An attempt's slot is freed
//! once its verdict is known and its record is final (the final workspace
//! collected); removing its container then runs here, in the background,
//! a bounded number at once so destroys never crowd out the engine. The run
//! waits for every one before it ends, also when it was interrupted: a
//! Ctrl-C or SIGTERM still leaves nothing behind.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::background::Background;
use crate::sandbox::Sandbox;

/// Destroys running at once, at most.
pub(crate) const MAX_DESTROYS: usize = 4;
/// How long one destroy may take before it is given up to the run's end sweep
/// (removing a container of 100,000 files takes over a minute on fuse-overlayfs).
const DESTROY_LIMIT: Duration = Duration::from_secs(300);

/// The run's background destroys.
#[derive(Debug)]
pub(crate) struct Teardowns {
    tasks: Background,
}

impl Teardowns {
    pub(crate) fn new(max_at_once: usize) -> Self {
        Self { tasks: Background::new(max_at_once) }
    }

    /// Destroys `sandbox` in the background; a failure is said on stderr and
    /// left to the run's end sweep (which removes every sandbox of the run).
    pub(crate) fn destroy(&self, sandbox: Arc<dyn Sandbox>) {
        // Never cancelled: Ctrl-C still tears everything down.
        self.tasks.spawn(CancellationToken::new(), destroy(sandbox));
    }

    /// Closes the gateway of a container made ahead that no attempt used, then
    /// destroys it, in the background.
    pub(crate) fn discard(&self, ahead: crate::attempt::Ahead) {
        self.tasks.spawn(CancellationToken::new(), async move {
            destroy(ahead.discard().await).await;
        });
    }

    /// Waits until every destroy handed over so far has ended.
    ///
    /// # Cancel safety
    /// Dropping it aborts the destroys it was waiting for; their sandboxes
    /// are left to the next run's sweep.
    pub(crate) async fn wait_all(&self) {
        self.tasks.wait_all().await;
    }
}

/// Destroys `sandbox`; a failure is said on stderr and left to the run's end sweep.
async fn destroy(sandbox: Arc<dyn Sandbox>) {
    let outcome =
        tokio::time::timeout(DESTROY_LIMIT, crate::lifecycle::teardown::destroy(&*sandbox)).await;
    let why = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("it took longer than {}s", DESTROY_LIMIT.as_secs()),
    };
    crate::report::say(&format!(
        "reeval: failed to destroy sandbox {}: {why}; the run's end sweep removes it\n",
        sandbox.id()
    ));
}
