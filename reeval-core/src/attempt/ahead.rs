//! A container made ahead of the attempt's slot (`--prestart`; the run's
//! allowance is `runner/prestart.rs`), made as the container phase would
//! make it: the same spec, and for an attempt with a way out its gateway
//! prepared first (the relay is the container's main process, and reports
//! the sandbox's isolation as soon as it starts). The attempt's gateway phase
//! still waits for that report and checks it: a sandbox made ahead is
//! verified as any other. Nothing of the eval runs in it before its slot.
//!
//! Where nothing of the start writes the sandbox between its container and
//! its snapshot (no workspace, files, rules or setup: a Harbor task's
//! image holds its workspace), the snapshot is taken ahead as well: the
//! agent user prepared and the workspace read as the snapshot phase would,
//! in the same container, after the relay's report (as the attempt's start
//! orders them) and before anything of the eval ran in it. The attempt's
//! snapshot phase then takes it as it is.

use std::sync::Arc;
use std::time::Duration;

use super::AttemptPlan;
use crate::diff::{HostHelper, Snapshot};
use crate::gateway::AttemptEgress;
use crate::harness::Harness;
use crate::lifecycle;
use crate::sandbox::{Backend, NetworkSpec, Sandbox, SandboxHandle};

/// A container made ahead of its attempt's slot, and what was made with it.
#[derive(Debug)]
pub(crate) struct Ahead {
    pub(crate) sandbox: Arc<dyn Sandbox>,
    /// The image it was created from.
    pub(crate) image: String,
    /// The attempt's gateway, prepared for this container.
    pub(crate) egress: Option<AttemptEgress>,
    /// The host's directory of the diff helper mounted into it.
    pub(crate) helper: Option<Arc<HostHelper>>,
    /// The snapshot taken in it ahead of the slot, where the start writes nothing before it.
    pub(crate) snapshot: Option<SnapshotAhead>,
}

/// A snapshot phase's work done ahead: the agent user prepared and the
/// workspace read (the diff helper's session serving for the first turn's diff).
#[derive(Debug)]
pub(crate) struct SnapshotAhead {
    /// Whether the workspace is a git repository (its refs noted).
    pub(crate) git_repo: bool,
    pub(crate) baseline: Snapshot,
}

impl Ahead {
    /// Creates and starts `plan`'s container on `backend`, with its gateway when
    /// the attempt has a way out; `None` when the attempt could not use it (its
    /// sandbox has services or mounts, which start with it) or anything fails
    /// (the attempt then makes its own).
    ///
    /// # Cancel safety
    /// A cancelled call may leave a labelled container to the run's end sweep,
    /// and a gateway directory to the run's end.
    pub(crate) async fn make(
        plan: &AttemptPlan,
        harness: Option<&dyn Harness>,
        backend: &Arc<dyn Backend>,
    ) -> Option<Ahead> {
        let cell = &plan.cell;
        if !cell.env.services.is_empty() || !cell.env.mounts.is_empty() {
            return None;
        }
        let image =
            lifecycle::image::ensure(backend.as_ref(), &cell.image, &cell.image_key).await.ok()?;
        let attempt_id = plan.new_record().artifacts_dir_name();
        let labels = lifecycle::container::labels(&plan.run_id, &attempt_id);
        // The same plan the attempt makes (`start.rs`'s launch): the same inputs.
        let way_out = crate::gateway::attempt::plan(&cell.env, harness, &cell.secrets).ok()?;
        let (variables, _) =
            lifecycle::env::sandbox_variables(&cell.env, &cell.secrets, way_out.as_ref());
        let (egress, network, main_process, files) = match way_out {
            Some(way_out) => {
                let (egress, sandbox) = crate::gateway::attempt::prepare(
                    &plan.egress,
                    way_out,
                    backend.as_ref(),
                    &labels,
                )
                .await
                .ok()?;
                (Some(egress), sandbox.network, Some(sandbox.main_process), sandbox.files)
            }
            None => (None, NetworkSpec::None, None, Vec::new()),
        };
        let made = Made { egress, image: image.reference.clone() };
        let workspace = cell.env.workspace_dir.resolve(image.workdir.as_deref());
        let spec = lifecycle::container::spec(
            &image.reference,
            &workspace,
            &plan.run_id,
            &attempt_id,
            &cell.env.limits,
            network,
            main_process,
        );
        let (spec, helper) = lifecycle::container::complete(
            spec,
            backend.as_ref(),
            Vec::new(),
            Vec::new(),
            image.user.clone(),
        );
        let Ok(sandbox) = backend.create(&spec).await else {
            made.close().await;
            return None;
        };
        if lifecycle::container::start(sandbox.as_ref(), files).await.is_err() {
            made.close().await;
            let _ = sandbox.destroy().await;
            return None;
        }
        // As in the attempt's start: the relay's report first (it installs its
        // CA before reporting), then the snapshot.
        let isolated = match &made.egress {
            Some(egress) => egress.verify().await.is_ok(),
            None => true,
        };
        let snapshot = match lifecycle::snapshot::may_take_ahead(&cell.env, harness) && isolated {
            true => {
                let handle = lifecycle::container::handle(
                    sandbox.clone(),
                    &workspace,
                    variables,
                    helper.is_some(),
                );
                snapshot_ahead(&handle, image.user.as_deref()).await
            }
            false => None,
        };
        Some(Ahead { sandbox, image: made.image, egress: made.egress, helper, snapshot })
    }

    /// Not used by its attempt: its gateway closed. The sandbox, for the caller to destroy.
    pub(crate) async fn discard(self) -> Arc<dyn Sandbox> {
        Made { egress: self.egress, image: self.image }.close().await;
        self.sandbox
    }
}

/// What was made before the container, closed when the container is not made.
struct Made {
    egress: Option<AttemptEgress>,
    image: String,
}

impl Made {
    async fn close(self) {
        if let Some(egress) = self.egress {
            egress.close(0).await;
        }
    }
}

/// How long the snapshot ahead may take: the trial waits for it before its
/// slot, so a sandbox that stops answering must not hold the run's line.
const SNAPSHOT_AHEAD_WITHIN: Duration = Duration::from_secs(30);

/// The snapshot phase's work, as it does it when a turn follows; `None` when
/// it fails or takes over [`SNAPSHOT_AHEAD_WITHIN`] (the attempt's own
/// snapshot phase then runs it, under the attempt's deadline, and says why).
/// The diff helper's session is kept for the turn only where the helper is
/// mounted (a local engine's attached stream, which idles safely while the
/// attempt waits); elsewhere the baseline comes without one.
async fn snapshot_ahead(handle: &SandboxHandle, image_user: Option<&str>) -> Option<SnapshotAhead> {
    let session = handle.helpers_dir().is_some();
    let taken = lifecycle::snapshot::prepare_agent_user_and_take(handle, session, image_user);
    let (git_repo, baseline) =
        tokio::time::timeout(SNAPSHOT_AHEAD_WITHIN, taken).await.ok()?.ok()?;
    Some(SnapshotAhead { git_repo, baseline })
}
