//! The walk: a few threads list the workspace's directories in parallel and
//! compare each with the entries it had in the stored listing.
//!
//! Nothing the agent can change is resolved twice. Each directory is opened
//! through its parent's descriptor (`/proc/self/fd/N/name` with `O_NOFOLLOW`
//! and `O_DIRECTORY`), so a directory swapped for a symlink between two
//! steps is not entered; entries are stated with `fstatat` and
//! `AT_SYMLINK_NOFOLLOW` on the directory's own descriptor (std's
//! `DirEntry::metadata`); a changed file is opened the same way with
//! `O_NOFOLLOW | O_NONBLOCK` and read only if it is still a regular file,
//! and a symlink's target is read, never followed. Fifos, sockets and
//! devices are never opened.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, mpsc};

use super::listing::{self, Change, Listing, Version};

// Linux's open flags (std has no names for them). Both differ between architectures.
#[cfg(target_arch = "x86_64")]
const O_DIRECTORY: i32 = 0o200_000;
#[cfg(target_arch = "x86_64")]
const O_NOFOLLOW: i32 = 0o400_000;
#[cfg(target_arch = "aarch64")]
const O_DIRECTORY: i32 = 0o40_000;
#[cfg(target_arch = "aarch64")]
const O_NOFOLLOW: i32 = 0o100_000;
/// A fifo swapped in for a file must not block the open.
const O_NONBLOCK: i32 = 0o4_000;
const O_NOCTTY: i32 = 0o400;

/// What to walk against.
#[derive(Debug)]
pub struct Options<'a> {
    /// The listing of the last diff, if there is one.
    pub old: Option<&'a Listing<'a>>,
    /// Directories listed at once.
    pub threads: usize,
    /// A file larger than this is named, not read.
    pub file_limit: u64,
    /// The most bytes read in all; files past it are named, not read.
    pub budget: u64,
    /// A whole tree, not a workspace (a `tree` request): `.git` at the top is
    /// walked too, and each directory is found as new (kind `d`).
    pub whole_tree: bool,
}

/// The content sent for a new or changed entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Not a file or symlink: named by kind, never opened.
    None,
    /// The file's bytes, or the symlink's target.
    Read(Vec<u8>),
    /// Too large (or past the budget): named with its size.
    NotCaptured,
}

/// A change found by the walk, named by its path in the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// New or different since the stored listing.
    New { path: Vec<u8>, version: Version, content: Content },
    /// Gone since the stored listing.
    Gone { path: Vec<u8> },
}

/// One directory walked.
#[derive(Debug)]
pub struct Walked {
    /// Its path in the workspace (empty for the top).
    pub path: Vec<u8>,
    /// Its part of the new listing (see [`listing::push_dir`]).
    pub listing: Vec<u8>,
    /// What changed in it.
    pub found: Vec<Found>,
}

/// `path/name`, or `name` at the top.
pub fn join(path: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len() + 1 + name.len());
    if !path.is_empty() {
        out.extend_from_slice(path);
        out.push(b'/');
    }
    out.extend_from_slice(name);
    out
}

/// A directory still to list, at `path` in the workspace.
struct Job {
    dir: ToOpen,
    path: Vec<u8>,
}

enum ToOpen {
    /// The top, opened by the caller.
    Top(File),
    /// `name` in the directory `parent`.
    Child { parent: Arc<File>, name: Vec<u8> },
}

#[derive(Default)]
struct Queue {
    jobs: Vec<Job>,
    /// Jobs taken and not finished: more may come while any is.
    busy: usize,
    failed: Option<io::Error>,
}

/// Walks the directory `top` and gives `sink` each directory it listed, as
/// it is listed (from the calling thread). `.git` at the top is left out.
///
/// # Errors
/// The first error other than an entry vanishing or being swapped while it
/// was read (those are left out of this listing, and the next diff sees them).
pub fn walk(top: File, options: &Options<'_>, mut sink: impl FnMut(Walked)) -> io::Result<()> {
    let queue = Mutex::new(Queue {
        jobs: vec![Job { dir: ToOpen::Top(top), path: Vec::new() }],
        ..Queue::default()
    });
    let ready = Condvar::new();
    let budget = AtomicU64::new(options.budget);
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|scope| {
        for _ in 0..options.threads.max(1) {
            let tx = tx.clone();
            let (queue, ready, budget) = (&queue, &ready, &budget);
            scope.spawn(move || worker(queue, ready, options, budget, tx));
        }
        drop(tx);
        for walked in rx {
            sink(walked);
        }
    });
    match queue.into_inner().unwrap_or_else(|e| e.into_inner()).failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn worker(
    queue: &Mutex<Queue>,
    ready: &Condvar,
    options: &Options<'_>,
    budget: &AtomicU64,
    tx: mpsc::Sender<Walked>,
) {
    loop {
        let job = {
            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if q.failed.is_some() {
                    break None;
                }
                if let Some(job) = q.jobs.pop() {
                    q.busy += 1;
                    break Some(job);
                }
                if q.busy == 0 {
                    break None;
                }
                q = ready.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        let Some(job) = job else {
            ready.notify_all();
            return;
        };
        let result = visit(job, options, budget, queue, ready);
        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
        q.busy -= 1;
        match result {
            Ok(Some(walked)) => {
                let _ = tx.send(walked);
            }
            Ok(None) => {}
            Err(e) => {
                q.failed.get_or_insert(e);
            }
        }
        drop(q);
        ready.notify_all();
    }
}

/// Whether `e` means the entry vanished or was swapped while it was read.
fn raced(e: &io::Error) -> bool {
    const ENOENT: i32 = 2;
    const ENOTDIR: i32 = 20;
    const EINVAL: i32 = 22;
    const ELOOP: i32 = 40;
    matches!(e.raw_os_error(), Some(ENOENT | ENOTDIR | EINVAL | ELOOP))
}

/// `name` inside the directory `dir`, resolved through `dir`'s descriptor.
fn beneath(dir: &File, name: &[u8]) -> PathBuf {
    let mut path = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
    path.extend_from_slice(name);
    PathBuf::from(std::ffi::OsString::from_vec(path))
}

/// Opens the directory `name` in `parent` without following a symlink.
/// Opens the directory at `path`, which must not itself be a symlink (the
/// top of a `tree` request: a link there is archived by the engine as the
/// link, so it is not followed here either).
pub fn open_top(path: &str) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(O_DIRECTORY | O_NOFOLLOW).open(path)
}

fn open_dir(parent: &File, name: &[u8]) -> io::Result<File> {
    OpenOptions::new().read(true).custom_flags(O_DIRECTORY | O_NOFOLLOW).open(beneath(parent, name))
}

fn version_of(meta: &Metadata) -> Version {
    let t = meta.file_type();
    let kind = if t.is_symlink() {
        b'l'
    } else if t.is_fifo() {
        b'p'
    } else if t.is_socket() {
        b's'
    } else if t.is_block_device() {
        b'b'
    } else if t.is_char_device() {
        b'c'
    } else {
        b'f'
    };
    Version {
        kind,
        mode: meta.mode() & 0o7777,
        size: meta.size(),
        mtime: (meta.mtime(), meta.mtime_nsec() as u32),
        ctime: (meta.ctime(), meta.ctime_nsec() as u32),
    }
}

/// Lists one directory, queues its subdirectories, and compares it with its stored entries.
/// `None` when it vanished or was swapped before it was opened.
fn visit(
    job: Job,
    options: &Options<'_>,
    budget: &AtomicU64,
    queue: &Mutex<Queue>,
    ready: &Condvar,
) -> io::Result<Option<Walked>> {
    let Job { dir, path } = job;
    let dir = match dir {
        ToOpen::Top(top) => Arc::new(top),
        ToOpen::Child { parent, name } => match open_dir(&parent, &name) {
            Ok(dir) => Arc::new(dir),
            Err(e) if raced(&e) => return Ok(None),
            Err(e) => return Err(e),
        },
    };
    let mut entries = Vec::new();
    let mut subdirs = Vec::new();
    let mut dirs_found = Vec::new();
    for entry in std::fs::read_dir(beneath(&dir, b""))? {
        let entry = entry?;
        let name = entry.file_name().into_vec();
        if path.is_empty() && name == b".git" && !options.whole_tree {
            continue;
        }
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(e) if raced(&e) => continue,
            Err(e) => return Err(e),
        };
        if meta.is_dir() {
            if options.whole_tree {
                let version = Version { kind: b'd', size: 0, ..version_of(&meta) };
                let found =
                    Found::New { path: join(&path, &name), version, content: Content::None };
                dirs_found.push(found);
            }
            subdirs.push(name);
        } else {
            entries.push((name, version_of(&meta)));
        }
    }
    if !subdirs.is_empty() {
        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
        for name in subdirs {
            let path = join(&path, &name);
            q.jobs.push(Job { dir: ToOpen::Child { parent: dir.clone(), name }, path });
        }
        drop(q);
        ready.notify_all();
    }
    entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));

    let stored = options.old.and_then(|old| old.dir(&path));
    let mut changes = Vec::new();
    listing::compare(stored.iter().flat_map(|d| d.entries()), &entries, |c| changes.push(c));
    let mut found = dirs_found;
    let mut unread = Vec::new();
    for change in changes {
        let (index, existed) = match change {
            Change::Gone(name) => {
                found.push(Found::Gone { path: join(&path, name) });
                continue;
            }
            Change::Added(i) => (i, false),
            Change::Modified(i) => (i, true),
        };
        let (name, version) = &entries[index];
        match content(&dir, name, version, options.file_limit, budget) {
            Ok(content) => {
                found.push(Found::New { path: join(&path, name), version: *version, content })
            }
            Err(e) if raced(&e) => {
                // Gone or swapped before it was read: out of this listing, so the next diff looks again.
                unread.push(index);
                if existed {
                    found.push(Found::Gone { path: join(&path, name) });
                }
            }
            Err(e) => return Err(e),
        }
    }
    for index in unread.into_iter().rev() {
        entries.remove(index);
    }
    let mut listed = Vec::new();
    listing::push_dir(&mut listed, &path, &entries);
    Ok(Some(Walked { path, listing: listed, found }))
}

/// What a new or changed entry sends: a file's bytes, a symlink's target, or nothing.
fn content(
    dir: &File,
    name: &[u8],
    version: &Version,
    file_limit: u64,
    budget: &AtomicU64,
) -> io::Result<Content> {
    if !matches!(version.kind, b'f' | b'l') {
        return Ok(Content::None);
    }
    let fits = version.size <= file_limit
        && budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(version.size)
            })
            .is_ok();
    if !fits {
        return Ok(Content::NotCaptured);
    }
    if version.kind == b'l' {
        return Ok(Content::Read(
            std::fs::read_link(beneath(dir, name))?.into_os_string().into_vec(),
        ));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)
        .open(beneath(dir, name))?;
    if !file.metadata()?.is_file() {
        // Swapped for something else since it was stated.
        return Err(io::Error::from_raw_os_error(22));
    }
    let mut bytes = Vec::with_capacity(version.size as usize);
    file.take(file_limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > file_limit {
        // It grew past the limit after it was stated.
        return Ok(Content::NotCaptured);
    }
    Ok(Content::Read(bytes))
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod tests;
