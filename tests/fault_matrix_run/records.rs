//! The record directory failing: unwritable at the start (a read-only
//! mount: preflight refuses, exit 2), filling up mid-run (a 1100 KiB tmpfs,
//! filled once the first record is there: preflight needs 1 MiB free), and
//! removed mid-run. A run that could not write a record is not a success
//! (exit 3 where it would have passed), the error names the path and the
//! attempt, what could be written is whole, and nothing is left.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::require_docker;
use crate::suite::{self, Suite};
use crate::{SECRET, common, faults};
use common::faults::Row;

/// A tmpfs mounted with `options` on a fresh directory, unmounted when dropped.
struct Mount(PathBuf);

impl Mount {
    fn tmpfs(tag: &str, options: &str) -> Mount {
        let dir = common::temp_dir(tag);
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(mounted, "mount a tmpfs ({options}) on {} (needs root)", dir.display());
        Mount(dir)
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Waits for the first trial's record of `records` in `suite`.
async fn first_record(suite: &mut Suite) {
    let began = Instant::now();
    while !suite.run_dir.join("records.shell.t1.try1.json").is_file() {
        assert!(!suite.ended(), "the suite ended before its first record");
        assert!(began.elapsed() < Duration::from_secs(120), "no first record");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_record_directory_is_unwritable_at_the_start() {
    require_docker!();
    let mount = Mount::tmpfs("fr-records-ro", "ro,size=4m");
    let run_id = format!("fr-records-ro-{}", std::process::id());
    let ended =
        Suite::spawn(&["records", "--exact"], &mount.0, &run_id).wait(Duration::from_secs(60));
    assert_eq!(ended.code, Some(2), "preflight refuses: {}{}", ended.stdout, ended.stderr);
    ended.assert_says_no(SECRET);
    let says = "failed preflight, nothing was started: failed to write records under <dir>: Read-only file system";
    let said =
        format!("failed to write records under {}: Read-only file system", mount.0.display());
    assert!(
        ended.stderr.contains("failed preflight, nothing was started")
            && ended.stderr.contains(&said),
        "{}",
        ended.stderr
    );
    let left = faults::leftovers(&run_id, None).await;
    assert_eq!(left, "nothing");
    faults::check_row(&Row {
        id: "records-1-unwritable",
        fault: "the record directory is unwritable (a read-only mount)",
        at: "start of the run (preflight)",
        outcome: "(run stops, exit 2)".into(),
        kind: "config".into(),
        says,
        left,
    });
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_record_disk_fills_up_mid_run() {
    require_docker!();
    let mount = Mount::tmpfs("fr-records-full", "size=1100k");
    let run_id = format!("fr-records-full-{}", std::process::id());
    let mut suite = Suite::spawn(
        &["records", "--exact", "--trials", "3", "--test-threads", "1"],
        &mount.0,
        &run_id,
    );
    first_record(&mut suite).await;
    {
        use std::io::Write;
        let mut f = std::fs::File::create(mount.0.join("filler")).unwrap();
        while f.write_all(&[0u8; 16 * 1024]).is_ok() {}
    }
    let run_dir = suite.run_dir.clone();
    let ended = suite.wait(Duration::from_secs(180));
    assert_eq!(ended.code, Some(3), "{}{}", ended.stdout, ended.stderr);
    ended.assert_says_no(SECRET);
    let lost = run_dir.join("records.shell.t3.try1.json");
    let says = "failed to write the record <path> of attempt records#3 [shell] try 1: No space left on device";
    assert!(
        ended.stderr.contains(&says.replace("<path>", &lost.display().to_string())),
        "{}",
        ended.stderr
    );
    let files = suite::assert_whole(&run_dir);
    assert!(files.contains(&"records.shell.t1.try1.json".to_string()), "kept: {files:?}");
    crate::assert_nowhere(&run_dir, SECRET);
    let left = faults::leftovers(&run_id, Some(&run_dir)).await;
    assert_eq!(left, "nothing");
    faults::check_row(&Row {
        id: "records-2-disk-full",
        fault: "the record disk fills up (a 1100 KiB tmpfs, filled after the first record)",
        at: "records of later attempts, summary, report",
        outcome: "pass (exit 3)".into(),
        kind: String::new(),
        says,
        left,
    });
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_record_directory_is_removed_mid_run() {
    require_docker!();
    let dir = common::temp_dir("fr-records-removed");
    let run_id = format!("fr-records-removed-{}", std::process::id());
    let mut suite = Suite::spawn(
        &["records", "--exact", "--trials", "3", "--test-threads", "1"],
        &dir,
        &run_id,
    );
    first_record(&mut suite).await;
    std::fs::remove_dir_all(&suite.run_dir).expect("remove the run directory");
    let run_dir = suite.run_dir.clone();
    let ended = suite.wait(Duration::from_secs(180));
    // Later records make the directory again; the first one is gone, and the run says so.
    assert_eq!(ended.code, Some(3), "a run that lost a record is no success: {}", ended.stderr);
    ended.assert_says_no(SECRET);
    let lost = run_dir.join("records.shell.t1.try1.json");
    let says = "failed to keep the record <path> of attempt records#1 [shell] try 1: it was removed during the run";
    assert!(
        ended.stderr.contains(&says.replace("<path>", &lost.display().to_string())),
        "{}",
        ended.stderr
    );
    let files = suite::assert_whole(&run_dir);
    assert!(files.contains(&"records.shell.t3.try1.json".to_string()), "kept: {files:?}");
    let summary = common::json(&run_dir.join("summary.json"));
    assert_eq!(summary["exitCode"], 3);
    let listed = summary["records"].to_string();
    assert!(!listed.contains("t1.try1"), "the summary lists only records that are there: {listed}");
    assert!(summary["writeErrors"].to_string().contains("removed during the run"), "{summary}");
    crate::assert_nowhere(&run_dir, SECRET);
    let left = faults::leftovers(&run_id, Some(&run_dir)).await;
    assert_eq!(left, "nothing");
    faults::check_row(&Row {
        id: "records-3-removed",
        fault: "the run's record directory is removed (after the first record)",
        at: "the records written before it",
        outcome: "pass (exit 3)".into(),
        kind: String::new(),
        says,
        left,
    });
}
