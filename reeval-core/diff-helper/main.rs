//! reeval-diff: lists a sandbox's workspace and compares it with the
//! listing of the last diff, in one process. std only, built static by
//! reeval-core's build script and copied into the sandbox by the first diff.
//!
//!   reeval-diff SINCE ID FILE_LIMIT BUDGET [THREADS]
//!   reeval-diff serve WORKSPACE FILE_LIMIT BUDGET [THREADS]
//!
//! Run as root. The first form answers once, in its working directory (the
//! workspace). `serve` stays, so that a diff costs no exec: it reads one
//! request per line on stdin (`SINCE ID`), answers each on stdout in
//! chunks (`u32` length, then that many bytes of the answer; an empty chunk
//! ends it), and exits when stdin closes. It also takes `tree LIMIT PATH`:
//! the whole tree at the absolute PATH (a CLI's config home, for the
//! record) answered as changes since nothing, directories included (kind
//! `d`), files of up to LIMIT bytes (LIMIT in all), no listing stored: the
//! runner builds its archive from that instead of asking the engine. A PATH
//! that is itself a link, or no directory, is refused (the engine archives
//! a link as the link). And it takes `run LENGTH`: a command started as an
//! engine's exec would start it, its output and exit code answered in frames
//! (see run.rs), so that an agent's turn needs no exec.
//!
//! Each answer walks the workspace (`.git` at the top left out; see walk.rs
//! for how it never follows a link), compares every directory with the
//! listing stored as SINCE (`none`: there is none), stores the new listing as
//! ID, and names only what changed, with the content of changed files and
//! symlinks of at most FILE_LIMIT bytes (BUDGET bytes in all). Listings live
//! in a directory made by root and writable by root only, so the agent
//! cannot change what a diff compares with: `/dev/shm/reeval-diff` (memory),
//! else (or when memory is full) `/var/lib/reeval-diff`. The newest few are kept.
//!
//! The answer on stdout (integers little-endian; a version as in listing.rs):
//!
//! ```text
//! answer  = "reeval-diff 1\n" change* end
//! change  = "+" version u32 path-length path content    new or different
//!         | "-" u32 path-length path                     gone
//! content = 0 (a fifo, socket or device) | 1 u64 length bytes | 2 (too large: not captured)
//! end     = "." u8 since (1: compared with SINCE; 0: none, the changes are the whole workspace)
//!           u8 stored (1: the new listing is stored as ID)
//! ```
//!
//! Exit status: 0 with an answer (serve: when stdin closed); 1 when the
//! workspace could not be read (serve: such an answer lacks its end);
//! 2 for bad arguments; 3 when there is no directory of root's own for listings.

mod listing;
mod run;
#[allow(dead_code, reason = "the helper decodes; reeval-core, which shares the module, encodes")]
mod run_request;
mod walk;

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use listing::Listing;
use walk::{Content, Found, Options, Walked};

/// Where listings live: memory first, then disk.
const STATE_DIRS: [&str; 2] = ["/dev/shm/reeval-diff", "/var/lib/reeval-diff"];
/// Listings kept besides the one compared with and the new one.
const KEEP: usize = 2;

/// How each answer is computed.
struct Settings<'a> {
    dirs: Vec<&'a Path>,
    file_limit: u64,
    budget: u64,
    threads: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: reeval-diff SINCE ID FILE_LIMIT BUDGET [THREADS] | serve WORKSPACE FILE_LIMIT BUDGET [THREADS]";
    let numbers = |limit: &str, budget: &str, rest: &[String]| -> Option<(u64, u64, usize)> {
        let threads = match rest {
            [] => 4,
            [t] => t.parse().ok()?,
            _ => return None,
        };
        Some((limit.parse().ok()?, budget.parse().ok()?, threads))
    };
    let (serve, first, second, (file_limit, budget, threads)) = match args.as_slice() {
        [mode, workspace, limit, budget, rest @ ..] if mode == "serve" => {
            match numbers(limit, budget, rest) {
                Some(n) => (true, workspace, "", n),
                None => return bad(usage),
            }
        }
        [since, id, limit, budget, rest @ ..] => match numbers(limit, budget, rest) {
            Some(n) => (false, since, id.as_str(), n),
            None => return bad(usage),
        },
        _ => return bad(usage),
    };
    let dirs: Vec<&Path> = STATE_DIRS.iter().map(Path::new).filter(|d| ensure_ours(d)).collect();
    if dirs.is_empty() {
        eprintln!("reeval-diff: failed to find a directory of root's own for listings ({STATE_DIRS:?})");
        return ExitCode::from(3);
    }
    let settings = Settings { dirs, file_limit, budget, threads };
    if serve {
        return match serve_requests(&settings, Path::new(first)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("reeval-diff: failed to serve: {e}");
                ExitCode::from(1)
            }
        };
    }
    if !is_listing_id(first) && first != "none" || !is_listing_id(second) {
        return bad(usage);
    }
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 20, stdout);
    let answered = File::open(".")
        .and_then(|top| answer(&settings, top, first, second, &mut out))
        .and_then(|()| out.flush());
    match answered {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("reeval-diff: failed to list the workspace: {e}");
            ExitCode::from(1)
        }
    }
}

fn bad(usage: &str) -> ExitCode {
    eprintln!("{usage}\n(listing ids are digits and dashes)");
    ExitCode::from(2)
}

/// Answers `SINCE ID` lines from stdin until it closes, each in chunks ending with an empty one.
fn serve_requests(settings: &Settings<'_>, workspace: &Path) -> io::Result<()> {
    let mut stdin = io::stdin().lock();
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end_matches('\n');
        // A command to start (run.rs): its own frames, not a listing's chunks.
        if let Some(length) = line.strip_prefix("run ") {
            let mut stdout = BufWriter::with_capacity(1 << 16, io::stdout().lock());
            run::run(length, &mut stdin, &mut stdout)?;
            stdout.write_all(&0u32.to_le_bytes())?;
            stdout.flush()?;
            continue;
        }
        let mut out = BufWriter::with_capacity(1 << 20, Chunked(io::stdout().lock()));
        let answered = match line.split_once(' ') {
            Some(("tree", rest)) => tree(settings, rest, &mut out),
            Some((since, id)) if (is_listing_id(since) || since == "none") && is_listing_id(id) => {
                File::open(workspace).and_then(|top| answer(settings, top, since, id, &mut out))
            }
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "a request is `SINCE ID`")),
        };
        if let Err(e) = answered {
            // The answer goes without its end: the caller reads it as failed.
            eprintln!("reeval-diff: failed to list the workspace: {e}");
        }
        let mut stdout = out.into_inner().map_err(|e| e.into_error())?.0;
        stdout.write_all(&0u32.to_le_bytes())?;
        stdout.flush()?;
    }
}

/// Frames what is written as chunks: a `u32` length, then that many bytes.
struct Chunked<W: Write>(W);

impl<W: Write> Write for Chunked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(u32::MAX as usize);
        if n == 0 {
            return Ok(0);
        }
        self.0.write_all(&(n as u32).to_le_bytes())?;
        self.0.write_all(&buf[..n])?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Listing ids are ours (`<pid>-<n>`): nothing that names another path.
fn is_listing_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_digit() || b == b'-')
}

/// Makes `dir` if it is missing; whether it is root's own directory that only root may write.
fn ensure_ours(dir: &Path) -> bool {
    let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o022 == 0,
        Err(_) => false,
    }
}

/// Compares the workspace `top` with the listing `since`, stores the new
/// one as `id`, and writes the answer to `out`.
fn answer(
    settings: &Settings<'_>,
    top: File,
    since: &str,
    id: &str,
    out: &mut impl Write,
) -> io::Result<()> {
    let dirs = &settings.dirs;
    let stored = (since != "none")
        .then(|| dirs.iter().find_map(|d| std::fs::read(d.join(since)).ok()))
        .flatten()
        .unwrap_or_default();
    let old = Listing::parse(&stored);
    out.write_all(b"reeval-diff 1\n")?;
    let mut listed = listing::MAGIC.to_vec();
    let mut visited = HashSet::new();
    let options = Options {
        old: old.as_ref(),
        threads: settings.threads,
        file_limit: settings.file_limit,
        budget: settings.budget,
        whole_tree: false,
    };
    walk_writing(top, &options, out, |walked: Walked| {
        listed.extend_from_slice(&walked.listing);
        visited.insert(walked.path);
    })?;
    // A directory that is gone (or no longer a directory) takes its entries with it.
    if let Some(old) = &old {
        for (path, dir) in old.dirs().filter(|(p, _)| !visited.contains(*p)) {
            for (name, _) in dir.entries() {
                write_found(out, &Found::Gone { path: walk::join(path, name) })?;
            }
        }
    }
    let stored_as = store(dirs, id, &listed);
    if let Some(dir) = stored_as {
        prune(dir, &[since, id]);
    }
    out.write_all(&[b'.', old.is_some() as u8, stored_as.is_some() as u8])
}

/// Answers `tree LIMIT PATH` (see the module's note): the whole tree at
/// PATH, compared with nothing and stored nowhere.
fn tree(settings: &Settings<'_>, request: &str, out: &mut impl Write) -> io::Result<()> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, "a tree request is `tree LIMIT PATH`");
    let (limit, path) = request.split_once(' ').ok_or_else(bad)?;
    let limit: u64 = limit.parse().map_err(|_| bad())?;
    if !path.starts_with('/') {
        return Err(bad());
    }
    let options =
        Options { old: None, threads: settings.threads, file_limit: limit, budget: limit, whole_tree: true };
    out.write_all(b"reeval-diff 1\n")?;
    walk_writing(walk::open_top(path)?, &options, out, |_| {})?;
    out.write_all(&[b'.', 0, 0])
}

/// Walks `top`, writing what each directory holds that changed as it is
/// walked, then handing the directory to `each`; the first write that fails
/// stops the writing (the walk ends on its own) and is the error.
fn walk_writing(
    top: File,
    options: &Options<'_>,
    out: &mut impl Write,
    mut each: impl FnMut(Walked),
) -> io::Result<()> {
    let mut written: io::Result<()> = Ok(());
    walk::walk(top, options, |walked: Walked| {
        for found in &walked.found {
            if written.is_ok() {
                written = write_found(out, found);
            }
        }
        each(walked);
    })?;
    written
}

fn write_found(out: &mut impl Write, found: &Found) -> io::Result<()> {
    let counted = |out: &mut dyn Write, bytes: &[u8]| {
        out.write_all(&(bytes.len() as u32).to_le_bytes())?;
        out.write_all(bytes)
    };
    match found {
        Found::Gone { path } => {
            out.write_all(b"-")?;
            counted(out, path)
        }
        Found::New { path, version, content } => {
            let mut head = Vec::with_capacity(1 + listing::Version::LEN);
            head.push(b'+');
            version.encode(&mut head);
            out.write_all(&head)?;
            counted(out, path)?;
            match content {
                Content::None => out.write_all(&[0]),
                Content::Read(bytes) => {
                    out.write_all(&[1])?;
                    out.write_all(&(bytes.len() as u64).to_le_bytes())?;
                    out.write_all(bytes)
                }
                Content::NotCaptured => out.write_all(&[2]),
            }
        }
    }
}

/// Stores the new listing as `id` in the first directory that takes it; where it went.
fn store<'a>(dirs: &[&'a Path], id: &str, listed: &[u8]) -> Option<&'a Path> {
    dirs.iter().copied().find(|dir| {
        let tmp = dir.join(format!("{id}.tmp"));
        let done = std::fs::write(&tmp, listed).and_then(|()| std::fs::rename(&tmp, dir.join(id)));
        if done.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        done.is_ok()
    })
}

/// Removes all but the newest listings of `dir` (and those in `keep`).
fn prune(dir: &Path, keep: &[&str]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut listings: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_str().is_some_and(|n| is_listing_id(n) && !keep.contains(&n)))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    listings.sort_by(|a, b| b.0.cmp(&a.0));
    for (_, path) in listings.into_iter().skip(KEEP) {
        let _ = std::fs::remove_file(path);
    }
}
