//! Starting ahead (`--prestart N`): while an attempt waits for its slot, its
//! container is created and started, up to N at once across the run. A
//! prestarted container is fresh (made for that attempt, with its labels and
//! limits), never reused, and counted in no budget: the attempt's clock has
//! not started. The attempt takes it over when its sandbox starts; if it
//! never starts one, or the run ends first, the container is destroyed like
//! any other at teardown. Only attempts without an egress gateway and on a
//! pool of one engine start ahead: a gateway's sandbox is made with its
//! gateway, and an attempt's engine is chosen only when it gets its slot.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::attempt::AttemptPlan;
use crate::sandbox::{Backend, NetworkSpec, Sandbox};

/// A container made ahead of its slot, and the permit it holds until then.
#[derive(Debug)]
pub(crate) struct Prestarted {
    pub(crate) sandbox: Arc<dyn Sandbox>,
    /// The image it was created from.
    pub(crate) image: String,
    permit: OwnedSemaphorePermit,
}

impl Prestarted {
    /// Its slot came: it no longer counts as ahead.
    pub(crate) fn into_sandbox(self) -> (Arc<dyn Sandbox>, String) {
        drop(self.permit);
        (self.sandbox, self.image)
    }
}

/// The run's allowance of containers ahead.
#[derive(Debug, Clone)]
pub(crate) struct Prestart {
    ahead: Arc<Semaphore>,
}

impl Prestart {
    pub(crate) fn new(n: usize) -> Self {
        Self { ahead: Arc::new(Semaphore::new(n)) }
    }

    /// Creates and starts `plan`'s container on `backend` when a place ahead is
    /// free and the attempt can use it; `None` otherwise, or when anything fails
    /// (the attempt then makes its own).
    ///
    /// # Cancel safety
    /// A cancelled call may leave a labelled container to the run's end sweep.
    pub(crate) async fn create(
        &self,
        plan: &AttemptPlan,
        backend: &Arc<dyn Backend>,
    ) -> Option<Prestarted> {
        let cell = &plan.cell;
        // A sandbox with a way out is made with its gateway, and one with services or
        // mounts with them, in its container phase.
        if cell.gateway || !cell.env.services.is_empty() || !cell.env.mounts.is_empty() {
            return None;
        }
        let permit = self.ahead.clone().try_acquire_owned().ok()?;
        let image = crate::lifecycle::image::ensure(backend.as_ref(), &cell.image, &cell.image_key)
            .await
            .ok()?;
        let attempt_id = plan.new_record().artifacts_dir_name();
        let workspace = cell.env.workspace_dir.resolve(image.workdir.as_deref());
        let mut spec = crate::lifecycle::container::spec(
            &image.reference,
            &workspace,
            &plan.run_id,
            &attempt_id,
            &cell.env.limits,
            NetworkSpec::None,
            None,
        );
        spec.user = image.user.clone();
        let sandbox = backend.create(&spec).await.ok()?;
        if sandbox.start().await.is_err() {
            let _ = sandbox.destroy().await;
            return None;
        }
        Some(Prestarted { sandbox, image: image.reference, permit })
    }
}
