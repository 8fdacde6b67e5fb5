//! Filling the setup cache off the critical path. An attempt that misses the
//! cache prepares its own sandbox as before and does not commit it: a commit
//! reads the whole container filesystem (seconds for a small setup, over two
//! minutes for 100,000 files on fuse-overlayfs), and committing the
//! attempt's own container while its eval acts in it would cache the
//! agent's changes. The miss asks for a fill instead: here, in the
//! background, a sandbox of its own is prepared from the same inputs
//! (`attempt::prepare_for_cache`), committed as `reeval/setup:<digest>` and
//! removed. One fill per digest per run, a bounded number at once. The run
//! waits for every fill before it ends. An interruption (Ctrl-C, SIGTERM)
//! abandons a fill still preparing (its container is removed at once); a
//! commit already running is waited for, bounded, because the engine
//! finishes it anyway: the image it tags is whole, and no container is left.
//!
//! Only a quiescent sandbox is committed (see `setup_cache::settle`): a setup
//! that leaves processes running past `SETTLE_WITHIN` is not cached, and
//! why is said on stderr and, as an event, in the record of every later
//! attempt of the run that misses it. The image is labelled with the
//! fingerprint of its workspace, read after the processes settled, which a
//! hit checks before it uses the image.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::background::Background;
use crate::attempt::{self, AttemptPlan, ForCache};
use crate::harness::HarnessRegistry;
use crate::sandbox::{Backend, Sandbox, SandboxHandle};
use crate::setup_cache;

/// Fills running at once, at most: each prepares a sandbox and commits it.
pub(crate) const MAX_FILLS: usize = 2;
/// How long one commit may take before the fill gives up waiting for it.
const COMMIT_LIMIT: Duration = Duration::from_secs(600);

/// The run's background fills.
#[derive(Debug)]
pub(crate) struct SetupFills {
    tasks: Background,
    /// Digests asked for in this run: each is filled once.
    asked: Mutex<HashSet<String>>,
    /// Why a fill of this run did not cache its digest.
    refused: Mutex<HashMap<String, String>>,
    shutdown: CancellationToken,
    /// The cache's size cap, kept after each commit.
    max_bytes: u64,
}

/// What a fill needs besides its digest: the attempt's plan and where it ran.
#[derive(Debug, Clone)]
pub(crate) struct FillFrom {
    pub(crate) plan: AttemptPlan,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) harnesses: HarnessRegistry,
}

impl SetupFills {
    pub(crate) fn new(max_at_once: usize, max_bytes: u64, shutdown: CancellationToken) -> Self {
        Self {
            tasks: Background::new(max_at_once),
            asked: Mutex::new(HashSet::new()),
            refused: Mutex::new(HashMap::new()),
            shutdown,
            max_bytes,
        }
    }

    /// Fills the cache for `digest` in the background, unless this run
    /// already did or does; a failure is said on stderr (later attempts then
    /// prepare their own sandboxes, as on any miss). Returns why an earlier
    /// fill of this run did not cache `digest`, if one did not.
    pub(crate) fn fill(self: &Arc<Self>, digest: &str, from: FillFrom) -> Option<String> {
        if !self.asked.lock().expect("never poisoned").insert(digest.to_string()) {
            return self.refused.lock().expect("never poisoned").get(digest).cloned();
        }
        let (fills, digest) = (self.clone(), digest.to_string());
        let shutdown = self.shutdown.clone();
        self.tasks.spawn(shutdown.clone(), async move {
            if let Err(why) = fills.run(&digest, from).await
                && !shutdown.is_cancelled()
            {
                crate::report::say(&format!(
                    "reeval: failed to fill the setup cache with {digest}: {why}; \
                     later attempts prepare their own sandboxes\n"
                ));
                fills.refused.lock().expect("never poisoned").insert(digest, why);
            }
        });
        None
    }

    async fn run(&self, digest: &str, from: FillFrom) -> Result<(), String> {
        let FillFrom { plan, backend, harnesses } = from;
        // Another process may have filled it meanwhile.
        if let Ok(Some(_)) = backend.find_setup(digest).await {
            return Ok(());
        }
        let harness = harnesses.make(&plan.cell.harness_spec);
        let ForCache { sandbox, workspace, prepared } =
            attempt::prepare_for_cache(plan, backend.clone(), harness, self.shutdown.clone()).await;
        let committed = match (&prepared, &sandbox) {
            (Ok((made, _)), _) if made != digest => {
                Err(format!("its inputs gave another key ({made}) when prepared again"))
            }
            (Ok((_, labels)), Some(sandbox)) => match quiescent(sandbox, &workspace).await {
                Ok(fingerprint) => {
                    let mut labels = labels.clone();
                    labels.insert(setup_cache::LABEL_SNAPSHOT.into(), fingerprint);
                    let commit =
                        backend.commit_setup(sandbox.id(), digest, &labels, self.max_bytes);
                    match tokio::time::timeout(COMMIT_LIMIT, commit).await {
                        Ok(r) => r.map_err(|e| e.to_string()),
                        Err(_) => {
                            Err(format!("the commit took longer than {}s", COMMIT_LIMIT.as_secs()))
                        }
                    }
                }
                Err(why) => Err(why),
            },
            (Ok(_), None) => Err("no sandbox was prepared".into()),
            (Err(e), _) => Err(e.to_string()),
        };
        if let Some(sandbox) = sandbox
            && let Err(e) = crate::lifecycle::teardown::destroy(&*sandbox).await
        {
            crate::report::say(&format!(
                "reeval: failed to remove the setup cache's sandbox {}: {e}; the run's end sweep removes it\n",
                sandbox.id()
            ));
        }
        committed
    }

    /// Waits until every fill asked for so far has ended.
    ///
    /// # Cancel safety
    /// Dropping it aborts the fills it was waiting for; their containers are
    /// left to the run's end sweep, or the next run's.
    pub(crate) async fn wait_all(&self) {
        self.tasks.wait_all().await;
    }
}

/// The fingerprint of the prepared sandbox's workspace, once nothing its
/// setup left running can change it any more; or why it may not be committed.
async fn quiescent(sandbox: &Arc<dyn Sandbox>, workspace: &str) -> Result<String, String> {
    let handle = SandboxHandle::new(sandbox.clone(), workspace, Vec::new());
    setup_cache::settle(&handle, setup_cache::SETTLE_WITHIN).await?;
    // Read from the engine as an archive: nothing is written into the sandbox before its commit.
    let snapshot = crate::diff::Snapshot::download(&handle)
        .await
        .map_err(|e| format!("failed to read its workspace before the commit: {e}"))?;
    Ok(snapshot.fingerprint())
}
