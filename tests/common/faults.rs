//! The fault matrix's rows (docs/faults.md): each row test injects one fault,
//! checks what the README promises (outcome and kind, a complete record on
//! disk, nothing of the run left on the engine, no secret's value in any file
//! of the run) and then checks its row of the documentation's table against
//! what it observed, so the table cannot drift from the tests. With
//! `REEVAL_BLESS=1` a row that differs is rewritten instead (review the diff).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use reeval::{Outcome, Record, RunReport};

/// The table's file, and the markers its generated rows sit between.
const DOC: &str = "docs/faults.md";
const START: &str = "<!-- fault-matrix:start -->";
const END: &str = "<!-- fault-matrix:end -->";

/// One row of the table, as the test observed it.
#[derive(Debug)]
pub struct Row<'a> {
    /// A stable id; rows are kept sorted by it.
    pub id: &'a str,
    /// The fault injected.
    pub fault: &'a str,
    /// Where in the attempt (or the run) it happens.
    pub at: &'a str,
    /// The outcome observed (`pass`, `fail`, `infra_error`, `(run stops)`).
    pub outcome: String,
    /// The kind observed, or empty for a pass.
    pub kind: String,
    /// What the record (or the run's error) says: an excerpt the test asserted.
    pub says: &'a str,
    /// What is left on the engine and in the record directory, as observed.
    pub left: String,
}

impl Row<'_> {
    fn line(&self) -> String {
        let cell = |s: &str| markdown(&s.replace('|', "\\|").replace('\n', " "));
        format!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            self.id,
            cell(self.fault),
            cell(self.at),
            self.outcome,
            if self.kind.is_empty() { "" } else { &self.kind },
            cell(self.says),
            cell(&self.left)
        )
    }
}

/// `text` for a table cell of the book: outside code spans, `<` and `[` are
/// escaped (rustdoc, which renders the book, reads `<dir>` as an HTML tag and
/// `[shell]` as a link).
fn markdown(text: &str) -> String {
    text.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                part.to_string()
            } else {
                part.replace('<', "&lt;").replace('[', "\\[").replace(']', "\\]")
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

/// The outcome and kind columns of a record.
pub fn outcome_of(r: &Record) -> (String, String) {
    let kind = r.outcome.kind().map(|k| k.as_str().to_string()).unwrap_or_default();
    (r.outcome.as_str().to_string(), kind)
}

/// Checks `row` against docs/faults.md (or rewrites it under `REEVAL_BLESS=1`).
pub fn check_row(row: &Row<'_>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DOC);
    let want = row.line();
    let prefix = format!("| {} |", row.id);
    let bless = std::env::var("REEVAL_BLESS").is_ok_and(|v| v == "1");
    // Row tests run in parallel: one at a time reads and rewrites the file.
    let lock = std::fs::File::create(std::env::temp_dir().join("reeval-faults-doc.lock"))
        .expect("lock file");
    lock.lock().expect("lock");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("failed to read {}: {e}", path.display()));
    let (head, rest) = text.split_once(START).expect("docs/faults.md has the start marker");
    let (table, tail) = rest.split_once(END).expect("docs/faults.md has the end marker");
    let have = table.lines().find(|l| l.starts_with(&prefix));
    if have == Some(want.as_str()) {
        return;
    }
    if !bless {
        panic!(
            "the fault matrix's row {} in {DOC} does not match what the test observed:\n  doc:      {}\n  observed: {want}\n(run the test with REEVAL_BLESS=1 to rewrite the row, and review the diff)",
            row.id,
            have.unwrap_or("<missing>")
        );
    }
    let mut rows: Vec<String> = table
        .lines()
        .filter(|l| {
            l.starts_with("| ")
                && !l.starts_with(&prefix)
                && !l.starts_with("| id |")
                && !l.starts_with("|---")
        })
        .map(str::to_string)
        .collect();
    rows.push(want);
    rows.sort();
    let header = "| id | fault | where | outcome | kind | what the record says | what is left |\n|---|---|---|---|---|---|---|";
    let new = format!("{head}{START}\n{header}\n{}\n{END}{tail}", rows.join("\n"));
    std::fs::write(&path, new).expect("rewrite docs/faults.md");
}

/// What of the run is left: containers and networks labelled with its id,
/// and temporary record files. Empty when nothing is.
pub async fn leftovers(run_id: &str, run_dir: Option<&Path>) -> String {
    let docker = bollard::Docker::connect_with_defaults()
        .expect("docker")
        .negotiate_version()
        .await
        .expect("docker answers");
    let filters = HashMap::from([("label", vec![format!("dev.reeval.run={run_id}")])]);
    let containers = docker
        .list_containers(Some(
            bollard::query_parameters::ListContainersOptionsBuilder::default()
                .all(true)
                .filters(&filters)
                .build(),
        ))
        .await
        .expect("list containers")
        .len();
    let networks = super::networks_of_run(run_id).await;
    let tmp = run_dir
        .map(|d| files_under(d).iter().filter(|p| p.to_string_lossy().ends_with(".tmp")).count())
        .unwrap_or(0);
    let mut left = Vec::new();
    if containers > 0 {
        left.push(format!("{containers} containers"));
    }
    if networks > 0 {
        left.push(format!("{networks} networks"));
    }
    if tmp > 0 {
        left.push(format!("{tmp} temporary files"));
    }
    if left.is_empty() { "nothing".to_string() } else { left.join(", ") }
}

/// Every file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() { stack.push(p) } else { out.push(p) }
        }
    }
    out
}

/// The run's records are complete on disk (each parses, one per attempt, the
/// summary is there) and no file of the run holds `secret`.
pub fn assert_complete_and_clean(report: &RunReport, secret: Option<&str>) {
    for r in &report.records {
        let path = report.run_dir.join(r.file_name());
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("record {} missing: {e}", path.display()));
        let on_disk: Record = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("record {} does not parse: {e}", path.display()));
        assert_eq!(on_disk.outcome, r.outcome, "{}", path.display());
        assert!(
            on_disk.phases.iter().any(|p| p.phase.as_str() == "teardown"),
            "{} has its teardown",
            path.display()
        );
    }
    assert!(report.run_dir.join("summary.json").exists(), "the summary is written");
    if let Some(secret) = secret {
        for p in files_under(&report.run_dir) {
            let bytes = std::fs::read(&p).unwrap_or_default();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "{} holds the secret's value",
                p.display()
            );
        }
    }
}

/// The one record of a run of one attempt (no retries).
pub fn only(report: &RunReport) -> &Record {
    assert_eq!(
        report.records.len(),
        1,
        "one attempt: {:?}",
        report.records.iter().map(|r| &r.message).collect::<Vec<_>>()
    );
    &report.records[0]
}

/// Asserts the record's outcome and that its message holds `says`.
pub fn assert_outcome(r: &Record, outcome: Outcome, says: &str) {
    let message = r.message.as_deref().unwrap_or("");
    assert_eq!(r.outcome, outcome, "{message}");
    assert!(message.contains(says), "the message says {says:?}: {message}");
}
