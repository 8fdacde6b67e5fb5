//! Workspace snapshots and the diffs between them (unified, via `similar`).
//!
//! A snapshot's listing stays inside the sandbox: each refresh runs the
//! static helper `reeval-diff` there (`diff/helper.rs`), which walks the workspace
//! (type, mode, size, mtime, ctime and raw name of every entry, `.git` left
//! out), compares it with the listing of the snapshot it starts from, and
//! sends back only what changed, with the content of the changed files, in
//! one exec. So a diff of a 100,000-file workspace with five changes moves
//! five files. Names are kept byte for byte (a name that is not UTF-8 is
//! shown with `\xNN` escapes), symlinks are recorded as links and never
//! followed (the helper opens nothing by a path the agent could change
//! while it walks), fifos, sockets and devices are named by kind, and a file
//! over [`FILE_LIMIT`] is named with its size and marked not captured
//! instead of being read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sandbox::archive::Entry;
use crate::sandbox::{SandboxError, SandboxHandle};

pub use reeval_record::diff::{Change, Diff, FILE_LIMIT, FileChange, FileKind, PATCH_LIMIT};

mod helper;
mod launch;
mod mounted;
mod patch;
mod prepared;
mod tree;

pub(crate) use mounted::{HostHelper, MOUNTED_AT as HELPER_MOUNTED_AT};

/// The most a snapshot reads in one go; files past it are marked not captured.
pub const SNAPSHOT_LIMIT: u64 = 2 << 30;

/// Listing ids, unique within this process (the sandbox is the attempt's own).
static NEXT_LISTING: AtomicU64 = AtomicU64::new(1);

/// What a snapshot knows of one path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Item {
    /// A regular file or symlink, read.
    Read(Entry),
    /// A fifo, socket or device: named by kind, never opened.
    Special { kind: FileKind, mode: u32 },
    /// A file too large to read: its size and the listing's identity of its version.
    NotCaptured { size: u64, version: String },
}

/// Paths in the workspace and what a snapshot knows of each.
type Files = BTreeMap<Arc<str>, Arc<Item>>;

/// The workspace's files at one moment, `.git` internals excluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Shared: a snapshot is cloned without copying its map, and a refresh
    /// that found nothing changed keeps the same one.
    files: Arc<Files>,
    /// The id of this snapshot's listing inside the sandbox, when it has one.
    listing: Option<String>,
    /// The helper session that can compare with it, once one was started.
    session: helper::Shared,
}

/// A fresh listing id.
fn next_listing() -> String {
    format!("{}-{}", std::process::id(), NEXT_LISTING.fetch_add(1, Ordering::Relaxed))
}

fn is_git_internal(path: &str) -> bool {
    path == ".git" || path.starts_with(".git/")
}

/// A name as shown: UTF-8 as it is, other bytes as `\xNN`.
fn shown_name(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for chunk in raw.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

fn special_kind(kind: u8) -> FileKind {
    match kind {
        b'p' => FileKind::Fifo,
        b's' => FileKind::Socket,
        b'b' | b'c' => FileKind::Device,
        _ => FileKind::File,
    }
}

impl Snapshot {
    /// Reads the workspace of `sandbox`.
    ///
    /// # Errors
    /// [`SandboxError`] when the workspace cannot be read.
    ///
    /// # Cancel safety
    /// Safe: nothing in the workspace changes.
    pub async fn take(sandbox: &SandboxHandle) -> Result<Self, SandboxError> {
        Snapshot::default().refresh(sandbox).await
    }

    /// The workspace now, reading only what changed since `self`: the
    /// helper lists and compares inside the sandbox and returns what changed
    /// with the content of the changed files. The first listing in a sandbox
    /// installs the helper with its one exec, the second starts a session
    /// with the helper alongside its exec, and the later ones ask that
    /// session (no exec). Falls back to reading the whole workspace as an
    /// archive when the helper cannot run there (a sandbox of another
    /// architecture, or without `sh`, `/proc` or a writable `/var/lib`).
    ///
    /// # Errors
    /// [`SandboxError`] when the workspace cannot be read.
    ///
    /// # Cancel safety
    /// Safe: nothing in the workspace changes (the listing is written
    /// outside it); a cancelled refresh ends the helper session, and later
    /// refreshes use one exec each.
    pub async fn refresh(&self, sandbox: &SandboxHandle) -> Result<Self, SandboxError> {
        let id = next_listing();
        let since = self.listing.as_deref();
        if let Some(session) = &self.session.0
            && let Some(answer) = session.ask(since, &id).await
            && let Some(parsed) = helper::parse(&answer)
        {
            return Ok(self.apply(parsed, id, self.session.clone()));
        }
        // A snapshot with a listing was made by the helper in this sandbox: it is there.
        let install = self.listing.is_none();
        let ran = helper::run(sandbox, since, &id, install, None, FILE_LIMIT, SNAPSHOT_LIMIT);
        // A failed session is not started again.
        let session = async {
            match (&self.session.0, install) {
                (None, false) => helper::Shared(Some(
                    helper::Session::start(sandbox, FILE_LIMIT, SNAPSHOT_LIMIT).await,
                )),
                _ => self.session.clone(),
            }
        };
        let (ran, session) = tokio::join!(ran, session);
        let (out, answer) = ran?;
        match (out.exit_code == 0).then(|| helper::parse(&answer)).flatten() {
            Some(parsed) => Ok(self.apply(parsed, id, session)),
            None => Self::download(sandbox).await,
        }
    }

    /// Reads the workspace as [`Snapshot::take`] does, after `prelude` (a
    /// shell script run as root in the workspace) in the same exec: a start
    /// that prepares the sandbox just before its first snapshot saves an
    /// exec. The snapshot, `None` when the prelude failed, and the prelude's
    /// output (the exec's stderr).
    ///
    /// # Errors
    /// [`SandboxError`] when the engine fails or the workspace cannot be read.
    ///
    /// # Cancel safety
    /// A cancelled call may have run the prelude; the workspace is only read.
    pub(crate) async fn take_after(
        sandbox: &SandboxHandle,
        prelude: &str,
    ) -> Result<(Option<Self>, String), SandboxError> {
        if let Some(taken) = Self::take_prepared(sandbox, prelude).await {
            return taken;
        }
        Self::take_after_by_exec(sandbox, prelude).await
    }

    /// [`Snapshot::take_after`] in one exec of the helper, after `prelude`.
    async fn take_after_by_exec(
        sandbox: &SandboxHandle,
        prelude: &str,
    ) -> Result<(Option<Self>, String), SandboxError> {
        let id = next_listing();
        let (out, answer) =
            helper::run(sandbox, None, &id, true, Some(prelude), FILE_LIMIT, SNAPSHOT_LIMIT)
                .await?;
        if out.exit_code == helper::PRELUDE_FAILED {
            return Ok((None, out.stderr));
        }
        let snapshot = match (out.exit_code == 0).then(|| helper::parse(&answer)).flatten() {
            Some(parsed) => Self::default().apply(parsed, id, helper::Shared::default()),
            None => Self::download(sandbox).await?,
        };
        Ok((Some(snapshot), out.stderr))
    }

    /// [`Snapshot::take_after`], and the helper's session for the next
    /// refresh (a turn's diff), so no exec starts beside the turn. Where the
    /// helper is mounted, the session's own exec runs the prelude, then
    /// serves, and the listing is asked of it: one exec (`diff/prepared.rs`;
    /// where the prelude does not succeed there, it runs as below). Elsewhere
    /// the session starts beside the exec, waiting for the helper that exec
    /// puts in place.
    ///
    /// # Errors
    /// As [`Snapshot::take_after`].
    ///
    /// # Cancel safety
    /// As [`Snapshot::take_after`]; a cancelled session start leaves at most
    /// a waiting helper, which ends with the sandbox.
    pub(crate) async fn take_after_with_session(
        sandbox: &SandboxHandle,
        prelude: &str,
    ) -> Result<(Option<Self>, String), SandboxError> {
        if let Some(taken) = Self::take_prepared(sandbox, prelude).await {
            return taken;
        }
        let session = helper::Session::start_beside_install(sandbox, FILE_LIMIT, SNAPSHOT_LIMIT);
        // Not `take_after`, which would try the prepared session again.
        let (taken, session) = tokio::join!(Self::take_after_by_exec(sandbox, prelude), session);
        let (snapshot, out) = taken?;
        let snapshot = snapshot.map(|s| Self { session: helper::Shared(Some(session)), ..s });
        Ok((snapshot.map(Self::with_listed), out))
    }

    /// [`Snapshot::take_after`] by the helper's session that prepares first
    /// (`diff/prepared.rs`), kept for later refreshes; `None` where it did
    /// not run to success (the caller then runs the prelude in an exec).
    async fn take_prepared(
        sandbox: &SandboxHandle,
        prelude: &str,
    ) -> Option<Result<(Option<Self>, String), SandboxError>> {
        let prepared::Prepared::Ready { output, session } =
            prepared::start(sandbox, prelude, FILE_LIMIT, SNAPSHOT_LIMIT).await
        else {
            return None;
        };
        // The session archives the sandbox's directories for the record too (a
        // CLI's home), and starts the agent's turns (`diff/launch.rs`).
        sandbox.set_archiver(Arc::new(tree::SessionArchiver(session.clone())));
        let launcher = launch::SessionLauncher {
            session: session.clone(),
            sandbox: sandbox.sandbox().clone(),
        };
        sandbox.set_launcher(Arc::new(launcher));
        let id = next_listing();
        let asked = session.ask(None, &id).await;
        let snapshot = match asked.as_deref().and_then(helper::parse) {
            Some(parsed) => {
                Self::default().apply(parsed, id, helper::Shared(Some(session))).with_listed()
            }
            // The session failed (it is not asked again): one exec, as a refresh does.
            None => match Self::take(sandbox).await {
                Ok(taken) => taken,
                Err(e) => return Some(Err(e)),
            },
        };
        Some(Ok((Some(snapshot), output)))
    }

    /// The argv of the session that prepares the sandbox and then serves
    /// its listings, for a sandbox's main process to start and leave waiting
    /// on the sandbox's stdin (`diff/prepared.rs`), with the helper at its mount.
    pub(crate) fn main_session_argv(workspace: &str) -> Vec<String> {
        let helper = format!("{}/{}", mounted::MOUNTED_AT, helper::helper_name());
        prepared::argv(&helper, workspace, FILE_LIMIT, SNAPSHOT_LIMIT)
    }

    /// `self`, without its session when it has no listing: only a listing
    /// the helper made can be asked about.
    fn with_listed(self) -> Self {
        match self.listing.is_some() {
            true => self,
            false => Self { session: helper::Shared::default(), ..self },
        }
    }

    /// This snapshot, with the helper's session started when it has a
    /// listing and none was started yet: the next refresh asks the session
    /// instead of running an exec. Started alongside a turn, it takes the
    /// turn's diff off an exec. A session that cannot start is a failed one
    /// (later refreshes use one exec each, as after any failed session).
    ///
    /// # Cancel safety
    /// Safe: a cancelled start leaves at most a helper waiting for requests
    /// that never come, which ends with the sandbox.
    pub async fn with_session(&self, sandbox: &SandboxHandle) -> Self {
        if self.listing.is_none() || self.session.0.is_some() {
            return self.clone();
        }
        let session = helper::Session::start(sandbox, FILE_LIMIT, SNAPSHOT_LIMIT).await;
        Self { session: helper::Shared(Some(session)), ..self.clone() }
    }

    /// The whole workspace as one archive from the engine: no exec, no
    /// listing kept (so the next refresh reads everything again).
    ///
    /// # Errors
    /// [`SandboxError`] when it cannot be read, or is over [`SNAPSHOT_LIMIT`].
    ///
    /// # Cancel safety
    /// Safe: nothing in the workspace changes.
    pub async fn download(sandbox: &SandboxHandle) -> Result<Self, SandboxError> {
        let tar = sandbox.sandbox().download(sandbox.workspace(), SNAPSHOT_LIMIT).await?;
        Self::from_tar(&tar)
    }

    /// A digest of every path and what the snapshot knows of it (32 hex
    /// digits): equal for equal workspaces, however they were read. The setup
    /// cache labels its images with it, and a hit checks its own against it.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for (path, item) in self.files.iter() {
            h.update((path.len() as u64).to_le_bytes());
            h.update(path.as_bytes());
            match &**item {
                Item::Read(Entry::File { mode, bytes }) => {
                    h.update(b"f");
                    h.update((mode & 0o7777).to_le_bytes());
                    h.update((bytes.len() as u64).to_le_bytes());
                    h.update(bytes);
                }
                Item::Read(Entry::Symlink(target)) => {
                    h.update(b"l");
                    h.update((target.len() as u64).to_le_bytes());
                    h.update(target.as_bytes());
                }
                Item::Special { kind, .. } => h.update(format!("s{kind:?}").as_bytes()),
                Item::NotCaptured { size, .. } => {
                    h.update(b"n");
                    h.update(size.to_le_bytes());
                }
            }
        }
        h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
    }

    /// Whether the sandbox keeps a listing of this snapshot (a refresh then reads only changes).
    pub fn is_listed(&self) -> bool {
        self.listing.is_some()
    }

    /// `self` with the changes the helper reported.
    fn apply(&self, answer: helper::Answer<'_>, id: String, session: helper::Shared) -> Self {
        let listing = answer.stored.then_some(id);
        // Without the earlier listing, the changes are the whole workspace: start from nothing.
        let mut files = if answer.since { self.files.clone() } else { Arc::default() };
        if answer.changes.is_empty() {
            return Self { files, listing, session };
        }
        let map = Arc::make_mut(&mut files);
        for change in answer.changes {
            match change {
                helper::Changed::Gone { path } => {
                    map.remove(shown_name(path).as_str());
                }
                helper::Changed::New { path, version, content, .. } => {
                    let item = match (version.kind, content) {
                        (b'f', Some(bytes)) => {
                            Item::Read(Entry::File { mode: version.mode, bytes: bytes.to_vec() })
                        }
                        (b'l', Some(target)) => Item::Read(Entry::Symlink(shown_name(target))),
                        (b'f' | b'l', None) => Item::NotCaptured {
                            size: version.size,
                            version: format!(
                                "{}.{:09} {}.{:09}",
                                version.mtime.0, version.mtime.1, version.ctime.0, version.ctime.1
                            ),
                        },
                        (kind, _) => Item::Special { kind: special_kind(kind), mode: version.mode },
                    };
                    map.insert(shown_name(path).into(), Arc::new(item));
                }
            }
        }
        Self { files, listing, session }
    }

    /// Parses a `download` of the workspace directory.
    ///
    /// # Errors
    /// [`SandboxError::Archive`] for an unreadable or unsafe archive.
    pub fn from_tar(tar: &[u8]) -> Result<Self, SandboxError> {
        let files = crate::sandbox::archive::read_tree(tar, is_git_internal)?
            .into_iter()
            .map(|(p, e)| (p.into(), Arc::new(Item::Read(e))))
            .collect();
        Ok(Self { files: Arc::new(files), ..Self::default() })
    }

    /// A snapshot of these files (for tests and in-memory workspaces).
    pub fn from_files<I: IntoIterator<Item = (String, Vec<u8>)>>(files: I) -> Self {
        let files = files
            .into_iter()
            .map(|(p, b)| (p.into(), Arc::new(Item::Read(Entry::File { mode: 0o644, bytes: b }))))
            .collect();
        Self { files: Arc::new(files), ..Self::default() }
    }

    /// `self`, the snapshot the agent's diffs start from, moved past what
    /// someone else changed between `before` and `after` (a check: see
    /// `attempt/checks.rs`), so those changes are not the agent's. A path in
    /// `changed` takes `after`'s version, unless the agent had already changed
    /// it since `self` (then `self`'s version stays, and the agent's change
    /// still shows). A later change by the agent to a path moved here shows
    /// as a change from `after`'s version. The result has no listing of its
    /// own: diffs are read from the latest snapshot, never from it.
    pub fn absorb(&self, before: &Snapshot, after: &Snapshot, changed: &Diff) -> Snapshot {
        let mut files = self.files.clone();
        let map = Arc::make_mut(&mut files);
        for change in &changed.files {
            let path = change.path.as_str();
            if self.files.get(path) != before.files.get(path) {
                continue; // the agent's own change: keep it visible
            }
            match after.files.get(path) {
                Some(item) => {
                    map.insert(path.into(), item.clone());
                }
                None => {
                    map.remove(path);
                }
            }
        }
        Self { files, listing: None, session: self.session.clone() }
    }

    /// Whether `self` and `other` hold the same files (listings aside).
    pub fn same_files(&self, other: &Snapshot) -> bool {
        self.files == other.files
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the workspace is empty.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The file (mode and bytes) or symlink at `path`, if there is one and it
    /// was read: a fifo, socket or device, or a file too large to read, has none.
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        match self.files.get(path).map(Arc::as_ref) {
            Some(Item::Read(entry)) => Some(entry),
            _ => None,
        }
    }

    /// Whether `path` is in the workspace, read or not.
    pub fn contains(&self, path: &str) -> bool {
        self.files.contains_key(path)
    }

    /// Paths of the files, sorted.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(|p| &**p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(files: &[(&str, &[u8])]) -> Snapshot {
        Snapshot::from_files(files.iter().map(|(p, b)| (p.to_string(), b.to_vec())))
    }

    #[test]
    fn added_modified_deleted_and_binary() {
        let before =
            snap(&[("a.txt", b"one\ntwo\n"), ("gone.txt", b"x\n"), ("img.bin", b"\0\x01")]);
        let after = snap(&[("a.txt", b"one\n2\n"), ("new.txt", b"hi\n"), ("img.bin", b"\0\x02")]);
        let d = before.diff(&after);
        let summary: Vec<_> =
            d.files.iter().map(|f| (f.path.as_str(), f.change, f.binary)).collect();
        assert_eq!(
            summary,
            vec![
                ("a.txt", Change::Modified, false),
                ("gone.txt", Change::Deleted, false),
                ("img.bin", Change::Modified, true),
                ("new.txt", Change::Added, false),
            ]
        );
        assert!(d.patch.contains("-two\n+2\n"), "{}", d.patch);
        assert!(d.patch.contains("+++ b/new.txt"), "{}", d.patch);
        assert!(d.patch.contains("--- /dev/null"), "{}", d.patch);
        assert!(d.patch.contains("Binary files a/img.bin and b/img.bin differ"), "{}", d.patch);
    }

    #[test]
    fn huge_patches_are_truncated_visibly() {
        let big = "x\n".repeat(PATCH_LIMIT);
        let d = snap(&[]).diff(&snap(&[("big.txt", big.as_bytes())]));
        assert!(d.truncated);
        assert!(d.patch.len() < PATCH_LIMIT + 200);
        assert!(d.patch.contains("[patch truncated"));
    }

    fn version(kind: u8, size: u64, mtime: i64) -> helper::Version {
        helper::Version { kind, mode: 0o644, size, mtime: (mtime, 0), ctime: (mtime, 0) }
    }

    #[test]
    fn changes_the_helper_reports_become_the_next_snapshot() {
        let before = snap(&[("gone.txt", b"x\n"), ("keep.txt", b"k\n"), ("edit.txt", b"1\n")]);
        let reply = helper::answer(
            &[
                (b"gone.txt", None),
                (b"edit.txt", Some((version(b'f', 2, 2), Some(b"2\n")))),
                (b"pipe", Some((version(b'p', 0, 2), None))),
                (b"sock", Some((version(b's', 0, 2), None))),
                (b"huge.bin", Some((version(b'f', 2 << 30, 2), None))),
                (b"caf\xe9.txt", Some((version(b'f', 3, 2), Some(b"no\n")))),
                (b"link", Some((version(b'l', 11, 2), Some(b"/etc/passwd")))),
            ],
            true,
        );
        let after =
            before.apply(helper::parse(&reply).expect("parses"), "id".into(), Default::default());
        assert_eq!(after.listing.as_deref(), Some("id"));
        let d = before.diff(&after);
        let got: Vec<_> = d
            .files
            .iter()
            .map(|f| (f.path.as_str(), f.change, f.kind, f.size, f.not_captured))
            .collect();
        assert_eq!(
            got,
            vec![
                ("caf\\xe9.txt", Change::Added, FileKind::File, None, false),
                ("edit.txt", Change::Modified, FileKind::File, None, false),
                ("gone.txt", Change::Deleted, FileKind::File, None, false),
                ("huge.bin", Change::Added, FileKind::File, Some(2 << 30), true),
                ("link", Change::Added, FileKind::Symlink, None, false),
                ("pipe", Change::Added, FileKind::Fifo, None, false),
                ("sock", Change::Added, FileKind::Socket, None, false),
            ],
            "{}",
            d.patch
        );
        assert!(d.patch.contains("+2"), "{}", d.patch);
        assert!(d.patch.contains("2147483648 bytes"), "{}", d.patch);
        assert!(d.patch.contains("+-> /etc/passwd"), "{}", d.patch);
        assert_eq!(after.entry("keep.txt"), before.entry("keep.txt"));
    }

    #[test]
    fn without_the_earlier_listing_the_changes_are_the_whole_workspace() {
        let before = snap(&[("gone.txt", b"x\n"), ("kept.txt", b"k\n")]);
        // The helper says it had no earlier listing to compare with.
        let reply =
            helper::answer(&[(b"kept.txt", Some((version(b'f', 2, 1), Some(b"k\n"))))], false);
        let after =
            before.apply(helper::parse(&reply).expect("parses"), "id".into(), Default::default());
        assert_eq!(after.paths().collect::<Vec<_>>(), ["kept.txt"]);
        assert_eq!(before.diff(&after).paths(), ["gone.txt"]);
    }

    #[test]
    fn a_refresh_that_found_nothing_keeps_the_same_files() {
        let before = snap(&[("a", b"1")]);
        let after = before.apply(
            helper::parse(&helper::answer(&[], true)).unwrap(),
            "id".into(),
            Default::default(),
        );
        assert!(Arc::ptr_eq(&before.files, &after.files));
        assert!(before.diff(&after).is_empty());
    }

    #[test]
    fn a_checks_changes_are_absorbed_and_the_agents_stay_visible() {
        let baseline = snap(&[("src.py", b"v1\n"), ("notes.txt", b"n\n")]);
        // The agent edited src.py; then a check wrote a .pyc, touched notes.txt and src.py.
        let before = snap(&[("src.py", b"v2\n"), ("notes.txt", b"n\n")]);
        let after =
            snap(&[("src.py", b"v2 formatted\n"), ("notes.txt", b"n2\n"), ("x.pyc", b"\0")]);
        let check = before.diff(&after);
        let moved = baseline.absorb(&before, &after, &check);
        assert!(moved.listing.is_none());
        // What the check alone did is gone from the agent's diff; the agent's edit stays.
        assert_eq!(moved.diff(&after).paths(), ["src.py"]);
        // The agent later edits a file the check touched: that shows.
        let later =
            snap(&[("src.py", b"v2 formatted\n"), ("notes.txt", b"agent\n"), ("x.pyc", b"\0")]);
        assert_eq!(moved.diff(&later).paths(), ["notes.txt", "src.py"]);
        // A check deleting a file the agent never touched is not the agent's deletion.
        let gone = snap(&[("src.py", b"v2\n")]);
        let moved = baseline.absorb(&before, &gone, &before.diff(&gone));
        assert_eq!(moved.diff(&gone).paths(), ["src.py"]);
    }

    #[test]
    fn identical_snapshots_have_empty_diff() {
        let s = snap(&[("a", b"1")]);
        assert!(s.diff(&s.clone()).is_empty());
    }
}
