//! The run's self-contained HTML report: the cells, and each attempt's phases as a timeline.

use askama::Template;

use crate::record::{Record, Summary};

struct CellView {
    eval: String,
    harness: String,
    passed: u32,
    failed: u32,
    infra: u32,
    rate: String,
    at_k: String,
    pow_k: String,
}

struct BarView {
    phase: String,
    left: String,
    width: String,
    ms: u64,
    detail: String,
}

struct AttemptView {
    title: String,
    outcome: &'static str,
    kind: &'static str,
    message: String,
    total_ms: u64,
    record_file: String,
    bars: Vec<BarView>,
    egress: Vec<crate::record::EgressRecord>,
}

#[derive(Template)]
#[template(path = "report.html")]
struct ReportPage {
    run_id: String,
    passed: u32,
    failed: u32,
    failed_by_kind: String,
    infra: u32,
    exit_code: i32,
    cells: Vec<CellView>,
    attempts: Vec<AttemptView>,
}

fn figures(v: &[f64]) -> String {
    v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>().join(" / ")
}

/// Renders the report of a run, with every secret value redacted before escaping.
///
/// # Errors
/// A template error (never expected: the template is checked at compile time).
pub fn render(
    summary: &Summary,
    records: &[Record],
    redactor: &crate::secrets::Redactor,
) -> Result<String, askama::Error> {
    let redact = |s: &str| redactor.redact(s).into_owned();
    let cells = summary
        .cells
        .iter()
        .map(|c| CellView {
            eval: c.eval.clone(),
            harness: c.harness.clone(),
            passed: c.passed,
            failed: c.failed,
            infra: c.infra,
            rate: c.pass_rate.map(|r| format!("{:.0}%", r * 100.0)).unwrap_or_else(|| "n/a".into()),
            at_k: figures(&c.pass_at_k),
            pow_k: figures(&c.pass_pow_k),
        })
        .collect();
    let attempts = records
        .iter()
        .map(|r| {
            let total = r.timings.total_ms.max(1) as f64;
            AttemptView {
                title: format!("{} #{} [{}] try {}", r.eval, r.trial, r.harness, r.try_),
                outcome: match r.outcome {
                    crate::Outcome::Pass => "pass",
                    crate::Outcome::Fail(_) => "fail",
                    crate::Outcome::InfraError | crate::Outcome::Config => "infra_error",
                },
                kind: r.outcome.kind().map(|k| k.as_str()).unwrap_or(""),
                message: redact(r.message.as_deref().unwrap_or_default()),
                total_ms: r.timings.total_ms,
                record_file: r.file_name(),
                bars: r
                    .phases
                    .iter()
                    .map(|p| BarView {
                        phase: p.phase.to_string(),
                        left: format!("{:.2}", p.start_ms as f64 / total * 100.0),
                        width: format!("{:.2}", p.duration_ms as f64 / total * 100.0),
                        ms: p.duration_ms,
                        detail: redact(&p.detail),
                    })
                    .collect(),
                // Hosts and paths only, never a header or body value; redacted all the same.
                egress: redactor.scrub(&r.egress).unwrap_or_default(),
            }
        })
        .collect();
    ReportPage {
        run_id: summary.run_id.clone(),
        passed: summary.passed,
        failed: summary.failed.values().sum(),
        failed_by_kind: summary
            .failed
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        infra: summary.infra,
        exit_code: summary.exit_code,
        cells,
        attempts,
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_escapes_and_shows_phases() {
        let mut r = Record::new("run-1", "evil<script>", "shell", 1, 1);
        r.timings.total_ms = 100;
        r.message = Some("<b>not bold</b>".into());
        r.phases.push(crate::record::PhaseRecord {
            phase: crate::Phase::Turn,
            start_ms: 10,
            duration_ms: 50,
            detail: "1 completed".into(),
        });
        let summary = crate::runner::summarize("run-1", std::slice::from_ref(&r));
        let html = render(&summary, &[r], &crate::secrets::Redactor::new(["not bold"])).unwrap();
        assert!(
            html.contains("evil&#60;script&#62;") || html.contains("evil&lt;script&gt;"),
            "{html}"
        );
        assert!(!html.contains("not bold") && html.contains("[redacted]"));
        assert!(
            html.contains("class=\"bar p-turn\" style=\"left: 10.00%; width: 50.00%\""),
            "{html}"
        );
    }
}

/// Writes the run's `report.html` (or `report.<pid>.html` under nextest) when it ends.
#[derive(Debug)]
pub struct HtmlReport {
    path: std::path::PathBuf,
    redactor: crate::secrets::Redactor,
}

impl HtmlReport {
    /// A report written to `path`, through `redactor`.
    pub fn new(path: std::path::PathBuf, redactor: crate::secrets::Redactor) -> Self {
        Self { path, redactor }
    }
}

impl super::Reporter for HtmlReport {
    fn event(&mut self, _event: &crate::runner::events::RunEvent) -> std::io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, report: &crate::runner::RunReport) -> std::io::Result<()> {
        let html = render(&report.summary, &report.records, &self.redactor)
            .map_err(std::io::Error::other)?;
        std::fs::write(&self.path, html)
    }
}
