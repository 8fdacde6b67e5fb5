//! Running a [`Runner`]: preflight, the reporters every run writes with,
//! then the dispatcher (which owns the event loop) and the run's end.

use std::collections::BTreeMap;

use super::Runner;
use super::preflight::{self, PreflightError, Preflighted};
use crate::eval::Eval;
use crate::report::{AtifFiles, Console, HtmlReport, JsonFiles, Reporter, RunReport};

impl Runner {
    /// Runs `evals` (already selected) and writes the run's records, summary
    /// and report (with `print` or `verbose`, also on the console).
    ///
    /// # Errors
    /// A [`PreflightError`] when something required is missing; nothing was started then.
    ///
    /// # Cancel safety
    /// Dropping the future may leave sandboxes behind, which the next run
    /// removes; use [`Runner::shutdown_token`] to stop a run cleanly.
    pub async fn run(&self, evals: Vec<Eval>) -> Result<RunReport, PreflightError> {
        self.run_with(evals, Vec::new()).await
    }

    /// [`Runner::run`] with reporters of the caller's on the run's event
    /// stream too. With any given, the default console is left out.
    ///
    /// # Errors
    /// As [`Runner::run`].
    ///
    /// # Cancel safety
    /// As [`Runner::run`].
    pub async fn run_with(
        &self,
        evals: Vec<Eval>,
        extra: Vec<Box<dyn Reporter>>,
    ) -> Result<RunReport, PreflightError> {
        let ready = preflight::preflight(self, &evals).await?;
        // Found once, in the cells' plans: the trajectories name them, and the summary's provenance.
        let versions: BTreeMap<String, String> = ready
            .plans
            .iter()
            .flatten()
            .filter_map(|p| Some((p.harness_spec.clone(), p.harness_version.clone()?)))
            .collect();
        let mut reporters = self.reporters(&ready, &versions, extra);
        Ok(super::dispatcher::dispatch(self, evals, ready, versions, &mut reporters).await)
    }

    /// The files every run writes (records, summary, report, trajectories),
    /// the console when asked for and no reporter is `extra`, then `extra`.
    fn reporters(
        &self,
        ready: &Preflighted,
        versions: &BTreeMap<String, String>,
        extra: Vec<Box<dyn Reporter>>,
    ) -> Vec<Box<dyn Reporter>> {
        let config = &self.config;
        let run_dir = config.settings.record_dir.join(&config.settings.run_id);
        let redactor = &ready.redactor;
        let mut reporters: Vec<Box<dyn Reporter>> = if config.settings.under_nextest {
            // Every eval is its own process writing into one run directory: each writes its
            // own summary, and the whole run's summary and report are rebuilt over all of them.
            let summary = format!("summary.{}.json", std::process::id());
            vec![Box::new(
                JsonFiles::new(run_dir.clone(), summary, redactor.clone())
                    .combining(config.settings.prices.clone()),
            )]
        } else {
            // The report before the summary: the summary then says whether the report was written.
            vec![
                Box::new(
                    HtmlReport::new(run_dir.join("report.html"), redactor.clone())
                        .priced(config.settings.prices.clone()),
                ),
                Box::new(JsonFiles::new(run_dir.clone(), "summary.json", redactor.clone())),
            ]
        };
        if extra.is_empty() && (config.print || config.settings.verbose) {
            reporters.push(Box::new(Console::new(config.print, config.settings.verbose)));
        }
        let prices = config.settings.prices.clone();
        reporters.push(Box::new(AtifFiles::new(
            run_dir,
            redactor.clone(),
            prices,
            versions.clone(),
        )));
        reporters.extend(extra);
        reporters
    }
}
