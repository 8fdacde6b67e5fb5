//! The start of a sandbox's pod: room on the cluster, Ready, a working
//! exec (the probe of its container's user), and its image's user learned
//! there (`user.rs`): the pod made again as root.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;

use super::super::patience::create_patiently;
use super::super::room::{self, NoRoom};
use super::super::{pod, user};
use super::{GONE_WITHIN, KubeSandbox};
use crate::SandboxError;
use crate::exec::BoundedBuffer;
use crate::shell_exec::{Process, RunProcess};

/// How long an exec may keep failing after Ready (exec can fail just after it).
const EXEC_READY_WITHIN: Duration = Duration::from_secs(60);

impl KubeSandbox {
    /// Waits until the pod can be used: placed and Ready, an exec working,
    /// running as root where its image's user is not root (learned here
    /// where it was not known: the pod is made again as root).
    pub(super) async fn start_pod(&self) -> Result<(), SandboxError> {
        self.placed().await?;
        let mut probe = self.wait_exec().await?;
        if let (None, Some(ids)) = (self.user(), probe.not_root()) {
            // The image's user was not known: its pod starts again, as root.
            *self.user.lock().expect("user lock") = Some(ids.to_string());
            self.start_again_as_root().await?;
            probe = self.wait_exec().await?;
        }
        probe.check(self.name(), self.user().as_deref())
    }

    /// Waits until the pod is Ready, waiting for room on the cluster as long
    /// as its [`super::Room`] allows: a pod its node refused for resources is deleted
    /// and created again (same name, so its NetworkPolicy still selects it),
    /// an unschedulable one is left to the scheduler. A request no node could
    /// ever fit fails at once.
    async fn placed(&self) -> Result<(), SandboxError> {
        let began = Instant::now();
        let mut first: Option<NoRoom> = None;
        let mut pause = Duration::from_millis(500);
        loop {
            let why = match pod::wait_ready(&self.pods, self.name(), self.ready_within, &self.parts)
                .await?
            {
                pod::Waited::Ready => break,
                pod::Waited::NoRoom(why) => why,
            };
            let Some(room) = &self.room else {
                return Err(SandboxError::NoRoom { message: why.says().to_string() });
            };
            if first.is_none() {
                if let Some(e) = room::never_fits(&room.nodes, &room.manifest).await {
                    return Err(e);
                }
                first = Some(why.clone());
            }
            if began.elapsed() > room.within {
                return Err(room::timed_out(&room.manifest, room.within, &why));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(4));
            if let NoRoom::Refused(_) = why {
                self.create_again(&room.manifest).await?;
            }
        }
        if let Some(why) = first {
            *self.note.lock().expect("note lock") = Some(format!(
                "waited {:.1}s for room on the cluster ({})",
                began.elapsed().as_secs_f64(),
                why.says()
            ));
        }
        Ok(())
    }

    /// Deletes the refused pod and creates it again from `manifest`.
    async fn create_again(&self, manifest: &Pod) -> Result<(), SandboxError> {
        self.delete_pod().await?;
        let post = kube::api::PostParams::default();
        let mut manifest = manifest.clone();
        if let Some(name) = self.again.get() {
            manifest.metadata.name = Some(name.clone());
            user::start_as_root(&mut manifest);
        }
        let manifest = &manifest;
        create_patiently(|| self.pods.create(&post, manifest)).await.map_err(|e| {
            SandboxError::engine(format!("create pod {} again (it waits for room)", self.name()), e)
        })?;
        Ok(())
    }

    /// Deletes the pod and creates it again as root (its image's user, not
    /// root, was learned from it) under a new name (see `again`), then waits
    /// until it is Ready.
    async fn start_again_as_root(&self) -> Result<(), SandboxError> {
        let Some(room) = &self.room else {
            return Err(SandboxError::EngineConfig {
                message: format!(
                    "failed to start pod {} as root: its image's user is not root, and it cannot be created again",
                    self.name()
                ),
            });
        };
        self.delete_pod().await?;
        let name = format!("{}-root", self.first);
        // The first pod's labels stay: its NetworkPolicy selects the new one.
        let mut manifest = room.manifest.clone();
        manifest.metadata.name = Some(name.clone());
        user::start_as_root(&mut manifest);
        // Named before it exists: a destroy from now on deletes this one.
        let _ = self.again.set(name.clone());
        let post = kube::api::PostParams::default();
        create_patiently(|| self.pods.create(&post, &manifest)).await.map_err(|e| {
            SandboxError::engine(
                format!("create pod {name} (pod {} again, as root)", self.first),
                e,
            )
        })?;
        self.placed().await
    }

    /// Deletes the pod now and waits until it is gone.
    async fn delete_pod(&self) -> Result<(), SandboxError> {
        self.delete_pod_now().await?;
        pod::wait_gone(&self.pods, self.name(), GONE_WITHIN).await
    }

    /// Waits until an exec works, up to [`EXEC_READY_WITHIN`]: the probe
    /// of the container's user (`user.rs`), run as that user.
    async fn wait_exec(&self) -> Result<user::Probe, SandboxError> {
        let began = Instant::now();
        loop {
            let (mut out, mut err) = (BoundedBuffer::new(4096), BoundedBuffer::new(4096));
            let argv = vec!["/bin/sh".into(), "-c".into(), user::PROBE.into()];
            // Root (`0`): no switch, the container's own user.
            let probe = Process { argv, user: Some("0".into()), ..Default::default() };
            match self.run_process(probe, None, &mut out, &mut err).await.map(|c| (c, err)) {
                Ok((0, _)) => return Ok(user::Probe::parse(&out.into_string())),
                result if began.elapsed() > EXEC_READY_WITHIN => {
                    let why = match result {
                        Ok((code, err)) => format!("`sh` exited {code}: {}", err.into_string()),
                        Err(e) => e.to_string(),
                    };
                    return Err(SandboxError::engine_says(
                        format!("start pod {}", self.name()),
                        format!(
                            "exec did not work within {}s after Ready: {why}",
                            EXEC_READY_WITHIN.as_secs()
                        ),
                    ));
                }
                _ => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}
