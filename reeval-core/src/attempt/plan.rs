//! A cell's plan: what every attempt of one cell (an eval × a harness, in
//! an arm of a comparison) shares, found once before any attempt starts.
//! The runner builds it (`runner/plan.rs`: the eval's environment from the
//! user's closure, the image spec, the harness's version; preflight resolves
//! its secrets) and hands the same [`CellPlan`] (an `Arc`) to preflight,
//! dispatch, the containers made ahead, the setup cache's fills and every
//! attempt, none of which builds any of it again.

use std::sync::Arc;
use std::time::Duration;

use super::EvalFn;
use crate::environment::{Environment, ImageSpec};
use crate::secrets::Secret;

/// One cell, planned once for all its attempts.
#[derive(Clone)]
pub(crate) struct CellPlan {
    /// The eval's name.
    pub(crate) eval: String,
    /// Where the eval is defined (`file:line`), for its records.
    pub(crate) source: Option<String>,
    /// The eval's tags.
    pub(crate) tags: Vec<String>,
    /// The pass rate at which the cell passes (the run's, else the eval's).
    pub(crate) min_pass_rate: Option<f64>,
    /// The judge model spec (the eval's, else the run's).
    pub(crate) judge: Option<String>,
    /// The budget of each attempt (the run's, else the eval's).
    pub(crate) timeout: Duration,
    /// The whole-attempt ceiling, if the eval sets one.
    pub(crate) deadline: Option<Duration>,
    /// The eval's body.
    pub(crate) run: EvalFn,
    /// The eval's reference solution, if it names one.
    pub(crate) oracle: Option<EvalFn>,
    /// The harness spec (`claude-code:sonnet`).
    pub(crate) harness_spec: String,
    /// The arm of a comparison, when the run compares.
    pub(crate) arm: Option<String>,
    /// The eval's environment, with the arm's change applied: built once from
    /// the eval's function.
    pub(crate) env: Arc<Environment>,
    /// The image the cell's sandboxes start from (the environment's, else the harness's, else the base).
    pub(crate) image: ImageSpec,
    /// The harness name the images it builds are keyed by.
    pub(crate) image_key: String,
    /// The harness's version, where it pins one (the setup cache's key and the summary name it).
    pub(crate) harness_version: Option<String>,
    /// Whether the cell's sandboxes are made with an egress gateway (or
    /// could not be planned without one): they are then never made ahead.
    pub(crate) gateway: bool,
    /// The secrets its gateway brokers (the harness's and the environment's), by name.
    #[cfg_attr(not(feature = "kubernetes"), allow(dead_code))]
    pub(crate) brokered: Vec<String>,
    /// The secrets the cell's attempts get: the environment's and the
    /// harness's credentials, resolved by preflight.
    pub(crate) secrets: Vec<Secret>,
    /// The run's `[images]`, for the environments of extra sandboxes (`extra.rs`).
    pub(crate) images: crate::image_map::ImageMap,
    /// The judge's keys (the chosen judge's, and each provider's default key
    /// found), resolved by preflight: for the host's judge calls alone. Kept
    /// apart from `secrets`, so that no broker, sandbox or check can take one.
    pub(crate) judge_keys: Vec<Secret>,
    /// Why the cell cannot run, when it cannot (`Eval::cannot_run`, or what
    /// preflight found of this eval alone in a run that goes on past it): its
    /// trials are config outcomes saying so, without a slot or a sandbox.
    pub(crate) cannot_run: Option<String>,
}

impl std::fmt::Debug for CellPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CellPlan")
            .field("eval", &self.eval)
            .field("harness_spec", &self.harness_spec)
            .field("arm", &self.arm)
            .field("image", &self.image)
            .field("harness_version", &self.harness_version)
            .field("secrets", &self.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>())
            .field(
                "judge_keys",
                &self.judge_keys.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}
