//! Mounts: what a sandbox, or one of its services, sees at a path besides its
//! image's files. A volume made for the sandbox and shared by name with its
//! services (compose's named volumes: a sidecar writes a log that the
//! sandbox reads), or a path of this host (compose's bind mounts of a task's
//! files), each read-only or writable.
//!
//! A backend makes a sandbox's volumes when it creates the sandbox, labels
//! them as the sandbox (so the run's sweep finds what a killed attempt
//! left), and removes them with it. Whether a backend can mount at all is
//! [`Backend::mounts`](crate::Backend::mounts): Docker and Podman can (a host
//! path only where the engine runs on this host); Kubernetes mounts volumes
//! (the pod's `emptyDir`s), never a host path.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// Label on a volume a backend made for a sandbox: its name in the spec.
pub const LABEL_VOLUME: &str = "dev.reeval.volume";

/// Where a mount's files come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MountSource {
    /// A volume made for one sandbox when it is created, and removed with it;
    /// the sandbox and those of its services that name it share it. It starts
    /// with what the image of the first container mounting it holds at the
    /// target (as compose's named volumes do), else empty.
    Volume(String),
    /// A file or directory of the host this process runs on (so the engine
    /// must run here too). Read-only, the host's own path is mounted.
    /// Writable, a copy made for the sandbox is, removed with it: nothing the
    /// sandbox writes reaches the host's files, and two sandboxes never see
    /// each other's writes.
    Host(PathBuf),
}

/// One mount of a sandbox or a service.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Mount {
    /// Where its files come from.
    pub source: MountSource,
    /// The absolute path it appears at in the container.
    pub target: String,
    /// Whether the container may only read it (writes fail with `EROFS`).
    pub read_only: bool,
}

impl Mount {
    /// The sandbox's volume `name` at `target`, writable.
    pub fn volume(name: impl Into<String>, target: impl Into<String>) -> Self {
        Self { source: MountSource::Volume(name.into()), target: target.into(), read_only: false }
    }

    /// The host's `path` at `target`, writable (through a copy: see [`MountSource::Host`]).
    pub fn host(path: impl Into<PathBuf>, target: impl Into<String>) -> Self {
        Self { source: MountSource::Host(path.into()), target: target.into(), read_only: false }
    }

    /// Read-only.
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The volume's name, when it is one.
    pub fn volume_name(&self) -> Option<&str> {
        match &self.source {
            MountSource::Volume(name) => Some(name),
            MountSource::Host(_) => None,
        }
    }

    /// `volume data at /var/log/app (read-only)`, for messages.
    pub fn describe(&self) -> String {
        let source = match &self.source {
            MountSource::Volume(name) => format!("volume {name}"),
            MountSource::Host(path) => format!("host path {}", path.display()),
        };
        let mode = if self.read_only { "read-only" } else { "writable" };
        format!("{source} at {} ({mode})", self.target)
    }
}

/// Whether `name` can name a volume (letters, digits, `_`, `.`, `-`; a letter or digit first).
fn valid_volume_name(name: &str) -> bool {
    name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// What is wrong with the mounts of one container (`owner`: `the sandbox`,
/// `service db`), found without starting anything: a relative or repeated
/// target, a volume name that cannot be one, a host path that does not exist.
pub fn problems(owner: &str, mounts: &[Mount]) -> Vec<String> {
    let mut out = Vec::new();
    let mut targets = BTreeSet::new();
    for m in mounts {
        let at = format!("failed to mount {} in {owner}", m.describe());
        if !m.target.starts_with('/') {
            out.push(format!("{at}: the target must be an absolute path"));
        } else if !targets.insert(m.target.trim_end_matches('/').to_string()) {
            out.push(format!("{at}: another mount has the same target"));
        }
        match &m.source {
            MountSource::Volume(name) if !valid_volume_name(name) => out.push(format!(
                "{at}: `{name}` is not a volume name (letters, digits, `_`, `.`, `-`)"
            )),
            MountSource::Host(path) if !path.is_absolute() => {
                out.push(format!("{at}: the host path must be absolute"))
            }
            MountSource::Host(path) if !path.exists() => {
                out.push(format!("{at}: the host path does not exist"))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mounts_are_checked_before_anything_starts() {
        let here = std::env::temp_dir();
        let ok = [Mount::volume("logs", "/var/log/app").read_only(), Mount::host(&here, "/data")];
        assert!(problems("the sandbox", &ok).is_empty(), "{:?}", problems("the sandbox", &ok));
        let bad = [
            Mount::volume("logs", "relative"),
            Mount::volume("-bad", "/a"),
            Mount::volume("logs", "/a/"),
            Mount::host(here.join("reeval-no-such-path-here"), "/b"),
        ];
        let p = problems("service db", &bad);
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(p[0].contains("absolute") && p[0].contains("in service db"), "{p:?}");
        assert!(p[1].contains("`-bad` is not a volume name"), "{p:?}");
        assert!(p[2].contains("same target"), "{p:?}");
        assert!(p[3].contains("does not exist"), "{p:?}");
        assert_eq!(
            Mount::volume("logs", "/x").read_only().describe(),
            "volume logs at /x (read-only)"
        );
    }
}
