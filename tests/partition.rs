//! A run split across machines, as a CI matrix splits it: a real suite
//! binary (`examples/matrix_suite.rs`: 7 cells of the `shell` harness whose
//! outcomes are known, in real containers) run as `--partition hash:K/3` and
//! `count:K/3`, each part its own run; every cell lands in exactly one part,
//! `reeval report` over the three run directories gives the figures of one
//! unpartitioned run, and `reeval compare` reads the parts as one arm.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// Two trials of the matrix's 6 cells and `flaky_but_ok`'s 1: 14 attempts,
/// passes, fails and an infra error (not retried).
const SELECTION: [&str; 4] = ["--tag", "matrix,threshold", "--trials", "2"];

fn suite() -> Command {
    let mut cmd = Command::new(common::example_bin("matrix_suite"));
    cmd.env_remove("NEXTEST_RUN_ID")
        .env_remove("NEXTEST")
        .env_remove("REEVAL_FIXTURE_QUICK")
        .env_remove("REEVAL_TAGS")
        .env_remove("REEVAL_PARTITION")
        .env("REEVAL_RETRIES", "0")
        .args(["--test-threads", "4"]);
    cmd
}

/// The suite with [`SELECTION`].
fn selected() -> Command {
    let mut cmd = suite();
    cmd.args(SELECTION);
    cmd
}

/// The `reeval` tool, built beside the examples (`cargo test --workspace` builds it).
fn reeval() -> Command {
    let examples = common::example_bin("matrix_suite");
    let bin = examples.parent().and_then(Path::parent).expect("target profile dir").join("reeval");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p reeval-cli`",
        bin.display()
    );
    Command::new(bin)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("run");
    eprintln!("stdout:\n{}\nstderr:\n{}", text(&out.stdout), text(&out.stderr));
    out
}

/// The one run directory under `record_dir`.
fn the_run(record_dir: &Path) -> PathBuf {
    let runs: Vec<PathBuf> =
        std::fs::read_dir(record_dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(runs.len(), 1, "one run in {}: {runs:?}", record_dir.display());
    runs[0].clone()
}

/// Each record of `run` as (eval, harness, trial, try).
fn attempts(run: &Path) -> Vec<(String, String, u64, u64)> {
    common::records(run)
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            (s("eval"), s("harness"), r["trial"].as_u64().unwrap(), r["try"].as_u64().unwrap())
        })
        .collect()
}

/// What must be the same of a run split and the run whole.
fn figures(summary: &Value) -> Value {
    let keys = ["cells", "passed", "failed", "infra", "exitCode", "exitReason"];
    keys.iter().map(|k| (k.to_string(), summary[k].clone())).collect()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_parts_of_a_partitioned_run_add_up_to_the_whole_run() {
    require_docker!();
    let root = common::temp_dir("partition");
    let whole_dir = root.join("whole");
    let out = run(selected().arg("--record-dir").arg(&whole_dir));
    assert_eq!(out.status.code(), Some(1), "cells fail");
    let whole = the_run(&whole_dir);
    let whole_summary = common::json(&whole.join("summary.json"));
    let mut whole_attempts = attempts(&whole);
    whole_attempts.sort();
    assert_eq!(whole_attempts.len(), 14);
    assert_eq!(whole_summary["cells"].as_array().unwrap().len(), 7);
    assert!(whole_summary.get("partition").is_none());

    for kind in ["hash", "count"] {
        let record_dir = root.join(kind);
        let mut parts = Vec::new();
        let mut listed_cells = 0;
        for k in 1..=3 {
            let spec = format!("{kind}:{k}/3");
            // --list shows what the part runs, with no engine.
            let out = run(selected().args(["--list", "--partition", &spec]));
            assert_eq!(out.status.code(), Some(0));
            let listing = text(&out.stdout);
            let note = listing.lines().find(|l| l.starts_with("partition ")).expect("the note");
            let n: usize =
                note.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
            listed_cells += n;

            let out = run(selected()
                .args(["--partition", &spec])
                .arg("--record-dir")
                .arg(record_dir.join(k.to_string())));
            assert!(text(&out.stderr).contains(&format!("reeval: partition {spec}: ")), "{spec}");
            let part = the_run(&record_dir.join(k.to_string()));
            let summary = common::json(&part.join("summary.json"));
            assert_eq!(summary["partition"], spec.as_str());
            // The part ran what its listing said.
            let ran: BTreeSet<String> = attempts(&part).into_iter().map(|a| a.0).collect();
            let listed: BTreeSet<String> = listing
                .lines()
                .filter_map(|l| l.strip_suffix(": test"))
                .map(str::to_string)
                .collect();
            assert_eq!(ran, listed, "{spec}");
            parts.push(part);
        }
        assert_eq!(listed_cells, 7, "{kind}: the listings cover the 7 cells once");

        // Every attempt of the whole run, in exactly one part.
        let mut split: Vec<_> = parts.iter().flat_map(|p| attempts(p)).collect();
        split.sort();
        assert_eq!(split, whole_attempts, "{kind}: each cell's trials, once");
        let cells = |p: &PathBuf| -> BTreeSet<(String, String)> {
            attempts(p).into_iter().map(|a| (a.0, a.1)).collect()
        };
        for (i, a) in parts.iter().enumerate() {
            for b in &parts[i + 1..] {
                assert!(cells(a).is_disjoint(&cells(b)), "{kind}: a cell in two parts");
            }
        }
        if kind == "hash" {
            // A part resumed stays its part, unless another is named, which is refused.
            let id = parts[0].file_name().unwrap().to_str().unwrap().to_string();
            let out = run(selected()
                .args(["--resume", &id])
                .arg("--record-dir")
                .arg(record_dir.join("1")));
            assert_eq!(out.status.code(), Some(1), "part 1's cells, one of which fails");
            let resumed = common::json(&parts[0].join("summary.json"));
            assert_eq!(resumed["partition"], "hash:1/3");
            assert_eq!(resumed["cells"].as_array().unwrap().len(), cells(&parts[0]).len());
            let out = run(selected()
                .args(["--resume", &id, "--partition", "hash:2/3"])
                .arg("--record-dir")
                .arg(record_dir.join("1")));
            assert_eq!(out.status.code(), Some(2));
            assert!(
                text(&out.stderr)
                    .contains("it is part hash:1/3 of a partitioned run, not hash:2/3")
            );
        }
        if kind == "count" {
            // Dealt in turn: 3, 2 and 2 cells.
            let sizes: Vec<usize> = parts.iter().map(|p| cells(p).len()).collect();
            assert_eq!(sizes, [3, 2, 2]);
        }

        // One report over the three parts: the figures of the whole run.
        let mut cmd = reeval();
        cmd.arg("report").args(&parts).arg("--record-dir").arg(&record_dir);
        let out = run(&mut cmd);
        assert!(out.status.success());
        assert!(!text(&out.stderr).contains("warning"), "every part is here");
        let ids: Vec<String> =
            parts.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
        let combined = record_dir.join(ids.join("+"));
        let summary = common::json(&combined.join("summary.json"));
        assert_eq!(figures(&summary), figures(&whole_summary), "{kind}");
        assert_eq!(summary["parts"], serde_json::json!(ids));
        let mut read_back = attempts(&combined);
        read_back.sort();
        assert_eq!(read_back, whole_attempts, "{kind}: the combined run holds every record");
        let html = std::fs::read_to_string(combined.join("report.html")).unwrap();
        assert!(
            html.contains("two_of_three #2 [shell:alt]"),
            "{kind}: the report shows every cell"
        );

        // A part missing from the report is said; a part given twice is refused.
        let mut cmd = reeval();
        cmd.arg("report").args(&parts[..2]).arg("--out").arg(root.join(format!("{kind}-two")));
        let out = run(&mut cmd);
        assert!(out.status.success());
        assert!(
            text(&out.stderr)
                .contains(&format!("warning: part 3 of {kind}:K/3 is not among the runs")),
            "{kind}"
        );
        let mut cmd = reeval();
        cmd.arg("report").args([&parts[0], &parts[1], &parts[0]]).arg("--out").arg(root.join("x"));
        let out = run(&mut cmd);
        assert_eq!(out.status.code(), Some(1));
        assert!(text(&out.stderr).contains("is given twice"));

        // The parts as one arm of a comparison, against the whole run: the same figures.
        let arm: Vec<String> = parts.iter().map(|p| p.display().to_string()).collect();
        let page = root.join(format!("{kind}-compare.html"));
        let mut cmd = reeval();
        cmd.args(["compare", &arm.join(",")]).arg(&whole).arg("--out").arg(&page);
        let out = run(&mut cmd);
        assert!(out.status.success());
        let comparison = common::json(&page.with_extension("json"));
        assert_eq!(comparison["evals"].as_array().unwrap().len(), 7, "paired per eval and harness");
        for row in comparison["evals"].as_array().unwrap().iter().chain([&comparison["overall"]]) {
            for key in ["passed", "failed", "infra", "passRate"] {
                assert_eq!(row["control"][key], row["treatment"][key], "{kind}: {key} of {row}");
            }
        }
    }

    // A part that gets no cell is no error: it says so, and is recorded without an engine.
    let out = run(suite()
        .args(["--tag", "threshold", "--partition", "hash:1/3"])
        .arg("--record-dir")
        .arg(root.join("empty"))
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock"));
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stderr).contains("holds none of the 1 cell selected"));
    let empty = common::json(&the_run(&root.join("empty")).join("summary.json"));
    assert_eq!(
        (empty["partition"].as_str(), empty["records"].as_array().map(Vec::len)),
        (Some("hash:1/3"), Some(0))
    );
    let _ = std::fs::remove_dir_all(&root);
}
