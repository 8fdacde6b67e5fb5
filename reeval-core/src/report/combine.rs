//! Several recorded runs read back as one: the parts of a partitioned run
//! (`--partition hash:K/N`), or any runs of disjoint cells. [`union`] reads
//! their records, each with the run directory it came from, and refuses an
//! attempt recorded in two of them; [`combine`] makes a run directory of the
//! union (`reeval report RUN RUN...`): the records and their artifacts
//! brought in (hard links where the file system allows, else copies), and
//! `summary.json` and `report.html` over them all, so that every tool that
//! reads a run (`reeval report`, `runs`, `compare`, `regrade`,
//! `--rerun-failed`) reads it as one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::runs::{RunsError, merge_provenance, records, summaries, write_summary_and_report};
use super::summary::{EXIT_INTERRUPTED, RunReport, settle_exit, summarize_priced};
use crate::partition::Partition;
use crate::prices::PriceTable;
use crate::record::{Record, Summary};
use crate::secrets::Redactor;

/// The name of a run: its directory's name.
pub fn run_name(dir: &Path) -> String {
    dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned())
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> RunsError + 'a {
    move |source| RunsError::Io { action, path: path.to_path_buf(), source }
}

/// Every record of the runs `run_dirs`, each with the directory it was read
/// from, in the order given.
///
/// # Errors
/// [`RunsError::Combine`] when a directory is given twice, or an attempt
/// (eval × harness × arm × trial) is recorded in two of them, naming it and
/// both; a [`RunsError`] when one cannot be read.
pub fn union(run_dirs: &[PathBuf]) -> Result<Vec<(PathBuf, Record)>, RunsError> {
    let mut seen: BTreeMap<PathBuf, &Path> = BTreeMap::new();
    for dir in run_dirs {
        let real = std::fs::canonicalize(dir).map_err(io("read the run directory", dir))?;
        if let Some(first) = seen.insert(real, dir) {
            return Err(RunsError::Combine(format!(
                "{} is given twice{}",
                dir.display(),
                if first == dir { String::new() } else { format!(" (as {})", first.display()) }
            )));
        }
    }
    let mut out: Vec<(PathBuf, Record)> = Vec::new();
    // Which directory holds each trial of each cell.
    let mut holder: BTreeMap<(crate::record::CellKey, u32), usize> = BTreeMap::new();
    for (i, dir) in run_dirs.iter().enumerate() {
        for r in records(dir)? {
            let first = *holder.entry((r.cell(), r.trial)).or_insert(i);
            if first != i {
                let arm = r.arm.as_deref().map(|a| format!(" {a}")).unwrap_or_default();
                return Err(RunsError::Combine(format!(
                    "{} [{}{arm}] trial {} is recorded in both {} and {}: each attempt must be in one run only",
                    r.eval,
                    r.harness,
                    r.trial,
                    run_dirs[first].display(),
                    dir.display()
                )));
            }
            out.push((dir.clone(), r));
        }
    }
    Ok(out)
}

/// A run directory made of several ([`combine`]).
#[derive(Debug, Clone)]
pub struct Combined {
    /// The combined run: its directory, every record, the summary.
    pub report: RunReport,
    /// What the caller should hear: parts of a partitioned run that are not among the runs.
    pub warnings: Vec<String>,
}

/// The directory a combination of `run_dirs` goes to when none is given:
/// `<record dir>/<id>+<id>+…`, or `<first id>+<N-1>-more-<hash>` when that
/// name would be long. The same runs give the same name.
pub fn default_combined_dir(record_dir: &Path, run_dirs: &[PathBuf]) -> PathBuf {
    let ids: Vec<String> = run_dirs.iter().map(|d| run_name(d)).collect();
    let joined = ids.join("+");
    if joined.len() <= 120 {
        return record_dir.join(joined);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    let hash = crate::partition::cell_hash(&sorted.join("\n"), "");
    record_dir.join(format!("{}+{}-more-{:08x}", ids[0], ids.len() - 1, hash >> 32))
}

/// Makes `out` a run directory of the union of the runs `run_dirs` (see the
/// module note): their records and artifacts brought in, and `summary.json`
/// and `report.html` over them all. The summary's `parts` names the runs;
/// its provenance spans them. `out` must not exist, be empty, or be an
/// earlier combination of the same runs (which is replaced).
///
/// # Errors
/// As [`union`]; [`RunsError::Combine`] when `out` holds another run or is
/// one of `run_dirs`; [`RunsError::Io`] when a file cannot be written.
pub fn combine(
    run_dirs: &[PathBuf],
    out: &Path,
    prices: &PriceTable,
    redactor: &Redactor,
) -> Result<Combined, RunsError> {
    let all = union(run_dirs)?;
    let parts: Vec<String> = run_dirs.iter().map(|d| run_name(d)).collect();
    let per_run: Vec<Vec<Summary>> =
        run_dirs.iter().map(|d| summaries(d)).collect::<Result<_, _>>()?;
    make_room(out, run_dirs, &parts)?;
    for (dir, r) in &all {
        bring(dir, out, r)?;
    }
    let run_id = run_name(out);
    let records: Vec<Record> = all.into_iter().map(|(_, r)| r).collect();
    let mut summary = summarize_priced(&run_id, &records, prices);
    let every: Vec<&Summary> = per_run.iter().flatten().collect();
    summary.provenance = merge_provenance(every.iter().copied());
    summary.suite = every.iter().find_map(|s| s.suite.clone());
    summary.parts = parts.clone();
    let lost: Vec<String> = every.iter().flat_map(|s| s.write_errors.clone()).collect();
    let interrupted = every.iter().any(|s| s.exit_code == EXIT_INTERRUPTED);
    let counted = (summary.exit_code, summary.exit_reason.clone());
    settle_exit(&mut summary, &counted, interrupted, &lost);
    let report = RunReport { run_id, run_dir: out.to_path_buf(), records, summary };
    write_summary_and_report(&report, "summary.json", "report.html", redactor, prices)?;
    let partitions: Vec<(String, Option<String>)> = parts
        .into_iter()
        .zip(&per_run)
        .map(|(id, s)| (id, s.iter().find_map(|s| s.partition.clone())))
        .collect();
    Ok(Combined { report, warnings: partition_gaps(&partitions) })
}

/// Makes sure `out` can take the combination of `run_dirs` (named `parts`):
/// absent or empty is fine, an earlier combination of the same runs is
/// removed, anything else is refused.
fn make_room(out: &Path, run_dirs: &[PathBuf], parts: &[String]) -> Result<(), RunsError> {
    let refuse = |why: String| {
        RunsError::Combine(format!(
            "{} cannot take the combined run: {why}; choose another --out, or remove it",
            out.display()
        ))
    };
    if let Ok(real) = std::fs::canonicalize(out) {
        if run_dirs.iter().any(|d| std::fs::canonicalize(d).is_ok_and(|d| d == real)) {
            return Err(refuse("it is one of the runs combined".into()));
        }
        let empty = std::fs::read_dir(out).map_err(io("read", out))?.next().is_none();
        if !empty {
            let earlier: BTreeSet<String> = summaries(out)
                .ok()
                .and_then(|s| s.into_iter().next())
                .map(|s| s.parts.into_iter().collect())
                .unwrap_or_default();
            let now: BTreeSet<String> = parts.iter().cloned().collect();
            if earlier != now {
                return Err(refuse("it holds another run".into()));
            }
            std::fs::remove_dir_all(out).map_err(io("remove the earlier combination", out))?;
        }
    }
    std::fs::create_dir_all(out).map_err(io("create", out))
}

/// Brings the record `r` of the run `dir` into `out`: its file, its
/// artifacts' directory and its ATIF trajectory, where they exist.
fn bring(dir: &Path, out: &Path, r: &Record) -> Result<(), RunsError> {
    let file = r.file_name();
    link_or_copy(&dir.join(&file), &out.join(&file))?;
    let artifacts = dir.join(r.artifacts_dir_name());
    if artifacts.is_dir() {
        link_or_copy_tree(&artifacts, &out.join(r.artifacts_dir_name()))?;
    }
    let atif = dir.join("atif").join(&file);
    if atif.is_file() {
        let to = out.join("atif");
        std::fs::create_dir_all(&to).map_err(io("create", &to))?;
        link_or_copy(&atif, &to.join(&file))?;
    }
    Ok(())
}

/// A hard link of `from` at `to`, else a copy (another file system).
fn link_or_copy(from: &Path, to: &Path) -> Result<(), RunsError> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to).map(drop).map_err(io("copy into the combined run", to))
}

fn link_or_copy_tree(from: &Path, to: &Path) -> Result<(), RunsError> {
    std::fs::create_dir_all(to).map_err(io("create", to))?;
    for entry in std::fs::read_dir(from).map_err(io("read", from))? {
        let entry = entry.map_err(io("read", from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(io("read", &src))?;
        if kind.is_dir() {
            link_or_copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            // An artifact's link is kept as a link, never followed out of the run.
            let target = std::fs::read_link(&src).map_err(io("read", &src))?;
            std::os::unix::fs::symlink(target, &dst).map_err(io("write", &dst))?;
        } else {
            link_or_copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// What is amiss with the parts of a partitioned run among `runs` (each
/// run's id and the partition its summary names): parts missing, runs of
/// different partitions, a run that was not a part. Nothing for runs none of
/// which was a part.
pub fn partition_gaps(runs: &[(String, Option<String>)]) -> Vec<String> {
    let parted: Vec<(&String, Partition)> = runs
        .iter()
        .filter_map(|(id, p)| Some((id, p.as_deref()?.parse::<Partition>().ok()?)))
        .collect();
    let Some((_, first)) = parted.first() else { return Vec::new() };
    let mut said = Vec::new();
    for (id, p) in runs {
        if p.is_none() {
            said.push(format!("run {id} is not a part of a partitioned run"));
        }
    }
    // `hash:K/3`: the partition, whichever part.
    let split = |p: &Partition| format!("{}:K/{}", p.kind, p.of);
    let splits: BTreeSet<String> = parted.iter().map(|(_, p)| split(p)).collect();
    if splits.len() > 1 {
        let specs: Vec<String> = parted.iter().map(|(id, p)| format!("{id} {p}")).collect();
        said.push(format!("the runs are parts of different partitions: {}", specs.join(", ")));
        return said;
    }
    let have: BTreeSet<u32> = parted.iter().map(|(_, p)| p.part).collect();
    let missing: Vec<String> =
        (1..=first.of).filter(|k| !have.contains(k)).map(|k| k.to_string()).collect();
    if !missing.is_empty() {
        let (parts, are) = if missing.len() == 1 { ("part", "is") } else { ("parts", "are") };
        said.push(format!(
            "{parts} {} of {} {are} not among the runs: the figures cover only the parts given",
            missing.join(", "),
            split(first)
        ));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{FailKind, Outcome};
    use crate::test_records::test_record as rec;

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "reeval-combine-{tag}-{}-{}",
            std::process::id(),
            crate::settings::run_id_from(&crate::settings::process_env)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_run(dir: &Path, records: &[Record], partition: Option<&str>) {
        std::fs::create_dir_all(dir).unwrap();
        let redactor = Redactor::new(Vec::<&str>::new());
        for r in records {
            redactor.write_json(&dir.join(r.file_name()), r).unwrap();
        }
        let mut s = summarize_priced(&run_name(dir), records, &PriceTable::default());
        s.partition = partition.map(str::to_string);
        redactor.write_json(&dir.join("summary.json"), &s).unwrap();
    }

    #[test]
    fn parts_combine_into_one_run_with_the_figures_of_the_whole() {
        let root = temp("parts");
        let whole = [
            rec("a", 1, 1, Outcome::Pass),
            rec("a", 2, 1, Outcome::Fail(FailKind::Assertion)),
            rec("b", 1, 1, Outcome::InfraError),
            rec("b", 1, 2, Outcome::Pass),
            rec("c", 1, 1, Outcome::Fail(FailKind::Judge)),
        ];
        let (p1, p2) = (root.join("p1"), root.join("p2"));
        write_run(&p1, &whole[..2], Some("hash:1/2"));
        write_run(&p2, &whole[2..], Some("hash:2/2"));
        std::fs::create_dir_all(p1.join(whole[0].artifacts_dir_name())).unwrap();
        std::fs::write(p1.join(whole[0].artifacts_dir_name()).join("setup.log"), "ok").unwrap();
        let redactor = Redactor::new(Vec::<&str>::new());
        let out = default_combined_dir(&root, &[p1.clone(), p2.clone()]);
        assert_eq!(out, root.join("p1+p2"));
        let combined =
            combine(&[p1.clone(), p2.clone()], &out, &PriceTable::default(), &redactor).unwrap();
        assert!(combined.warnings.is_empty(), "{:?}", combined.warnings);
        let mut want = summarize_priced("p1+p2", &whole, &PriceTable::default());
        let got = &combined.report.summary;
        assert_eq!(got.cells, want.cells);
        assert_eq!((got.passed, &got.failed, got.infra), (want.passed, &want.failed, want.infra));
        assert_eq!(got.parts, ["p1", "p2"]);
        want.records.sort();
        let mut listed = got.records.clone();
        listed.sort();
        assert_eq!(listed, want.records);
        // A run directory of its own: read back, it gives the same figures.
        assert_eq!(records(&out).unwrap().len(), 5);
        assert!(out.join("report.html").is_file());
        assert_eq!(
            std::fs::read_to_string(out.join(whole[0].artifacts_dir_name()).join("setup.log"))
                .unwrap(),
            "ok"
        );
        let again = crate::report::runs::rebuild(&out, &PriceTable::default(), &redactor).unwrap();
        assert_eq!(again.summary.cells, want.cells);
        assert_eq!(again.summary.parts, ["p1", "p2"], "a rebuild keeps the parts");
        // The same runs again replace the combination; another run is refused.
        combine(&[p2.clone(), p1.clone()], &out, &PriceTable::default(), &redactor).unwrap();
        let e = combine(std::slice::from_ref(&p1), &out, &PriceTable::default(), &redactor)
            .unwrap_err();
        assert!(e.to_string().contains("holds another run"), "{e}");
        let e =
            combine(&[p1.clone(), p2.clone()], &p1, &PriceTable::default(), &redactor).unwrap_err();
        assert!(e.to_string().contains("is one of the runs combined"), "{e}");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn an_attempt_in_two_runs_or_a_run_given_twice_is_refused() {
        let root = temp("twice");
        let (p1, p2) = (root.join("p1"), root.join("p2"));
        write_run(&p1, &[rec("a", 1, 1, Outcome::Pass), rec("b", 1, 1, Outcome::Pass)], None);
        write_run(&p2, &[rec("b", 2, 1, Outcome::Pass), rec("b", 1, 2, Outcome::Pass)], None);
        let e = union(&[p1.clone(), p2.clone()]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "failed to read the runs as one: b [shell] trial 1 is recorded in both {} and {}: each attempt must be in one run only",
                p1.display(),
                p2.display()
            )
        );
        let e = union(&[p1.clone(), root.join("p1/../p1")]).unwrap_err().to_string();
        assert!(e.contains("is given twice (as"), "{e}");
        // Different trials of one cell may come from different runs.
        write_run(&p2, &[rec("b", 2, 1, Outcome::Pass)], None);
        std::fs::remove_file(p2.join(rec("b", 1, 2, Outcome::Pass).file_name())).unwrap();
        assert_eq!(union(&[p1.clone(), p2.clone()]).unwrap().len(), 3);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn missing_parts_and_mixed_partitions_are_said() {
        let of = |specs: &[(&str, Option<&str>)]| {
            let runs: Vec<(String, Option<String>)> =
                specs.iter().map(|(id, p)| (id.to_string(), p.map(str::to_string))).collect();
            partition_gaps(&runs)
        };
        assert!(of(&[("a", Some("hash:1/2")), ("b", Some("hash:2/2"))]).is_empty());
        assert!(of(&[("a", None), ("b", None)]).is_empty());
        assert_eq!(
            of(&[("a", Some("count:2/3"))]),
            [
                "parts 1, 3 of count:K/3 are not among the runs: the figures cover only the parts given"
            ]
        );
        assert_eq!(
            of(&[("a", Some("hash:1/2")), ("b", None)]),
            [
                "run b is not a part of a partitioned run",
                "part 2 of hash:K/2 is not among the runs: the figures cover only the parts given"
            ]
        );
        assert_eq!(
            of(&[("a", Some("hash:1/2")), ("b", Some("count:2/2"))]),
            ["the runs are parts of different partitions: a hash:1/2, b count:2/2"]
        );
    }
}
