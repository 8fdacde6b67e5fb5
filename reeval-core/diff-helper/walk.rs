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
mod tests {
    use std::collections::BTreeMap;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::Path;

    use super::*;

    /// A directory of its own under the system's temp dir, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("reeval-walk-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("ws")).unwrap();
            Scratch(dir)
        }

        fn ws(&self) -> PathBuf {
            self.0.join("ws")
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    /// Walks `ws` against `old` (a stored listing's bytes): the changes by
    /// path (`+` new or changed with what was read, `-` gone) and the new
    /// listing, checked to hold every directory walked.
    fn changes(
        ws: &Path,
        old: Option<&[u8]>,
        threads: usize,
    ) -> (BTreeMap<String, String>, Vec<u8>) {
        walked(ws, old, threads, false)
    }

    /// [`changes`], of a whole tree (`whole_tree`) or a workspace.
    fn walked(
        ws: &Path,
        old: Option<&[u8]>,
        threads: usize,
        whole_tree: bool,
    ) -> (BTreeMap<String, String>, Vec<u8>) {
        let old = old.map(|b| Listing::parse(b).expect("a listing"));
        let options =
            Options { old: old.as_ref(), threads, file_limit: 100, budget: 1 << 20, whole_tree };
        let mut got = BTreeMap::new();
        let mut listing = listing::MAGIC.to_vec();
        let mut walked_dirs = Vec::new();
        let top = File::open(ws).unwrap();
        walk(top, &options, |walked| {
            listing.extend_from_slice(&walked.listing);
            walked_dirs.push(walked.path);
            for f in walked.found {
                let (path, shown) = match f {
                    Found::Gone { path } => (path, "-".to_string()),
                    Found::New { path, version, content } => {
                        let content = match content {
                            Content::None => String::new(),
                            Content::NotCaptured => {
                                format!(" not captured, {} bytes", version.size)
                            }
                            Content::Read(b) => format!(" {}", String::from_utf8_lossy(&b)),
                        };
                        (path, format!("+{}{content}", version.kind as char))
                    }
                };
                assert!(got.insert(String::from_utf8_lossy(&path).into_owned(), shown).is_none());
            }
        })
        .expect("walks");
        let parsed = Listing::parse(&listing).expect("a listing");
        assert_eq!(parsed.dirs().count(), walked_dirs.len());
        assert!(walked_dirs.iter().all(|d| parsed.dir(d).is_some()));
        (got, listing)
    }

    fn map(list: &[(&str, &str)]) -> BTreeMap<String, String> {
        list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
    }

    /// A `tree` request's walk: `.git` at the top too, and every directory,
    /// empty or not, found as one (kind `d`) with its own entries.
    #[test]
    fn a_whole_tree_keeps_git_at_the_top_and_names_its_directories() {
        let s = Scratch::new("tree");
        let ws = s.ws();
        write(&ws.join(".git/HEAD"), b"ref");
        write(&ws.join("sessions/a.jsonl"), b"{}");
        std::fs::create_dir(ws.join("empty")).unwrap();
        let (got, _) = walked(&ws, None, 2, true);
        assert_eq!(
            got,
            map(&[
                (".git", "+d"),
                (".git/HEAD", "+f ref"),
                ("empty", "+d"),
                ("sessions", "+d"),
                ("sessions/a.jsonl", "+f {}"),
            ])
        );
    }

    #[test]
    fn a_trees_top_is_never_a_followed_link() {
        let s = Scratch::new("top");
        let ws = s.ws();
        std::fs::create_dir_all(s.0.join("elsewhere")).unwrap();
        symlink(s.0.join("elsewhere"), ws.join("home")).unwrap();
        assert!(open_top(ws.to_str().unwrap()).is_ok());
        assert!(open_top(ws.join("home").to_str().unwrap()).is_err(), "a link at the top");
        write(&ws.join("file"), b"x");
        assert!(open_top(ws.join("file").to_str().unwrap()).is_err(), "not a directory");
    }

    #[test]
    fn a_walk_lists_every_kind_and_reads_only_files_and_link_targets() {
        let s = Scratch::new("kinds");
        let ws = s.ws();
        write(&ws.join("a.txt"), b"hello");
        write(&ws.join("deep/er/b.txt"), b"deep");
        write(&ws.join(std::ffi::OsStr::from_bytes(b"caf\xe9")), b"latin");
        write(&ws.join(".git/HEAD"), b"ref");
        write(&ws.join("sub/.git"), b"a nested .git is content");
        write(&ws.join("big.bin"), &[7u8; 101]);
        write(&s.0.join("outside/secret"), b"SECRET");
        symlink(s.0.join("outside"), ws.join("out")).unwrap();
        symlink(s.0.join("outside/secret"), ws.join("secret-link")).unwrap();
        std::os::unix::net::UnixListener::bind(ws.join("sock")).unwrap();
        std::fs::create_dir(ws.join("empty")).unwrap();
        let (got, _) = changes(&ws, None, 3);
        let out = format!("+l {}", s.0.join("outside").display());
        let secret = format!("+l {}", s.0.join("outside/secret").display());
        assert_eq!(
            got,
            map(&[
                ("a.txt", "+f hello"),
                ("big.bin", "+f not captured, 101 bytes"),
                ("caf\u{fffd}", "+f latin"),
                ("deep/er/b.txt", "+f deep"),
                ("out", &out),
                ("secret-link", &secret),
                ("sock", "+s"),
                ("sub/.git", "+f a nested .git is content"),
            ])
        );
    }

    #[test]
    fn a_second_walk_names_exactly_what_changed() {
        let s = Scratch::new("changes");
        let ws = s.ws();
        for i in 0..50 {
            write(&ws.join(format!("d{}/f{i}.txt", i % 5)), b"same");
        }
        write(&ws.join("gone/x.txt"), b"x");
        write(&ws.join("becomes-dir"), b"file");
        write(&ws.join("becomes-file/y.txt"), b"y");
        let (first, listing) = changes(&ws, None, 4);
        assert_eq!(first.len(), 53);
        let (none, again) = changes(&ws, Some(&listing), 4);
        assert!(none.is_empty(), "{none:?}");
        let dirs =
            Listing::parse(&again).unwrap().dirs().map(|(p, _)| p.to_vec()).collect::<Vec<_>>();
        // The top, d0 to d4, gone, becomes-file.
        assert_eq!(dirs.len(), 8, "{dirs:?}");

        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&ws.join("d1/f1.txt"), b"edited");
        std::fs::remove_file(ws.join("d2/f2.txt")).unwrap();
        write(&ws.join("d3/new.txt"), b"new");
        std::fs::remove_dir_all(ws.join("gone")).unwrap();
        std::fs::remove_file(ws.join("becomes-dir")).unwrap();
        write(&ws.join("becomes-dir/z.txt"), b"z");
        std::fs::remove_dir_all(ws.join("becomes-file")).unwrap();
        write(&ws.join("becomes-file"), b"now a file");
        std::fs::set_permissions(ws.join("d4/f4.txt"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        let (got, _) = changes(&ws, Some(&again), 4);
        assert_eq!(
            got,
            map(&[
                ("becomes-dir", "-"),
                ("becomes-dir/z.txt", "+f z"),
                ("becomes-file", "+f now a file"),
                ("d1/f1.txt", "+f edited"),
                ("d2/f2.txt", "-"),
                ("d3/new.txt", "+f new"),
                ("d4/f4.txt", "+f same"),
            ])
        );
        // `gone/x.txt` and `becomes-file/y.txt` are gone with their directories: the
        // caller names the entries of directories the walk did not visit.
    }

    #[test]
    fn a_directory_swapped_for_a_symlink_is_never_entered() {
        let s = Scratch::new("swap");
        let ws = s.ws();
        let top = File::open(&ws).unwrap();
        std::fs::create_dir(ws.join("d")).unwrap();
        symlink(&s.0, ws.join("link")).unwrap();
        assert!(open_dir(&top, b"d").is_ok());
        let e = open_dir(&top, b"link").expect_err("a symlink is not opened as a directory");
        assert!(raced(&e), "{e}");
        write(&ws.join("file"), b"x");
        let e = open_dir(&top, b"file").expect_err("a file is not a directory");
        assert!(raced(&e), "{e}");
    }

    #[test]
    fn an_agent_swapping_directories_and_links_mid_walk_never_makes_it_read_outside() {
        let s = Scratch::new("race");
        let ws = s.ws();
        write(&s.0.join("outside/SECRET-NAME"), b"SECRET-CONTENT");
        for i in 0..20 {
            write(&ws.join(format!("d/sub/f{i}")), b"inside");
        }
        let stop = std::sync::atomic::AtomicBool::new(false);
        /// Stops the agent however the walks end (a failed assertion too).
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        std::thread::scope(|scope| {
            // The agent: swaps `d` and `d/sub` for symlinks to the outside and back, as fast as it can.
            scope.spawn(|| {
                let outside = s.0.join("outside");
                while !stop.load(Ordering::Relaxed) {
                    for dir in [ws.join("d/sub"), ws.join("d")] {
                        let aside = dir.with_extension("aside");
                        if std::fs::rename(&dir, &aside).is_ok() {
                            let _ = symlink(&outside, &dir);
                            let _ = std::fs::remove_file(&dir);
                            let _ = std::fs::rename(&aside, &dir);
                        }
                    }
                }
            });
            let _stop = Stop(&stop);
            let mut listing: Option<Vec<u8>> = None;
            for _ in 0..300 {
                let (got, next) = changes(&ws, listing.as_deref(), 4);
                for (path, shown) in &got {
                    assert!(!path.contains("SECRET"), "walked outside: {path}");
                    assert!(!shown.contains("SECRET-CONTENT"), "read outside: {path} {shown}");
                }
                listing = Some(next);
            }
        });
    }
}
