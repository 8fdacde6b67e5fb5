//! How a comparison reads: a terminal table, and (for `reeval compare`) an HTML page.

use super::analysis::{ArmFigures, Comparison, ComparisonRow};

fn percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:.0}%", x * 100.0))
}

fn interval(x: Option<[f64; 2]>) -> String {
    x.map_or("-".into(), |[l, h]| format!("[{:.0}%, {:.0}%]", l * 100.0, h * 100.0))
}

fn signed_percent(x: Option<f64>) -> String {
    x.map_or("-".into(), |x| format!("{:+.0}%", x * 100.0))
}

fn arm(f: &ArmFigures) -> String {
    format!(
        "{}/{} {} {}",
        f.passed,
        f.passed + f.failed,
        percent(f.pass_rate),
        interval(f.pass_rate_interval)
    )
}

fn line(row: &ComparisonRow) -> String {
    let mut excluded = String::new();
    if row.excluded.pairs > 0 {
        excluded = format!(
            "; {} pairs left out for infra errors ({} {}, {} {})",
            row.excluded.pairs,
            row.excluded.control,
            row.control.arm,
            row.excluded.treatment,
            row.treatment.arm
        );
    }
    let cost = match row.differences.cost_usd {
        Some(c) => format!(", cost {c:+.4} USD"),
        None => String::new(),
    };
    format!(
        "  {:<32} {:<22} {:<22} {:>5} {:<13} {}\n  {:<32} {} pairs{excluded}; time {}, tokens {:+}{cost}\n",
        row.label(),
        arm(&row.control),
        arm(&row.treatment),
        signed_percent(row.difference),
        interval(row.interval),
        row.verdict_text(),
        "",
        row.pairs,
        row.differences
            .mean_ms
            .map_or("-".into(), |ms| format!("{:+.1}s", ms / 1000.0)),
        row.differences.tokens,
    )
}

/// The comparison as a table for a terminal.
pub fn table(c: &Comparison) -> String {
    let mut out = format!(
        "\ncomparison: {} vs {} (difference = {} − {}), look {}\n",
        c.treatment, c.control, c.treatment, c.control, c.look
    );
    out.push_str(&format!(
        "  {:<32} {:<22} {:<22} {:>5} {:<13} {}\n",
        "eval", c.control, c.treatment, "diff", "interval", "verdict"
    ));
    for row in &c.evals {
        out.push_str(&line(row));
    }
    out.push_str(&line(&c.overall));
    out.push_str(&format!(
        "  pass rates: 95% Wilson intervals; difference: {} at {:.0}%{}\n",
        c.overall.method,
        c.overall.confidence * 100.0,
        if c.look > 1 {
            " (a later look: valid however often trials are added)"
        } else {
            " (a resumed run's later looks use a confidence sequence)"
        }
    ));
    out
}
