//! The `reeval` binary, run as a user runs it.

use std::path::Path;
use std::process::{Command, Output};

use reeval_core::record::Record;
use reeval_core::secrets::Redactor;
use reeval_core::{FailKind, Outcome};

fn reeval(args: &[&str], record_dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reeval"))
        .args(args)
        .arg("--record-dir")
        .arg(record_dir)
        .output()
        .expect("run reeval")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A run directory with three records, as a run of two processes leaves it (no combined summary).
fn recorded_run(record_dir: &Path) -> std::path::PathBuf {
    let run = record_dir.join("run-a");
    std::fs::create_dir_all(&run).unwrap();
    let redactor = Redactor::new(Vec::<&str>::new());
    for (eval, trial, outcome) in [
        ("greets", 1, Outcome::Pass),
        ("greets", 2, Outcome::Fail(FailKind::Assertion)),
        ("counts", 1, Outcome::InfraError),
    ] {
        let mut r = Record::new("run-a", eval, "shell", trial, 1);
        r.outcome = outcome;
        redactor.write_json(&run.join(r.file_name()), &r).unwrap();
    }
    run
}

#[test]
fn report_rebuilds_the_summary_and_report_and_runs_lists_them() {
    let dir = std::env::temp_dir().join(format!("reeval-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = recorded_run(&dir);

    let out = reeval(&["report", run.to_str().unwrap()], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout)
            .starts_with("run-a: 3 records, 1 passed, 1 failed, 1 infra errors; exit 1"),
        "{}",
        text(&out.stdout)
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["cells"].as_array().unwrap().len(), 2);
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("greets #2 [shell]") && html.contains("counts #1 [shell]"));

    // Without DIR: the last run under the record dir.
    let out = reeval(&["report"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = reeval(&["runs"], &dir);
    assert!(out.status.success());
    let listing = text(&out.stdout);
    let row = listing.lines().find(|l| l.starts_with("run-a ")).expect("the run is listed");
    let figures: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(figures[2..], ["3", "1", "1", "1", "1"], "{listing}");

    let out = reeval(&["report", "/nonexistent/run"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error: failed to read the run directory /nonexistent/run")
    );
    let out = reeval(&["frobnicate"], &dir);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn clean_and_images_talk_to_the_engine() {
    let docker_ok =
        Command::new("docker").args(["version"]).output().is_ok_and(|o| o.status.success());
    if !docker_ok {
        assert!(
            std::env::var("REEVAL_REQUIRE_DOCKER").as_deref() != Ok("1"),
            "REEVAL_REQUIRE_DOCKER=1 but the Docker engine does not answer"
        );
        return;
    }
    let dir = std::env::temp_dir();
    let out = reeval(&["clean"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("removed "), "{}", text(&out.stdout));
    let out = reeval(&["images"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("reeval/base:latest"), "{}", text(&out.stdout));
}

/// A run of `outcomes` (one per trial of eval `e`) named `name`.
fn run_of(record_dir: &Path, name: &str, outcomes: &[Outcome]) -> std::path::PathBuf {
    let run = record_dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    let redactor = Redactor::new(Vec::<&str>::new());
    for (i, outcome) in outcomes.iter().enumerate() {
        let mut r = Record::new(name, "e", "shell", i as u32 + 1, 1);
        r.outcome = *outcome;
        redactor.write_json(&run.join(r.file_name()), &r).unwrap();
    }
    run
}

#[test]
fn compare_prints_the_table_and_writes_the_page_and_its_figures() {
    let dir = std::env::temp_dir().join(format!("reeval-cli-compare-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fail = Outcome::Fail(FailKind::Assertion);
    run_of(&dir, "before", &[fail, fail, fail, fail, Outcome::Pass, Outcome::InfraError]);
    run_of(&dir, "after", &[Outcome::Pass; 6]);

    let out = reeval(&["compare", "before", "after"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("comparison: after vs before"), "{table}");
    assert!(table.contains("1 pairs left out for infra errors (1 before, 0 after)"), "{table}");
    let page = dir.join("compare.before.vs.after.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("e.shell.t6.try1.json") && html.contains("infra_error"),
        "links and outcomes"
    );
    let figures: serde_json::Value =
        serde_json::from_slice(&std::fs::read(page.with_extension("json")).unwrap()).unwrap();
    // 4 of 5 pairs favour `after`: Newcombe's interval lies above 0.
    assert_eq!(figures["evals"][0]["table"]["onlyTreatment"], 4);
    assert_eq!(figures["evals"][0]["verdict"], "helped");
    assert_eq!(figures["overall"]["excluded"]["control"], 1);

    let out = reeval(&["compare", "before", "missing"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("failed to read the run directory"),
        "{}",
        text(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A part of a partitioned run: records of `eval` (one per outcome, by
/// trial), and a summary naming the part.
fn part_of(record_dir: &Path, name: &str, eval: &str, outcomes: &[Outcome], part: &str) {
    let run = record_dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    let redactor = Redactor::new(Vec::<&str>::new());
    let mut records = Vec::new();
    for (i, outcome) in outcomes.iter().enumerate() {
        let mut r = Record::new(name, eval, "shell", i as u32 + 1, 1);
        r.outcome = *outcome;
        redactor.write_json(&run.join(r.file_name()), &r).unwrap();
        records.push(r);
    }
    let mut summary = reeval_core::report::summarize(name, &records);
    summary.partition = Some(part.to_string());
    redactor.write_json(&run.join("summary.json"), &summary).unwrap();
}

#[test]
fn report_combines_the_parts_of_a_partitioned_run_and_compare_reads_them_as_one_arm() {
    let dir = std::env::temp_dir().join(format!("reeval-cli-parts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let fail = Outcome::Fail(FailKind::Assertion);
    part_of(&dir, "p1", "a", &[Outcome::Pass, fail], "hash:1/2");
    part_of(&dir, "p2", "b", &[Outcome::Pass, Outcome::InfraError], "hash:2/2");

    // Run ids under the record dir; the combined run goes beside them, named after them.
    let out = reeval(&["report", "p1", "p2"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "both parts are here: no warning");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("p1+p2: 4 records, 2 passed, 1 failed, 1 infra errors"), "{stdout}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("p1+p2/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["cells"].as_array().unwrap().len(), 2);
    assert_eq!(summary["parts"], serde_json::json!(["p1", "p2"]));
    assert!(dir.join("p1+p2/b.shell.t2.try1.json").is_file(), "the records are brought in");
    // It is a run like any other: listed, and rebuilt in place.
    let out = reeval(&["runs"], &dir);
    assert!(text(&out.stdout).lines().any(|l| l.starts_with("p1+p2 ")), "{}", text(&out.stdout));
    let out = reeval(&["report", "p1+p2"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));

    // One part alone: the missing one is said.
    let out = reeval(&["report", "p1", "--out", dir.join("only-p1").to_str().unwrap()], &dir);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stderr),
        "warning: part 2 of hash:K/2 is not among the runs: the figures cover only the parts given\n"
    );

    // The same attempt in two parts is refused, naming it.
    part_of(&dir, "p3", "a", &[Outcome::Pass], "hash:1/2");
    let out = reeval(&["report", "p1", "p3"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(
            "error: failed to read the runs as one: a [shell] trial 1 is recorded in both"
        ) && err.contains("p1 and ")
            && err.contains("p3"),
        "{err}"
    );

    // compare: an arm of several runs joined by commas, read as one.
    part_of(&dir, "q1", "a", &[Outcome::Pass, Outcome::Pass], "count:1/2");
    part_of(&dir, "q2", "b", &[Outcome::Pass, Outcome::Pass], "count:2/2");
    let out = reeval(&["compare", "p1,p2", "q1,q2"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("comparison: q1+1-more vs p1+1-more"),
        "{}",
        text(&out.stdout)
    );
    let figures: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("compare.p1_1-more.vs.q1_1-more.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(figures["overall"]["control"]["passed"], 2);
    assert_eq!(figures["overall"]["treatment"]["passed"], 4);
    assert_eq!(figures["evals"].as_array().unwrap().len(), 2);
    let out = reeval(&["compare", "p1,p3", "q1"], &dir);
    assert_eq!(out.status.code(), Some(1), "an arm's runs must not overlap");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn regrade_runs_the_suite_binary_that_recorded_the_run_with_regrade() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("reeval-cli-regrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = recorded_run(&dir);
    // A stand-in suite binary: it writes its arguments down and exits 3.
    let suite = dir.join("suite.sh");
    let args_file = dir.join("args.txt");
    std::fs::write(&suite, format!("#!/bin/sh\necho \"$@\" > {}\nexit 3\n", args_file.display()))
        .unwrap();
    std::fs::set_permissions(&suite, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut summary = reeval_core::report::summarize("run-a", &[]);
    summary.provenance.command = vec![suite.display().to_string(), "--tag".into(), "x".into()];
    std::fs::write(run.join("summary.json"), serde_json::to_vec(&summary).unwrap()).unwrap();

    let out = reeval(&["regrade", "run-a"], &dir);
    assert_eq!(out.status.code(), Some(3), "the suite's exit code: {}", text(&out.stderr));
    let args = std::fs::read_to_string(&args_file).unwrap();
    assert_eq!(args.trim(), format!("--regrade {} --record-dir {}", run.display(), dir.display()));

    std::fs::remove_file(run.join("summary.json")).unwrap();
    let out = reeval(&["regrade", "run-a"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("names no suite binary"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `reeval harbor run PATH [FLAGS]`: Harbor tasks through the suite's own
/// flags (`--list`, `--tag`, `--harness`, `--record-dir`) and Harbor's
/// timeout multipliers; the run's records carry the reward.
#[test]
fn harbor_run_runs_tasks_with_the_suites_flags() {
    let dir = std::env::temp_dir().join(format!("reeval-cli-harbor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/harbor/tasks");
    let tasks = tasks.to_str().unwrap();

    let out = reeval(&["harbor", "run", tasks, "--list"], &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains("hello-shell: test") && listed.contains("8 tests"), "{listed}");

    let out = reeval(
        &[
            "harbor",
            "run",
            tasks,
            "--harness",
            "oracle",
            "--tag",
            "smoke",
            "--timeout-multiplier",
            "2",
        ],
        &dir,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("test hello-shell ... ok"), "{stdout}");
    let run = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).find(|p| p.is_dir());
    let record = run.expect("a run directory").join("hello-shell.oracle.t1.try1.json");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(record["reward"], serde_json::json!({"reward": 1.0}));

    // --partition passes through: each task in exactly one part.
    let mut parts = Vec::new();
    for part in ["hash:1/2", "hash:2/2"] {
        let out = reeval(&["harbor", "run", tasks, "--list", "--partition", part], &dir);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let listed = text(&out.stdout);
        assert!(listed.contains(&format!("partition {part}: ")), "{listed}");
        parts.extend(listed.lines().filter_map(|l| l.strip_suffix(": test")).map(str::to_string));
    }
    let all = text(&reeval(&["harbor", "run", tasks, "--list", "--format", "terse"], &dir).stdout);
    let mut all: Vec<String> =
        all.lines().filter_map(|l| l.strip_suffix(": test")).map(str::to_string).collect();
    parts.sort();
    all.sort();
    assert_eq!(parts, all);

    let out = reeval(&["harbor", "run", "/nonexistent"], &dir);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: failed to read Harbor tasks at /nonexistent"));
    let out = reeval(&["harbor", "run", tasks, "--timeout-multiplier", "zero"], &dir);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `reeval harbor run TASKS --compare control,NAME`: a binary with no
/// variants of its own compares with one declared in `reeval.toml`, here the
/// file the compare tasks need (`tests/harbor_compare.rs` runs the same
/// tasks from a suite); the verdict on pass/fail and on rewards is helped.
#[test]
fn harbor_run_compares_with_a_variant_declared_in_reeval_toml() {
    let dir = std::env::temp_dir().join(format!("reeval-cli-variants-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.md"), "answer: 42\nfact: beta\nfact: gamma\nfact: delta\n")
        .unwrap();
    let config = dir.join("reeval.toml");
    std::fs::write(&config, "[variants.with_notes]\nfiles = { \"NOTES.md\" = \"notes.md\" }\n")
        .unwrap();
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/harbor/compare");
    let run = |compare: &str| {
        Command::new(env!("CARGO_BIN_EXE_reeval"))
            .args(["harbor", "run", tasks.to_str().unwrap(), "--harness", "shell"])
            .args(["--trials", "4", "--test-threads", "4", "--compare", compare])
            .arg("--record-dir")
            .arg(dir.join("runs"))
            .env("REEVAL_CONFIG", &config)
            .output()
            .expect("run reeval")
    };
    let out = run("control,with_notes");
    let stdout = text(&out.stdout);
    // The control arm fails the tasks: exit 1 with the comparison printed.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("comparison: with_notes vs control"), "{stdout}");
    let mut runs = std::fs::read_dir(dir.join("runs")).unwrap().flatten().map(|e| e.path());
    let run_dir = runs.find(|p| p.is_dir()).expect("a run directory");
    let summary = std::fs::read_dir(&run_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("summary")))
        .expect("a summary");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(summary["comparison"]["overall"]["verdict"], "helped", "{stdout}");
    assert_eq!(summary["comparison"]["overall"]["reward"]["verdict"], "helped", "{stdout}");

    // A variant neither the binary nor reeval.toml declares is named, with where to declare it.
    let out = run("control,with_nothing");
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("failed to find the variant `with_nothing`")
            && err.contains("[variants.with_nothing]"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
