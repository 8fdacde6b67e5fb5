//! The diff between two snapshots: which paths changed, how, and a unified
//! patch of them (via `similar`), bounded by [`PATCH_LIMIT`].

use std::sync::Arc;

use similar::TextDiff;

use super::{Item, Snapshot};
use crate::sandbox::archive::Entry;
use reeval_record::diff::{Change, Diff, FileChange, FileKind, PATCH_LIMIT};

impl Snapshot {
    /// The diff from `self` (earlier) to `later`.
    pub fn diff(&self, later: &Snapshot) -> Diff {
        let mut diff = Diff::default();
        if Arc::ptr_eq(&self.files, &later.files) {
            return diff;
        }
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
                path: path.to_string(),
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
