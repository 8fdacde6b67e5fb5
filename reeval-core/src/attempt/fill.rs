//! A sandbox prepared for the setup cache rather than for an eval: the same
//! start phases as an attempt (image, container, gateway, workspace, files,
//! setup, the agent user), from the same inputs, so the image committed from
//! it is what the attempt that missed the cache prepared. It is never
//! snapshotted, runs no eval and writes no record; the run's fills
//! (`runner/setup_fill.rs`) commit and remove it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::{Attempt, AttemptPlan, Purpose};
use crate::error::{Error, Result};
use crate::harness::Harness;
use crate::sandbox::{Backend, Sandbox};

/// Asks the run to fill the setup cache for a digest, in the background.
/// The answer is why the digest will not be cached, when an earlier fill
/// of this run already refused it (its setup left processes running).
#[derive(Clone)]
pub(crate) struct AskFill(Arc<Ask>);

/// Asks for a fill of a digest; returns why it will not be cached, if known.
type Ask = dyn Fn(&str) -> Option<String> + Send + Sync;

impl AskFill {
    pub(crate) fn new(ask: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(ask))
    }

    pub(crate) fn ask(&self, digest: &str) -> Option<String> {
        (self.0)(digest)
    }
}

impl std::fmt::Debug for AskFill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AskFill")
    }
}

/// A sandbox prepared for the cache.
#[derive(Debug)]
pub(crate) struct ForCache {
    /// The container, whatever happened: the caller removes it.
    pub(crate) sandbox: Option<Arc<dyn Sandbox>>,
    /// Where its workspace lives.
    pub(crate) workspace: String,
    /// Its key, and the labels its image gets; or why it could not be prepared.
    pub(crate) prepared: Result<(String, std::collections::BTreeMap<String, String>)>,
}

/// Prepares a sandbox of `plan`'s eval for the setup cache. Its container is
/// labelled as try 0 of the plan's trial, so it is never taken for the
/// attempt's own; its `setup.log` goes to a directory of its own, removed after.
///
/// # Errors
/// In [`ForCache::prepared`]: a start phase failed, the inputs may not be
/// cached after all, or `shutdown` fired first.
///
/// # Cancel safety
/// Cancelling it may leave a labelled container to the run's end sweep; fire
/// `shutdown` instead, which stops it and still returns the container.
pub(crate) async fn prepare_for_cache(
    mut plan: AttemptPlan,
    backend: Arc<dyn Backend>,
    harness: Option<Box<dyn Harness>>,
    shutdown: CancellationToken,
) -> ForCache {
    plan.try_ = 0;
    plan.events = None;
    let mut attempt = Attempt::new(&plan, Some(backend), harness, &shutdown, None, Purpose::Fill);
    let scratch = std::env::temp_dir().join(format!(
        "reeval-fill-{}-{}",
        std::process::id(),
        attempt.record.artifacts_dir_name()
    ));
    attempt.given.artifacts_dir = scratch.clone();
    let started = tokio::select! {
        r = attempt.sandbox() => r.map(|_| ()),
        _ = shutdown.cancelled() => Err(Error::infra("prepare the setup cache", "the run was interrupted")),
    };
    let _ = attempt.egress.close().await;
    let _ = std::fs::remove_dir_all(&scratch);
    let sandbox = attempt.handle().map(|h| h.sandbox().clone());
    let workspace = attempt
        .handle()
        .map(|h| h.workspace().to_string())
        .unwrap_or_else(|| crate::environment::WORKSPACE.to_string());
    let prepared = started.and_then(|()| {
        let digest = attempt.prepare.cache_digest.clone().ok_or_else(|| {
            Error::infra("prepare the setup cache", "its inputs may not be cached")
        })?;
        let labels = crate::lifecycle::container::labels(
            &attempt.record.run_id,
            &attempt.record.artifacts_dir_name(),
        );
        Ok((digest, labels))
    });
    ForCache { sandbox, workspace, prepared }
}
