//! An image whose own `USER` is not root, as on Docker: its pod's container
//! runs as root (`runAsUser: 0`), so that reeval's own preparation has
//! root's capabilities, and each command that names no user runs as the
//! image's user (the exec prologue's switch, `exec.rs`). A kubelet's exec
//! cannot switch user, and under `allowPrivilegeEscalation: false` a
//! container started as another user can never become root.
//!
//! The image's user is known when reeval built the image (`SandboxSpec::user`);
//! an image the cluster pulls (`Image::from`) is not inspected here, so the
//! start's probe learns it: a pod whose process is not root is created again
//! as root, and its uid and gid are what commands run as from then on.

use k8s_openapi::api::core::v1::Pod;

use super::names::CONTAINER;
use crate::exec::is_root_user;
use crate::{SandboxError, SandboxSpec};

/// The image's user where it is not root (the pod then starts as root).
pub(super) fn of(spec: &SandboxSpec) -> Option<String> {
    spec.user.clone().filter(|u| !is_root_user(u))
}

/// The sandbox's container of `pod` runs as root (uid 0, its group from the
/// image's `/etc/passwd`, as Docker's `User: "0"`), whatever the image's `USER`.
pub(super) fn start_as_root(pod: &mut Pod) {
    let containers = pod.spec.iter_mut().flat_map(|s| s.containers.iter_mut());
    for c in containers.filter(|c| c.name == CONTAINER) {
        c.security_context.get_or_insert_with(Default::default).run_as_user = Some(0);
    }
}

/// The start's probe, run with no user (as the container's own): the uid
/// and gid of its process, and whether `setpriv` is there, on lines of their own.
pub(super) const PROBE: &str = r#"while read -r k a _; do case $k in Uid:) u=$a;; Gid:) g=$a;; esac; done </proc/self/status
echo "reeval-probe-ids $u:$g"; if command -v setpriv >/dev/null 2>&1; then echo reeval-probe-setpriv; fi"#;

/// What [`PROBE`] saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Probe {
    /// `uid:gid` of the container's own process; `None`: not told.
    pub(super) ids: Option<String>,
    /// Whether the image has `setpriv`.
    pub(super) setpriv: bool,
}

impl Probe {
    /// [`PROBE`]'s output.
    pub(super) fn parse(stdout: &str) -> Self {
        let mut probe = Probe::default();
        for line in stdout.lines() {
            if let Some(ids) = line.strip_prefix("reeval-probe-ids ") {
                probe.ids = Some(ids.trim().to_string()).filter(|i| i.contains(':'));
            }
            probe.setpriv |= line == "reeval-probe-setpriv";
        }
        probe
    }

    /// The container's user where it is not root: an image's own, not known
    /// when its pod was made (`uid:gid`).
    pub(super) fn not_root(&self) -> Option<&str> {
        self.ids.as_deref().filter(|ids| !is_root_user(ids))
    }

    /// Whether a sandbox whose commands run as `user` by default can be used:
    /// its container runs as root, and its image can switch users.
    ///
    /// # Errors
    /// [`SandboxError::EngineConfig`] saying why not.
    pub(super) fn check(&self, pod: &str, user: Option<&str>) -> Result<(), SandboxError> {
        let Some(user) = user else { return Ok(()) };
        if let Some(ids) = self.not_root() {
            return Err(SandboxError::EngineConfig {
                message: format!(
                    "failed to start pod {pod} as root: its container runs as {ids} (does the cluster force a user on pods?), and the image's user {user} needs the sandbox started as root"
                ),
            });
        }
        if !self.setpriv {
            return Err(SandboxError::EngineConfig {
                message: format!(
                    "failed to run commands as the image's user {user} in pod {pod}: the image has no `setpriv` (util-linux), with which the Kubernetes backend switches users (a kubelet's exec cannot); install util-linux in the image"
                ),
            });
        }
        Ok(())
    }
}
