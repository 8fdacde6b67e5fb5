//! Workspace snapshots and the diffs between them (unified, via `similar`).
//!
//! A snapshot's listing stays inside the sandbox: each refresh lists the
//! workspace there (type, mode, size, mtime, ctime and raw name of every
//! entry, `.git` left out), compares it with the listing of the snapshot it
//! starts from, and sends back only what changed, with an archive of the
//! changed files in the same exec. So a diff of a 100,000-file workspace
//! with five changes moves five files. Names are kept byte for byte (a name
//! that is not UTF-8 is shown with `\xNN` escapes), symlinks are recorded
//! as links and never followed, fifos, sockets and devices are named by
//! kind, and a file over [`FILE_LIMIT`] is named with its size and marked
//! not captured instead of being read.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use similar::TextDiff;

use crate::exec::Command;
use crate::sandbox::archive::Entry;
use crate::sandbox::{SandboxError, SandboxHandle};

/// The most a snapshot reads in one go; files past it are marked not captured.
pub const SNAPSHOT_LIMIT: u64 = 2 << 30;
/// A file larger than this is named with its size and marked not captured
/// (the listing helper compares decimal digits: fewer than 9, so under 100 MB).
pub const FILE_LIMIT: u64 = 99_999_999;
/// A patch longer than this is cut, with a notice.
pub const PATCH_LIMIT: usize = 512 * 1024;

/// Lists the workspace (`$2` names the new listing), compares it with the
/// listing `$1`, prints a header (the changed records' length, and 1 when
/// `$1` was there to compare with, else 0), the records (`comm`'s two
/// columns: old versions, then tab-prefixed new versions) and a tar of the
/// new versions of changed files and symlinks under [`FILE_LIMIT`]. GNU find,
/// sort, comm, sed and tar. The listings live in a directory made by root and
/// readable by root only, so the agent cannot change what a diff compares
/// against: in `/dev/shm` (memory, faster to write), else in `/var/lib`;
/// the script exits 3 when neither is root's own. The newest four listings
/// and the one compared with are kept.
const COMPARE: &str = r#"set -e
ours() { [ -O "$1" ] && [ ! -L "$1" ]; }
d=/dev/shm/reeval-diff
mkdir -p -m 700 "$d" 2>/dev/null || true
if ! ours "$d"; then
  d=/var/lib/reeval-diff
  mkdir -p -m 700 "$d"
  ours "$d" || exit 3
fi
old="$d/$1"; since=1
[ -f "$old" ] || { old=/dev/null; since=0; }
find . -path ./.git -prune -o ! -type d -printf '%y %m %s %T@ %C@ %P\0' | LC_ALL=C sort -z > "$d/$2"
LC_ALL=C comm -z -3 "$old" "$d/$2" > "$d/$2.changes"
echo "$(wc -c < "$d/$2.changes") $since"
cat "$d/$2.changes"
status=0
LC_ALL=C sed -zn 's|^\t[fl] [0-7]* [0-9]\{1,8\} [^ ]* [^ ]* |./|p' "$d/$2.changes" \
  | tar --null --verbatim-files-from --no-recursion --hard-dereference -cf - -T - || status=$?
rm -f "$d/$2.changes"
ls -t "$d" | tail -n +5 | while read -r f; do [ "$f" = "$1" ] || rm -f "$d/$f"; done
exit $status"#;

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

/// The workspace's files at one moment, `.git` internals excluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Shared entries: a refresh reuses unchanged files without copying them.
    files: BTreeMap<String, Arc<Item>>,
    /// The id of this snapshot's listing inside the sandbox, when it has one.
    listing: Option<String>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// New since the earlier snapshot.
    Added,
    /// Content, mode or link target changed.
    Modified,
    /// Gone since the earlier snapshot.
    Deleted,
}

/// What kind of entry a changed path is (its later version, or the earlier one when deleted).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// A regular file.
    #[default]
    File,
    /// A symbolic link (recorded, never followed).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A unix socket.
    Socket,
    /// A block or character device.
    Device,
}

impl FileKind {
    fn is_file(&self) -> bool {
        *self == FileKind::File
    }

    fn name(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Symlink => "symlink",
            FileKind::Fifo => "fifo",
            FileKind::Socket => "socket",
            FileKind::Device => "device",
        }
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FileChange {
    /// Path relative to the workspace (bytes that are not UTF-8 as `\xNN`).
    pub path: String,
    /// How it changed.
    pub change: Change,
    /// Whether either side is binary (named in the patch, not dumped).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// What it is, when not a regular file.
    #[serde(default, skip_serializing_if = "FileKind::is_file")]
    pub kind: FileKind,
    /// Its size in bytes, when it was too large to capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Whether its content was left out for its size (see [`FILE_LIMIT`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_captured: bool,
}

/// A workspace diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    /// Changed files, sorted by path.
    pub files: Vec<FileChange>,
    /// The unified diff.
    pub patch: String,
    /// Whether the patch was cut at [`PATCH_LIMIT`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Paths of changed files.
    pub fn paths(&self) -> Vec<&str> {
        self.files.iter().map(|f| f.path.as_str()).collect()
    }
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

/// One record of the in-sandbox listing: `<type> <mode> <size> <mtime> <ctime> <name>`.
struct Listed<'a> {
    kind: u8,
    mode: u32,
    size: u64,
    /// Everything but the name: what identifies a version.
    version: &'a [u8],
    name: &'a [u8],
}

fn parse_record(record: &[u8]) -> Option<Listed<'_>> {
    let mut spaces = record.iter().enumerate().filter(|(_, b)| **b == b' ').map(|(i, _)| i);
    let (a, b, c, _, e) =
        (spaces.next()?, spaces.next()?, spaces.next()?, spaces.next()?, spaces.next()?);
    let field = |from: usize, to: usize| std::str::from_utf8(&record[from..to]).ok();
    Some(Listed {
        kind: *record.first()?,
        mode: u32::from_str_radix(field(a + 1, b)?, 8).ok()?,
        size: field(b + 1, c)?.parse().ok()?,
        version: &record[..e],
        name: &record[e + 1..],
    })
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
    /// listing and the comparison run inside the sandbox, and one exec
    /// returns the changed records with an archive of the changed files.
    /// Falls back to reading everything when the image lacks GNU find,
    /// sort, comm, sed and tar, or the sandbox's user is not root.
    ///
    /// # Errors
    /// [`SandboxError`] when the workspace cannot be read.
    ///
    /// # Cancel safety
    /// Safe: nothing in the workspace changes (the listing is written outside it).
    pub async fn refresh(&self, sandbox: &SandboxHandle) -> Result<Self, SandboxError> {
        let id = format!("{}-{}", std::process::id(), NEXT_LISTING.fetch_add(1, Ordering::Relaxed));
        let since = self.listing.clone().unwrap_or_else(|| "none".into());
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let cmd = Command::new("sh").args(["-c", COMPARE, "sh", &since, &id]).user("0");
        let out = sandbox.exec_streaming(cmd, tx).await?;
        let mut bytes = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            bytes.extend_from_slice(&chunk);
        }
        // tar exits 1 when a file changed or vanished while it was read; worse means no usable answer.
        let parsed = (out.exit_code <= 1).then(|| self.apply(&bytes, id)).flatten();
        match parsed {
            Some(snapshot) => snapshot,
            None => {
                let tar = sandbox.sandbox().download(sandbox.workspace(), SNAPSHOT_LIMIT).await?;
                Self::from_tar(&tar)
            }
        }
    }

    /// `self` with the changes the compare script reported; `None` when its answer does not parse.
    fn apply(&self, answer: &[u8], id: String) -> Option<Result<Self, SandboxError>> {
        let newline = answer.iter().position(|b| *b == b'\n')?;
        let header = std::str::from_utf8(&answer[..newline]).ok()?;
        let (len, since) = header.trim().split_once(' ')?;
        let len: usize = len.trim().parse().ok()?;
        // Without the earlier listing, the records are the whole workspace: start from nothing.
        let files_before = match since {
            "1" => self.files.clone(),
            _ => BTreeMap::new(),
        };
        let records = answer.get(newline + 1..newline + 1 + len)?;
        let tar = &answer[newline + 1 + len..];
        // Old versions (gone or replaced) first, then the new versions.
        let mut gone = BTreeSet::new();
        let mut new: BTreeMap<String, Listed<'_>> = BTreeMap::new();
        for record in records.split(|b| *b == 0).filter(|r| !r.is_empty()) {
            let (is_new, record) = match record.strip_prefix(b"\t") {
                Some(r) => (true, r),
                None => (false, record),
            };
            let listed = parse_record(record)?;
            let name = shown_name(listed.name);
            if is_new {
                new.insert(name, listed);
            } else {
                gone.insert(name);
            }
        }
        let mut files = files_before;
        for name in gone.iter().filter(|n| !new.contains_key(*n)) {
            files.remove(name);
        }
        // What the archive should hold: the small files and links the script read.
        let mut wanted = BTreeSet::new();
        let mut budget = SNAPSHOT_LIMIT;
        for (name, listed) in &new {
            let item = match listed.kind {
                b'f' | b'l' if listed.size <= FILE_LIMIT && listed.size <= budget => {
                    budget -= listed.size;
                    wanted.insert(name.clone());
                    files.remove(name);
                    continue;
                }
                b'f' | b'l' => Item::NotCaptured {
                    size: listed.size,
                    version: String::from_utf8_lossy(listed.version).into_owned(),
                },
                kind => Item::Special { kind: special_kind(kind), mode: listed.mode },
            };
            files.insert(name.clone(), Arc::new(item));
        }
        // A file listed but gone before tar read it is gone: it is not in the archive.
        if let Err(e) = read_archive(tar, &wanted, &mut files) {
            return Some(Err(e));
        }
        Some(Ok(Self { files, listing: Some(id) }))
    }

    /// Parses a `download` of the workspace directory.
    ///
    /// # Errors
    /// [`SandboxError::Archive`] for an unreadable or unsafe archive.
    pub fn from_tar(tar: &[u8]) -> Result<Self, SandboxError> {
        let files = crate::sandbox::archive::read_tree(tar, is_git_internal)?
            .into_iter()
            .map(|(p, e)| (p, Arc::new(Item::Read(e))))
            .collect();
        Ok(Self { files, listing: None })
    }

    /// A snapshot of these files (for tests and in-memory workspaces).
    pub fn from_files<I: IntoIterator<Item = (String, Vec<u8>)>>(files: I) -> Self {
        Self {
            files: files
                .into_iter()
                .map(|(p, b)| (p, Arc::new(Item::Read(Entry::File { mode: 0o644, bytes: b }))))
                .collect(),
            listing: None,
        }
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
        self.files.keys().map(String::as_str)
    }

    /// The diff from `self` (earlier) to `later`.
    pub fn diff(&self, later: &Snapshot) -> Diff {
        let mut diff = Diff::default();
        let mut patch = String::new();
        // Both maps are sorted: walk them together.
        let mut old = self.files.iter().peekable();
        let mut new = later.files.iter().peekable();
        loop {
            let (path, before, after) = match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some((p, a)), None) => {
                    let r = (*p, Some(*a), None);
                    old.next();
                    r
                }
                (None, Some((p, b))) => {
                    let r = (*p, None, Some(*b));
                    new.next();
                    r
                }
                (Some((p, a)), Some((q, b))) => match p.cmp(q) {
                    std::cmp::Ordering::Less => {
                        let r = (*p, Some(*a), None);
                        old.next();
                        r
                    }
                    std::cmp::Ordering::Greater => {
                        let r = (*q, None, Some(*b));
                        new.next();
                        r
                    }
                    std::cmp::Ordering::Equal => {
                        let r = (*p, Some(*a), Some(*b));
                        old.next();
                        new.next();
                        r
                    }
                },
            };
            let change = match (before, after) {
                (None, Some(_)) => Change::Added,
                (Some(_), None) => Change::Deleted,
                (Some(a), Some(b)) if a != b => Change::Modified,
                _ => continue,
            };
            let (before, after) = (before.map(|a| a.as_ref()), after.map(|b| b.as_ref()));
            let binary = before.is_some_and(is_binary_item) || after.is_some_and(is_binary_item);
            if patch.len() < PATCH_LIMIT {
                patch.push_str(&item_patch(path, before, after, binary));
            } else {
                diff.truncated = true;
            }
            let shown = after.or(before).expect("one side exists");
            let size = match shown {
                Item::NotCaptured { size, .. } => Some(*size),
                _ => None,
            };
            diff.files.push(FileChange {
                path: path.clone(),
                change,
                binary,
                kind: kind_of(shown),
                size,
                not_captured: size.is_some(),
            });
        }
        if patch.len() > PATCH_LIMIT {
            let mut cut = PATCH_LIMIT;
            while !patch.is_char_boundary(cut) {
                cut -= 1;
            }
            patch.truncate(cut);
            diff.truncated = true;
        }
        if diff.truncated {
            patch.push_str(&format!(
                "\n[patch truncated at {PATCH_LIMIT} bytes; {} files changed in all]\n",
                diff.files.len()
            ));
        }
        diff.patch = patch;
        diff
    }
}

/// Reads the archive of changed files into `files`: only the names asked
/// for, each once; symlinks as links. Untrusted: parsed, never unpacked.
fn read_archive(
    tar: &[u8],
    wanted: &BTreeSet<String>,
    files: &mut BTreeMap<String, Arc<Item>>,
) -> Result<(), SandboxError> {
    let bad = |e: std::io::Error| SandboxError::Archive { message: e.to_string() };
    if wanted.is_empty() {
        return Ok(());
    }
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let raw = entry.path_bytes();
        let name = shown_name(raw.strip_prefix(b"./").unwrap_or(&raw));
        if !wanted.contains(&name) || files.contains_key(&name) {
            continue;
        }
        let header = entry.header();
        let kind = header.entry_type();
        let item = if kind.is_file() {
            let mode = header.mode().unwrap_or(0o644);
            let size = entry.size();
            if size > FILE_LIMIT {
                // It grew after it was listed.
                Item::NotCaptured { size, version: String::new() }
            } else {
                let mut bytes = Vec::with_capacity(size as usize);
                entry.read_to_end(&mut bytes).map_err(bad)?;
                Item::Read(Entry::File { mode, bytes })
            }
        } else if kind.is_symlink() {
            let target = entry.link_name_bytes().map(|t| shown_name(&t)).unwrap_or_default();
            Item::Read(Entry::Symlink(target))
        } else {
            continue;
        };
        files.insert(name, Arc::new(item));
    }
    Ok(())
}

fn read_entry(item: Option<&Item>) -> Option<&Entry> {
    match item {
        Some(Item::Read(e)) => Some(e),
        _ => None,
    }
}

fn kind_of(item: &Item) -> FileKind {
    match item {
        Item::Read(Entry::File { .. }) | Item::NotCaptured { .. } => FileKind::File,
        Item::Read(Entry::Symlink(_)) => FileKind::Symlink,
        Item::Special { kind, .. } => *kind,
    }
}

fn is_binary_item(item: &Item) -> bool {
    match item {
        Item::Read(entry) => is_binary(entry),
        Item::NotCaptured { .. } => true,
        Item::Special { .. } => false,
    }
}

fn item_patch(path: &str, old: Option<&Item>, new: Option<&Item>, binary: bool) -> String {
    let described = |i: &Item| match i {
        Item::NotCaptured { size, .. } => {
            format!("file too large to capture ({size} bytes), not captured")
        }
        Item::Special { kind, mode } => format!("{} (mode {mode:o})", kind.name()),
        Item::Read(Entry::Symlink(t)) => format!("symlink -> {t}"),
        Item::Read(Entry::File { .. }) => "file".into(),
    };
    match (old, new) {
        (Some(Item::Read(_)) | None, Some(Item::Read(_)) | None) => {
            file_patch(path, read_entry(old), read_entry(new), binary)
        }
        _ => {
            let mut out = format!("diff --git a/{path} b/{path}\n");
            if let Some(o) = old {
                out.push_str(&format!("old: {}\n", described(o)));
            }
            if let Some(n) = new {
                out.push_str(&format!("new: {}\n", described(n)));
            }
            out
        }
    }
}

fn is_binary(entry: &Entry) -> bool {
    match entry {
        Entry::File { bytes, .. } => {
            bytes[..bytes.len().min(8000)].contains(&0) || std::str::from_utf8(bytes).is_err()
        }
        Entry::Symlink(_) => false,
    }
}

fn text_of(entry: Option<&Entry>) -> String {
    match entry {
        None => String::new(),
        Some(Entry::File { bytes, .. }) => String::from_utf8_lossy(bytes).into_owned(),
        Some(Entry::Symlink(target)) => format!("-> {target}\n"),
    }
}

fn file_patch(path: &str, old: Option<&Entry>, new: Option<&Entry>, binary: bool) -> String {
    let a = if old.is_some() { format!("a/{path}") } else { "/dev/null".into() };
    let b = if new.is_some() { format!("b/{path}") } else { "/dev/null".into() };
    let mut out = format!("diff --git a/{path} b/{path}\n");
    if let (Some(Entry::File { mode: m1, .. }), Some(Entry::File { mode: m2, .. })) = (old, new)
        && m1 != m2
    {
        out.push_str(&format!("old mode {:o}\nnew mode {:o}\n", m1, m2));
    }
    if binary {
        out.push_str(&format!("Binary files {a} and {b} differ\n"));
        return out;
    }
    let (old_text, new_text) = (text_of(old), text_of(new));
    if old_text == new_text {
        return out;
    }
    let text = TextDiff::from_lines(&old_text, &new_text);
    out.push_str(&text.unified_diff().context_radius(3).header(&a, &b).to_string());
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
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

    /// What the compare script prints: the records' length, the records, a tar.
    fn answer(records: &[&[u8]], files: &[(&[u8], &[u8])]) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        let records: Vec<u8> = records.iter().flat_map(|r| r.iter().copied().chain([0])).collect();
        let mut b = tar::Builder::new(Vec::new());
        for (name, bytes) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(bytes.len() as u64);
            h.set_mode(0o644);
            h.set_entry_type(tar::EntryType::Regular);
            b.append_data(&mut h, std::ffi::OsStr::from_bytes(name), *bytes).unwrap();
        }
        let tar = b.into_inner().unwrap();
        let mut out = format!("{} 1\n", records.len()).into_bytes();
        out.extend(records);
        out.extend(tar);
        out
    }

    #[test]
    fn changed_records_become_the_next_snapshot() {
        let before = snap(&[("gone.txt", b"x\n"), ("keep.txt", b"k\n"), ("edit.txt", b"1\n")]);
        let reply = answer(
            &[
                b"f 644 2 1.0 1.0 gone.txt",
                b"f 644 2 1.0 1.0 edit.txt",
                b"\tf 644 2 2.0 2.0 edit.txt",
                b"\tp 644 0 2.0 2.0 pipe",
                b"\ts 755 0 2.0 2.0 sock",
                b"\tf 644 2147483648 2.0 2.0 huge.bin",
                b"\tf 644 3 2.0 2.0 caf\xe9.txt",
            ],
            &[(b"edit.txt", b"2\n"), (b"caf\xe9.txt", b"no\n")],
        );
        let after = before.apply(&reply, "id".into()).expect("parses").expect("reads");
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
                ("pipe", Change::Added, FileKind::Fifo, None, false),
                ("sock", Change::Added, FileKind::Socket, None, false),
            ],
            "{}",
            d.patch
        );
        assert!(d.patch.contains("+2"), "{}", d.patch);
        assert!(d.patch.contains("2147483648 bytes"), "{}", d.patch);
        assert!(before.apply(b"garbage", "id".into()).is_none(), "an unreadable answer falls back");
    }

    #[test]
    fn without_the_earlier_listing_the_records_are_the_whole_workspace() {
        let before = snap(&[("gone.txt", b"x\n"), ("kept.txt", b"k\n")]);
        let mut reply = answer(&[b"\tf 644 2 2.0 2.0 kept.txt"], &[(b"kept.txt", b"k\n")]);
        // The script says it had no earlier listing to compare with.
        let header_end = reply.iter().position(|b| *b == b'\n').unwrap();
        reply[header_end - 1] = b'0';
        let after = before.apply(&reply, "id".into()).expect("parses").expect("reads");
        assert_eq!(after.paths().collect::<Vec<_>>(), ["kept.txt"]);
        assert_eq!(before.diff(&after).paths(), ["gone.txt"]);
    }

    #[test]
    fn identical_snapshots_have_empty_diff() {
        let s = snap(&[("a", b"1")]);
        assert!(s.diff(&s.clone()).is_empty());
    }
}
