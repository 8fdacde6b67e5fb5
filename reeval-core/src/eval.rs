//! An eval: a name, its options and the async function that runs it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::attempt::Ctx;
use crate::environment::Environment;

/// The default attempt budget.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

pub use crate::attempt::EvalFn;

/// Options of an eval (the `#[reeval::eval(..)]` arguments).
#[derive(Clone)]
pub struct EvalOptions {
    /// The budget of the eval's own work (turns, checks, judge, its code).
    pub timeout: Duration,
    /// Independent trials per harness.
    pub trials: u32,
    /// Harness names (`shell`, `claude-code:sonnet`, …); empty means the run's default.
    pub harnesses: Vec<String>,
    /// The environment the sandbox is built from.
    pub environment: Option<Arc<dyn Fn() -> Environment + Send + Sync>>,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Skipped unless `--ignored` or `--include-ignored`.
    pub ignore: bool,
    /// The judge model spec for this eval, e.g. `anthropic:claude-sonnet-4-5`.
    pub judge: Option<String>,
    /// A whole-attempt ceiling covering image build and setup too (infra error when exceeded).
    pub deadline: Option<Duration>,
    /// The pass rate at which the eval's cells pass (`0.66`: 2 of 3 trials);
    /// without one, every trial must pass.
    pub min_pass_rate: Option<f64>,
    /// The eval's reference solution (`oracle = solve`): `--harness oracle`
    /// runs it at the first `send` in place of an agent.
    pub oracle: Option<EvalFn>,
    /// Whether the eval asks a judge (`c.judge(..)`): preflight then requires
    /// a judge model and its key before any agent runs. `#[reeval::eval]` sees
    /// it in the body; an eval built by hand says so with [`Eval::uses_judge`].
    pub uses_judge: bool,
    /// Why the eval cannot run, when it cannot ([`Eval::cannot_run`]).
    pub cannot_run: Option<String>,
    /// Whether a fault of this eval's alone found before the run (its
    /// environment, a secret, an image it names, resources or services its
    /// engine cannot give) refuses this eval alone, as a config outcome of its
    /// cells, instead of stopping the run ([`Eval::refuse_alone`]).
    pub refuse_alone: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            trials: 1,
            harnesses: Vec::new(),
            environment: None,
            tags: Vec::new(),
            ignore: false,
            judge: None,
            deadline: None,
            min_pass_rate: None,
            oracle: None,
            uses_judge: false,
            cannot_run: None,
            refuse_alone: false,
        }
    }
}

impl fmt::Debug for EvalOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvalOptions")
            .field("timeout", &self.timeout)
            .field("trials", &self.trials)
            .field("harnesses", &self.harnesses)
            .field("environment", &self.environment.is_some())
            .field("tags", &self.tags)
            .field("ignore", &self.ignore)
            .field("judge", &self.judge)
            .field("deadline", &self.deadline)
            .field("min_pass_rate", &self.min_pass_rate)
            .field("oracle", &self.oracle.is_some())
            .field("uses_judge", &self.uses_judge)
            .field("cannot_run", &self.cannot_run)
            .field("refuse_alone", &self.refuse_alone)
            .finish()
    }
}

/// An eval ready to run: built by `#[reeval::eval]` or by hand when embedding.
#[derive(Clone)]
pub struct Eval {
    pub(crate) name: String,
    pub(crate) location: Option<(&'static str, u32)>,
    pub(crate) options: EvalOptions,
    pub(crate) run: EvalFn,
}

impl fmt::Debug for Eval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Eval").field("name", &self.name).field("options", &self.options).finish()
    }
}

impl Eval {
    /// An eval named `name` that runs `f`.
    ///
    /// ```no_run
    /// # use reeval_core::Eval;
    /// let eval = Eval::new("writes_a_file", |c| Box::pin(async move {
    ///     c.exec("echo hi > hi.txt").await?;
    ///     Ok(())
    /// }));
    /// ```
    pub fn new<F>(name: impl Into<String>, f: F) -> Self
    where
        F: for<'a> Fn(&'a mut Ctx) -> BoxFuture<'a, crate::Result<()>> + Send + Sync + 'static,
    {
        Self {
            name: name.into(),
            location: None,
            options: EvalOptions::default(),
            run: Arc::new(f),
        }
    }

    /// An eval that cannot run, and why (a task of a dataset that does not
    /// load, say): each of its cells ends as a config outcome saying so, is
    /// listed when the run starts, starts nothing and is not retried, while
    /// the rest of the run goes on. `--skip NAME` leaves it out.
    pub fn cannot_run(name: impl Into<String>, why: impl Into<String>) -> Self {
        let why = why.into();
        let said = why.clone();
        let mut eval = Eval::new(name, move |_c| {
            let why = said.clone();
            Box::pin(async move { Err(crate::Error::Config(why)) })
        });
        eval.options.cannot_run = Some(why);
        eval
    }

    /// Whether a fault of this eval's alone found before the run (its
    /// environment, a secret, an image it names that is not there, resources
    /// or services its engine cannot give) refuses this eval alone: its cells
    /// end as config outcomes saying why, listed when the run starts, and the
    /// rest of the run goes on. Off by default: such a fault stops the run
    /// before anything starts. Every task of a Harbor dataset is refused alone.
    pub fn refuse_alone(mut self, alone: bool) -> Self {
        self.options.refuse_alone = alone;
        self
    }

    /// The eval's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The eval's options.
    pub fn options(&self) -> &EvalOptions {
        &self.options
    }

    /// Sets the budget.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// Sets the number of trials.
    pub fn trials(mut self, trials: u32) -> Self {
        self.options.trials = trials.max(1);
        self
    }

    /// Adds a harness by name.
    pub fn harness(mut self, name: impl Into<String>) -> Self {
        self.options.harnesses.push(name.into());
        self
    }

    /// Sets the environment.
    pub fn environment(mut self, env: impl Fn() -> Environment + Send + Sync + 'static) -> Self {
        self.options.environment = Some(Arc::new(env));
        self
    }

    /// This eval with `map` applied to the environment its function returns
    /// (an eval without one uses its harness's image, which is not mapped).
    /// While that function runs, [`crate::image_map::mapped`] answers from
    /// `map`. The runner does not need it (it maps each cell's environment,
    /// a variant's change included); it is for code that builds environments
    /// itself.
    pub fn map_images(mut self, map: &crate::image_map::ImageMap) -> Self {
        if !map.is_empty() {
            self.options.environment = self.options.environment.take().map(|base| map.wrap(base));
        }
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.options.tags.push(tag.into());
        self
    }

    /// Marks the eval ignored.
    pub fn ignore(mut self, ignore: bool) -> Self {
        self.options.ignore = ignore;
        self
    }

    /// Sets the judge model spec.
    pub fn judge(mut self, spec: impl Into<String>) -> Self {
        self.options.judge = Some(spec.into());
        self
    }

    /// Says the eval asks a judge (`c.judge(..)`), so that preflight requires a
    /// judge model and its key before any agent runs (`#[reeval::eval]` sees it itself).
    pub fn uses_judge(mut self, uses: bool) -> Self {
        self.options.uses_judge = uses;
        self
    }

    /// Sets a whole-attempt ceiling (image build and setup included).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.options.deadline = Some(deadline);
        self
    }

    /// Sets the pass rate at which the eval's cells pass (clamped to 0..=1).
    pub fn min_pass_rate(mut self, rate: f64) -> Self {
        self.options.min_pass_rate = Some(rate.clamp(0.0, 1.0));
        self
    }

    /// Sets the reference solution that `--harness oracle` runs in place of an agent.
    pub fn oracle<F>(mut self, f: F) -> Self
    where
        F: for<'a> Fn(&'a mut Ctx) -> BoxFuture<'a, crate::Result<()>> + Send + Sync + 'static,
    {
        self.options.oracle = Some(Arc::new(f));
        self
    }

    /// Where the eval is defined, for failure messages.
    pub fn location(mut self, file: &'static str, line: u32) -> Self {
        self.location = Some((file, line));
        self
    }
}

/// A registered eval or oracle function, boxed. Not public API: use the macro.
#[doc(hidden)]
pub type RegisteredFn = for<'a> fn(&'a mut Ctx) -> BoxFuture<'a, crate::Result<()>>;

/// What `#[reeval::eval]` registers. Not public API: use the macro.
#[doc(hidden)]
#[derive(Debug)]
pub struct EvalRegistration {
    /// `module_path!()` of the eval.
    pub module: &'static str,
    /// The function's name.
    pub name: &'static str,
    /// `file!()`.
    pub file: &'static str,
    /// `line!()`.
    pub line: u32,
    /// `timeout = ".."` in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `deadline = ".."` in milliseconds.
    pub deadline_ms: Option<u64>,
    /// `trials = N`.
    pub trials: Option<u32>,
    /// `harness = ".."` or a list.
    pub harnesses: &'static [&'static str],
    /// `environment = path`.
    pub environment: Option<fn() -> Environment>,
    /// `tags = [..]`.
    pub tags: &'static [&'static str],
    /// `ignore`.
    pub ignore: bool,
    /// `judge = ".."`.
    pub judge: Option<&'static str>,
    /// `min_pass_rate = 0.66`.
    pub min_pass_rate: Option<f64>,
    /// Whether the body calls `.judge(..)` (the macro reads its tokens).
    pub uses_judge: bool,
    /// The function, boxed.
    pub run: for<'a> fn(&'a mut Ctx) -> BoxFuture<'a, crate::Result<()>>,
    /// `oracle = solve`: the reference solution, boxed.
    pub oracle: Option<RegisteredFn>,
}

inventory::collect!(EvalRegistration);

impl EvalRegistration {
    /// `module::fn_name` with the binary crate's own segment stripped.
    pub fn qualified_name(&self) -> String {
        match self.module.split_once("::") {
            Some((_, rest)) => format!("{rest}::{}", self.name),
            None => self.name.to_string(),
        }
    }

    /// Turns the registration into an [`Eval`].
    pub fn to_eval(&self) -> Eval {
        let run = self.run;
        let mut eval =
            Eval::new(self.qualified_name(), move |c| run(c)).location(self.file, self.line);
        if let Some(ms) = self.timeout_ms {
            eval.options.timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.deadline_ms {
            eval.options.deadline = Some(Duration::from_millis(ms));
        }
        if let Some(t) = self.trials {
            eval.options.trials = t.max(1);
        }
        eval.options.harnesses = self.harnesses.iter().map(|s| s.to_string()).collect();
        if let Some(env) = self.environment {
            eval.options.environment = Some(Arc::new(env));
        }
        eval.options.tags = self.tags.iter().map(|s| s.to_string()).collect();
        eval.options.ignore = self.ignore;
        eval.options.judge = self.judge.map(str::to_string);
        eval.options.min_pass_rate = self.min_pass_rate;
        eval.options.uses_judge = self.uses_judge;
        if let Some(oracle) = self.oracle {
            eval.options.oracle = Some(Arc::new(move |c| oracle(c)));
        }
        eval
    }
}

/// Every eval registered with `#[reeval::eval]` in this binary, sorted by name.
pub fn registered_evals() -> Vec<Eval> {
    let mut evals: Vec<Eval> =
        inventory::iter::<EvalRegistration>.into_iter().map(EvalRegistration::to_eval).collect();
    evals.sort_by(|a, b| a.name.cmp(&b.name));
    evals
}
