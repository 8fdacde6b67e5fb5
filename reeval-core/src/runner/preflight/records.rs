//! Records must be writable before any sandbox starts: a run that cannot
//! record is no run.

use super::Misses;
use crate::runner::Runner;

/// The free space a run needs in its record directory before it starts:
/// records of a few attempts and the report (a full disk mid-run is still
/// caught, and named, as each file is written).
const MIN_FREE_BYTES: u64 = 1024 * 1024;

/// The run's record directory can be written and has room.
pub(super) fn check(runner: &Runner, misses: &mut Misses) {
    let run_dir = runner.config.settings.record_dir.join(&runner.config.settings.run_id);
    if let Err(problem) = writable(&run_dir) {
        misses.run(format!(
            "failed to write records under {}: {problem}; choose another --record-dir (or REEVAL_RECORD_DIR, or record_dir in reeval.toml)",
            runner.config.settings.record_dir.display()
        ));
    } else if let Some(free) = free_bytes(&runner.config.settings.record_dir)
        && free < MIN_FREE_BYTES
    {
        misses.run(format!(
            "only {} free under {}; a run needs at least {} there for its records and report: free some space or choose another --record-dir",
            kib(free),
            runner.config.settings.record_dir.display(),
            kib(MIN_FREE_BYTES)
        ));
    }
}

/// Bytes an unprivileged process may still write on the filesystem of `dir`.
fn free_bytes(dir: &std::path::Path) -> Option<u64> {
    let stat = rustix::fs::statvfs(dir).ok()?;
    Some(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// `180 KiB`, `1024 KiB`.
fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}

/// Whether records can be written in `run_dir`: it is created, and a file written and removed there.
fn writable(run_dir: &std::path::Path) -> Result<(), std::io::Error> {
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = run_dir.join(format!(".reeval-probe-{}-{n}", std::process::id()));
    // The processes of one run under nextest share its directory, and each
    // removes it once empty (below): made again when another removed it
    // while this one made it or wrote in it.
    let raced = |e: &std::io::Error| {
        matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::AlreadyExists)
    };
    // Each removal needs another probe finished, so one of them always gets
    // on; a loaded machine may take some tries (2 s at most, from the 10th a
    // millisecond apart).
    let began = std::time::Instant::now();
    let mut tries = 0;
    loop {
        match std::fs::create_dir_all(run_dir).and_then(|()| std::fs::write(&probe, b"")) {
            Err(e) if raced(&e) && began.elapsed() < std::time::Duration::from_secs(2) => {
                tries += 1;
                if tries >= 10 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
            written => break written?,
        }
    }
    std::fs::remove_file(&probe)?;
    // Left empty until the first record, so a run that stops in preflight leaves no directory.
    let _ = std::fs::remove_dir(run_dir);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The processes of one run under nextest share its run directory, and
    /// each removes it when empty: another's probe must still be written.
    #[test]
    fn processes_probing_one_run_directory_at_once_all_find_it_writable() {
        let run_dir = std::env::temp_dir()
            .join(format!("reeval-probe-race-{}", std::process::id()))
            .join("run");
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let run_dir = run_dir.clone();
                std::thread::spawn(move || {
                    (0..300).filter_map(|_| writable(&run_dir).err()).collect::<Vec<_>>()
                })
            })
            .collect();
        let failed: Vec<_> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let _ = std::fs::remove_dir_all(run_dir.parent().unwrap());
        assert!(failed.is_empty(), "{} probes failed: {:?}", failed.len(), failed.first());
    }
}
