//! The listing the helper keeps between diffs, and the comparison of one
//! directory's entries with the entries it had then.
//!
//! A listing holds every directory of the workspace with its entries (each
//! entry that is not a directory), sorted by name bytes. Little-endian:
//!
//! ```text
//! listing   = "RDL1" directory*
//! directory = u32 path length, path (relative; empty for the top), u32 entry count, entry*
//! entry     = u32 name length, name, version
//! version   = u8 kind, u32 mode, u64 size, i64 mtime s, u32 mtime ns, i64 ctime s, u32 ctime ns
//! ```

use std::collections::HashMap;

/// The first bytes of a listing: its format.
pub const MAGIC: &[u8; 4] = b"RDL1";

/// What identifies one version of an entry: any field that differs is a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Version {
    /// `f` file, `l` symlink, `p` fifo, `s` socket, `b`/`c` device (as find's `%y`).
    pub kind: u8,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    pub size: u64,
    pub mtime: (i64, u32),
    pub ctime: (i64, u32),
}

impl Version {
    /// Its encoded length.
    pub const LEN: usize = 37;

    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(self.kind);
        out.extend_from_slice(&self.mode.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.mtime.0.to_le_bytes());
        out.extend_from_slice(&self.mtime.1.to_le_bytes());
        out.extend_from_slice(&self.ctime.0.to_le_bytes());
        out.extend_from_slice(&self.ctime.1.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Option<Version> {
        let b = b.get(..Self::LEN)?;
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        Some(Version {
            kind: b[0],
            mode: u32_at(1),
            size: u64_at(5),
            mtime: (u64_at(13) as i64, u32_at(21)),
            ctime: (u64_at(25) as i64, u32_at(33)),
        })
    }
}

/// Reads a `u32` length at `*at` and the bytes it counts, moving `*at` past them.
fn counted<'a>(bytes: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len = u32::from_le_bytes(bytes.get(*at..*at + 4)?.try_into().ok()?) as usize;
    let field = bytes.get(*at + 4..*at + 4 + len)?;
    *at += 4 + len;
    Some(field)
}

fn push_counted(out: &mut Vec<u8>, field: &[u8]) {
    out.extend_from_slice(&(field.len() as u32).to_le_bytes());
    out.extend_from_slice(field);
}

/// One directory of a stored listing: its entries, still encoded (checked when parsed).
#[derive(Debug, Clone, Copy)]
pub struct StoredDir<'a> {
    count: usize,
    entries: &'a [u8],
}

impl<'a> StoredDir<'a> {
    /// Its entries, sorted by name.
    pub fn entries(&self) -> impl Iterator<Item = (&'a [u8], Version)> + 'a {
        let (bytes, mut at) = (self.entries, 0);
        (0..self.count).map_while(move |_| {
            let name = counted(bytes, &mut at)?;
            let version = Version::decode(&bytes[at..])?;
            at += Version::LEN;
            Some((name, version))
        })
    }
}

/// A stored listing, by directory path.
#[derive(Debug, Default)]
pub struct Listing<'a> {
    dirs: HashMap<&'a [u8], StoredDir<'a>>,
}

impl<'a> Listing<'a> {
    /// Parses a stored listing; `None` when it is not one (then nothing is compared with it).
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        let mut at = MAGIC.len();
        if bytes.get(..at)? != MAGIC {
            return None;
        }
        let mut dirs = HashMap::new();
        while at < bytes.len() {
            let path = counted(bytes, &mut at)?;
            let count = u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
            at += 4;
            let start = at;
            for _ in 0..count {
                counted(bytes, &mut at)?;
                at += Version::LEN;
            }
            let entries = bytes.get(start..at)?;
            dirs.insert(path, StoredDir { count, entries });
        }
        Some(Listing { dirs })
    }

    /// The entries `path` had, if it was a directory then.
    pub fn dir(&self, path: &[u8]) -> Option<StoredDir<'a>> {
        self.dirs.get(path).copied()
    }

    /// Every directory, in no order.
    pub fn dirs(&self) -> impl Iterator<Item = (&'a [u8], StoredDir<'a>)> + '_ {
        self.dirs.iter().map(|(p, d)| (*p, *d))
    }
}

/// Appends one directory, with its entries sorted by name, to a listing being written.
pub fn push_dir(out: &mut Vec<u8>, path: &[u8], entries: &[(Vec<u8>, Version)]) {
    push_counted(out, path);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for (name, version) in entries {
        push_counted(out, name);
        version.encode(out);
    }
}

/// How a name of one directory changed since the stored listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change<'a> {
    /// New since then: the entry at `new[index]`.
    Added(usize),
    /// There then, and different now: the entry at `new[index]`.
    Modified(usize),
    /// Gone.
    Gone(&'a [u8]),
}

/// Compares a directory's entries now (`new`, sorted by name) with the ones
/// it had (`old`, sorted by name), calling `each` for every change in name order.
pub fn compare<'a>(
    old: impl Iterator<Item = (&'a [u8], Version)>,
    new: &[(Vec<u8>, Version)],
    mut each: impl FnMut(Change<'a>),
) {
    let mut old = old.peekable();
    let mut i = 0;
    loop {
        match (old.peek(), new.get(i)) {
            (None, None) => break,
            (Some(&(name, _)), None) => {
                each(Change::Gone(name));
                old.next();
            }
            (None, Some(_)) => {
                each(Change::Added(i));
                i += 1;
            }
            (Some(&(name, version)), Some((new_name, new_version))) => {
                match name.cmp(new_name.as_slice()) {
                    std::cmp::Ordering::Less => {
                        each(Change::Gone(name));
                        old.next();
                    }
                    std::cmp::Ordering::Greater => {
                        each(Change::Added(i));
                        i += 1;
                    }
                    std::cmp::Ordering::Equal => {
                        if version != *new_version {
                            each(Change::Modified(i));
                        }
                        old.next();
                        i += 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(kind: u8, size: u64, mtime: i64) -> Version {
        Version { kind, mode: 0o644, size, mtime: (mtime, 5), ctime: (mtime, 7) }
    }

    fn entries(list: &[(&[u8], Version)]) -> Vec<(Vec<u8>, Version)> {
        list.iter().map(|(n, v)| (n.to_vec(), *v)).collect()
    }

    #[test]
    fn versions_round_trip() {
        let version = Version {
            kind: b'l',
            mode: 0o4755,
            size: u64::MAX,
            mtime: (-3, 999_999_999),
            ctime: (i64::MAX, 1),
        };
        let mut out = Vec::new();
        version.encode(&mut out);
        assert_eq!(out.len(), Version::LEN);
        assert_eq!(Version::decode(&out), Some(version));
        assert_eq!(Version::decode(&out[..Version::LEN - 1]), None);
    }

    #[test]
    fn a_listing_reads_back_by_directory_with_names_byte_for_byte() {
        let top = entries(&[(b"a.txt", v(b'f', 1, 1)), (b"caf\xe9", v(b'f', 2, 1))]);
        let sub = entries(&[(b"pipe", v(b'p', 0, 2))]);
        let mut out = MAGIC.to_vec();
        push_dir(&mut out, b"", &top);
        push_dir(&mut out, b"src/\xff", &sub);
        push_dir(&mut out, b"empty", &[]);
        let listing = Listing::parse(&out).expect("parses");
        let read = |p: &[u8]| -> Vec<(Vec<u8>, Version)> {
            listing.dir(p).expect("listed").entries().map(|(n, v)| (n.to_vec(), v)).collect()
        };
        assert_eq!(read(b""), top);
        assert_eq!(read(b"src/\xff"), sub);
        assert_eq!(listing.dir(b"empty").map(|d| d.entries().count()), Some(0));
        assert!(listing.dir(b"src").is_none());
        assert_eq!(listing.dirs().count(), 3);
    }

    #[test]
    fn a_damaged_listing_is_not_one() {
        let mut out = MAGIC.to_vec();
        push_dir(&mut out, b"", &entries(&[(b"a", v(b'f', 1, 1))]));
        for cut in 1..out.len() {
            if cut == MAGIC.len() {
                continue; // a listing of no directories is a listing
            }
            assert!(Listing::parse(&out[..cut]).is_none(), "cut at {cut}");
        }
        assert!(Listing::parse(b"RDL0").is_none());
        assert!(Listing::parse(b"").is_none());
    }

    #[test]
    fn compare_names_what_was_added_changed_and_removed_in_name_order() {
        let old = entries(&[
            (b"gone", v(b'f', 1, 1)),
            (b"kept", v(b'f', 1, 1)),
            (b"longer", v(b'f', 1, 1)),
            (b"mode", v(b'f', 1, 1)),
            (b"touched", v(b'f', 1, 1)),
            (b"zz-gone", v(b'f', 1, 1)),
        ]);
        let mut mode = v(b'f', 1, 1);
        mode.mode = 0o755;
        let mut ctime = v(b'f', 1, 1);
        ctime.ctime.1 += 1;
        let new = entries(&[
            (b"added", v(b'f', 1, 2)),
            (b"kept", v(b'f', 1, 1)),
            (b"longer", v(b'f', 2, 1)),
            (b"mode", mode),
            (b"now-a-link", v(b'l', 4, 2)),
            (b"touched", ctime),
        ]);
        let mut got = Vec::new();
        compare(old.iter().map(|(n, v)| (n.as_slice(), *v)), &new, |c| {
            got.push(match c {
                Change::Added(i) => format!("+{}", String::from_utf8_lossy(&new[i].0)),
                Change::Modified(i) => format!("~{}", String::from_utf8_lossy(&new[i].0)),
                Change::Gone(n) => format!("-{}", String::from_utf8_lossy(n)),
            })
        });
        assert_eq!(
            got,
            ["+added", "-gone", "~longer", "~mode", "+now-a-link", "~touched", "-zz-gone"]
        );
    }

    #[test]
    fn compare_with_nothing_before_or_after() {
        let some = entries(&[(b"a", v(b'f', 1, 1)), (b"b", v(b's', 0, 1))]);
        let mut added = Vec::new();
        compare(std::iter::empty(), &some, |c| added.push(c));
        assert_eq!(added, [Change::Added(0), Change::Added(1)]);
        let mut gone = Vec::new();
        compare(some.iter().map(|(n, v)| (n.as_slice(), *v)), &[], |c| gone.push(c));
        assert_eq!(gone, [Change::Gone(b"a"), Change::Gone(b"b")]);
        let mut none = Vec::new();
        compare(some.iter().map(|(n, v)| (n.as_slice(), *v)), &some, |c| none.push(c));
        assert!(none.is_empty());
    }
}
