//! The run's end, once every trial ended: the background work waited for
//! (destroys, setup fills), the run's own sandboxes swept, records gone
//! missing counted, the summary made and the reporters finished.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::Runner;
use super::executor::Executor;
use super::pool::Pool;
use crate::record::Record;
use crate::report::summary::settle_exit;
use crate::report::{Reporter, RunReport, summarize_priced};
use crate::sandbox::Sweep;

/// What the end needs of the run beyond its records.
pub(super) struct End<'a> {
    pub(super) runner: &'a Runner,
    pub(super) run_dir: PathBuf,
    /// When the run started, for the summary's provenance.
    pub(super) started: SystemTime,
    /// The engine and its version, for the summary.
    pub(super) engine: Option<String>,
    pub(super) harness_versions: BTreeMap<String, String>,
}

impl End<'_> {
    /// Ends the run of `records`: `lost` holds what could not be written so far.
    ///
    /// # Cancel safety
    /// Dropping it may leave sandboxes to the next run's sweep and the summary unwritten.
    pub(super) async fn finish(
        self,
        pool: &Pool,
        executor: &Executor,
        records: Vec<Record>,
        mut lost: Vec<String>,
        reporters: &mut [Box<dyn Reporter>],
    ) -> RunReport {
        let config = &self.runner.config;
        // Every sandbox destroyed in the background is gone before the run ends,
        // also when it was interrupted; the setup cache's fills are done too.
        executor.wait_background().await;
        // Sandboxes whose attempt lost track of them (a create cut short, an engine
        // that went away and came back) go now, not at the next run.
        for engine in pool.engines() {
            let _ = engine.backend.sweep(Sweep::OwnRun(&config.settings.run_id)).await;
        }
        missing_records(&self.run_dir, &records, &mut lost);
        let mut summary =
            summarize_priced(&config.settings.run_id, &records, &config.settings.prices);
        summary.comparison = self.runner.comparison(&records);
        summary.provenance =
            super::provenance::of_run(self.started, self.engine, self.harness_versions);
        summary.suite = config.suite.clone();
        summary.partition = config.settings.partition.map(|p| p.to_string());
        let interrupted = self.runner.shutdown.is_cancelled();
        let counted = (summary.exit_code, summary.exit_reason.clone());
        settle_exit(&mut summary, &counted, interrupted, &lost);
        if !lost.is_empty() {
            // The summary lists the records that are there, not those a full disk lost.
            summary.records.retain(|f| self.run_dir.join(f).is_file());
        }
        let run_id = config.settings.run_id.clone();
        let mut report = RunReport { run_id, run_dir: self.run_dir, records, summary };
        // The files first (report.html before the summary, which then knows whether it was
        // written), the console last: each hears of what the ones before it failed to write.
        for r in reporters.iter_mut() {
            if let Err(e) = r.finish(&report) {
                crate::report::say(&format!("reeval: {e}\n"));
                lost.push(e.to_string());
                settle_exit(&mut report.summary, &counted, interrupted, &lost);
            }
        }
        report
    }
}

/// A record that was written but is gone at the end (its directory removed
/// during the run, the writer then making it again for later records) is lost
/// as surely as one a full disk refused: said with its path and attempt, and
/// counted in `lost`, so the run is no success.
fn missing_records(run_dir: &Path, records: &[Record], lost: &mut Vec<String>) {
    for r in records {
        let path = run_dir.join(r.file_name());
        let named = path.display().to_string();
        if path.is_file() || lost.iter().any(|l| l.contains(&named)) {
            continue;
        }
        let e = format!(
            "failed to keep the record {named} of attempt {}: it was removed during the run",
            r.attempt_label()
        );
        crate::report::say(&format!("reeval: {e}\n"));
        lost.push(e);
    }
}
