//! Comparing two arms of the same evals: "did this change help?".
//!
//! - `mod.rs` (here): what an arm is, the variants registered with
//!   `#[reeval::variant]`, and how an arm changes an eval before it runs.
//! - `declared.rs`: the variants `reeval.toml` declares (`[variants.NAME]`).
//! - [`analysis`]: the paired analysis of recorded attempts (per eval and
//!   overall), the same for a live run and for `reeval compare RUN_A RUN_B`.
//! - [`recorded`]: `reeval compare RUN_A RUN_B`, the analysis of two recorded runs.
//! - The terminal table and the HTML page of a comparison are a reporter's:
//!   [`crate::report::compare`].
//!
//! A variant is a named change to an eval's environment (a skill, rules, a
//! file, an MCP server, an image). `control` is the arm with no change.
//! Comparing harnesses (`--harness a --vs b`) makes each harness an arm.

pub mod analysis;
mod declared;
pub mod recorded;

use std::sync::Arc;

use crate::environment::Environment;
use crate::eval::Eval;
use crate::settings::{Comparing, Settings};

pub use analysis::{ArmFigures, Comparison, ComparisonRow, analyze};
pub use declared::known_variants;

/// The arm that changes nothing.
pub const CONTROL: &str = "control";

/// What `#[reeval::variant]` registers. Not public API: use the macro.
#[doc(hidden)]
#[derive(Debug)]
pub struct VariantRegistration {
    /// The function's name, which is the variant's name.
    pub name: &'static str,
    /// The change to an eval's environment.
    pub apply: fn(Environment) -> Environment,
}

inventory::collect!(VariantRegistration);

/// A named change to an eval's environment.
#[derive(Clone)]
pub struct Variant {
    name: String,
    apply: Arc<dyn Fn(Environment) -> Environment + Send + Sync>,
}

impl std::fmt::Debug for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variant").field("name", &self.name).finish()
    }
}

impl Variant {
    /// A variant named `name` that changes an eval's environment with `apply`.
    pub fn new(
        name: impl Into<String>,
        apply: impl Fn(Environment) -> Environment + Send + Sync + 'static,
    ) -> Self {
        Self { name: name.into(), apply: Arc::new(apply) }
    }

    /// The variant that changes nothing ([`CONTROL`]).
    pub fn control() -> Self {
        Self::new(CONTROL, |env| env)
    }

    /// The variant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `env` (an eval's environment, built) with this variant's change applied.
    pub(crate) fn apply_env(&self, env: Environment) -> Environment {
        if self.name == CONTROL { env } else { (self.apply)(env) }
    }

    /// `eval` with this variant's change applied on top of its own environment.
    pub fn apply_to(&self, mut eval: Eval) -> Eval {
        if self.name == CONTROL {
            return eval;
        }
        let base = eval.options.environment.clone();
        let apply = self.apply.clone();
        eval.options.environment = Some(Arc::new(move || {
            let env = base.as_ref().map(|f| f()).unwrap_or_default();
            apply(env)
        }));
        eval
    }
}

/// Every variant registered with `#[reeval::variant]` in this binary.
pub fn registered_variants() -> Vec<Variant> {
    inventory::iter::<VariantRegistration>
        .into_iter()
        .map(|r| Variant::new(r.name, r.apply))
        .collect()
}

/// The variant named `name` among `known` ([`CONTROL`] is always known).
///
/// # Errors
/// A message naming the variant and the known ones when there is none of that name.
pub fn find_variant(known: &[Variant], name: &str) -> Result<Variant, String> {
    if name == CONTROL {
        return Ok(Variant::control());
    }
    known.iter().find(|v| v.name == name).cloned().ok_or_else(|| {
        let mut names: Vec<&str> = known.iter().map(|v| v.name.as_str()).collect();
        names.insert(0, CONTROL);
        format!(
            "failed to find the variant `{name}`: this suite knows {} (declare one with \
             #[reeval::variant] or [variants.{name}] in reeval.toml)",
            names.join(", ")
        )
    })
}

/// The two arms of a comparison: the first is the baseline ("control"), the
/// second the change whose effect is measured (the difference is second − first).
#[derive(Debug, Clone)]
pub enum Arms {
    /// `--compare control,with_skill`: each eval runs with both variants, with its own harnesses.
    Variants(Variant, Variant),
    /// `--harness a --vs b`: each eval runs with both harnesses.
    Harnesses(String, String),
}

impl Arms {
    /// The arms a recorded comparison compared: harnesses when its records'
    /// arms are their harnesses, else variants found among `known`.
    ///
    /// # Errors
    /// A message naming a variant this suite no longer declares.
    pub fn recorded(
        previous: &Comparison,
        records: &[crate::record::Record],
        known: &[Variant],
    ) -> Result<Arms, String> {
        let by_harness = records.iter().any(|r| r.arm.as_deref() == Some(r.harness.as_str()));
        if by_harness {
            return Ok(Arms::Harnesses(previous.control.clone(), previous.treatment.clone()));
        }
        Ok(Arms::Variants(
            find_variant(known, &previous.control)?,
            find_variant(known, &previous.treatment)?,
        ))
    }

    /// The arms' names, baseline first.
    pub fn names(&self) -> [String; 2] {
        match self {
            Arms::Variants(a, b) => [a.name.clone(), b.name.clone()],
            Arms::Harnesses(a, b) => [a.clone(), b.clone()],
        }
    }
}

/// Which look at a comparison this is: each `--resume` of a compare run is
/// one more look at the same pairs plus the new ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Look {
    /// 0 or 1 for the run's first analysis.
    pub number: u32,
    /// Pairs per row (eval, or `overall`) at the first look, where the
    /// confidence sequence of later looks is tuned.
    pub planned_pairs: std::collections::BTreeMap<String, u32>,
}

impl Look {
    /// The look after the one `previous` recorded.
    pub fn after(previous: &Comparison) -> Look {
        let mut planned = std::collections::BTreeMap::new();
        for row in previous.evals.iter().chain(std::iter::once(&previous.overall)) {
            planned.insert(row.label(), row.planned_pairs);
        }
        Look { number: previous.look + 1, planned_pairs: planned }
    }
}

// Settings name a comparison's arms; resolving them among the suite's
// variants is this module's business, so settings need not name compare.
impl Settings {
    /// The arms of [`Settings::compare`] and the [`Settings::variant`], with
    /// variant names resolved among `known` (the `#[reeval::variant]`s of the suite).
    ///
    /// # Errors
    /// A message naming a variant that `known` lacks.
    pub fn arms(&self, known: &[Variant]) -> Result<(Option<Arms>, Option<Variant>), String> {
        let arms = match &self.compare {
            None => None,
            Some(Comparing::Harnesses(a, b)) => Some(Arms::Harnesses(a.clone(), b.clone())),
            Some(Comparing::Variants(a, b)) => {
                if a == b {
                    return Err(format!("failed to compare `{a}` with itself: name two arms"));
                }
                Some(Arms::Variants(find_variant(known, a)?, find_variant(known, b)?))
            }
        };
        let variant = self.variant.as_deref().map(|v| find_variant(known, v)).transpose()?;
        Ok((arms, variant))
    }
}
