//! A sandbox's volumes on Kubernetes (see `mount.rs`): each volume the
//! sandbox or its services name is an `emptyDir` of the attempt's pod,
//! mounted into every container that names it, read-only where its mount
//! says (writes fail with `EROFS`); it goes with the pod, so nothing is left
//! to sweep. As on Docker, it starts with what the image of the first
//! container mounting it (the sandbox, else the services in their order)
//! holds at the target: an init container from that image copies it in
//! (`cp -a`, which needs `/bin/sh` and `cp` in that image; a target the
//! image does not have leaves the volume empty).
//!
//! A path of this host cannot be mounted into a pod, which runs on a node of
//! the cluster with files of its own: refused, saying what to do instead.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, SecurityContext, Volume, VolumeMount,
};

use crate::{Mount, MountSource, SandboxSpec};

/// Where the copying init container sees the volume (never a mount target of a task).
const FILL_AT: &str = "/.reeval-fill";
/// `sh -c FILL <target>`: the image's files at the target, owners and modes kept, into the volume.
const FILL: &str = r#"[ -d "$0" ] || exit 0; exec cp -a "$0/." /.reeval-fill/"#;

/// Whether the kubernetes backend can give these mounts: volumes yes, host paths no.
pub(super) fn refused(mounts: &[Mount]) -> Result<(), String> {
    match mounts.iter().find(|m| matches!(m.source, MountSource::Host(_))) {
        Some(m) => Err(format!(
            "the kubernetes backend cannot mount a path of this host into a pod ({}): the pod runs on a node of the cluster, which has files of its own; put the files into the image instead (COPY in its Dockerfile), or share them through a named volume",
            m.describe()
        )),
        None => Ok(()),
    }
}

/// One volume of the pod: its name there, and who fills it from which image.
#[derive(Debug, Clone)]
struct PodVolume {
    /// Its place in the order the volumes were first named.
    n: usize,
    name: String,
    /// The image of the first container mounting it, and that mount's target.
    first: (String, String),
}

/// The pod's volumes for a sandbox and its services.
#[derive(Debug, Clone, Default)]
pub(super) struct PodVolumes {
    /// By the volume's name in the spec.
    by_name: BTreeMap<String, PodVolume>,
}

impl PodVolumes {
    /// The volumes `spec` names (its own mounts, then its services'), in that order.
    pub(super) fn of(spec: &SandboxSpec) -> Self {
        let mut by_name = BTreeMap::new();
        let mounters = std::iter::once((&spec.image, &spec.mounts))
            .chain(spec.services.iter().map(|s| (&s.image, &s.service.mounts)));
        for (image, mounts) in mounters {
            for m in mounts {
                let MountSource::Volume(volume) = &m.source else { continue };
                let n = by_name.len();
                by_name.entry(volume.clone()).or_insert_with(|| PodVolume {
                    n,
                    name: pod_name(n, volume),
                    first: (image.clone(), m.target.clone()),
                });
            }
        }
        Self { by_name }
    }

    /// The pod's `volumes`, if any.
    pub(super) fn volumes(&self) -> Option<Vec<Volume>> {
        let volumes: Vec<Volume> = self
            .ordered()
            .map(|(_, v)| Volume {
                name: v.name.clone(),
                empty_dir: Some(EmptyDirVolumeSource::default()),
                ..Default::default()
            })
            .collect();
        (!volumes.is_empty()).then_some(volumes)
    }

    /// A container's `volumeMounts` for `mounts` (of the sandbox, or of one service).
    pub(super) fn mounts_of(&self, mounts: &[Mount]) -> Option<Vec<VolumeMount>> {
        let found: Vec<VolumeMount> = mounts
            .iter()
            .filter_map(|m| {
                let v = self.by_name.get(m.volume_name()?)?;
                Some(VolumeMount {
                    name: v.name.clone(),
                    mount_path: m.target.clone(),
                    read_only: m.read_only.then_some(true),
                    ..Default::default()
                })
            })
            .collect();
        (!found.is_empty()).then_some(found)
    }

    /// The init containers that fill each volume from its first mounter's
    /// image, shaped by `like` (pull policy, limits, confinement); with
    /// what each is, for messages.
    pub(super) fn fills(&self, like: &Container) -> Vec<(Container, String)> {
        self.ordered()
            .map(|(volume, v)| {
                let (image, target) = &v.first;
                // Root, whatever the image's USER: `cp -a` keeps the files' owners.
                let security_context = SecurityContext {
                    run_as_user: Some(0),
                    run_as_group: Some(0),
                    ..like.security_context.clone().unwrap_or_default()
                };
                let container = Container {
                    name: format!("fill-{}", v.name),
                    image: Some(image.clone()),
                    image_pull_policy: like.image_pull_policy.clone(),
                    command: Some(vec!["/bin/sh".into(), "-c".into(), FILL.into(), target.clone()]),
                    volume_mounts: Some(vec![VolumeMount {
                        name: v.name.clone(),
                        mount_path: FILL_AT.into(),
                        ..Default::default()
                    }]),
                    resources: like.resources.clone(),
                    security_context: Some(security_context),
                    ..Default::default()
                };
                let what = format!("the copy of {target} of image {image} into volume {volume}");
                (container, what)
            })
            .collect()
    }

    /// The volumes in the order they were first named.
    fn ordered(&self) -> impl Iterator<Item = (&String, &PodVolume)> {
        let mut all: Vec<_> = self.by_name.iter().collect();
        all.sort_by_key(|(_, v)| v.n);
        all.into_iter()
    }
}

/// `vol-<n>-<name>`: a DNS label (what a pod's volume and container names
/// must be), unique by its number, readable by the rest.
fn pod_name(n: usize, name: &str) -> String {
    super::names::dns_label(&format!("vol-{n}"), name, 58)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_are_refused_and_volumes_are_not() {
        assert!(refused(&[Mount::volume("logs", "/l").read_only()]).is_ok());
        let e = refused(&[Mount::host("/etc", "/x")]).unwrap_err();
        assert!(e.contains("cannot mount a path of this host into a pod (host path /etc"), "{e}");
    }
}
