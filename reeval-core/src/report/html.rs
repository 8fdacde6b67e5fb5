//! The run's self-contained HTML report (askama; no script, no font or
//! style from the network, every text escaped): the run's provenance and
//! figures, its cells with their statistics and cost, then its attempts,
//! failures first, each with its tries grouped under it, a timeline of its
//! phases (a time axis, labels and a legend) and, a click away, its turns
//! (with each turn's diff rendered as a diff), checks, verdicts, egress,
//! artifacts (`setup.log`, captures, linked), usage and cost.

use askama::Template;

use crate::outcome::Outcome;
use crate::prices::PriceTable;
use crate::record::{Record, Summary};
use crate::runner::RunReport;
use crate::secrets::Redactor;

struct CellView {
    eval: String,
    harness: String,
    passed: u32,
    failed: u32,
    infra: u32,
    rate: String,
    interval: String,
    threshold: String,
    ok: bool,
    /// False for a cell of infra and config errors only: neither passes nor fails.
    graded: bool,
    by_k: Vec<(u32, String, String)>,
    tokens: String,
    cost: String,
}

struct BarView {
    phase: String,
    left: String,
    width: String,
    ms: u64,
    detail: String,
}

struct DiffLine {
    class: &'static str,
    text: String,
}

struct ToolView {
    name: String,
    input: String,
    result: String,
}

struct TurnView {
    index: usize,
    prompt: String,
    status: String,
    final_message: String,
    error: String,
    model: String,
    duration_ms: u64,
    tools: Vec<ToolView>,
    files: Vec<String>,
    diff: Vec<DiffLine>,
}

struct CheckView {
    command: String,
    exit_code: i64,
    duration_ms: u64,
    stdout: String,
    stderr: String,
}

struct VerdictView {
    criterion: String,
    score: String,
    threshold: String,
    pass: bool,
    reasoning: String,
    error: String,
}

struct TryView {
    title: String,
    outcome: &'static str,
    kind: &'static str,
    message: String,
    location: String,
    total_ms: u64,
    record_file: String,
    ticks: Vec<(String, String)>,
    bars: Vec<BarView>,
    turns: Vec<TurnView>,
    checks: Vec<CheckView>,
    verdicts: Vec<VerdictView>,
    egress: Vec<crate::record::EgressRecord>,
    artifacts: Vec<(String, String)>,
    usage: String,
    cost: String,
    events: Vec<String>,
}

struct AttemptView {
    id: String,
    title: String,
    outcome: &'static str,
    kind: &'static str,
    tries: Vec<TryView>,
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
    exit_reason: String,
    provenance: Vec<(String, String)>,
    legend: Vec<&'static str>,
    cells: Vec<CellView>,
    attempts: Vec<AttemptView>,
}

/// Every phase a timeline can show, in lifecycle order (the legend).
const PHASES: &[&str] = &[
    "preflight",
    "image",
    "container",
    "gateway",
    "env",
    "workspace",
    "files",
    "setup",
    "snapshot",
    "harness",
    "turn",
    "check",
    "judge",
    "serve",
    "capture",
    "teardown",
];

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn usage_text(u: &crate::turn::Usage) -> String {
    let n = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "–".into());
    if *u == crate::turn::Usage::default() {
        return "not reported".into();
    }
    format!(
        "input {}, output {}, cache read {}, cache write {}, reasoning {}",
        n(u.input),
        n(u.output),
        n(u.cache_read),
        n(u.cache_write),
        n(u.reasoning)
    )
}

fn cost_text(cost: Option<f64>) -> String {
    cost.map(|c| format!("${c:.4}")).unwrap_or_else(|| "unknown".into())
}

fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail(_) => "fail",
        Outcome::InfraError | Outcome::Config => "infra_error",
    }
}

fn diff_lines(patch: &str) -> Vec<DiffLine> {
    patch
        .lines()
        .map(|l| DiffLine {
            class: if l.starts_with("+++") || l.starts_with("---") || l.starts_with("diff ") {
                "d-file"
            } else if l.starts_with("@@") {
                "d-hunk"
            } else if l.starts_with('+') {
                "d-add"
            } else if l.starts_with('-') {
                "d-del"
            } else {
                "d-ctx"
            },
            text: l.to_string(),
        })
        .collect()
}

/// Time-axis ticks for a timeline of `total_ms`: about five round steps.
fn ticks(total_ms: u64) -> Vec<(String, String)> {
    let total = total_ms.max(1);
    let step = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000,
        120_000, 300_000, 600_000,
    ]
    .into_iter()
    .find(|s| total / s <= 6)
    .unwrap_or(1_200_000);
    (0..=total / step)
        .map(|i| {
            let ms = i * step;
            let label = if step >= 1_000 { format!("{}s", ms / 1_000) } else { format!("{ms}ms") };
            (format!("{:.2}", ms as f64 / total as f64 * 100.0), label)
        })
        .collect()
}

/// How much of a turn's final message the page shows: its end. The record
/// keeps all the harness kept (the shell harness: 64 KiB), and the page of a
/// run of many chatty attempts stays small, in the browser and in the runner.
const PAGE_MESSAGE_LIMIT: usize = 4 * 1024;

/// The end of an already redacted message (cut after redaction, so that a
/// secret's value is never cut in two and left half unmasked).
fn message_end(redacted: String) -> String {
    if redacted.len() <= PAGE_MESSAGE_LIMIT {
        return redacted;
    }
    let kept = crate::exec::tail(&redacted, PAGE_MESSAGE_LIMIT);
    format!(
        "[… {} bytes before this are in the attempt's record …]\n{kept}",
        redacted.len() - kept.len()
    )
}

fn try_view(r: &Record, prices: &PriceTable, redact: &dyn Fn(&str) -> String) -> TryView {
    let total = r.timings.total_ms.max(1) as f64;
    let mut artifacts: Vec<(String, String)> = r
        .artifacts
        .iter()
        .map(|a| (a.clone(), format!("{}/{a}", r.artifacts_dir_name())))
        .collect();
    artifacts.sort();
    TryView {
        title: format!("try {}", r.try_),
        outcome: outcome_class(r.outcome),
        kind: r.outcome.kind().map(|k| k.as_str()).unwrap_or(""),
        message: redact(r.message.as_deref().unwrap_or_default()),
        location: r.location.clone().unwrap_or_default(),
        total_ms: r.timings.total_ms,
        record_file: r.file_name(),
        ticks: ticks(r.timings.total_ms),
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
        turns: r
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| TurnView {
                index: i + 1,
                prompt: redact(&t.prompt),
                status: serde_json::to_value(t.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                final_message: message_end(redact(t.final_message.as_deref().unwrap_or(""))),
                error: redact(t.error.as_deref().unwrap_or("")),
                model: t.model.clone().unwrap_or_default(),
                duration_ms: t.duration_ms,
                tools: t
                    .tool_calls
                    .iter()
                    .map(|c| ToolView {
                        name: c.name.clone(),
                        input: redact(&c.input.to_string()),
                        result: redact(
                            c.error.as_deref().or(c.result.as_deref()).unwrap_or_default(),
                        ),
                    })
                    .collect(),
                files: t
                    .diff
                    .files
                    .iter()
                    .map(|f| format!("{} ({:?})", f.path, f.change).to_lowercase())
                    .collect(),
                diff: diff_lines(&redact(&t.diff.patch)),
            })
            .collect(),
        checks: r
            .checks
            .iter()
            .map(|c| CheckView {
                command: redact(&c.command),
                exit_code: c.exit_code,
                duration_ms: c.duration_ms,
                stdout: redact(&c.stdout_tail),
                stderr: redact(&c.stderr_tail),
            })
            .collect(),
        verdicts: r
            .verdicts
            .iter()
            .map(|v| VerdictView {
                criterion: redact(&v.criterion),
                score: format!("{:.2}", v.score),
                threshold: format!("{:.2}", v.threshold),
                pass: v.pass,
                reasoning: redact(&v.reasoning),
                error: redact(v.error.as_deref().unwrap_or("")),
            })
            .collect(),
        egress: Vec::new(),
        artifacts,
        usage: usage_text(&r.usage),
        cost: cost_text(prices.cost([r])),
        events: r
            .events
            .iter()
            .map(|e| format!("{} ms: {}", e.at_ms, redact(&e.message)))
            .collect(),
    }
}

/// Renders the report of a run (built-in prices), with every secret value redacted before escaping.
///
/// # Errors
/// A template error (never expected: the template is checked at compile time).
pub fn render(
    summary: &Summary,
    records: &[Record],
    redactor: &Redactor,
) -> Result<String, askama::Error> {
    render_priced(summary, records, redactor, &PriceTable::default())
}

/// [`render`] with the run's prices.
///
/// # Errors
/// As [`render`].
pub fn render_priced(
    summary: &Summary,
    records: &[Record],
    redactor: &Redactor,
    prices: &PriceTable,
) -> Result<String, askama::Error> {
    let redact = |s: &str| redactor.redact(s).into_owned();
    let cells = summary
        .cells
        .iter()
        .map(|c| CellView {
            eval: c.eval.clone(),
            harness: super::console::arm_label(&c.harness, c.arm.as_deref()),
            passed: c.passed,
            failed: c.failed,
            infra: c.infra,
            rate: c.pass_rate.map(pct).unwrap_or_else(|| "n/a".into()),
            interval: c
                .pass_rate_interval
                .map(|[lo, hi]| format!("{}–{}", pct(lo), pct(hi)))
                .unwrap_or_else(|| "n/a".into()),
            threshold: c.min_pass_rate.map(pct).unwrap_or_else(|| "all".into()),
            ok: c.ok == Some(true),
            graded: c.ok.is_some(),
            by_k: c
                .by_k
                .iter()
                .map(|a| (a.k, format!("{:.2}", a.pass_at_k), format!("{:.2}", a.pass_pow_k)))
                .collect(),
            tokens: usage_text(&c.usage),
            cost: cost_text(c.cost_usd),
        })
        .collect();
    // Attempts: each trial with its tries under it, failures first, then by name.
    let mut groups: std::collections::BTreeMap<(String, String, u32), Vec<&Record>> =
        Default::default();
    for r in records {
        // A comparison's arms are apart: `harness, arm`.
        let harness = super::console::arm_label(&r.harness, r.arm.as_deref());
        groups.entry((r.eval.clone(), harness, r.trial)).or_default().push(r);
    }
    let mut attempts: Vec<AttemptView> = groups
        .into_iter()
        .map(|((eval, harness, trial), mut tries)| {
            tries.sort_by_key(|r| r.try_);
            let last = *tries.last().expect("a group has a try");
            AttemptView {
                id: crate::record::sanitize(&format!("{eval}-{harness}-{trial}")),
                title: format!("{eval} #{trial} [{harness}]"),
                outcome: outcome_class(last.outcome),
                kind: last.outcome.kind().map(|k| k.as_str()).unwrap_or(""),
                tries: tries
                    .iter()
                    .map(|r| {
                        let mut view = try_view(r, prices, &redact);
                        // Hosts and paths only, never a header or body value; redacted all the same.
                        view.egress = redactor.scrub(&r.egress).unwrap_or_default();
                        view
                    })
                    .collect(),
            }
        })
        .collect();
    let rank = |o: &str| match o {
        "fail" => 0,
        "infra_error" => 1,
        _ => 2,
    };
    attempts.sort_by(|a, b| rank(a.outcome).cmp(&rank(b.outcome)).then(a.title.cmp(&b.title)));
    let p = &summary.provenance;
    let mut provenance = vec![
        ("started".to_string(), p.started_at.clone().unwrap_or_default()),
        ("ended".to_string(), p.ended_at.clone().unwrap_or_default()),
        (
            "duration".to_string(),
            p.duration_ms.map(|ms| format!("{:.1}s", ms as f64 / 1000.0)).unwrap_or_default(),
        ),
        ("command".to_string(), redact(&p.command.join(" "))),
        (
            "git".to_string(),
            p.git
                .as_ref()
                .map(|g| format!("{}{}", g.commit, if g.dirty { " (dirty)" } else { "" }))
                .unwrap_or_else(|| "not a git repository".into()),
        ),
        ("reeval".to_string(), p.reeval_version.clone()),
        ("engine".to_string(), p.engine.clone().unwrap_or_default()),
        ("tokens".to_string(), usage_text(&summary.usage)),
        ("cost".to_string(), cost_text(summary.cost_usd)),
    ];
    for (h, v) in &p.harness_versions {
        provenance.push((format!("harness {h}"), v.clone()));
    }
    provenance.retain(|(_, v)| !v.is_empty());
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
        exit_reason: summary.exit_reason.clone(),
        provenance,
        legend: PHASES.to_vec(),
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
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "nothing from the network"
        );
    }

    #[test]
    fn a_long_final_message_shows_its_redacted_end_on_the_page() {
        // The secret straddles the page's cut: redaction comes first, so no half of it shows.
        let secret = "sk-live-0123456789abcdef";
        let long =
            format!("{}{secret}{}THE END", "a".repeat(5000), "b".repeat(PAGE_MESSAGE_LIMIT - 20));
        let shown = message_end(crate::secrets::Redactor::new([secret]).redact(&long).into_owned());
        assert!(shown.ends_with("THE END") && shown.starts_with("[… "), "{shown:.80}");
        assert!(shown.len() < PAGE_MESSAGE_LIMIT + 80);
        assert!(!shown.contains("0123456789") && !shown.contains("abcdef"), "{shown:.200}");
        assert_eq!(message_end("short".into()), "short");
    }

    #[test]
    fn failures_come_first_and_tries_are_grouped() {
        let mut pass = Record::new("run", "a_passes", "shell", 1, 1);
        pass.outcome = Outcome::Pass;
        let mut tries = Vec::new();
        for t in 1..=2 {
            let mut r = Record::new("run", "z_fails", "shell", 1, t);
            r.outcome =
                if t == 1 { Outcome::InfraError } else { Outcome::Fail(crate::FailKind::Judge) };
            tries.push(r);
        }
        let records = [pass, tries[0].clone(), tries[1].clone()];
        let summary = crate::runner::summarize("run", &records);
        let html = render(&summary, &records, &Redactor::new(Vec::<&str>::new())).unwrap();
        let fail = html.find("z_fails #1 [shell]").unwrap();
        let ok = html.find("a_passes #1 [shell]").unwrap();
        assert!(fail < ok, "the failing attempt comes first");
        assert_eq!(html.matches("z_fails #1 [shell]").count(), 1, "one attempt, its tries inside");
        assert!(html.contains("try 1") && html.contains("try 2"));
    }

    #[test]
    fn ticks_are_round() {
        let t = ticks(4_500);
        assert_eq!(
            t.iter().map(|(_, l)| l.as_str()).collect::<Vec<_>>(),
            ["0s", "1s", "2s", "3s", "4s"]
        );
        assert_eq!(ticks(80)[1].1, "20ms");
    }
}

/// Writes the run's `report.html` when it ends.
#[derive(Debug)]
pub struct HtmlReport {
    path: std::path::PathBuf,
    redactor: Redactor,
    prices: PriceTable,
}

impl HtmlReport {
    /// A report written to `path`, through `redactor`.
    pub fn new(path: std::path::PathBuf, redactor: Redactor) -> Self {
        Self { path, redactor, prices: PriceTable::default() }
    }

    /// Costs from `prices`.
    pub fn priced(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }
}

impl super::Reporter for HtmlReport {
    fn event(&mut self, _event: &crate::runner::events::RunEvent) -> std::io::Result<()> {
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> std::io::Result<()> {
        let html = render_priced(&report.summary, &report.records, &self.redactor, &self.prices)
            .map_err(std::io::Error::other)?;
        let dir = self.path.parent().filter(|d| !d.as_os_str().is_empty());
        dir.map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| crate::secrets::write_atomically(&self.path, html.as_bytes()))
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("failed to write {}: {e}", self.path.display()),
                )
            })
    }
}
