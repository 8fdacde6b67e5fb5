//! Recorded runs on disk. A run is a directory `<record_dir>/<run_id>/`
//! holding one JSON record per attempt, the summary (`summary.json`; under
//! nextest also one `summary.<pid>.json` per process), `report.html`, and
//! each attempt's artifacts in a directory named like its record.
//!
//! The runner reads runs back for `--rerun-failed` and `--resume`, and to
//! rebuild one summary and report over every process of a nextest run; the
//! `reeval` tool reads them for `report` and `runs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::outcome::Outcome;
use crate::prices::PriceTable;
use crate::record::{Provenance, Record, SuiteIdentity, Summary};
use crate::report::summary::RunReport;
use crate::secrets::Redactor;

/// A run directory that cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunsError {
    /// A directory or file could not be read or written.
    #[error("failed to {action} {}: {source}", path.display())]
    Io {
        /// What was being done (`read the run directory`).
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record or summary is not one reeval wrote.
    #[error("failed to read {} as a record of reeval: {message}", path.display())]
    NotARecord {
        /// The file.
        path: PathBuf,
        /// What does not parse.
        message: String,
    },
    /// A file that is not whole JSON: cut short, never to be trusted.
    #[error("failed to read {}: not a whole JSON file ({message})", path.display())]
    Partial {
        /// The file.
        path: PathBuf,
        /// Where it stops making sense.
        message: String,
    },
    /// Runs that cannot be read as one: a run given twice, an attempt in two
    /// of them, an output directory that holds another run.
    #[error("failed to read the runs as one: {0}")]
    Combine(String),
    /// No run was found.
    #[error("failed to find a run in {}: {why}", dir.display())]
    NoRun {
        /// Where runs were looked for.
        dir: PathBuf,
        /// Why none was found.
        why: String,
    },
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RunsError + 'a {
    move |source| RunsError::Io { action, path: path.to_path_buf(), source }
}

/// One recorded run.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The run id (the directory's name).
    pub id: String,
    /// The directory.
    pub path: PathBuf,
    /// When it was last written to.
    pub modified: SystemTime,
}

/// Whether `name` is a summary file (`summary.json`, `summary.<pid>.json`).
fn is_summary(name: &str) -> bool {
    name.starts_with("summary") && name.ends_with(".json")
}

/// Every run under `record_dir` (directories holding at least one record or
/// summary), oldest first.
///
/// # Errors
/// [`RunsError::Io`] when `record_dir` cannot be read.
pub fn list(record_dir: &Path) -> Result<Vec<RunDir>, RunsError> {
    let mut runs = Vec::new();
    let entries = match std::fs::read_dir(record_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(runs),
        Err(e) => return Err(io("read the record directory", record_dir)(e)),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(files) = std::fs::read_dir(&path) else { continue };
        let mut newest = None;
        for f in files.flatten() {
            if f.file_name().to_string_lossy().ends_with(".json") {
                let modified = f.metadata().and_then(|m| m.modified()).ok();
                newest = newest.max(modified);
            }
        }
        if let Some(modified) = newest {
            runs.push(RunDir {
                id: entry.file_name().to_string_lossy().into_owned(),
                path,
                modified,
            });
        }
    }
    runs.sort_by(|a, b| a.modified.cmp(&b.modified).then_with(|| a.id.cmp(&b.id)));
    Ok(runs)
}

/// The run written to last under `record_dir`.
///
/// # Errors
/// [`RunsError::NoRun`] when there is none; [`RunsError::Io`].
pub fn latest(record_dir: &Path) -> Result<RunDir, RunsError> {
    list(record_dir)?.pop().ok_or_else(|| RunsError::NoRun {
        dir: record_dir.to_path_buf(),
        why: "no run has been recorded there".into(),
    })
}

/// Whether `run_dir` is a run of the suite binary `suite`: its summary names
/// that binary, or (a run killed before its summary, or recorded by an older
/// reeval) every eval its records name is one `suite` knows.
///
/// # Errors
/// Why it is not, in words: another binary's run, unknown evals, nothing recorded.
pub fn belongs_to(run_dir: &Path, suite: &SuiteIdentity) -> Result<(), String> {
    let recorded = summaries(run_dir).ok().and_then(|s| s.into_iter().find_map(|s| s.suite));
    if let Some(recorded) = recorded {
        return if recorded.binary == suite.binary {
            Ok(())
        } else {
            Err(format!(
                "it is a run of the suite binary `{}`, not of this one (`{}`)",
                recorded.binary, suite.binary
            ))
        };
    }
    let records = records(run_dir).map_err(|e| e.to_string())?;
    if records.is_empty() {
        return Err("it holds no record".into());
    }
    let mut unknown: Vec<&str> = records
        .iter()
        .map(|r| r.eval.as_str())
        .filter(|e| !suite.evals.iter().any(|k| k == e))
        .collect();
    unknown.dedup();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "its records name evals that the suite binary `{}` does not have: {}",
            suite.binary,
            unknown.join(", ")
        ))
    }
}

/// The newest run under `record_dir` of the suite binary `suite` (see [`belongs_to`]).
///
/// # Errors
/// [`RunsError::NoRun`] saying how many runs of other binaries there are; [`RunsError::Io`].
pub fn latest_of(record_dir: &Path, suite: &SuiteIdentity) -> Result<RunDir, RunsError> {
    let runs = list(record_dir)?;
    let others = runs.len();
    runs.into_iter().rev().find(|run| belongs_to(&run.path, suite).is_ok()).ok_or_else(|| {
        RunsError::NoRun {
            dir: record_dir.to_path_buf(),
            why: format!(
                "no run of the suite binary `{}` is recorded there ({others} {} of other suite binaries)",
                suite.binary,
                if others == 1 { "run" } else { "runs" }
            ),
        }
    })
}

/// Every attempt's record in `run_dir`, in file-name order. A file cut
/// short (not whole JSON: a disk that filled up under an older reeval, or a
/// copy in progress) is skipped with a warning on stderr, never trusted;
/// temporary files (`*.json.tmp`) are not read.
///
/// # Errors
/// [`RunsError::Io`] when the directory cannot be read, and
/// [`RunsError::NotARecord`] naming a JSON file that is not a record.
pub fn records(run_dir: &Path) -> Result<Vec<Record>, RunsError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(run_dir)
        .map_err(io("read the run directory", run_dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            p.is_file() && name.ends_with(".json") && !is_summary(&name)
        })
        .collect();
    paths.sort();
    read_whole(&paths)
}

/// The files of `paths` that are whole JSON, a file cut short skipped with a warning.
fn read_whole<T: serde::de::DeserializeOwned>(paths: &[PathBuf]) -> Result<Vec<T>, RunsError> {
    let mut read = Vec::new();
    for path in paths {
        match read_json(path) {
            Ok(r) => read.push(r),
            Err(RunsError::Partial { path, message }) => crate::report::say(&format!(
                "reeval: warning: skipped {}: not a whole JSON file ({message}); what it held counts as not recorded\n",
                path.display()
            )),
            Err(e) => return Err(e),
        }
    }
    Ok(read)
}

/// The summaries written into `run_dir`: the per-process ones under nextest, else `summary.json`.
///
/// # Errors
/// As [`records`].
pub fn summaries(run_dir: &Path) -> Result<Vec<Summary>, RunsError> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(run_dir)
        .map_err(io("read the run directory", run_dir))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().is_some_and(|n| is_summary(&n.to_string_lossy())))
        .collect();
    paths.sort();
    let per_process: Vec<&PathBuf> =
        paths.iter().filter(|p| !p.ends_with("summary.json")).collect();
    let chosen: Vec<&PathBuf> =
        if per_process.is_empty() { paths.iter().collect() } else { per_process };
    read_whole(&chosen.into_iter().cloned().collect::<Vec<_>>())
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, RunsError> {
    use serde_json::error::Category;
    let bytes = std::fs::read(path).map_err(io("read", path))?;
    serde_json::from_slice(&bytes).map_err(|e| match e.classify() {
        Category::Eof | Category::Syntax => {
            RunsError::Partial { path: path.to_path_buf(), message: e.to_string() }
        }
        _ => RunsError::NotARecord { path: path.to_path_buf(), message: e.to_string() },
    })
}

/// One provenance over several processes' summaries: the earliest start, the
/// latest end, the arguments every command line had (each process's in
/// `commands`), the first git state and engine, every harness version.
pub fn merge_provenance<'a>(summaries: impl IntoIterator<Item = &'a Summary>) -> Provenance {
    let mut merged = Provenance::default();
    let mut commands: Vec<Vec<String>> = Vec::new();
    for s in summaries {
        commands.extend(
            std::iter::once(&s.provenance.command)
                .chain(&s.provenance.commands)
                .filter(|c| !c.is_empty())
                .cloned(),
        );
        let p = &s.provenance;
        merged.started_at = match (merged.started_at.take(), &p.started_at) {
            (Some(a), Some(b)) => Some(a.min(b.clone())),
            (a, b) => a.or(b.clone()),
        };
        merged.ended_at = match (merged.ended_at.take(), &p.ended_at) {
            (Some(a), Some(b)) => Some(a.max(b.clone())),
            (a, b) => a.or(b.clone()),
        };
        merged.git = merged.git.take().or(p.git.clone());
        if merged.reeval_version.is_empty() {
            merged.reeval_version = p.reeval_version.clone();
        }
        merged.engine = merged.engine.take().or(p.engine.clone());
        for (h, v) in &p.harness_versions {
            merged.harness_versions.entry(h.clone()).or_insert_with(|| v.clone());
        }
    }
    commands.sort();
    commands.dedup();
    merged.command = match commands.first() {
        Some(first) => {
            first.iter().filter(|arg| commands.iter().all(|c| c.contains(arg))).cloned().collect()
        }
        None => Vec::new(),
    };
    if commands.len() > 1 {
        merged.commands = commands;
    }
    let at = |t: &Option<String>| t.as_deref().and_then(|t| humantime::parse_rfc3339_weak(t).ok());
    if let (Some(start), Some(end)) = (at(&merged.started_at), at(&merged.ended_at)) {
        merged.duration_ms =
            end.duration_since(start).ok().map(|d| d.as_millis() as u64).or(Some(0));
    }
    merged
}

/// Rebuilds `summary.json` and `report.html` of `run_dir` from every record
/// in it, with the provenance of the summaries the processes wrote.
///
/// # Errors
/// [`RunsError`] when the run cannot be read or the files cannot be written.
pub fn rebuild(
    run_dir: &Path,
    prices: &PriceTable,
    redactor: &Redactor,
) -> Result<RunReport, RunsError> {
    let run_id = run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let records = records(run_dir)?;
    let mut summary = crate::report::summary::summarize_priced(&run_id, &records, prices);
    let per_process = summaries(run_dir)?;
    summary.provenance = merge_provenance(&per_process);
    summary.suite = per_process.iter().find_map(|s| s.suite.clone());
    // A part of a partitioned run stays one, and a combined run keeps its parts.
    summary.partition = per_process.iter().find_map(|s| s.partition.clone());
    summary.parts =
        per_process.iter().map(|s| s.parts.clone()).find(|p| !p.is_empty()).unwrap_or_default();
    // What a process could not write, or that was interrupted, stays said in the whole run's summary.
    let lost: Vec<String> = per_process.iter().flat_map(|s| s.write_errors.clone()).collect();
    let interrupted =
        per_process.iter().any(|s| s.exit_code == crate::report::summary::EXIT_INTERRUPTED);
    let counted = (summary.exit_code, summary.exit_reason.clone());
    crate::report::summary::settle_exit(&mut summary, &counted, interrupted, &lost);
    let report = RunReport { run_id, run_dir: run_dir.to_path_buf(), records, summary };
    write_summary_and_report(&report, "summary.json", "report.html", redactor, prices)?;
    Ok(report)
}

/// Writes the run's summary and HTML report under its directory.
///
/// # Errors
/// [`RunsError::Io`] when a file cannot be written.
pub fn write_summary_and_report(
    report: &RunReport,
    summary_name: &str,
    html_name: &str,
    redactor: &Redactor,
    prices: &PriceTable,
) -> Result<(), RunsError> {
    let path = report.run_dir.join(summary_name);
    redactor.write_json(&path, &report.summary).map_err(io("write", &path))?;
    let path = report.run_dir.join(html_name);
    let html =
        crate::report::html::render_priced(&report.summary, &report.records, redactor, prices)
            .map_err(|e| io("render", &path)(std::io::Error::other(e)))?;
    crate::secrets::write_atomically(&path, html.as_bytes()).map_err(io("write", &path))
}

/// The cells (eval, harness) of `records` that failed or had an infra error.
pub fn failed_cells(records: &[Record]) -> Vec<(String, String)> {
    let summary = crate::report::summary::summarize("", records);
    summary
        .cells
        .iter()
        .filter(|c| c.ok != Some(true) || c.infra > 0)
        .map(|c| (c.eval.clone(), c.harness.clone()))
        .collect()
}

/// The records of `records` whose trials need not run again when a run is
/// resumed: every try of a trial whose last try ended on its own (it was not
/// interrupted, and is not an infra error that had retries left).
pub fn finished_trials(records: Vec<Record>, infra_retries: u32) -> Vec<Record> {
    let mut trials: BTreeMap<(crate::record::CellKey, u32), Vec<Record>> = BTreeMap::new();
    for r in records {
        trials.entry((r.cell(), r.trial)).or_default().push(r);
    }
    trials
        .into_values()
        .filter(|tries| {
            let last = tries.iter().max_by_key(|r| r.try_).expect("a trial has a try");
            let retries_left = last.outcome == Outcome::InfraError && last.try_ <= infra_retries;
            !(last.interrupted || retries_left)
        })
        .flatten()
        .collect()
}

/// The next try number of a trial in `run_dir`: one more than any recorded
/// (nextest's `--retries` runs a test's process again into the same run).
pub fn next_try(run_dir: &Path, eval: &str, harness: &str, arm: Option<&str>, trial: u32) -> u32 {
    let stem = format!("{}.t{trial}.try", crate::record::cell_stem(eval, harness, arm));
    let highest = std::fs::read_dir(run_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_prefix(&stem)?.strip_suffix(".json")?.parse::<u32>().ok()
        })
        .max();
    highest.map_or(1, |n| n + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailKind;

    use crate::test_records::test_record as rec;

    #[test]
    fn resuming_keeps_trials_that_ended_on_their_own() {
        let mut interrupted = rec("b", 1, 1, Outcome::InfraError);
        interrupted.interrupted = true;
        let kept = finished_trials(
            vec![
                rec("a", 1, 1, Outcome::Pass),
                rec("a", 2, 1, Outcome::Fail(FailKind::Assertion)),
                interrupted,
                rec("c", 1, 1, Outcome::InfraError),
                rec("d", 1, 1, Outcome::InfraError),
                rec("d", 1, 2, Outcome::InfraError),
                rec("d", 1, 3, Outcome::InfraError),
            ],
            2,
        );
        let names: Vec<(String, u32, u32)> =
            kept.iter().map(|r| (r.eval.clone(), r.trial, r.try_)).collect();
        assert_eq!(
            names,
            [
                ("a".into(), 1, 1),
                ("a".into(), 2, 1),
                ("d".into(), 1, 1),
                ("d".into(), 1, 2),
                ("d".into(), 1, 3)
            ]
        );
    }

    #[test]
    fn a_merged_provenance_has_the_command_every_process_shared_and_each_ones() {
        // Before the fix the merged summary's command was the first process's (`--exact a`).
        let of = |args: &[&str]| Summary {
            provenance: Provenance {
                command: args.iter().map(|a| a.to_string()).collect(),
                ..Default::default()
            },
            ..Default::default()
        };
        let merged = merge_provenance(&[
            of(&["suite", "--exact", "a", "--nocapture"]),
            of(&["suite", "--exact", "b", "--nocapture"]),
        ]);
        assert_eq!(merged.command, ["suite", "--exact", "--nocapture"]);
        assert_eq!(merged.commands.len(), 2);
        assert_eq!(merged.commands[1], ["suite", "--exact", "b", "--nocapture"]);
        let one = merge_provenance(&[of(&["suite", "x"])]);
        assert_eq!((one.command.len(), one.commands.len()), (2, 0));
    }

    #[test]
    fn runs_are_read_back_and_tries_are_numbered_on() {
        let dir = std::env::temp_dir().join(format!(
            "reeval-runs-{}-{}",
            std::process::id(),
            crate::settings::run_id_from(&crate::settings::process_env)
        ));
        let run = dir.join("run-1");
        std::fs::create_dir_all(&run).unwrap();
        let redactor = Redactor::new(Vec::<&str>::new());
        for r in [rec("a", 1, 1, Outcome::Pass), rec("b", 1, 1, Outcome::Fail(FailKind::Judge))] {
            redactor.write_json(&run.join(r.file_name()), &r).unwrap();
        }
        assert_eq!(next_try(&run, "a", "shell", None, 1), 2);
        assert_eq!(next_try(&run, "a", "shell", None, 2), 1);
        let report = rebuild(&run, &PriceTable::default(), &redactor).unwrap();
        assert_eq!((report.summary.passed, report.summary.exit_code), (1, 1));
        assert!(run.join("report.html").is_file());
        assert_eq!(failed_cells(&report.records), [("b".to_string(), "shell".to_string())]);
        assert_eq!(latest(&dir).unwrap().id, "run-1");
        // A record cut short (an empty file, half an object) is skipped, not trusted.
        std::fs::write(run.join("c.shell.t1.try1.json"), "").unwrap();
        std::fs::write(run.join("d.shell.t1.try1.json"), "{\"schemaVersion\": 1, \"ev").unwrap();
        std::fs::write(run.join("e.shell.t1.try1.json.tmp"), "{").unwrap();
        assert_eq!(records(&run).unwrap().len(), 2);
        std::fs::write(run.join("junk.json"), "[]").unwrap();
        let e = records(&run).unwrap_err().to_string();
        assert!(e.starts_with("failed to read") && e.contains("junk.json"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
