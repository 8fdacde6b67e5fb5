//! The run's JSON files: each attempt's record as it ends, and the summary
//! (`summary.json`, or `summary.<pid>.json` under nextest, whose processes
//! share one run directory). Under nextest each process, when it ends, also
//! rebuilds `summary.json` and `report.html` over every record of the run
//! directory (one process at a time, under a lock file), so the last one to
//! end leaves a summary and report of the whole run.

use std::io;
use std::path::PathBuf;

use super::Reporter;
use crate::report::events::RunEvent;
use crate::report::summary::RunReport;
use crate::secrets::Redactor;

/// Writes records and the summary under the run directory.
#[derive(Debug)]
pub struct JsonFiles {
    run_dir: PathBuf,
    summary_name: String,
    redactor: Redactor,
    /// Under nextest: the prices to rebuild the whole run's summary with.
    combine: Option<crate::prices::PriceTable>,
}

impl JsonFiles {
    /// Files under `run_dir`, the summary named `summary_name`, through `redactor`.
    pub fn new(run_dir: PathBuf, summary_name: impl Into<String>, redactor: Redactor) -> Self {
        Self { run_dir, summary_name: summary_name.into(), redactor, combine: None }
    }

    /// Also rebuilds the summary and report of every process's records in the run directory.
    pub fn combining(mut self, prices: crate::prices::PriceTable) -> Self {
        self.combine = Some(prices);
        self
    }
}

impl Reporter for JsonFiles {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        if let RunEvent::AttemptEnded { record, .. } = event {
            let path = self.run_dir.join(record.file_name());
            // Created again if it was removed during the run.
            std::fs::create_dir_all(&self.run_dir)
                .and_then(|()| self.redactor.write_json(&path, record.as_ref()))
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "failed to write the record {} of attempt {}: {e}",
                            path.display(),
                            record.attempt_label()
                        ),
                    )
                })?;
        }
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        let path = self.run_dir.join(&self.summary_name);
        std::fs::create_dir_all(&self.run_dir)
            .and_then(|()| self.redactor.write_json(&path, &report.summary))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("failed to write the run's summary {}: {e}", path.display()),
                )
            })?;
        if let Some(prices) = &self.combine {
            let path = self.run_dir.join(".reeval.lock");
            let _lock =
                std::fs::File::create(&path).and_then(|f| f.lock().map(|()| f)).map_err(|e| {
                    io::Error::new(e.kind(), format!("failed to lock {}: {e}", path.display()))
                })?;
            crate::report::runs::rebuild(&self.run_dir, prices, &self.redactor)
                .map_err(io::Error::other)?;
        }
        Ok(())
    }
}
