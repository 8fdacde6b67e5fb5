//! Each attempt's trajectory as ATIF JSON (see [`crate::atif`]), written as
//! it ends to `atif/<record file name>` in the run directory, through the
//! run's redactor and atomically like the record itself.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use super::Reporter;
use crate::prices::PriceTable;
use crate::report::events::RunEvent;
use crate::secrets::Redactor;

/// Writes an ATIF trajectory beside each record that has turns.
#[derive(Debug)]
pub struct AtifFiles {
    dir: PathBuf,
    redactor: Redactor,
    prices: PriceTable,
    /// Each harness spec's version, for the trajectory's agent.
    versions: BTreeMap<String, String>,
}

impl AtifFiles {
    /// Trajectories under `run_dir/atif`, priced with `prices`, each agent
    /// named with its version from `versions` (by harness spec).
    pub fn new(
        run_dir: PathBuf,
        redactor: Redactor,
        prices: PriceTable,
        versions: BTreeMap<String, String>,
    ) -> Self {
        Self { dir: run_dir.join("atif"), redactor, prices, versions }
    }
}

impl Reporter for AtifFiles {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        let RunEvent::AttemptEnded { record, .. } = event else { return Ok(()) };
        let version = self.versions.get(&record.harness).map(String::as_str);
        let Some(trajectory) = crate::atif::trajectory(record, version, Some(&self.prices)) else {
            return Ok(());
        };
        let path = self.dir.join(record.file_name());
        std::fs::create_dir_all(&self.dir)
            .and_then(|()| self.redactor.write_json(&path, &trajectory))
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "failed to write the ATIF trajectory {} of attempt {}: {e}",
                        path.display(),
                        record.attempt_label()
                    ),
                )
            })
    }
}
