//! The start's dealings with the setup cache: a hit checked against the
//! workspace it was committed with (and forgotten when it is not), a miss
//! handed to the run's fill, and the key of what a prepared sandbox holds.

use super::start::Launch;
use super::{AskFill, Attempt, Purpose, Ready};
use crate::error::{Error, Result};
use crate::gateway::attempt::Plan as EgressPlan;
use crate::phase::Phase;

impl Attempt {
    /// A hit is used only if its workspace is the one its image was committed
    /// with; otherwise the start fails, and [`Attempt::sandbox`] starts again
    /// without the cache.
    pub(super) fn check_cached_workspace(&mut self, launch: &Launch, ready: &Ready) -> Result<()> {
        let (Some(found), Some(digest), true) = (&launch.hit, &launch.digest, ready.agent_user)
        else {
            return Ok(());
        };
        let seen = ready.baseline.fingerprint();
        if found.snapshot.as_deref() == Some(seen.as_str()) {
            return Ok(());
        }
        let why = format!(
            "the cached setup {digest} does not hold the workspace it was committed with \
             (fingerprint {} when committed, {seen} now)",
            found.snapshot.as_deref().unwrap_or("none")
        );
        self.prepare.cache_mismatch = Some((digest.clone(), why.clone()));
        Err(Error::infra("use the cached setup", why).in_phase(Phase::Snapshot))
    }

    /// A cached setup that did not hold its workspace: its sandbox and egress
    /// closed, its image forgotten, and the cache off for this attempt.
    pub(super) async fn forget_cached_setup(&mut self, digest: &str, why: &str) {
        if let Some(handle) = self.handle() {
            let _ = handle.sandbox().destroy().await;
        }
        let _ = self.egress.close().await;
        // After its container is gone, so the image goes at once (unless another attempt runs from it).
        let removed = match self.given.backend.as_ref().map(|b| b.forget_setup(digest)) {
            Some(forget) => match forget.await {
                Ok(()) => "the image was removed".to_string(),
                Err(e) => e.to_string(),
            },
            None => "no backend".to_string(),
        };
        self.phases.log.event(format!("{why}: {removed}, and the setup runs again"));
        self.prepare.setup_cache = false;
    }

    /// On a miss, the run's fill of the cache for this digest, when it fills.
    ///
    /// A miss is cached by a fill in the background (`runner/setup_fill.rs`),
    /// from a sandbox of its own: committing this one while the eval acts in
    /// it would cache the agent's changes, and waiting for the commit here
    /// would put it on the attempt's critical path.
    pub(super) fn fill_on_miss(&self, launch: &Launch) -> Option<(AskFill, String)> {
        match (&self.prepare.purpose, launch.digest.as_deref().filter(|_| launch.hit.is_none())) {
            (Purpose::Eval(Some(ask)), Some(digest)) => Some((ask.clone(), digest.to_string())),
            _ => None,
        }
    }

    /// Asks the run to fill the cache after a miss; says so when it will not.
    pub(super) fn ask_fill(&mut self, launch: &Launch) {
        if let Some((ask, digest)) = self.fill_on_miss(launch)
            && let Some(why) = ask.ask(&digest)
        {
            self.phases.log.event(format!("setup cache: {digest} is not cached: {why}"));
        }
    }

    /// `setup.log` is among the record's artifacts (once).
    pub(super) fn keep_setup_log(&mut self) {
        if !self.record.artifacts.iter().any(|a| a == "setup.log") {
            self.record.artifacts.push("setup.log".into());
        }
    }

    /// The setup cache's key for this attempt, when its prepared sandbox may be cached.
    pub(super) fn setup_cache_digest(
        &mut self,
        base_image_id: &str,
        rules_file: &str,
        egress: Option<&EgressPlan>,
    ) -> Option<String> {
        use crate::setup_cache::SetupCache;
        let env = &self.given.env;
        // Only a setup is worth an image; without steps, preparing is a few uploads.
        // A setup beside services, or with mounts, may have written to them, which no image keeps.
        if !self.prepare.setup_cache
            || env.setup.is_empty()
            || !env.services.is_empty()
            || !env.mounts.is_empty()
        {
            return None;
        }
        match env.setup_cache {
            SetupCache::Off => return None,
            SetupCache::On if egress.is_some_and(|p| p.secrets_reach_setup()) => {
                self.phases.log.event(
                    "setup not cached: a secret could reach it through the gateway \
                     (setup_cache(SetupCache::IncludingSecrets) caches it)"
                        .to_string(),
                );
                return None;
            }
            SetupCache::On | SetupCache::IncludingSecrets => {}
        }
        let harness = self
            .given
            .harness
            .as_ref()
            .map(|h| {
                format!("{} {}", h.name(), self.given.cell.harness_version.as_deref().unwrap_or(""))
            })
            .unwrap_or_default();
        crate::setup_key::key(&self.given.env, base_image_id, &harness, rules_file).ok()
    }
}
