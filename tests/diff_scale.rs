//! Diffs at repository scale, against the real Docker engine: a
//! 100,000-file workspace with a name that is not UTF-8, a symlink pointing
//! out of the workspace, a fifo, a socket and a 2 GiB sparse file. The
//! change lists are exact, no link is followed, and the file too large to
//! read is named with its size instead of failing the attempt. And an agent
//! that swaps directories for symlinks while diffs run never makes one read
//! outside the workspace.

mod common;

use reeval::prelude::*;
use reeval::{Change, Eval, Outcome};

/// 100,000 small files in 100 directories, made by the setup (python3 is in the base image).
const MAKE_100K: &str = "python3 -c \"import os\nfor d in range(100):\n  os.makedirs(f'src/d{d}', exist_ok=True)\n  for i in range(1000):\n    open(f'src/d{d}/f{i}.txt', 'w').write(f'{d} {i}\\n')\"";

/// The turn: two edits, a delete, and one of every awkward kind of entry.
const TURN: &str = r#"set -e
echo edited >> src/d3/f7.txt
echo edited >> src/d99/f999.txt
rm src/d50/f500.txt
printf 'latin-1 name\n' > "$(printf 'caf\351.txt')"
ln -s /etc/passwd escape
mkfifo pipe
python3 -c "import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock')"
truncate -s 2G sparse.bin
"#;

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_100k_file_workspace_diffs_exactly_with_odd_names_links_fifos_sockets_and_a_huge_file() {
    require_docker!();
    let eval = Eval::new("diff_100k", |c| {
        Box::pin(async move {
            let turn = c.send(TURN).await?;
            expect(turn.status == reeval::TurnStatus::Completed).to_equal(true)?;
            // A turn that changes nothing has an empty diff, at this size too.
            let quiet = c.send("true").await?;
            expect(quiet.diff.files.len()).to_equal(0)?;
            Ok(())
        })
    })
    .environment(|| {
        // The diff is under test here, not the setup cache (its commit of 100,000 files is slow).
        Environment::new()
            .setup_with_timeout(MAKE_100K, std::time::Duration::from_secs(600))
            .setup_cache(false)
    });
    let report = common::runner("diff100k").run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    // The 2 GiB file does not fail the attempt against the agent.
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let snapshot =
        r.phases.iter().find(|p| p.phase.as_str() == "snapshot").expect("snapshot phase");
    assert_eq!(snapshot.detail, "100000 files");

    for p in &r.phases {
        eprintln!("{} {} ms: {}", p.phase.as_str(), p.duration_ms, p.detail);
    }
    eprintln!("diffMs {}", r.timings.diff_ms);
    let diff = &r.turns[0].diff;
    let got: Vec<(&str, Change, &str)> =
        diff.files.iter().map(|f| (f.path.as_str(), f.change, kind(f))).collect();
    use Change::*;
    assert_eq!(
        got,
        [
            ("caf\\xe9.txt", Added, "file"),
            ("escape", Added, "symlink"),
            ("pipe", Added, "fifo"),
            ("sock", Added, "socket"),
            ("sparse.bin", Added, "file"),
            ("src/d3/f7.txt", Modified, "file"),
            ("src/d50/f500.txt", Deleted, "file"),
            ("src/d99/f999.txt", Modified, "file"),
        ],
        "{}",
        diff.patch
    );
    let sparse = diff.files.iter().find(|f| f.path == "sparse.bin").unwrap();
    assert!(sparse.not_captured);
    assert_eq!(sparse.size, Some(2 << 30));
    assert!(diff.patch.contains("2147483648 bytes"), "{}", diff.patch);
    // The link is recorded as a link: its target's content never appears.
    assert!(diff.patch.contains("+-> /etc/passwd"), "{}", diff.patch);
    assert!(!diff.patch.contains("root:x:0:0"), "the link was followed:\n{}", diff.patch);
    assert!(diff.patch.contains("+latin-1 name"), "{}", diff.patch);
    assert!(diff.patch.contains("+edited"), "{}", diff.patch);
    // The final collection sees the same changes.
    assert!(r.workspace_collected);
    assert_eq!(r.final_diff.as_ref().unwrap().paths(), diff.paths());
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

fn kind(f: &reeval::FileChange) -> &'static str {
    match f.kind {
        reeval::FileKind::File => "file",
        reeval::FileKind::Symlink => "symlink",
        reeval::FileKind::Fifo => "fifo",
        reeval::FileKind::Socket => "socket",
        reeval::FileKind::Device => "device",
    }
}

/// Swaps `d` and `d/sub` for symlinks to /etc and back, as fast as it can,
/// in the background, until /tmp/stop-swaps appears.
const SWAPPER: &str = r#"setsid sh -c 'while [ ! -e /tmp/stop-swaps ]; do
  mv d d.x && ln -s /etc d && rm d && mv d.x d
  mv d/sub d/sub.x && ln -s /etc d/sub && rm d/sub && mv d/sub.x d/sub
done; touch /tmp/swaps-stopped' >/dev/null 2>&1 < /dev/null &"#;

/// Stops the swapper, waits for it, and replaces the directory with a link to /etc.
const SETTLE: &str = "touch /tmp/stop-swaps; while [ ! -e /tmp/swaps-stopped ]; do sleep 0.1; done; \
                      rm -rf d d.x; ln -s /etc d";

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_agent_swapping_directories_for_links_while_diffs_run_never_makes_them_read_outside() {
    require_docker!();
    let eval = Eval::new("diff_swaps", |c| {
        Box::pin(async move {
            c.send("mkdir -p d/sub && for i in $(seq 50); do echo inside > d/sub/f$i; done; ln -s /etc planted").await?;
            c.send(SWAPPER).await?;
            // Diffs while the agent's process swaps: each one's walk races it.
            for _ in 0..30 {
                let diff = c.diff().await?;
                for f in &diff.files {
                    let outside = ["passwd", "shadow", "hostname", "os-release"];
                    expect(outside.iter().any(|o| f.path.contains(o))).to_equal(false)?;
                }
                expect(diff.patch.contains("root:x:0:0")).to_equal(false)?;
            }
            // Settled: the directory replaced by a link is a link, its files are gone.
            c.send(SETTLE).await?;
            Ok(())
        })
    });
    let report = common::runner("diffswaps").run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let first = &r.turns[0].diff;
    assert_eq!(first.files.len(), 51, "{:?}", first.paths());
    let planted = first.files.iter().find(|f| f.path == "planted").expect("the planted link");
    assert_eq!(planted.kind, reeval::FileKind::Symlink);
    assert!(first.patch.contains("+-> /etc"), "{}", first.patch);
    let last = r.final_diff.as_ref().unwrap();
    assert_eq!(last.paths(), ["d", "planted"], "{}", last.patch);
    assert!(last.files.iter().all(|f| f.kind == reeval::FileKind::Symlink));
    assert!(!last.patch.contains("root:x:0:0"), "{}", last.patch);
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}
