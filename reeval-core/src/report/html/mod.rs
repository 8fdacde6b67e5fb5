//! The run's self-contained HTML report (askama; its style and script are
//! inlined, nothing is fetched from the network, every text escaped), made
//! to read a whole suite: the run's figures and provenance, then one group
//! per eval (collapsed: the eval's cells and their statistics on one line),
//! inside it the cells' figures and the eval's attempts, each with its tries,
//! a timeline of its phases and, in the order they ran, its turns (with each
//! turn's diff), checks and judge calls (`steps.rs`), then egress, artifacts
//! and events. An in-page script filters attempts by outcome, kind and a
//! search, from the controls or the URL's fragment (`#outcome=fail&q=readme`,
//! `#attempt=<id>` opens one attempt alone), so a view can be linked.

#[cfg(test)]
mod screenshot_tests;
mod steps;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use askama::Template;

use crate::outcome::Outcome;
use crate::prices::PriceTable;
use crate::record::{Record, Summary};
use crate::report::summary::RunReport;
use crate::secrets::Redactor;
use steps::StepView;

/// The page's style and script, inlined into it (the template is `page.html`, beside them).
const STYLE: &str = include_str!("style.css");
const SCRIPT: &str = include_str!("script.js");

struct CellView {
    harness: String,
    passed: u32,
    failed: u32,
    infra: u32,
    /// Trials with a final try.
    total: u32,
    rate: String,
    interval: String,
    threshold: String,
    ok: bool,
    /// False for a cell of infra and config errors only: neither passes nor fails.
    graded: bool,
    /// `1.00 · 0.90 · 0.67` for k = 1, 2, 3 (the title says which is which).
    at_k: String,
    pow_k: String,
    k_title: String,
    tokens: String,
    cost: String,
    /// `0.62`, or empty when the cell recorded no reward.
    reward: String,
    /// `0.31–0.85` (95 %), its method in the title.
    reward_interval: String,
    reward_method: String,
}

struct BarView {
    phase: String,
    left: String,
    width: String,
    ms: u64,
    detail: String,
}

struct TryView {
    title: String,
    outcome: &'static str,
    /// `fail/assertion`, `infra error`: the outcome as the page says it.
    label: String,
    message: String,
    location: String,
    total: String,
    record_file: String,
    ticks: Vec<(String, String)>,
    bars: Vec<BarView>,
    steps: Vec<StepView>,
    egress: Vec<crate::record::EgressRecord>,
    artifacts: Vec<(String, String)>,
    usage: String,
    cost: String,
    events: Vec<String>,
    /// `reward {"reward":0.5}` and each step's, or empty.
    reward: String,
    /// What the eval printed (its end, redacted), or empty.
    output: String,
}

struct AttemptView {
    id: String,
    title: String,
    /// Its harness and trial, the order within an outcome.
    order: (String, u32),
    outcome: &'static str,
    kind: &'static str,
    label: String,
    /// The last try's message, first line.
    headline: String,
    /// Lowercase text the page's search looks in.
    search: String,
    tries: Vec<TryView>,
}

struct EvalView {
    id: String,
    name: String,
    /// `pass` when every cell passes, else `fail`.
    status: &'static str,
    cells: Vec<CellView>,
    attempts: Vec<AttemptView>,
    /// Its first failing attempt's message, first line (empty when all passed).
    headline: String,
    /// Whether a cell recorded rewards: the table has a mean reward column.
    rewards: bool,
}

#[derive(Template)]
#[template(path = "page.html")]
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
    kinds: Vec<&'static str>,
    attempts: usize,
    evals: Vec<EvalView>,
    style: &'static str,
    script: &'static str,
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
    let partial = if u.partial { " (partial: a turn was cut short before its totals)" } else { "" };
    format!(
        "input {}, output {}, cache read {}, cache write {}, reasoning {}{partial}",
        n(u.input),
        n(u.output),
        n(u.cache_read),
        n(u.cache_write),
        n(u.reasoning)
    )
}

/// A cost; priced from partial usage, it is a lower bound and says so.
fn cost_text(cost: Option<f64>, usage: &crate::turn::Usage) -> String {
    match cost {
        Some(c) if usage.partial => format!("at least ${c:.4}"),
        Some(c) => format!("${c:.4}"),
        None => "unknown".into(),
    }
}

fn outcome_label(o: Outcome) -> String {
    match o {
        Outcome::Pass => "pass".into(),
        Outcome::Fail(kind) => format!("fail/{}", crate::outcome::Kind::from(kind).as_str()),
        Outcome::InfraError => "infra error".into(),
        Outcome::Config => "config error".into(),
    }
}

fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail(_) => "fail",
        Outcome::InfraError | Outcome::Config => "infra_error",
    }
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

/// How much of a turn's final message (or the eval's output) the page shows: its end. The record
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

fn try_view(r: &Record, prices: &PriceTable, redactor: &Redactor) -> TryView {
    let redact = |s: &str| redactor.redact(s).into_owned();
    let total = r.timings.total_ms.max(1) as f64;
    let mut artifacts: Vec<(String, String)> = r
        .artifacts
        .iter()
        .map(|a| (a.clone(), format!("{}/{a}", r.artifacts_dir_name())))
        .collect();
    artifacts.sort();
    TryView {
        title: format!("try {}", r.try_),
        reward: reward_line(r),
        outcome: outcome_class(r.outcome),
        label: outcome_label(r.outcome),
        message: redact(r.message.as_deref().unwrap_or_default()),
        location: r.location.clone().unwrap_or_default(),
        total: format!("{:.2}s", r.timings.total_ms as f64 / 1000.0),
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
        steps: steps::steps(r, &redact),
        // Hosts and paths only, never a header or body value; redacted all the same.
        egress: redactor.scrub(&r.egress).unwrap_or_default(),
        artifacts,
        usage: usage_text(&r.usage),
        cost: cost_text(prices.cost([r]), &r.usage),
        events: r
            .events
            .iter()
            .map(|e| format!("{} ms: {}", e.at_ms, redact(&e.message)))
            .collect(),
        output: r.output.as_deref().map(|o| message_end(redact(o))).unwrap_or_default(),
    }
}

fn cell_view(c: &crate::record::CellSummary) -> CellView {
    let join = |f: &dyn Fn(&crate::record::AtK) -> f64| {
        c.by_k.iter().map(|a| format!("{:.2}", f(a))).collect::<Vec<_>>().join(" · ")
    };
    CellView {
        harness: super::arm_label(&c.harness, c.arm.as_deref()),
        passed: c.passed,
        failed: c.failed,
        infra: c.infra,
        total: c.passed + c.failed + c.infra,
        rate: c.pass_rate.map(pct).unwrap_or_else(|| "n/a".into()),
        interval: c
            .pass_rate_interval
            .map(|[lo, hi]| format!("{}–{}", pct(lo), pct(hi)))
            .unwrap_or_else(|| "n/a".into()),
        threshold: c.min_pass_rate.map(pct).unwrap_or_else(|| "all".into()),
        ok: c.ok == Some(true),
        graded: c.ok.is_some(),
        at_k: join(&|a| a.pass_at_k),
        pow_k: join(&|a| a.pass_pow_k),
        k_title: match c.by_k.last() {
            Some(last) => format!("k = 1 … {}", last.k),
            None => String::new(),
        },
        tokens: usage_text(&c.usage),
        cost: cost_text(c.cost_usd, &c.usage),
        reward: c.reward.as_ref().map(|r| format!("{:.2}", r.mean)).unwrap_or_default(),
        reward_interval: c
            .reward
            .as_ref()
            .and_then(|r| r.interval)
            .map(|[lo, hi]| format!("{lo:.2}–{hi:.2}"))
            .unwrap_or_else(|| "n/a".into()),
        reward_method: c
            .reward
            .as_ref()
            .map(|r| {
                let left = match r.unrewarded {
                    0 => String::new(),
                    n => format!("; {n} graded without a reward, left out"),
                };
                format!("mean of {} rewards; 95% {}{left}", r.n, r.method)
            })
            .unwrap_or_default(),
    }
}

/// An attempt's reward and its steps' rewards, in one line (empty without one).
fn reward_line(r: &Record) -> String {
    let shown =
        |m: &std::collections::BTreeMap<String, f64>| serde_json::to_string(m).unwrap_or_default();
    let mut parts: Vec<String> = Vec::new();
    if let Some(reward) = &r.reward {
        let threshold = r.reward_threshold.map(|t| format!(" (passes at {t})")).unwrap_or_default();
        parts.push(format!("reward {}{threshold}", shown(reward)));
    }
    for step in &r.step_rewards {
        let reward = step.reward.as_ref().map(shown).unwrap_or_else(|| "none".into());
        let note = step.note.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
        parts.push(format!("step {} {reward}{note}", step.step));
    }
    parts.join(" · ")
}

/// An attempt: a trial's tries, the last one deciding.
fn attempt_view(
    eval: &str,
    harness: &str,
    trial: u32,
    mut tries: Vec<&Record>,
    prices: &PriceTable,
    redactor: &Redactor,
) -> AttemptView {
    tries.sort_by_key(|r| r.try_);
    let last = *tries.last().expect("a group has a try");
    let outcome = outcome_class(last.outcome);
    let kind = last.outcome.kind().map(|k| k.as_str()).unwrap_or("");
    let message = redactor.redact(last.message.as_deref().unwrap_or_default()).into_owned();
    let headline: String = message.lines().next().unwrap_or_default().chars().take(200).collect();
    let title = format!("{eval} #{trial} [{harness}]");
    AttemptView {
        id: crate::record::sanitize(&format!("{eval}-{harness}-{trial}")),
        search: format!("{title} {outcome} {kind} {message}").to_lowercase(),
        title,
        order: (harness.to_string(), trial),
        outcome,
        kind,
        label: outcome_label(last.outcome),
        headline,
        tries: tries.iter().map(|r| try_view(r, prices, redactor)).collect(),
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
    // One group per eval: its cells, then its attempts (each trial with its tries).
    let mut evals: BTreeMap<&str, EvalView> = BTreeMap::new();
    let group = |name: &str| EvalView {
        id: crate::record::sanitize(name),
        name: name.to_string(),
        status: "pass",
        cells: Vec::new(),
        attempts: Vec::new(),
        headline: String::new(),
        rewards: false,
    };
    for c in &summary.cells {
        let e = evals.entry(&c.eval).or_insert_with(|| group(&c.eval));
        e.rewards |= c.reward.is_some();
        match c.ok {
            Some(false) => e.status = "fail",
            // A cell of infra errors only: the eval is not green unless another cell passed.
            None if e.status == "pass" && e.cells.iter().all(|c| !c.graded) => {
                e.status = "infra_error"
            }
            Some(true) if e.status == "infra_error" => e.status = "pass",
            _ => {}
        }
        e.cells.push(cell_view(c));
    }
    let mut trials: BTreeMap<(&str, String, u32), Vec<&Record>> = BTreeMap::new();
    for r in records {
        // A comparison's arms are apart: `harness, arm`.
        let harness = super::arm_label(&r.harness, r.arm.as_deref());
        trials.entry((&r.eval, harness, r.trial)).or_default().push(r);
    }
    let attempts = trials.len();
    let mut kinds: Vec<&'static str> = Vec::new();
    for ((eval, harness, trial), tries) in trials {
        let a = attempt_view(eval, &harness, trial, tries, prices, redactor);
        if !a.kind.is_empty() && !kinds.contains(&a.kind) {
            kinds.push(a.kind);
        }
        evals.entry(eval).or_insert_with(|| group(eval)).attempts.push(a);
    }
    kinds.sort();
    // Failures first: evals whose cells fail, and in each, failed attempts before infra errors and passes.
    let rank = |o: &str| match o {
        "fail" => 0,
        "infra_error" => 1,
        _ => 2,
    };
    let mut evals: Vec<EvalView> = evals.into_values().collect();
    for e in &mut evals {
        e.attempts
            .sort_by(|a, b| rank(a.outcome).cmp(&rank(b.outcome)).then(a.order.cmp(&b.order)));
        if let Some(a) = e.attempts.iter().find(|a| a.outcome != "pass") {
            e.headline = a.headline.clone();
        }
    }
    evals.sort_by(|a, b| rank(a.status).cmp(&rank(b.status)).then(a.name.cmp(&b.name)));
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
        ("cost".to_string(), cost_text(summary.cost_usd, &summary.usage)),
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
        kinds,
        attempts,
        evals,
        style: STYLE,
        script: SCRIPT,
    }
    .render()
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
    fn event(&mut self, _event: &crate::report::events::RunEvent) -> std::io::Result<()> {
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
