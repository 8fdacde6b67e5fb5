//! walk.rs's tests (reeval-core compiles walk.rs for them: they need Linux's /proc).

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::*;

/// A directory of its own under the system's temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("reeval-walk-{name}-{}", std::process::id()));
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
fn changes(ws: &Path, old: Option<&[u8]>, threads: usize) -> (BTreeMap<String, String>, Vec<u8>) {
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
    let dirs = Listing::parse(&again).unwrap().dirs().map(|(p, _)| p.to_vec()).collect::<Vec<_>>();
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
    std::fs::set_permissions(ws.join("d4/f4.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
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
