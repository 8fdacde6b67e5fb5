//! A sandbox's mounts on a Docker engine (see `sandbox/mount.rs`): its
//! volumes made when it is created, one engine volume per name the sandbox
//! and its services use (`reeval-vol-<id>-<name>`), labelled as the sandbox
//! (run, attempt, owner) and with `dev.reeval.volume`; writable host paths
//! copied for it into a directory of its own. Both are removed after its
//! containers; the run's sweep removes the volumes a killed runner left (a
//! copy it left is in the system's temp directory, under `reeval-mounts/`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::models::{Mount as EngineMount, MountType, VolumeCreateRequest};
use bollard::query_parameters::{ListVolumesOptionsBuilder, RemoveVolumeOptionsBuilder};
use sha2::{Digest, Sha256};

use super::{DockerBackend, LABEL_OWNER, LABEL_RUN, owner_is_gone, owner_label};
use crate::{LABEL_VOLUME, Mount, MountSource, SandboxError, Sweep};

/// What was made for one sandbox's mounts, to mount and later remove.
#[derive(Debug, Default)]
pub(super) struct Made {
    /// Each volume's name in the spec → the engine's volume.
    volumes: BTreeMap<String, String>,
    /// Each writable host path → its copy.
    copies: BTreeMap<PathBuf, PathBuf>,
    /// The directory holding the copies, if any.
    copies_dir: Option<PathBuf>,
}

/// Makes the volumes and copies `mounts` (the sandbox's and its services')
/// need, labelled with `labels`. On failure, what was made is removed again.
pub(super) async fn make(
    docker: &Docker,
    mounts: &[&Mount],
    labels: &HashMap<String, String>,
) -> Result<Made, SandboxError> {
    let mut made = Made::default();
    if mounts.is_empty() {
        return Ok(made);
    }
    let id = format!(
        "{:012x}",
        short_hash(&[
            owner_label().as_bytes(),
            format!("{:?}", std::time::SystemTime::now()).as_bytes(),
            labels.get(crate::LABEL_ATTEMPT).map(String::as_bytes).unwrap_or_default(),
        ]) >> 16
    );
    for m in mounts {
        let result = match &m.source {
            MountSource::Volume(name) if !made.volumes.contains_key(name) => {
                create_volume(docker, &id, name, labels).await.map(|v| {
                    made.volumes.insert(name.clone(), v);
                })
            }
            MountSource::Host(path) if !m.read_only && !made.copies.contains_key(path) => {
                let dir = made
                    .copies_dir
                    .get_or_insert_with(|| std::env::temp_dir().join("reeval-mounts").join(&id))
                    .clone();
                copy_of(path, &dir, made.copies.len()).map(|copy| {
                    made.copies.insert(path.clone(), copy);
                })
            }
            _ => Ok(()),
        };
        if let Err(e) = result {
            made.remove(docker).await;
            return Err(e);
        }
    }
    Ok(made)
}

async fn create_volume(
    docker: &Docker,
    id: &str,
    name: &str,
    labels: &HashMap<String, String>,
) -> Result<String, SandboxError> {
    let mut labels = labels.clone();
    labels.insert(LABEL_VOLUME.into(), name.to_string());
    let engine_name = format!("reeval-vol-{id}-{name}");
    docker
        .create_volume(VolumeCreateRequest {
            name: Some(engine_name.clone()),
            labels: Some(labels),
            ..Default::default()
        })
        .await
        .map_err(|e| SandboxError::engine(format!("create volume {name}"), e))?;
    Ok(engine_name)
}

/// A copy of the host's `path` under `dir` (the `n`th), for a writable mount.
fn copy_of(path: &Path, dir: &Path, n: usize) -> Result<PathBuf, SandboxError> {
    let copy = dir.join(n.to_string());
    let fail = |e: std::io::Error| {
        SandboxError::engine_says(
            format!("copy {} for a writable mount", path.display()),
            e.to_string(),
        )
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    copy_tree(path, &copy).map_err(fail)?;
    Ok(copy)
}

/// Copies a file or a directory tree (modes kept, symlinks as symlinks).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        return symlink(&std::fs::read_link(from)?, to);
    }
    if !meta.is_dir() {
        std::fs::copy(from, to)?;
        return Ok(());
    }
    std::fs::create_dir_all(to)?;
    std::fs::set_permissions(to, meta.permissions())?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

#[cfg(unix)]
fn symlink(target: &Path, at: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

#[cfg(not(unix))]
fn symlink(target: &Path, at: &Path) -> std::io::Result<()> {
    std::fs::copy(target, at).map(|_| ())
}

impl Made {
    /// The engine's mounts for `mounts` (of the sandbox, or of one service).
    pub(super) fn engine_mounts(&self, mounts: &[Mount]) -> Option<Vec<EngineMount>> {
        if mounts.is_empty() {
            return None;
        }
        let engine = mounts
            .iter()
            .map(|m| {
                let (typ, source) = match &m.source {
                    MountSource::Volume(name) => {
                        (MountType::VOLUME, self.volumes.get(name).cloned().unwrap_or_default())
                    }
                    MountSource::Host(path) => {
                        let path = self.copies.get(path).unwrap_or(path);
                        (MountType::BIND, path.display().to_string())
                    }
                };
                EngineMount {
                    target: Some(m.target.clone()),
                    source: Some(source),
                    typ: Some(typ),
                    read_only: Some(m.read_only),
                    ..Default::default()
                }
            })
            .collect();
        Some(engine)
    }

    /// Removes the volumes and copies (after every container that mounts them).
    pub(super) async fn remove(&self, docker: &Docker) {
        for volume in self.volumes.values() {
            let _ = docker
                .remove_volume(
                    volume,
                    Some(RemoveVolumeOptionsBuilder::default().force(true).build()),
                )
                .await;
        }
        if let Some(dir) = &self.copies_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Removes the volumes of the sweep's scope (after their containers); how many.
pub(super) async fn sweep(backend: &DockerBackend, scope: Sweep<'_>) -> usize {
    let filter = match scope {
        Sweep::Orphans => LABEL_RUN.to_string(),
        Sweep::OwnRun(run) => format!("{LABEL_RUN}={run}"),
    };
    let filters = HashMap::from([("label", vec![filter])]);
    let Ok(listed) = backend
        .client()
        .list_volumes(Some(ListVolumesOptionsBuilder::default().filters(&filters).build()))
        .await
    else {
        return 0;
    };
    let me = owner_label();
    let mut removed = 0;
    for v in listed.volumes.unwrap_or_default() {
        let owner = v.labels.get(LABEL_OWNER).cloned().unwrap_or_default();
        let ours = match scope {
            Sweep::Orphans => owner_is_gone(&owner),
            Sweep::OwnRun(_) => owner == me,
        };
        if ours
            && v.labels.contains_key(LABEL_VOLUME)
            && backend
                .client()
                .remove_volume(
                    &v.name,
                    Some(RemoveVolumeOptionsBuilder::default().force(true).build()),
                )
                .await
                .is_ok()
        {
            removed += 1;
        }
    }
    removed
}

fn short_hash(parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    u64::from_be_bytes(h.finalize()[..8].try_into().expect("8 bytes"))
}
