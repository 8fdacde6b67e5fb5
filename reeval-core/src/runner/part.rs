//! One part of a partitioned run (`--partition hash:K/N`, `count:K/N`): the
//! cells (eval × harness spec) of the evals selected, dealt by
//! [`Partition`], and what the suite's `main` says of the part. How cells are
//! dealt is [`crate::partition`]'s.

use std::path::PathBuf;

use super::RunConfig;
use crate::eval::Eval;
use crate::report::runs::RunsError;
use crate::settings::Partition;

/// The cells of a part, out of the cells selected.
#[derive(Debug, Clone)]
pub(super) struct Part {
    /// Which part.
    pub(super) partition: Partition,
    /// This part's cells (eval, harness spec), sorted.
    pub(super) cells: Vec<(String, String)>,
    /// How many cells were selected in all (every part's).
    pub(super) of: usize,
}

impl Part {
    /// The part `partition` of the cells of `evals`, each eval's harness specs given by `specs`.
    pub(super) fn of<'a>(
        partition: Partition,
        evals: impl IntoIterator<Item = &'a Eval>,
        specs: impl Fn(&Eval) -> Vec<String>,
    ) -> Part {
        let mut all: Vec<(String, String)> = evals
            .into_iter()
            .flat_map(|e| specs(e).into_iter().map(|h| (e.name.clone(), h)))
            .collect();
        all.sort();
        all.dedup();
        Part { partition, cells: partition.select(&all), of: all.len() }
    }

    /// Whether any cell of the eval `name` is in this part.
    pub(super) fn has_eval(&self, name: &str) -> bool {
        self.cells.iter().any(|(e, _)| e == name)
    }

    /// A part with no cell of a selection that had some: not an error, but said.
    pub(super) fn is_empty_of_some(&self) -> bool {
        self.cells.is_empty() && self.of > 0
    }

    /// `partition hash:1/3: 3 of the 7 cells selected (eval × harness)`, and
    /// with `named`, the cells: `: a [shell], b [shell:alt]`.
    pub(super) fn said(&self, named: bool) -> String {
        let of = match self.of {
            1 => "the 1 cell selected".to_string(),
            n => format!("the {n} cells selected"),
        };
        let head =
            format!("partition {}: {} of {of} (eval × harness)", self.partition, self.cells.len());
        if self.is_empty_of_some() {
            return format!(
                "partition {} holds none of {of}: this part runs nothing",
                self.partition
            );
        }
        if !named || self.cells.is_empty() {
            return head;
        }
        let names: Vec<String> = self.cells.iter().map(|(e, h)| format!("{e} [{h}]")).collect();
        format!("{head}: {}", names.join(", "))
    }
}

/// Records a part with no cell as a run of nothing, without an engine: its
/// `summary.json` (which names the part, so `reeval report` over every part
/// sees all N) and `report.html`. Returns the run's directory.
///
/// # Errors
/// [`RunsError::Io`] when the files cannot be written.
pub(super) fn record_nothing(config: &RunConfig) -> Result<PathBuf, RunsError> {
    let run_dir = config.settings.record_dir.join(&config.settings.run_id);
    std::fs::create_dir_all(&run_dir).map_err(|source| RunsError::Io {
        action: "create the run directory",
        path: run_dir.clone(),
        source,
    })?;
    let mut summary =
        crate::report::summarize_priced(&config.settings.run_id, &[], &config.settings.prices);
    summary.provenance =
        super::provenance::of_run(std::time::SystemTime::now(), None, Default::default());
    summary.suite = config.suite.clone();
    summary.partition = config.settings.partition.map(|p| p.to_string());
    summary.exit_reason = "this part of the partitioned run holds no cell".into();
    let report = crate::report::RunReport {
        run_id: config.settings.run_id.clone(),
        run_dir: run_dir.clone(),
        records: Vec::new(),
        summary,
    };
    // Nothing ran, so nothing can hold a secret.
    let redactor = crate::secrets::Redactor::new(Vec::<&str>::new());
    crate::report::runs::write_summary_and_report(
        &report,
        "summary.json",
        "report.html",
        &redactor,
        &config.settings.prices,
    )?;
    Ok(run_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(name: &str) -> Eval {
        Eval::new(name, |_c| Box::pin(async { Ok(()) }))
    }

    #[test]
    fn a_part_names_its_cells_and_an_empty_part_says_so() {
        let evals = [eval("a"), eval("b"), eval("c")];
        let specs = |_: &Eval| vec!["shell".to_string(), "shell:alt".to_string()];
        let parts: Vec<Part> = (1..=4)
            .map(|k| Part::of(format!("count:{k}/4").parse().unwrap(), &evals, specs))
            .collect();
        // Sorted: a [shell], a [shell:alt], b [shell], b [shell:alt], c [shell], c [shell:alt].
        assert_eq!(parts[0].cells, [("a".into(), "shell".into()), ("c".into(), "shell".into())]);
        assert!(parts[0].has_eval("a") && parts[0].has_eval("c") && !parts[0].has_eval("b"));
        assert_eq!(
            parts[0].said(true),
            "partition count:1/4: 2 of the 6 cells selected (eval × harness): a [shell], c [shell]"
        );
        assert_eq!(parts[3].cells, [("b".into(), "shell:alt".into())]);
        assert_eq!(
            parts[3].said(false),
            "partition count:4/4: 1 of the 6 cells selected (eval × harness)"
        );
        let empty =
            Part::of("count:3/3".parse().unwrap(), &evals[..1], |_: &Eval| vec!["shell".into()]);
        assert!(empty.is_empty_of_some());
        assert_eq!(
            empty.said(true),
            "partition count:3/3 holds none of the 1 cell selected: this part runs nothing"
        );
    }
}
