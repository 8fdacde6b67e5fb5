//! The diff helper served from this host: a directory of this process's
//! holding `reeval-diff`, mounted read-only into each sandbox of a local
//! engine (as the gateway's socket is), so that no sandbox has the helper
//! copied in on its first listing (1.4 MB on an exec's stdin, written through
//! the container's file system). The mount cannot be written from the
//! sandbox, by root or the agent; the directory on the host is the runner's
//! own (mode 755) in a fresh, randomly named directory of the system's temp
//! directory, kept for the process's life (removed by a later process once
//! this one is gone).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::sandbox::Mount;

/// Where the directory is mounted in a sandbox.
pub(crate) const MOUNTED_AT: &str = "/run/reeval-diff";

/// The host's directory with the helper, shared by the attempts that hold it.
#[derive(Debug)]
pub(crate) struct HostHelper {
    dir: PathBuf,
}

/// The process's directory, once written (or `None`, when it could not be).
static SHARED: OnceLock<Option<Arc<HostHelper>>> = OnceLock::new();

impl HostHelper {
    /// The process's directory of the helper, written on first use and kept
    /// for the process's life: a sandbox's mounts must exist for as long as
    /// the engine reads it (a setup cache's fill reads and commits its
    /// sandbox after its attempt ended; sandboxes are removed in the
    /// background). The directories of processes that are gone are removed
    /// when a process writes its own. `None` when it cannot be written (the
    /// sandbox then gets the helper copied in, as on engines elsewhere).
    pub(crate) fn shared() -> Option<Arc<Self>> {
        SHARED
            .get_or_init(|| {
                let temp = std::env::temp_dir();
                sweep(&temp);
                Self::write(&temp).map(Arc::new)
            })
            .clone()
    }

    /// A fresh directory under `parent` with the helper in it, both mode 755.
    fn write(parent: &Path) -> Option<Self> {
        // Made here, never one that was there already.
        let helper = Self { dir: crate::host_dir::fresh(parent, "reeval-diff").ok()? };
        let file = helper.dir.join(super::helper::helper_name());
        // A failed write drops `helper`, which removes the directory.
        crate::host_dir::write_executable(&file, super::helper::HELPER_BINARY).ok()?;
        Some(helper)
    }

    /// Its read-only mount for a sandbox's spec.
    pub(crate) fn mount(&self) -> Mount {
        Mount::host(&self.dir, MOUNTED_AT).read_only()
    }
}

impl Drop for HostHelper {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes the helper directories of processes that no longer run.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("reeval-diff-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_helper_is_written_in_a_fresh_directory_removed_with_it() {
        use std::os::unix::fs::PermissionsExt;
        let parent = std::env::temp_dir().join(format!("reeval-mounted-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let made = HostHelper::write(&parent).expect("written");
        let file = made.dir.join(super::super::helper::helper_name());
        assert_eq!(std::fs::read(&file).unwrap(), super::super::helper::HELPER_BINARY);
        assert_eq!(std::fs::metadata(&made.dir).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o755);
        let m = made.mount();
        assert!(m.read_only);
        assert_eq!(m.target, MOUNTED_AT);
        let dir = made.dir.clone();
        drop(made);
        assert!(!dir.exists(), "removed with its holder");
        // Where it cannot be written, there is none.
        assert!(HostHelper::write(&parent.join("missing")).is_none());
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn the_directories_of_gone_processes_are_swept() {
        let parent = std::env::temp_dir().join(format!("reeval-sweep-{}", std::process::id()));
        let gone = parent.join("reeval-diff-999999999-ab");
        let mine = parent.join(format!("reeval-diff-{}-cd", std::process::id()));
        let other = parent.join("unrelated-1-2");
        for d in [&gone, &mine, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        sweep(&parent);
        assert!(!gone.exists());
        assert!(mine.exists() && other.exists());
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn holders_share_one_directory() {
        let a = HostHelper::shared().expect("the temp dir takes it");
        let b = HostHelper::shared().expect("held");
        assert_eq!(a.dir, b.dir);
        assert!(a.dir.join(super::super::helper::helper_name()).is_file());
    }
}
