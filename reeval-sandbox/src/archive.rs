//! Tar archives in and out of the sandbox. Archives from the sandbox are
//! untrusted: they are parsed in memory and never unpacked onto the host.

use crate::FileToWrite;
use std::collections::BTreeMap;
use std::io::Read;

use bytes::Bytes;

use super::SandboxError;

/// One entry of a workspace tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: its mode and bytes.
    File {
        /// Unix permission bits.
        mode: u32,
        /// Content.
        bytes: Vec<u8>,
    },
    /// A symbolic link and its target (never followed).
    Symlink(String),
}

fn archive_err(message: impl Into<String>) -> SandboxError {
    SandboxError::Archive { message: message.into() }
}

/// A tar of regular files (their paths relative to where it is unpacked).
pub fn tar_of(files: &[FileToWrite]) -> Result<Bytes, SandboxError> {
    tar_owned_by(files, 0)
}

/// A tar of regular files owned by `uid` (and the group of the same number): uploads keep owners.
pub fn tar_owned_by(files: &[FileToWrite], uid: u64) -> Result<Bytes, SandboxError> {
    let mut builder = tar::Builder::new(Vec::new());
    for FileToWrite { path, bytes, mode } in files {
        let mut header = tar::Header::new_gnu();
        header.set_uid(uid);
        header.set_gid(uid);
        header.set_size(bytes.len() as u64);
        header.set_mode(*mode);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_mtime(0);
        builder
            .append_data(&mut header, path, bytes.as_slice())
            .map_err(|e| archive_err(format!("cannot add {path} to an archive: {e}")))?;
    }
    builder.into_inner().map(Bytes::from).map_err(|e| archive_err(e.to_string()))
}

/// The entries of a tar (built by us) by owner `(uid, gid)`: their paths.
pub fn owners(
    tar: &[u8],
) -> Result<std::collections::BTreeMap<(u64, u64), Vec<String>>, SandboxError> {
    let mut archive = tar::Archive::new(tar);
    let mut owners: std::collections::BTreeMap<(u64, u64), Vec<String>> = Default::default();
    for entry in archive.entries().map_err(|e| archive_err(e.to_string()))? {
        let entry = entry.map_err(|e| archive_err(e.to_string()))?;
        let header = entry.header();
        let owner = (header.uid().unwrap_or(0), header.gid().unwrap_or(0));
        let path =
            entry.path().map_err(|e| archive_err(e.to_string()))?.to_string_lossy().into_owned();
        owners.entry(owner).or_default().push(path);
    }
    Ok(owners)
}

/// A tar of `entries` under the directory `top` (files with their modes, symlinks).
pub fn tar_of_tree(top: &str, entries: &BTreeMap<String, Entry>) -> Result<Bytes, SandboxError> {
    let mut builder = tar::Builder::new(Vec::new());
    let fail = |e: std::io::Error| archive_err(e.to_string());
    for (path, entry) in entries {
        let full = format!("{top}/{path}");
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        match entry {
            Entry::File { mode, bytes } => {
                header.set_size(bytes.len() as u64);
                header.set_mode(*mode);
                header.set_entry_type(tar::EntryType::Regular);
                builder.append_data(&mut header, &full, bytes.as_slice()).map_err(fail)?;
            }
            Entry::Symlink(target) => {
                header.set_size(0);
                header.set_mode(0o777);
                header.set_entry_type(tar::EntryType::Symlink);
                builder.append_link(&mut header, &full, target).map_err(fail)?;
            }
        }
    }
    builder.into_inner().map(Bytes::from).map_err(fail)
}

/// One entry of a tree read in the sandbox by another way than the engine's
/// archive (see [`TreeArchiver`](crate::TreeArchiver)): its path under the
/// tree (raw bytes, relative), permission bits and modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeEntry {
    /// Relative to the tree's top, no `.` or `..` component.
    pub path: Vec<u8>,
    /// Unix permission bits.
    pub mode: u32,
    /// Seconds since 1970.
    pub mtime: i64,
    /// What it is.
    pub kind: TreeKind,
}

/// What a [`TreeEntry`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeKind {
    /// A directory.
    Dir,
    /// A regular file and its bytes.
    File(Vec<u8>),
    /// A symbolic link and its target (never followed).
    Symlink(Vec<u8>),
    /// A named pipe.
    Fifo,
}

/// A tar of a tree as the engine's archive of it is laid out: `top` (the
/// tree's own name) first, then each entry under it, parents before
/// children, with its mode and modification time. Owners are not known
/// here: every entry is root's.
pub fn tar_of_entries(top: &str, entries: &[TreeEntry]) -> Result<Bytes, SandboxError> {
    use std::os::unix::ffi::OsStrExt;
    let mut builder = tar::Builder::new(Vec::new());
    let fail = |e: std::io::Error| archive_err(e.to_string());
    let mut sorted: Vec<&TreeEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let top_dir = TreeEntry { path: Vec::new(), mode: 0o755, mtime: 0, kind: TreeKind::Dir };
    for entry in std::iter::once(&top_dir).chain(sorted) {
        let mut full = top.as_bytes().to_vec();
        if !entry.path.is_empty() {
            full.push(b'/');
            full.extend_from_slice(&entry.path);
        }
        let full = std::path::Path::new(std::ffi::OsStr::from_bytes(&full));
        let mut header = tar::Header::new_gnu();
        header.set_mtime(entry.mtime.max(0) as u64);
        header.set_mode(entry.mode);
        match &entry.kind {
            TreeKind::Dir => {
                header.set_size(0);
                header.set_entry_type(tar::EntryType::Directory);
                builder.append_data(&mut header, full, std::io::empty()).map_err(fail)?;
            }
            TreeKind::File(bytes) => {
                header.set_size(bytes.len() as u64);
                header.set_entry_type(tar::EntryType::Regular);
                builder.append_data(&mut header, full, bytes.as_slice()).map_err(fail)?;
            }
            TreeKind::Symlink(target) => {
                header.set_size(0);
                header.set_entry_type(tar::EntryType::Symlink);
                let target = std::path::Path::new(std::ffi::OsStr::from_bytes(target));
                builder.append_link(&mut header, full, target).map_err(fail)?;
            }
            TreeKind::Fifo => {
                header.set_size(0);
                header.set_entry_type(tar::EntryType::Fifo);
                builder.append_data(&mut header, full, std::io::empty()).map_err(fail)?;
            }
        }
    }
    builder.into_inner().map(Bytes::from).map_err(fail)
}

/// Normalises an entry path: relative, no `..`, no empty or `.` components.
fn clean_path(raw: &std::path::Path) -> Result<String, SandboxError> {
    let mut parts = Vec::new();
    for comp in raw.components() {
        match comp {
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            std::path::Component::CurDir => {}
            _ => return Err(archive_err(format!("unsafe path {} in archive", raw.display()))),
        }
    }
    Ok(parts.join("/"))
}

/// The bytes of the single regular file in a `download` of `path`.
pub fn single_file(tar: &[u8], path: &str) -> Result<Vec<u8>, SandboxError> {
    let mut archive = tar::Archive::new(tar);
    let mut entries = archive.entries().map_err(|e| archive_err(e.to_string()))?;
    match entries.next() {
        Some(Ok(mut entry)) if entry.header().entry_type().is_file() => {
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut bytes).map_err(|e| archive_err(e.to_string()))?;
            Ok(bytes)
        }
        Some(Ok(_)) => Err(archive_err(format!("{path} is not a regular file"))),
        Some(Err(e)) => Err(archive_err(e.to_string())),
        None => Err(SandboxError::NotFound { path: path.to_string() }),
    }
}

/// Every file and symlink of a `download` of a directory, keyed by path
/// relative to that directory. Paths for which `skip` returns true are left out.
pub fn read_tree(
    tar: &[u8],
    skip: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, Entry>, SandboxError> {
    read_entries(tar, true, skip)
}

/// Every file and symlink of a tar, keyed by its path; with `strip_first`,
/// relative to the archive's top directory.
pub fn read_entries(
    tar: &[u8],
    strip_first: bool,
    skip: impl Fn(&str) -> bool,
) -> Result<BTreeMap<String, Entry>, SandboxError> {
    let mut archive = tar::Archive::new(tar);
    let mut tree = BTreeMap::new();
    for entry in archive.entries().map_err(|e| archive_err(e.to_string()))? {
        let mut entry = entry.map_err(|e| archive_err(e.to_string()))?;
        let raw = entry.path().map_err(|e| archive_err(e.to_string()))?.into_owned();
        let full = clean_path(&raw)?;
        // With `strip_first`, the first component is the downloaded directory itself.
        let rel = if strip_first {
            match full.split_once('/') {
                Some((_, rel)) => rel,
                None => continue,
            }
        } else {
            full.as_str()
        };
        if skip(rel) {
            continue;
        }
        let kind = entry.header().entry_type();
        if kind.is_file() {
            let mode = entry.header().mode().unwrap_or(0o644);
            let mut bytes = Vec::with_capacity(entry.size() as usize);
            entry.read_to_end(&mut bytes).map_err(|e| archive_err(e.to_string()))?;
            tree.insert(rel.to_string(), Entry::File { mode, bytes });
        } else if kind.is_symlink() {
            let target = entry
                .link_name()
                .ok()
                .flatten()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            tree.insert(rel.to_string(), Entry::Symlink(target));
        } else if kind.is_hard_link() {
            // A hard link inside the tree: record it by its target's content later; keep it simple.
            let target = entry
                .link_name()
                .ok()
                .flatten()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            tree.insert(rel.to_string(), Entry::Symlink(format!("hardlink:{target}")));
        }
    }
    Ok(tree)
}

/// A `download` of a file or directory made fit to upload into another
/// sandbox: its regular files (setuid and setgid bits cleared), directories,
/// and symlinks that stay inside it, in order; device files, FIFOs and
/// symlinks out of it are left out, and so is every path below the top for
/// which `skip` (given the path relative to the top) is true.
///
/// # Errors
/// [`SandboxError::Archive`] for an archive that cannot be read, or one with an unsafe path.
pub fn copy_for_upload(tar: &[u8], skip: impl Fn(&str) -> bool) -> Result<Bytes, SandboxError> {
    let mut archive = tar::Archive::new(tar);
    let mut builder = tar::Builder::new(Vec::new());
    let fail = |e: std::io::Error| archive_err(e.to_string());
    for entry in archive.entries().map_err(fail)? {
        let mut entry = entry.map_err(fail)?;
        let raw = entry.path().map_err(fail)?.into_owned();
        let full = clean_path(&raw)?;
        if full.is_empty() {
            continue;
        }
        if let Some((_, rel)) = full.split_once('/')
            && skip(rel)
        {
            continue;
        }
        let mut header = entry.header().clone();
        let kind = header.entry_type();
        if kind.is_symlink() {
            let target =
                entry.link_name().map_err(fail)?.map(|t| t.into_owned()).unwrap_or_default();
            // How deep the link's own directory is below the top.
            let depth = full.split('/').count().saturating_sub(2);
            if !stays_inside(&target.to_string_lossy(), depth) {
                continue;
            }
        } else if !kind.is_file() && !kind.is_dir() {
            continue;
        }
        header.set_mode(header.mode().unwrap_or(0o644) & 0o1777);
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(fail)?;
        builder.append_data(&mut header, &full, bytes.as_slice()).map_err(fail)?;
    }
    builder.into_inner().map(Bytes::from).map_err(fail)
}

/// Whether a symlink's `target`, `depth` directories below the copy's top, stays inside it.
fn stays_inside(target: &str, depth: usize) -> bool {
    if target.starts_with('/') {
        return false;
    }
    let mut level = depth as i64;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => level -= 1,
            _ => level += 1,
        }
        if level < 0 {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_for_upload_keeps_what_stays_inside() {
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, mode: u32, link: Option<&str>| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(0);
            h.set_mode(mode);
            match link {
                Some(l) => b.append_link(&mut h, path, l).unwrap(),
                None => b.append_data(&mut h, path, &[][..]).unwrap(),
            }
        };
        add("out", tar::EntryType::Directory, 0o755, None);
        add("out/run.sh", tar::EntryType::Regular, 0o4755, None);
        add("out/x.pyc", tar::EntryType::Regular, 0o644, None);
        add("out/in", tar::EntryType::Symlink, 0o777, Some("run.sh"));
        add("out/up", tar::EntryType::Symlink, 0o777, Some("../../etc/passwd"));
        add("out/abs", tar::EntryType::Symlink, 0o777, Some("/etc/passwd"));
        add("out/sibling", tar::EntryType::Symlink, 0o777, Some("../other"));
        add("out/d/back", tar::EntryType::Symlink, 0o777, Some("../run.sh"));
        add("out/fifo", tar::EntryType::Fifo, 0o644, None);
        let tar = b.into_inner().unwrap();
        let copy = copy_for_upload(&tar, |p| p.ends_with(".pyc")).unwrap();
        let mut kept = Vec::new();
        for e in tar::Archive::new(copy.as_ref()).entries().unwrap() {
            let e = e.unwrap();
            kept.push((e.path().unwrap().display().to_string(), e.header().mode().unwrap()));
        }
        assert_eq!(
            kept,
            [
                ("out".into(), 0o755),
                ("out/run.sh".into(), 0o755),
                ("out/in".into(), 0o777),
                ("out/d/back".into(), 0o777)
            ]
        );
    }

    fn tar_with(path: &str, kind: tar::EntryType, data: &[u8]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        // set_path refuses `..`; write the raw name to simulate a hostile archive.
        let name = h.as_old_mut().name.as_mut();
        name[..path.len()].copy_from_slice(path.as_bytes());
        h.set_cksum();
        b.append(&h, data).unwrap();
        b.into_inner().unwrap()
    }

    #[test]
    fn rejects_parent_components() {
        let tar = tar_with("workspace/../../etc/passwd", tar::EntryType::Regular, b"x");
        let err = read_tree(&tar, |_| false).unwrap_err();
        assert!(err.to_string().contains("unsafe path"), "{err}");
    }

    #[test]
    fn reads_files_relative_to_the_directory() {
        let tar = tar_with("workspace/a/b.txt", tar::EntryType::Regular, b"hi");
        let tree = read_tree(&tar, |_| false).unwrap();
        assert_eq!(tree.get("a/b.txt"), Some(&Entry::File { mode: 0o644, bytes: b"hi".to_vec() }));
    }

    #[test]
    fn round_trips_binary_bytes() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        let tar = tar_of(&[FileToWrite::new("f.bin", bytes.clone(), 0o600)]).unwrap();
        assert_eq!(single_file(&tar, "f.bin").unwrap(), bytes);
    }
}
