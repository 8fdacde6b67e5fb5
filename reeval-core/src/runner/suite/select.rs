//! Which evals a suite's command line selects (filters, `--skip`,
//! `--ignored`, `--tag`), `--list`, and why a run selected none.

use super::{EXIT_OUTPUT_LOST, Step, usage};
use crate::eval::Eval;
use crate::report::Lines;
use crate::runner::given::harness_specs_of;
use crate::runner::part::Part;
use crate::settings::{self, Args, Settings};

/// The evals the filters, `--skip`, `--ignored` and the tags select.
pub(super) fn selected<'e>(args: &Args, tags: &[String], evals: &'e [Eval]) -> Vec<&'e Eval> {
    evals
        .iter()
        .filter(|e| args.selects(&e.name, e.options.ignore))
        .filter(|e| Args::tagged(tags, &e.options.tags))
        .collect()
}

/// The evals a run chose, as each later step narrows them.
pub(super) struct Chosen<'e> {
    /// The evals that run.
    pub(super) to_run: Vec<&'e Eval>,
    /// Selected but marked ignore: reported as ignored, as libtest does.
    pub(super) ignored: Vec<&'e Eval>,
    /// How many evals the selection left out, for libtest's `filtered out`.
    pub(super) filtered_out: usize,
    /// Only these cells (eval, harness) run, when set (`--regrade`, `--rerun-failed`).
    pub(super) only_cells: Option<Vec<(String, String)>>,
}

impl<'e> Chosen<'e> {
    /// The `selected` evals of a suite of `all`, split into those that run and those ignored.
    pub(super) fn of(args: &Args, selected: Vec<&'e Eval>, all: usize) -> Self {
        let filtered_out = all - selected.len();
        let (to_run, ignored) = selected.into_iter().partition(|e| args.runs(e.options.ignore));
        Self { to_run, ignored, filtered_out, only_cells: None }
    }

    /// Keeps the evals that run for which `keep` holds; the others are filtered out.
    pub(super) fn retain(&mut self, keep: impl Fn(&Eval) -> bool) {
        let before = self.to_run.len();
        self.to_run.retain(|e| keep(e));
        self.filtered_out += before - self.to_run.len();
    }

    /// Only `cells` run, and only the evals that have one.
    pub(super) fn only(&mut self, cells: Vec<(String, String)>) {
        self.retain(|e| cells.iter().any(|(eval, _)| *eval == e.name));
        self.only_cells = Some(cells);
    }
}

/// `--list`: the evals selected (of the part `partition`, if any), as libtest
/// lists tests. Side-effect free: a sort over statics, no Docker, no network, no keys.
pub(super) fn list(
    args: &Args,
    selected: &[&Eval],
    partition: Option<settings::Partition>,
) -> Step<i32> {
    let part = partition.map(|p| list_part(p, args, selected)).transpose().map_err(usage)?;
    let listed: Vec<&&Eval> =
        selected.iter().filter(|e| part.as_ref().is_none_or(|p| p.has_eval(&e.name))).collect();
    let mut text = String::new();
    for e in &listed {
        text.push_str(&format!("{}: test\n", e.name));
    }
    if !args.terse {
        text.push_str(&format!("\n{} tests, 0 benchmarks\n", listed.len()));
        if let Some(part) = &part {
            text.push_str(&format!("{}\n", part.said(true)));
        }
    }
    let _ = Lines::default().out(&text);
    Ok(if crate::report::stdout_closed() { EXIT_OUTPUT_LOST } else { 0 })
}

/// The part `partition` of the evals `selected` for `--list`: their cells
/// need the harnesses the settings give (flags, variables, `reeval.toml`).
fn list_part(
    partition: settings::Partition,
    args: &Args,
    selected: &[&Eval],
) -> Result<Part, settings::SettingsError> {
    let harnesses = Settings::load(args, settings::process_env)?.harnesses;
    Ok(Part::of(partition, selected.iter().copied(), |e| harness_specs_of(&harnesses, e)))
}

/// Why a run selected no eval, in the words of the flags that did it.
pub(super) fn nothing_selected(
    args: &Args,
    tags: &[String],
    evals: &[Eval],
    rerun_of: Option<&str>,
) -> String {
    if evals.is_empty() {
        return "this suite binary has no eval".into();
    }
    if let Some(run) = rerun_of {
        return format!("--rerun-failed found no failed cell to run again in run {run}");
    }
    if !tags.is_empty() && !evals.iter().any(|e| Args::tagged(tags, &e.options.tags)) {
        let mut known: Vec<&str> =
            evals.iter().flat_map(|e| &e.options.tags).map(String::as_str).collect();
        known.sort_unstable();
        known.dedup();
        return format!(
            "no eval has the tag {} (tags of this suite: {})",
            tags.join(" or "),
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        );
    }
    format!(
        "{} matched none of the {} evals of this suite binary",
        asked(args, tags).join(" with "),
        evals.len()
    )
}

/// The flags of the selection, as `nothing_selected` names them.
fn asked(args: &Args, tags: &[String]) -> Vec<String> {
    let mut asked = Vec::new();
    if !args.filters.is_empty() {
        asked.push(format!(
            "the filter{} `{}`{}",
            if args.filters.len() == 1 { "" } else { "s" },
            args.filters.join("`, `"),
            if args.exact { " (--exact)" } else { "" }
        ));
    }
    if !args.skip.is_empty() {
        asked.push(format!("--skip `{}`", args.skip.join("`, `")));
    }
    if !tags.is_empty() {
        asked.push(format!("--tag {}", tags.join(",")));
    }
    if args.ignored {
        asked.push("--ignored".into());
    }
    if args.regrade.is_some() {
        asked.push("--regrade".into());
    }
    asked
}
