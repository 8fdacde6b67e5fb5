//! [`Runner`]: what a run is given (its config, the harnesses, the backend, a
//! resumed run's records, the cells asked for) and what follows from that
//! alone (each eval's cells, a comparison's analysis). Running it is `run.rs`.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::RunConfig;
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::record::Record;
use crate::sandbox::Backend;

/// The harness an eval runs with when neither it nor the command line names one.
pub const DEFAULT_HARNESS: &str = "shell";

/// The harness specs `eval` runs with when `harnesses` (the command line's,
/// empty for none) replace its own: theirs, else its own, else [`DEFAULT_HARNESS`].
pub(crate) fn harness_specs_of(harnesses: &[String], eval: &Eval) -> Vec<String> {
    if !harnesses.is_empty() {
        harnesses.to_vec()
    } else if !eval.options.harnesses.is_empty() {
        eval.options.harnesses.clone()
    } else {
        vec![DEFAULT_HARNESS.to_string()]
    }
}

/// One cell of an eval as the run plans it: the harness, the arm of a
/// comparison, and the variant whose change the arm makes to the eval's
/// environment (`plan.rs` applies it to the environment built once).
#[derive(Debug, Clone)]
pub(crate) struct ArmCell {
    pub(crate) spec: String,
    pub(crate) arm: Option<String>,
    pub(crate) variant: Option<crate::compare::Variant>,
}

/// Runs evals.
#[derive(Debug, Clone)]
pub struct Runner {
    pub(super) config: RunConfig,
    pub(super) harnesses: HarnessRegistry,
    pub(super) shutdown: CancellationToken,
    /// The engine sandboxes run on; by default the Docker engine of `DOCKER_HOST`.
    pub(super) backend: Option<Arc<dyn Backend>>,
    /// Records of a resumed run whose trials are not run again.
    pub(super) kept: Vec<Record>,
    /// Only these cells (eval, harness) run, when set (`--rerun-failed`).
    only_cells: Option<Vec<(String, String)>>,
    /// Which look at a comparison this run is (`--resume` of a compare run looks again).
    look: crate::compare::Look,
}

impl Runner {
    /// A runner with `config` and the harnesses of `registry`.
    pub fn new(config: RunConfig, harnesses: HarnessRegistry) -> Self {
        Self {
            config,
            harnesses,
            shutdown: CancellationToken::new(),
            backend: None,
            kept: Vec::new(),
            only_cells: None,
            look: crate::compare::Look::default(),
        }
    }

    /// Completes the run of `records` (same run id): their finished trials
    /// are kept and count in the summary; the other trials run.
    pub fn resuming(mut self, records: Vec<Record>) -> Self {
        self.kept =
            crate::report::runs::finished_trials(records, self.config.settings.infra_retries);
        self
    }

    /// Makes this run a later look at the comparison `previous` recorded
    /// (`--resume` of a compare run): its interval is then the confidence
    /// sequence, valid however often trials are added and looked at.
    pub fn comparing_after(mut self, previous: &crate::compare::Comparison) -> Self {
        self.look = crate::compare::Look::after(previous);
        self
    }

    /// The cells `eval` runs as: each harness, and in a comparison each arm.
    pub(crate) fn arm_cells(&self, eval: &Eval) -> Vec<ArmCell> {
        use crate::compare::Arms;
        let specs = self.harness_specs(eval);
        let of = |spec: String, variant: Option<&crate::compare::Variant>| ArmCell {
            arm: variant.map(|v| v.name().to_string()),
            variant: variant.cloned(),
            spec,
        };
        match (&self.config.compare, &self.config.variant) {
            (Some(Arms::Variants(a, b)), _) => {
                specs.iter().flat_map(|spec| [a, b].map(|v| of(spec.clone(), Some(v)))).collect()
            }
            (Some(Arms::Harnesses(..)), _) => specs
                .into_iter()
                .map(|spec| ArmCell { arm: Some(spec.clone()), spec, variant: None })
                .collect(),
            (None, variant) => specs.into_iter().map(|spec| of(spec, variant.as_ref())).collect(),
        }
    }

    /// The paired analysis of a compare run's `records`; `None` outside a comparison.
    pub(crate) fn comparison(&self, records: &[Record]) -> Option<crate::compare::Comparison> {
        use crate::compare::{Arms, analysis};
        let arms = self.config.compare.as_ref()?;
        let [control, treatment] = arms.names();
        let of = |name: &str| -> Vec<&Record> {
            records.iter().filter(|r| r.arm.as_deref() == Some(name)).collect()
        };
        let (c, t) = (of(&control), of(&treatment));
        let sides = analysis::Sides {
            control: (&control, &c),
            treatment: (&treatment, &t),
            by_harness: matches!(arms, Arms::Variants(..)),
        };
        Some(analysis::analyze(sides, &self.config.settings.prices, &self.look))
    }

    /// Runs only these cells (eval, harness) of the evals given to [`Runner::run`](Runner::run).
    pub fn only_cells(mut self, cells: Vec<(String, String)>) -> Self {
        self.only_cells = Some(cells);
        self
    }

    /// Runs sandboxes on `backend` instead of the Docker engine (another engine, or the fake of tests).
    pub fn with_backend(mut self, backend: Arc<dyn Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// A token that, when cancelled, interrupts every attempt (each still tears down and records).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// The harness specs `eval` runs with.
    pub fn harness_specs(&self, eval: &Eval) -> Vec<String> {
        let specs = harness_specs_of(&self.config.settings.harnesses, eval);
        match &self.only_cells {
            Some(cells) => specs
                .into_iter()
                .filter(|spec| cells.iter().any(|(e, h)| *e == eval.name && h == spec))
                .collect(),
            None => specs,
        }
    }
}
