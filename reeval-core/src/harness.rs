//! The agent behind `Ctx::send`: the [`Harness`] trait, the handle it acts
//! through, and the registry that selects harnesses by name.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::environment::ImageSpec;
use crate::sandbox::SandboxHandle;
use crate::turn::TurnReport;
use async_trait::async_trait;

use crate::turn::ErrorClass;

/// A failure to run a harness at all (not an agent's error, which is a failed [`TurnReport`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// The sandbox failed under the harness.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// The harness could not start or run, for a reason of its own.
    #[error("failed to run harness {harness}: {message}")]
    Failed {
        /// The harness name.
        harness: String,
        /// What went wrong.
        message: String,
        /// Who is to blame.
        class: ErrorClass,
    },
}

/// What a harness session is started with: skills and MCP servers to place
/// where this harness reads them, and its credentials' values.
#[derive(Clone, Default)]
pub struct SessionSetup {
    /// The values of [`Harness::credentials`], for a harness that runs on the
    /// host (an in-process agent). Never put them in the sandbox: a CLI
    /// harness's agent sees placeholders in its environment.
    pub credentials: Vec<(String, String)>,
    /// Skills, already read from the host.
    pub skills: Vec<crate::environment::Skill>,
    /// Directories in the sandbox whose skill folders the harness copies
    /// where its agent reads skills ([`crate::Environment::skills_in_sandbox`]).
    pub skills_in_sandbox: Vec<String>,
    /// MCP servers.
    pub mcp: Vec<crate::environment::McpServer>,
    /// MCP servers for a harness whose agent takes them, left out by one
    /// whose agent has none ([`crate::Environment::mcp_where_taken`]).
    pub mcp_where_taken: Vec<crate::environment::McpServer>,
    /// The attempt's directory on the host for artifacts.
    pub artifacts_dir: Option<std::path::PathBuf>,
    /// The eval the session is for.
    pub eval: String,
    /// The attempt's trial.
    pub trial: u32,
    /// The attempt's arm in a comparison.
    pub arm: Option<String>,
    /// The image the sandbox was made from, named by its content (the
    /// engine's `sha256:` id, or a cached setup's content-named reference);
    /// `None` when no such name is known. The same value is the same image, so
    /// a harness may remember what it learned of one, for the process's
    /// life, instead of asking each sandbox again.
    pub image: Option<String>,
}

impl fmt::Debug for SessionSetup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionSetup")
            .field(
                "credentials",
                &self.credentials.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
            )
            .field("skills", &self.skills.iter().map(|s| s.name.as_str()).collect::<Vec<_>>())
            .field("skills_in_sandbox", &self.skills_in_sandbox)
            .field("mcp", &self.mcp)
            .field("artifacts_dir", &self.artifacts_dir)
            .field("image", &self.image)
            .finish()
    }
}

/// Per-turn settings passed to [`Harness::turn`]. Its `Debug` names the
/// turn's variables, not their values (one may be a credential).
#[derive(Clone, Default)]
pub struct TurnContext {
    /// The 1-based turn number in this attempt.
    pub index: u32,
    /// The attempt's directory on the host for artifacts (transcripts, config homes).
    pub artifacts_dir: Option<std::path::PathBuf>,
    /// Where to report what the agent does as it happens (`--stream`), when anyone listens.
    pub events: Option<AgentEvents>,
    /// Variables for the agent's processes in this turn only
    /// ([`crate::TurnOptions::env`]), over the sandbox's and the harness's own.
    pub env: Vec<(String, String)>,
}

impl fmt::Debug for TurnContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnContext")
            .field("index", &self.index)
            .field("artifacts_dir", &self.artifacts_dir)
            .field("events", &self.events)
            .field("env", &self.env.iter().map(|(name, _)| format!("{name}=…")).collect::<Vec<_>>())
            .finish()
    }
}

impl TurnContext {
    /// Reports something the agent did, as it happens (redacted before it is shown).
    pub fn report(&self, event: AgentEvent) {
        if let Some(events) = &self.events {
            (events.0)(event);
        }
    }
}

/// Something the agent did during a turn, reported as it happens.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// It called a tool.
    ToolCall {
        /// The tool.
        name: String,
        /// Its input, on one line and shortened.
        input: String,
    },
    /// It reported an edit of a file.
    Edit {
        /// The file.
        path: String,
    },
    /// It said something (or printed output).
    Message {
        /// The text.
        text: String,
    },
}

/// Where a harness's agent events go: the run's event stream, through its redactor.
#[derive(Clone)]
pub struct AgentEvents(Arc<dyn Fn(AgentEvent) + Send + Sync>);

impl AgentEvents {
    /// Events handed to `sink`.
    pub fn new(sink: impl Fn(AgentEvent) + Send + Sync + 'static) -> Self {
        Self(Arc::new(sink))
    }
}

impl fmt::Debug for AgentEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AgentEvents")
    }
}

/// An agent that `Ctx::send` drives one turn at a time.
///
/// A CLI harness runs its agent in the sandbox through [`SandboxHandle::exec_turn`];
/// an in-process harness runs on the host and acts through
/// [`SandboxHandle::exec`], `read_file` and `write_file`.
#[async_trait]
pub trait Harness: Send + Sync + fmt::Debug {
    /// The harness name, as selected (`shell`, `claude-code`, …).
    fn name(&self) -> &str;

    /// The model, when one was selected (`claude-code:sonnet` → `sonnet`).
    fn model(&self) -> Option<&str> {
        None
    }

    /// The agent's version (its CLI's, for a CLI harness), for the run's summary.
    fn version(&self) -> Option<String> {
        None
    }

    /// The rules file this harness reads, relative to the workspace.
    fn rules_file(&self) -> &str {
        "AGENTS.md"
    }

    /// The image this harness needs, when it has its own.
    fn image(&self) -> Option<ImageSpec> {
        None
    }

    /// The harness name the images it builds are keyed by: its own. (A
    /// replay keys by the recorded harness's, so it finds that very image.)
    fn image_key(&self) -> &str {
        self.name()
    }

    /// Whether the first prompt gets the context summary appended (an agent
    /// reads prose; the `shell` harness runs its prompt as a script and does not).
    fn reads_context_summary(&self) -> bool {
        true
    }

    /// Whether its agent takes MCP servers ([`crate::Environment::mcp`]). One
    /// that does not is refused an environment that names any, when its
    /// session starts (a config outcome); servers given with
    /// [`crate::Environment::mcp_where_taken`] are left out for it instead.
    fn takes_mcp(&self) -> bool {
        false
    }

    /// Whether its agent reads skills ([`crate::Environment::skill`]). One
    /// that does not is refused an environment that names any, when its
    /// session starts (a config outcome): a comparison of a skill against
    /// none would otherwise compare two equal arms. Skills copied from the
    /// sandbox ([`crate::Environment::skills_in_sandbox`], a Harbor task's
    /// `skills_dir`) are left out for it instead, as Harbor's agents do.
    fn takes_skills(&self) -> bool {
        false
    }

    /// Host environment variables this harness needs (checked in preflight).
    fn credentials(&self) -> Vec<String> {
        Vec::new()
    }

    /// What the agent reaches through the egress gateway: its API hosts, and
    /// where each credential goes (its host, header and route). A harness
    /// that declares nothing gets no way out of the sandbox.
    fn egress(&self) -> crate::egress::HarnessEgress {
        crate::egress::HarnessEgress::default()
    }

    /// Starts the agent's session (config homes, skills, MCP servers).
    ///
    /// # Errors
    /// A [`HarnessError`] when the session cannot be prepared; the attempt is an infra error.
    ///
    /// # Cancel safety
    /// A cancelled start leaves the sandbox to teardown, which destroys it.
    async fn start(
        &mut self,
        _sandbox: &SandboxHandle,
        _setup: &SessionSetup,
    ) -> Result<(), HarnessError> {
        Ok(())
    }

    /// Runs one turn. An agent's own error is a [`TurnReport`] with status `failed`
    /// and an [`ErrorClass`], not an `Err`.
    ///
    /// # Errors
    /// A [`HarnessError`] when the turn could not be run at all.
    ///
    /// # Cancel safety
    /// The context drops this future when the budget or the turn limit runs out,
    /// after killing the turn's process tree in the sandbox and a 3-second grace.
    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError>;

    /// Ends the session. Called at teardown, best effort.
    ///
    /// # Errors
    /// A [`HarnessError`]; teardown records it as an event and goes on.
    ///
    /// # Cancel safety
    /// Teardown bounds it with 15 seconds, then destroys the sandbox anyway.
    async fn stop(&mut self, _sandbox: &SandboxHandle) -> Result<(), HarnessError> {
        Ok(())
    }

    /// Whether [`Harness::start`] writes nothing in `workspace` (the
    /// sandbox's) and needs nothing of the agent user's preparation but its
    /// user id (a CLI's config home elsewhere, uploaded as the agent user's
    /// own). Its session then starts beside the sandbox's first snapshot
    /// when a `send` starts the sandbox: the snapshot cannot take what it
    /// writes for the workspace's, and the first turn waits for neither alone.
    fn starts_apart_from(&self, _workspace: &str) -> bool {
        false
    }

    /// Whether the eval's reference solution (its `oracle = …`) runs at the
    /// first `send`, before this harness's first turn, so that the turn's
    /// diff is the solution's work (the oracle harness). Without a solution,
    /// that `send` is a config error.
    fn runs_reference_solution(&self) -> bool {
        false
    }

    /// The harness's last word on the attempt's record, once it is concluded
    /// and the sandbox torn down (a replay names the attempt it re-graded and
    /// carries its recorded usage). `run_dir` is the attempt's run directory.
    /// Called whether or not the session started.
    fn conclude(&mut self, _record: &mut crate::record::Record, _run_dir: &std::path::Path) {}

    /// Failure classification for a turn that got no events at all within `elapsed`.
    fn never_started(&self, elapsed: Duration) -> String {
        format!("harness {} produced no event in {:.1}s", self.name(), elapsed.as_secs_f64())
    }
}

/// Makes a harness from an optional model name.
pub type HarnessFactory = Arc<dyn Fn(Option<&str>) -> Box<dyn Harness> + Send + Sync>;

/// What `reeval::register_harness!` submits.
#[doc(hidden)]
#[derive(Debug)]
pub struct HarnessRegistration {
    /// The name the harness is selected by.
    pub name: &'static str,
    /// The factory.
    pub make: fn(Option<&str>) -> Box<dyn Harness>,
}

inventory::collect!(HarnessRegistration);

/// Harnesses by name.
#[derive(Clone, Default)]
pub struct HarnessRegistry {
    factories: BTreeMap<String, HarnessFactory>,
}

impl fmt::Debug for HarnessRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl HarnessRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) a harness under `name`.
    pub fn register(
        &mut self,
        name: impl Into<String>,
        make: impl Fn(Option<&str>) -> Box<dyn Harness> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.into(), Arc::new(make));
    }

    /// Adds every harness registered with `inventory` in this binary.
    pub fn with_registered(mut self) -> Self {
        for r in inventory::iter::<HarnessRegistration> {
            let make = r.make;
            self.register(r.name, move |m| make(m));
        }
        self
    }

    /// Whether a harness spec (`name` or `name:model`) names a known harness.
    pub fn knows(&self, spec: &str) -> bool {
        self.factories.contains_key(split_spec(spec).0)
    }

    /// Makes the harness for `spec` (`name` or `name:model`).
    pub fn make(&self, spec: &str) -> Option<Box<dyn Harness>> {
        let (name, model) = split_spec(spec);
        self.factories.get(name).map(|f| f(model))
    }

    /// Registered names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Why `spec` names no known harness: `did you mean `claude-code`? known: …`
    /// (the nearest known name by edit distance, when it is near).
    pub fn unknown(&self, spec: &str) -> String {
        let name = split_spec(spec).0;
        let nearest = crate::suggest::nearest(name, self.names());
        let known = self.names().collect::<Vec<_>>().join(", ");
        match nearest {
            Some(near) => format!("did you mean `{near}`? known: {known}"),
            None => format!("known: {known}"),
        }
    }
}

/// `claude-code:sonnet` → (`claude-code`, Some(`sonnet`)).
pub fn split_spec(spec: &str) -> (&str, Option<&str>) {
    match spec.split_once(':') {
        Some((n, m)) if !m.is_empty() => (n, Some(m)),
        Some((n, _)) => (n, None),
        None => (spec, None),
    }
}
