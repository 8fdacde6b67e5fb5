//! The attempt lifecycle against the real Docker engine: phase order, lazy
//! start, teardown after error, panic and timeout, the budget, aborted turns.

mod common;

use std::time::Duration;

use reeval::prelude::*;
use reeval::{Eval, FailKind, Outcome, Record, TurnStatus};

fn phases(r: &Record) -> Vec<&str> {
    r.phases.iter().map(|p| p.phase.as_str()).collect()
}

async fn run_one(tag: &str, eval: Eval) -> (Record, String, std::path::PathBuf) {
    let report = common::runner(tag).run(vec![eval]).await.expect("preflight passes");
    assert_eq!(report.records.len(), 1, "one attempt");
    let record = report.records[0].clone();
    // Every attempt leaves its record on disk, whatever happened.
    let path = report.run_dir.join(record.file_name());
    let on_disk: Record = serde_json::from_slice(&std::fs::read(&path).expect("record written"))
        .expect("record parses");
    assert_eq!(on_disk.outcome, record.outcome);
    // And, when it sent a turn, its trajectory as ATIF that Harbor's schema accepts.
    if !record.turns.is_empty() {
        common::atif::check_record(&report.run_dir, &record);
    }
    (record, report.run_id, report.run_dir)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn phases_run_in_the_documented_order() {
    require_docker!();
    let eval = Eval::new("phase_order", |c| {
        Box::pin(async move {
            c.send("echo hi > out.txt").await?;
            expect(c.exec("cat out.txt").await?).to_succeed()?;
            Ok(())
        })
    })
    .environment(|| Environment::new().file("given.txt", "x").rules("be nice").setup("echo setup"));
    let (r, run_id, _) = run_one("order", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(
        phases(&r),
        [
            "preflight",
            "image",
            "container",
            "env",
            "files",
            "setup",
            "snapshot",
            "harness",
            "turn",
            "check",
            "teardown"
        ]
    );
    // Start times never go backwards.
    assert!(r.phases.windows(2).all(|w| w[0].start_ms <= w[1].start_ms), "{:?}", r.phases);
    assert!(r.workspace_collected);
    let final_diff = r.final_diff.as_ref().expect("final diff");
    assert_eq!(final_diff.paths(), ["out.txt"], "files, rules and setup are in the snapshot");
    assert_eq!(r.turns[0].diff.paths(), ["out.txt"]);
    assert_eq!(r.checks[0].stdout_tail, "hi\n");
    assert!(r.artifacts.contains(&"setup.log".to_string()));
    assert_eq!(common::containers_of_run(&run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_eval_that_never_touches_the_sandbox_starts_no_container() {
    require_docker!();
    let eval = Eval::new("lazy", |_c| Box::pin(async move { expect(2 + 2).to_equal(4) }));
    let (r, run_id, _) = run_one("lazy", eval).await;
    assert_eq!(r.outcome, Outcome::Pass);
    assert_eq!(phases(&r), ["preflight", "teardown"]);
    assert!(r.container.is_none() && r.image.is_none());
    assert!(!r.workspace_collected);
    assert_eq!(common::containers_of_run(&run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn teardown_runs_after_error_panic_and_timeout() {
    require_docker!();
    let error = Eval::new("errors", |c| {
        Box::pin(async move {
            c.exec("touch made.txt").await?;
            Err(reeval::Error::other("the eval's own error"))
        })
    });
    let panic = Eval::new("panics", |c| {
        Box::pin(async move {
            c.exec("touch made.txt").await?;
            panic!("boom at line 42");
        })
    });
    let timeout = Eval::new("times_out", |c| {
        Box::pin(async move {
            c.exec("sleep 30").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(2));
    let report =
        common::runner("teardown").run(vec![error, panic, timeout]).await.expect("preflight");
    let by_name = |n: &str| report.records.iter().find(|r| r.eval == n).expect("record");

    let r = by_name("errors");
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Assertion));
    assert!(r.message.as_deref().unwrap().contains("the eval's own error"));

    let r = by_name("panics");
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Assertion));
    let message = r.message.as_deref().unwrap();
    assert!(
        message.contains("panicked at tests/lifecycle.rs:")
            && message.contains(": boom at line 42"),
        "the panic and where it happened: {message}"
    );
    assert!(
        r.location.as_deref().unwrap_or("").starts_with("tests/lifecycle.rs:"),
        "{:?}",
        r.location
    );

    let r = by_name("times_out");
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout));
    assert!(r.timings.total_ms < 20_000, "the 30 s check was cut short: {:?}", r.timings);

    for r in &report.records {
        assert_eq!(phases(r).last(), Some(&"teardown"), "{}", r.eval);
        assert!(r.container.is_some(), "{} started a sandbox", r.eval);
        assert!(r.workspace_collected, "{}: final workspace collected", r.eval);
        assert!(report.run_dir.join(r.file_name()).exists());
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "no container is left behind");
    let summary: reeval::Summary =
        serde_json::from_slice(&std::fs::read(report.run_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary.exit_code, 1);
    assert_eq!(summary.failed.get("assertion"), Some(&2));
    assert_eq!(summary.failed.get("timeout"), Some(&1));
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn setup_does_not_spend_the_budget() {
    require_docker!();
    let eval = Eval::new("slow_setup", |c| {
        Box::pin(async move { expect(c.exec("cat ready").await?).to_succeed() })
    })
    // A 4 s budget leaves room for the one exec on a loaded remote engine (SSH).
    .timeout(Duration::from_secs(4))
    .environment(|| Environment::new().setup("sleep 5 && touch ready"));
    let (r, _, _) = run_one("budget", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let setup = r.phases.iter().find(|p| p.phase == "setup").expect("setup phase");
    assert!(setup.duration_ms >= 5000, "setup took longer than the whole budget: {setup:?}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_turn_that_overruns_the_budget_is_aborted_and_its_work_kept() {
    require_docker!();
    let eval = Eval::new("overrun", |c| {
        Box::pin(async move {
            c.send("echo partial > progress.txt; sleep 60; echo never > done.txt").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(2));
    let (r, run_id, _) = run_one("abort", eval).await;
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout), "{:?}", r.message);
    assert_eq!(r.turns.len(), 1);
    assert_eq!(r.turns[0].status, TurnStatus::Aborted);
    assert_eq!(r.turns[0].diff.paths(), ["progress.txt"]);
    // Stopped within the 3-second grace, not after the 60-second sleep.
    assert!(r.turns[0].duration_ms < 8_000, "{}", r.turns[0].duration_ms);
    assert!(r.workspace_collected);
    assert_eq!(r.final_diff.as_ref().unwrap().paths(), ["progress.txt"]);
    assert_eq!(common::containers_of_run(&run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_per_turn_limit_ends_only_that_turn() {
    require_docker!();
    let eval = Eval::new("turn_limit", |c| {
        Box::pin(async move {
            let turn = c
                .send_with(
                    "echo half > half.txt; sleep 60",
                    TurnOptions { timeout: Some(Duration::from_secs(1)), ..Default::default() },
                )
                .await?;
            expect(format!("{:?}", turn.status)).to_equal("TimedOut")?;
            // The eval goes on and grades the partial work.
            expect(c.read_file("half.txt").await?).to_equal("half\n")?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(30));
    let (r, _, _) = run_one("turnlimit", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(r.turns[0].status, TurnStatus::TimedOut);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_turns_own_variables_reach_its_agent_and_nothing_after() {
    require_docker!();
    let eval = Eval::new("turn_env", |c| {
        Box::pin(async move {
            let options = TurnOptions {
                env: vec![("TURN_ONLY".into(), "for the agent".into())],
                ..Default::default()
            };
            c.send_with("echo \"$TURN_ONLY\" > seen.txt", options).await?;
            expect(c.read_file("seen.txt").await?).to_equal("for the agent\n")?;
            // Neither a check nor the next turn has it.
            expect(c.exec("echo \"${TURN_ONLY:-unset}\"").await?.stdout)
                .to_equal("unset\n".to_string())?;
            c.send("echo \"${TURN_ONLY:-unset}\" > later.txt").await?;
            expect(c.read_file("later.txt").await?).to_equal("unset\n")?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60));
    let (r, _, _) = run_one("turnenv", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn exec_captures_bounded_output_and_files_round_trip() {
    require_docker!();
    let eval = Eval::new("io", |c| {
        Box::pin(async move {
            // 64 MiB of output: kept as head and tail, counted in full.
            let out = c.exec("head -c 67108864 /dev/zero | tr '\\0' 'a'; echo; echo END").await?;
            expect(out.stdout_bytes).to_equal(67_108_864 + 5)?;
            expect(out.stdout.len() < 2 * 1024 * 1024).to_equal(true)?;
            expect(out.stdout.trim_end().ends_with("END")).to_equal(true)?;
            let argv = c.exec(Command::new("printf").arg("%s|").arg("a b").arg("$(x);`y`")).await?;
            expect(argv.stdout).to_equal("a b|$(x);`y`|")?;
            let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
            c.write_file("deep/dir/blob.bin", &bytes).await?;
            expect(c.read_bytes("deep/dir/blob.bin").await? == bytes).to_equal(true)?;
            let missing = c.read_file("nope.txt").await;
            expect(missing.is_err()).to_equal(true)?;
            Ok(())
        })
    });
    let (r, _, _) = run_one("io", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let diff = r.final_diff.unwrap();
    assert_eq!(diff.paths(), ["deep/dir/blob.bin"]);
    assert!(diff.files[0].binary);
    assert!(
        diff.patch.contains("Binary files /dev/null and b/deep/dir/blob.bin differ"),
        "{}",
        diff.patch
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_turn_printing_megabytes_keeps_the_end_of_its_output_as_final_message() {
    require_docker!();
    // 5 MB, then a last line: the turn's stdout is streamed and kept as head
    // and tail (128 KiB), and the shell harness's final message is its last 64 KiB.
    let eval = Eval::new("chatty", |c| {
        Box::pin(async move {
            let turn = c
                .send("head -c 5000000 /dev/zero | tr '\\0' 'a'; echo; seq 1 20000 | tail -n 3000; echo LAST")
                .await?;
            let message = turn.final_message.unwrap_or_default();
            expect(message.ends_with("19999\n20000\nLAST")).to_equal(true)?;
            expect(message.len() <= 64 * 1024 && message.len() > 14_000).to_equal(true)?;
            expect(message.contains("\n17001\n17002\n")).to_equal(true)?;
            Ok(())
        })
    });
    let (r, _, _) = run_one("chatty", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_failed_matcher_names_the_eval_the_line_and_the_output() {
    require_docker!();
    let eval = Eval::new("matcher_message", |c| {
        Box::pin(async move {
            expect(c.exec("echo some-output; echo oops >&2; exit 3").await?).to_succeed()
        })
    });
    let (r, _, _) = run_one("matcher", eval).await;
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Assertion));
    let m = r.message.unwrap();
    for needle in [
        "in eval matcher_message",
        "expected: exit code 0",
        "actual: exit code 3",
        "| some-output",
        "| oops",
        "tests/lifecycle.rs:",
    ] {
        assert!(m.contains(needle), "{needle:?} missing from:\n{m}");
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn incremental_diffs_see_every_kind_of_change() {
    require_docker!();
    let eval = Eval::new("diff_kinds", |c| {
        Box::pin(async move {
            c.send("echo changed >> keep.txt; rm gone.txt; chmod 755 run.sh; ln -s keep.txt link; mkdir -p a/b && echo new > a/b/new.txt").await?;
            // A second turn that changes nothing has an empty diff.
            let quiet = c.send("true").await?;
            expect(quiet.diff.files.len()).to_equal(0)?;
            c.send("echo again >> a/b/new.txt").await?;
            Ok(())
        })
    })
    .environment(|| Environment::new().file("keep.txt", "kept\n").file("gone.txt", "bye\n").file("run.sh", "echo run\n").setup("git init -q && git add -A"));
    let (r, _, _) = run_one("diffkinds", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let first: Vec<(&str, reeval::Change)> =
        r.turns[0].diff.files.iter().map(|f| (f.path.as_str(), f.change)).collect();
    use reeval::Change::*;
    assert_eq!(
        first,
        [
            ("a/b/new.txt", Added),
            ("gone.txt", Deleted),
            ("keep.txt", Modified),
            ("link", Added),
            ("run.sh", Modified)
        ]
    );
    assert!(
        r.turns[0].diff.patch.contains("old mode 644\nnew mode 755"),
        "{}",
        r.turns[0].diff.patch
    );
    assert_eq!(r.turns[2].diff.paths(), ["a/b/new.txt"]);
    assert!(r.turns[2].diff.patch.contains("+again"), "{}", r.turns[2].diff.patch);
    let all = r.final_diff.unwrap();
    assert_eq!(
        all.paths(),
        ["a/b/new.txt", "gone.txt", "keep.txt", "link", "run.sh"],
        ".git internals never appear"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_background_process_holding_stdout_does_not_hang_the_turn() {
    require_docker!();
    let eval = Eval::new("background", |c| {
        Box::pin(async move {
            // The agent starts a server and forgets to redirect its output.
            c.send("sleep 300 & echo started > started.txt").await?;
            expect(c.exec("sleep 200 & echo checked").await?.stdout).to_equal("checked\n")?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(60));
    let (r, _, _) = run_one("background", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert!(
        r.turns[0].duration_ms < 5_000,
        "the turn ended when its script did: {} ms",
        r.turns[0].duration_ms
    );
    assert!(r.checks[0].duration_ms < 5_000, "{:?}", r.checks[0]);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_deadline_covers_setup_and_a_cancelled_start_still_spends_no_budget() {
    require_docker!();
    let wedged =
        Eval::new("wedged_setup", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .deadline(Duration::from_secs(2))
            .environment(|| Environment::new().setup("sleep 30"));
    let cancelled = Eval::new("cancelled_start", |c| {
        Box::pin(async move {
            // The eval's own timeout cuts the lazy start short...
            let _ = tokio::time::timeout(Duration::from_millis(30), c.exec("true")).await;
            // ...and the budget runs again afterwards: this sleep must time out.
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(1));
    let report = common::runner("deadline").run(vec![wedged, cancelled]).await.unwrap();
    let find = |n: &str| report.records.iter().find(|r| r.eval == n).unwrap();
    let r = find("wedged_setup");
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    assert!(r.message.as_deref().unwrap().contains("deadline"), "{:?}", r.message);
    assert!(r.timings.total_ms < 15_000, "{:?}", r.timings);
    let r = find("cancelled_start");
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout), "{:?}", r.message);
    assert!(
        r.timings.total_ms < 8_000,
        "no turn was running, so no 15-second grace: {:?}",
        r.timings
    );
    assert_eq!(
        common::containers_of_run(&report.run_id).await,
        0,
        "the half-started sandbox was destroyed"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_harness_that_cannot_start_is_an_infra_error() {
    require_docker!();
    let eval =
        Eval::new("no_bash", |c| Box::pin(async move { c.send("echo never").await.map(|_| ()) }))
            .environment(|| {
                Environment::new()
                    .image(Image::install("reeval/base:latest", ["rm -f /bin/bash /usr/bin/bash"]))
            });
    let (r, _, _) = run_one("nobash", eval).await;
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    assert!(
        r.message.as_deref().unwrap().contains("failed before its first event"),
        "{:?}",
        r.message
    );
    assert_eq!(r.turns[0].status, TurnStatus::Failed);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn what_a_check_writes_is_the_checks_not_the_agents() {
    require_docker!();
    let eval = Eval::new("check_writes", |c| {
        Box::pin(async move {
            c.send("echo 'X = 1' > mod.py").await?;
            // Importing the agent's module writes __pycache__ into the workspace.
            expect(c.exec("python3 -c 'import mod' && echo checked >> notes.txt").await?)
                .to_succeed()?;
            expect(c.diff().await?.paths()).to_equal(vec!["mod.py"])?;
            // The agent then edits a file the check also changed: that is the agent's.
            c.send("echo agent >> notes.txt").await?;
            expect(c.diff().await?.paths()).to_equal(vec!["mod.py", "notes.txt"])?;
            Ok(())
        })
    })
    .environment(|| Environment::new().file("notes.txt", "given\n"));
    let (r, _, _) = run_one("checkwrites", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let checked = r.checks[0].changes.as_ref().expect("the check's changes are on its record");
    assert!(
        checked.paths().iter().any(|p| p.starts_with("__pycache__/mod.") && p.ends_with(".pyc")),
        "{:?}",
        checked.paths()
    );
    assert!(checked.paths().contains(&"notes.txt"), "{:?}", checked.paths());
    assert!(checked.patch.contains("+checked"), "{}", checked.patch);
    assert_eq!(r.turns[1].diff.paths(), ["notes.txt"], "the check's writes are in no turn");
    assert!(r.turns[1].diff.patch.contains(" checked\n+agent"), "{}", r.turns[1].diff.patch);
    assert_eq!(r.final_diff.as_ref().expect("final diff").paths(), ["mod.py", "notes.txt"]);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_replay_has_the_agents_commits_as_commits() {
    require_docker!();
    const ID: &str = "-c user.email=e@example.com -c user.name=n";
    let eval = |harness: String| {
        Eval::new("commits", |c| {
            Box::pin(async move {
                c.send(format!("echo 2 >> a.txt && git {ID} commit -qam 'agent: second line'"))
                    .await?;
                let log = c.exec("git log --format=%s").await?;
                expect(log.stdout).to_equal("agent: second line\nsetup\n".to_string())?;
                expect(c.exec("git status --porcelain").await?.stdout).to_equal(String::new())?;
                Ok(())
            })
        })
        .environment(|| {
            Environment::new()
                .file("a.txt", "1\n")
                .setup(format!("git init -q -b main && git add -A && git {ID} commit -qm setup"))
        })
        .harness(harness)
    };
    let (recorded, _, recorded_run) = run_one("commits", eval("shell".into())).await;
    assert_eq!(recorded.outcome, Outcome::Pass, "{:?}", recorded.message);
    assert!(recorded.artifacts.contains(&"workspace/commits.bundle".to_string()));
    let manifest = common::json(
        &recorded_run.join(recorded.artifacts_dir_name()).join("workspace/manifest.json"),
    );
    assert_eq!(manifest["commits"]["count"], 1, "{manifest}");
    assert_eq!(manifest["commits"]["head"], "refs/heads/main", "{manifest}");

    // The replay (what regrade runs): the setup's commit is made again (another
    // hash), the agent's files are applied, and its commit is there as a commit.
    let (replayed, _, _) =
        run_one("commits-replay", eval(format!("replay:{}", recorded_run.display()))).await;
    assert_eq!(replayed.outcome, Outcome::Pass, "{:?}", replayed.message);
    assert_eq!(replayed.checks[0].stdout_tail, recorded.checks[0].stdout_tail);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_default_image_has_what_the_readmes_first_eval_checks_with() {
    require_docker!();
    // The README's first eval, its prompt done by a script: the default image has
    // pytest, `python` and pip, and pytest's caches are not the agent's diff.
    let eval = Eval::new("readme_first_eval", |c| {
        Box::pin(async move {
            c.send("printf 'def sub(a, b):\\n    return a - b\\n' >> app.py && printf 'from app import sub\\n\\n\\ndef test_sub():\\n    assert sub(3, 1) == 2\\n' > test_app.py").await?;
            expect(c.exec("python3 -m pytest -q").await?).to_succeed()?;
            expect(c.exec("python -m pytest -q && pip --version").await?).to_succeed()?;
            expect(c.read_file("app.py").await?).to_contain("def sub")?;
            expect(c.diff().await?.paths().join(",")).to_equal("app.py,test_app.py".to_string())?;
            Ok(())
        })
    })
    .environment(|| {
        Environment::new()
            .file("app.py", "def add(a, b):\n    return a + b\n")
            .rules("Keep functions small and tested.")
            .setup("python3 -c 'import app'")
    });
    let (r, _, _) = run_one("readme-first", eval).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
}
