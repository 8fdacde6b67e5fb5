//! A fresh directory of this process's in the system's temp directory,
//! mode 755 so that a sandbox's read-only mount of it can be read by any of
//! its users, holding executables: the run's gateway directory (its relay)
//! and the mounted diff helper's.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Makes `<temp>/<prefix>-<pid>-<random>`, never one that was there already, mode 755.
pub(crate) fn fresh(parent: &Path, prefix: &str) -> std::io::Result<PathBuf> {
    let dir = parent.join(format!("{prefix}-{}-{:x}", std::process::id(), random_suffix()));
    std::fs::create_dir(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    Ok(dir)
}

/// Writes `bytes` to `path` as an executable every user may run (mode 755).
pub(crate) fn write_executable(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, bytes)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
}

/// A random number (the hasher's random keys and the time): unguessable names.
pub(crate) fn random_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}
