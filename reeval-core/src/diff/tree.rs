//! A directory of the sandbox archived by the diff helper's session instead
//! of the engine: the session already runs as root in the sandbox, so
//! reading a CLI's config home for the record is a question to it (a few
//! ms), not the engine's archive call (40 to 100 ms on two cores, each of
//! which mounts the container's file system and its mounts again). The
//! helper reads the tree as it reads a workspace, never following a link;
//! the archive is built here, laid out as the engine's. Whatever it cannot
//! carry (a file past the limit, a socket or device, a failed session) is
//! left to the engine.

use std::sync::Arc;

use bytes::Bytes;

use super::helper::{self, Changed, Session};
use crate::sandbox::archive::{TreeEntry, TreeKind, tar_of_entries};

/// The session's [`TreeArchiver`](crate::sandbox::TreeArchiver).
pub(super) struct SessionArchiver(pub(super) Arc<Session>);

#[async_trait::async_trait]
impl crate::sandbox::TreeArchiver for SessionArchiver {
    async fn archive(&self, path: &str, limit: u64) -> Option<Bytes> {
        let top = path.trim_end_matches('/').rsplit('/').next().filter(|t| !t.is_empty())?;
        let answer = self.0.tree(path, limit).await?;
        let tar = tar_of_answer(top, &answer)?;
        (tar.len() as u64 <= limit).then_some(tar)
    }
}

/// The archive of a `tree` answer under `top`; `None` when the answer is
/// not whole or holds what an archive from here cannot carry.
fn tar_of_answer(top: &str, answer: &[u8]) -> Option<Bytes> {
    let parsed = helper::parse(answer)?;
    let mut entries = Vec::with_capacity(parsed.changes.len());
    for change in parsed.changes {
        let Changed::New { path, version, content, not_captured: false } = change else {
            return None;
        };
        let kind = match (version.kind, content) {
            (b'd', _) => TreeKind::Dir,
            (b'f', Some(bytes)) => TreeKind::File(bytes.to_vec()),
            (b'l', Some(target)) => TreeKind::Symlink(target.to_vec()),
            (b'p', _) => TreeKind::Fifo,
            // A socket, a device, or a file whose bytes did not come.
            _ => return None,
        };
        entries.push(TreeEntry {
            path: path.to_vec(),
            mode: version.mode,
            mtime: version.mtime.0,
            kind,
        });
    }
    tar_of_entries(top, &entries).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use helper::Version;

    fn version(kind: u8, mode: u32, size: u64) -> Version {
        Version { kind, mode, size, mtime: (1_700_000_000, 0), ctime: (0, 0) }
    }

    /// Read back with the tar crate: each entry's path, type, mode, mtime and bytes.
    fn entries(tar: &[u8]) -> Vec<(String, tar::EntryType, u32, u64, Vec<u8>)> {
        use std::io::Read;
        let mut archive = tar::Archive::new(tar);
        archive
            .entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let h = e.header().clone();
                let mut bytes = Vec::new();
                e.read_to_end(&mut bytes).unwrap();
                if h.entry_type() == tar::EntryType::Symlink {
                    bytes = h.link_name_bytes().unwrap().to_vec();
                }
                let path = String::from_utf8(h.path_bytes().to_vec()).unwrap();
                (path, h.entry_type(), h.mode().unwrap(), h.mtime().unwrap(), bytes)
            })
            .collect()
    }

    #[test]
    fn an_answer_becomes_the_engines_layout_parents_first() {
        let answer = helper::answer(
            &[
                (b"sessions/a.jsonl", Some((version(b'f', 0o644, 3), Some(&b"{}\n"[..])))),
                (b"sessions", Some((version(b'd', 0o700, 0), None))),
                (b"link", Some((version(b'l', 0o777, 6), Some(&b"/etc/x"[..])))),
                (b"pipe", Some((version(b'p', 0o600, 0), None))),
            ],
            false,
        );
        let tar = tar_of_answer("codex", &answer).expect("an archive");
        let got = entries(&tar);
        let names: Vec<&str> = got.iter().map(|e| e.0.as_str()).collect();
        // (The engine's names a directory with a trailing `/`; the tar crate does not.)
        assert_eq!(
            names,
            ["codex", "codex/link", "codex/pipe", "codex/sessions", "codex/sessions/a.jsonl"]
        );
        assert_eq!(got[0].1, tar::EntryType::Directory);
        assert_eq!(got[1].1, tar::EntryType::Symlink);
        assert_eq!(got[1].4, b"/etc/x");
        assert_eq!(got[2].1, tar::EntryType::Fifo);
        assert_eq!((got[3].1, got[3].2), (tar::EntryType::Directory, 0o700));
        assert_eq!(
            got[4],
            (
                "codex/sessions/a.jsonl".into(),
                tar::EntryType::Regular,
                0o644,
                1_700_000_000,
                b"{}\n".to_vec()
            )
        );
    }

    #[test]
    fn what_an_archive_from_here_cannot_carry_is_left_to_the_engine() {
        // A file too large to have come, a device, an answer cut short, a gone entry.
        let large = helper::answer(&[(b"big", Some((version(b'f', 0o644, 9), None)))], false);
        assert!(tar_of_answer("h", &large).is_none());
        let device = helper::answer(&[(b"null", Some((version(b'c', 0o666, 0), None)))], false);
        assert!(tar_of_answer("h", &device).is_none());
        let whole =
            helper::answer(&[(b"f", Some((version(b'f', 0o644, 1), Some(&b"x"[..]))))], false);
        assert!(tar_of_answer("h", &whole).is_some());
        assert!(tar_of_answer("h", &whole[..whole.len() - 1]).is_none());
        let gone = helper::answer(&[(b"f", None)], false);
        assert!(tar_of_answer("h", &gone).is_none());
    }
}
