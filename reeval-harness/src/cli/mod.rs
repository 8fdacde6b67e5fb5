//! Harnesses for agent CLIs run in the sandbox: one module per CLI, and the
//! driver they share.
//!
//! A [`CliAgent`] says what differs between CLIs: its name, program, version
//! and rules file (one [`CliIdentity`] constant), the argv of a turn (the
//! task is one argv element or stdin, never part of a shell string), how a
//! later turn resumes the session, where the CLI's config home is relocated,
//! where skills and MCP servers go, and how its event stream reads. A
//! [`CliHarness`] drives any of them: it runs the argv with
//! [`SandboxHandle::exec_turn`], parses NDJSON lines as they arrive, and
//! classifies a failure from the exit code and output. When the context kills
//! the turn's process tree, the stream ends and the harness returns what it
//! parsed so far.

pub mod classify;
pub mod claude_code;
pub mod codex;
mod config;
pub mod cursor;
pub mod gemini;
mod home;
pub mod mini_swe;
pub mod ndjson;
pub mod opencode;
pub mod pi;
pub mod report;

use std::fmt;
use std::io::Write;
use std::path::PathBuf;

use async_trait::async_trait;
use bytes::Bytes;
use reeval_core::egress::HarnessEgress;
use reeval_core::environment::DEFAULT_IMAGE;
use reeval_core::harness::{Harness, HarnessError, SessionSetup, TurnContext};
use reeval_core::sandbox::FileToWrite;
use reeval_core::sandbox::{SandboxError, SandboxHandle};
use reeval_core::turn::ErrorClass;
use reeval_core::turn::{TurnReport, TurnStatus};
use reeval_core::{Command, ImageSpec};
use serde_json::Value;
use tokio::sync::mpsc;

pub(crate) use config::{anthropic, egress_of, openai};
pub use config::{
    mcp_json, mcp_servers, npm_install_steps, provider_broker, provider_key, provider_of,
    skill_files,
};
pub use report::{Failure, SessionTotal, TurnBuilder};

/// Where each CLI's config home lives in the sandbox: `<root>/<harness name>`.
pub const AGENT_HOME_ROOT: &str = "/tmp/reeval-agent";
/// The largest config home `stop()` collects.
pub const HOME_ARCHIVE_LIMIT: u64 = 256 << 20;
/// The Node.js release the npm-installed CLIs run on.
pub const NODE_VERSION: &str = "22.12.0";

/// What a turn's argv is built from.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    /// The program to run (the CLI's name, or a path set with [`CliHarness::with_program`]).
    pub program: &'a str,
    /// The task, passed as data.
    pub prompt: &'a str,
    /// The model, when one was selected (`claude-code:sonnet` → `sonnet`).
    pub model: Option<&'a str>,
    /// The session an earlier turn reported: set from the second turn on.
    pub resume: Option<&'a str>,
    /// The tasks of the session's earlier turns, in order: for a CLI that
    /// cannot resume (mini-swe-agent lists them before the new task).
    pub earlier: &'a [String],
    /// The CLI's config home in the sandbox.
    pub home: &'a str,
    /// Whether MCP servers were configured for this session.
    pub mcp: bool,
}

/// Reads one CLI's events into a [`TurnBuilder`].
pub trait EventParser: Send {
    /// Reads one JSON event. Unknown types and fields are skipped.
    fn event(&mut self, event: &Value, turn: &mut TurnBuilder);

    /// Called once when the stream ended (finished or killed). A parser whose
    /// CLI never reported the turn's totals marks `turn.usage` partial.
    fn finish(&mut self, _turn: &mut TurnBuilder) {}
}

/// What names a CLI: the same for every harness of it, so written once as
/// [`CliAgent::IDENTITY`] and read through the trait's getters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliIdentity {
    /// The harness name (`claude-code`).
    pub name: &'static str,
    /// The CLI's program name (`claude`).
    pub program: &'static str,
    /// The CLI's version as installed by [`CliAgent::install_steps`].
    pub version: Option<&'static str>,
    /// The rules file the CLI reads, relative to the workspace (most read `AGENTS.md`).
    pub rules_file: &'static str,
}

/// What differs between agent CLIs.
#[async_trait]
pub trait CliAgent: Send + Sync + fmt::Debug + 'static {
    /// The CLI's name, program, version and rules file.
    const IDENTITY: CliIdentity;

    /// The harness name (`claude-code`).
    fn name(&self) -> &'static str {
        Self::IDENTITY.name
    }

    /// The CLI's program name (`claude`).
    fn program(&self) -> &'static str {
        Self::IDENTITY.program
    }

    /// The CLI's version as installed by [`CliAgent::install_steps`].
    fn version(&self) -> Option<&'static str> {
        Self::IDENTITY.version
    }

    /// The rules file the CLI reads, relative to the workspace.
    fn rules_file(&self) -> &'static str {
        Self::IDENTITY.rules_file
    }

    /// Whether the CLI takes MCP servers (`SessionSetup::mcp_where_taken`
    /// goes to one that does; the core refuses `mcp` for one that does not,
    /// through `Harness::takes_mcp`).
    fn takes_mcp(&self) -> bool {
        true
    }

    /// Where the CLI reads skills, given its config home; `None` when it takes none.
    fn skills_dir(&self, home: &str) -> Option<String> {
        Some(format!("{home}/skills"))
    }

    /// Shell steps that install the CLI, pinned by version, on `reeval/base`.
    fn install_steps(&self) -> Vec<String>;

    /// Host variables the CLI needs for `model`.
    fn credentials(&self, model: Option<&str>) -> Vec<String>;

    /// The hosts the CLI reaches for `model`, and where each credential goes.
    fn egress(&self, model: Option<&str>) -> HarnessEgress;

    /// Variables of every turn: the relocated config home and the CLI's
    /// headless settings. `sandbox_env` is the attempt's environment (placeholders only).
    fn env(&self, home: &str, sandbox_env: &[(String, String)]) -> Vec<(String, String)>;

    /// Files written before the first turn (settings, skills, MCP servers), absolute paths.
    ///
    /// # Errors
    /// A message when the setup asks for something this CLI cannot do; the run is misconfigured.
    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String>;

    /// Adjusts the [`CliAgent::session_files`] to the CLI as installed, by
    /// looking in the sandbox before they are written (Codex points its config
    /// at the model catalog of the installed release); the files to write.
    /// The config home may not exist yet. Best effort: the CLI runs without it.
    ///
    /// # Cancel safety
    /// A dropped call may leave a file half written in the config home.
    async fn prepare(
        &self,
        _sandbox: &SandboxHandle,
        _program: &str,
        _home: &str,
        _setup: &SessionSetup,
        files: Vec<FileToWrite>,
    ) -> Vec<FileToWrite> {
        files
    }

    /// One turn's command.
    fn command(&self, inv: &Invocation<'_>) -> Command;

    /// A parser for one turn's stream.
    fn parser(&self) -> Box<dyn EventParser>;

    /// The class an exit code means by itself (Gemini's 41 is an auth error).
    fn classify_exit(&self, _exit_code: i64) -> Option<ErrorClass> {
        None
    }

    /// The model to report when the stream names none.
    fn fallback_model(&self, _selected: Option<&str>) -> Option<String> {
        None
    }

    /// Reads more of the turn from the config home once the stream ended (a
    /// session file), knowing the model the harness selected, if any. Best
    /// effort: what cannot be read is left out.
    ///
    /// # Cancel safety
    /// Reads only; a dropped call changes nothing in the sandbox.
    async fn after_turn(
        &self,
        _sandbox: &SandboxHandle,
        _home: &str,
        _selected_model: Option<&str>,
        _turn: &mut TurnBuilder,
    ) {
    }
}

/// A harness that runs an agent CLI in the sandbox, one process per turn.
#[derive(Debug)]
pub struct CliHarness<A: CliAgent> {
    agent: A,
    program: String,
    model: Option<String>,
    home: String,
    session: Option<String>,
    session_total: Option<SessionTotal>,
    earlier: Vec<String>,
    mcp: bool,
    artifacts_dir: Option<PathBuf>,
}

impl<A: CliAgent> CliHarness<A> {
    /// A harness for `agent` with an optional model, running the CLI by its usual name.
    pub fn new(agent: A, model: Option<&str>) -> Self {
        let home = format!("{AGENT_HOME_ROOT}/{}", agent.name());
        Self {
            program: agent.program().to_string(),
            agent,
            model: model.map(str::to_string),
            home,
            session: None,
            session_total: None,
            earlier: Vec::new(),
            mcp: false,
            artifacts_dir: None,
        }
    }

    /// Runs the CLI from `program` instead (a path in the sandbox, e.g. a stand-in).
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The CLI's config home in the sandbox.
    pub fn home(&self) -> &str {
        &self.home
    }

    /// The session the next turn resumes, once a turn reported one.
    pub fn session(&self) -> Option<&str> {
        self.session.as_deref()
    }

    fn failed(&self, message: impl Into<String>, class: ErrorClass) -> HarnessError {
        HarnessError::Failed {
            harness: self.agent.name().to_string(),
            message: message.into(),
            class,
        }
    }

    fn transcript(&self, index: u32) -> Option<std::fs::File> {
        let dir = self.artifacts_dir.as_ref()?;
        std::fs::create_dir_all(dir).ok()?;
        std::fs::File::create(dir.join(format!("{}-turn{index}.ndjson", self.agent.name()))).ok()
    }
}

#[async_trait]
impl<A: CliAgent> Harness for CliHarness<A> {
    fn name(&self) -> &str {
        self.agent.name()
    }

    fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    fn rules_file(&self) -> &str {
        self.agent.rules_file()
    }

    fn version(&self) -> Option<String> {
        self.agent.version().map(str::to_string)
    }

    fn image(&self) -> Option<ImageSpec> {
        Some(ImageSpec::Install {
            base: DEFAULT_IMAGE.to_string(),
            steps: self.agent.install_steps(),
        })
    }

    fn credentials(&self) -> Vec<String> {
        self.agent.credentials(self.model.as_deref())
    }

    fn takes_mcp(&self) -> bool {
        self.agent.takes_mcp()
    }

    fn takes_skills(&self) -> bool {
        self.agent.skills_dir(&self.home).is_some()
    }

    fn starts_apart_from(&self, workspace: &str) -> bool {
        // Its config home, uploaded as the agent's own by uid, is all it writes.
        !std::path::Path::new(&self.home).starts_with(workspace)
    }

    fn egress(&self) -> HarnessEgress {
        self.agent.egress(self.model.as_deref())
    }

    async fn start(
        &mut self,
        sandbox: &SandboxHandle,
        setup: &SessionSetup,
    ) -> Result<(), HarnessError> {
        self.artifacts_dir = setup.artifacts_dir.clone();
        // MCP servers given where taken: this agent's (a copy of the setup only then), or none.
        let with_taken;
        let setup = if setup.mcp_where_taken.is_empty() || !self.agent.takes_mcp() {
            setup
        } else {
            let mut merged = setup.clone();
            merged.mcp.extend(std::mem::take(&mut merged.mcp_where_taken));
            with_taken = merged;
            &with_taken
        };
        self.mcp = !setup.mcp.is_empty();
        let files = self
            .agent
            .session_files(&self.home, setup)
            .map_err(|m| self.failed(m, ErrorClass::Config))?;
        // Adjusted to the CLI first, so that each file is written once.
        let files = self.agent.prepare(sandbox, &self.program, &self.home, setup, files).await;
        self.write_home(sandbox, files).await?;
        self.copy_skills_in_sandbox(sandbox, &setup.skills_in_sandbox).await
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        let inv = Invocation {
            program: &self.program,
            prompt,
            model: self.model.as_deref(),
            resume: self.session.as_deref(),
            earlier: &self.earlier,
            home: &self.home,
            mcp: self.mcp,
        };
        let mut cmd = self.agent.command(&inv);
        let own = self.agent.env(&self.home, sandbox.env());
        // The turn's variables (Harbor's `--ae`), under the harness's own, which it needs to run.
        for (k, v) in turn.env.iter().filter(|(k, _)| !own.iter().any(|(o, _)| o == k)) {
            cmd = cmd.env(k.clone(), v.clone());
        }
        for (k, v) in own {
            cmd = cmd.env(k, v);
        }
        let mut transcript = self.transcript(turn.index);
        let mut parser = self.agent.parser();
        let mut built = TurnBuilder::new(sandbox.workspace());
        built.session_total = self.session_total.clone();

        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let exec = sandbox.exec_turn(cmd, tx);
        let mut unread = ndjson::Unread::default();
        let read = async {
            let mut lines = ndjson::LineSplitter::new();
            while let Some(chunk) = rx.recv().await {
                if let Some(f) = transcript.as_mut() {
                    let _ = f.write_all(&chunk);
                }
                for line in lines.push(&chunk) {
                    if !feed(parser.as_mut(), &mut built, &line, turn) {
                        unread.note(&line);
                    }
                }
            }
            if let Some(line) = lines.finish()
                && !feed(parser.as_mut(), &mut built, &line, turn)
            {
                unread.note(&line);
            }
        };
        let (out, ()) = tokio::join!(exec, read);
        parser.finish(&mut built);
        self.earlier.push(prompt.to_string());
        let out = out?;
        self.agent.after_turn(sandbox, &self.home, self.model.as_deref(), &mut built).await;
        if let Some(id) = &built.session_id {
            self.session = Some(id.clone());
        }
        if built.session_total.is_some() {
            self.session_total = built.session_total.take();
        }

        let failure = built.failure.take();
        // A CLI that exits 0 without one event (garbage, or nothing, on stdout)
        // ran no turn its harness can read: never a silent pass.
        let unreadable =
            out.exit_code == 0 && !out.timed_out && failure.is_none() && built.events == 0;
        let failed = out.exit_code != 0 || out.timed_out || failure.is_some() || unreadable;
        let (error, error_class) = if failed {
            let stderr = reeval_core::exec::tail(out.stderr.trim(), 2000);
            let message = match &failure {
                Some(f) => f.message.clone(),
                None if unreadable => unread.describe(self.agent.program()),
                None if !stderr.is_empty() => {
                    format!("{} exited {}: {stderr}", self.agent.program(), out.exit_code)
                }
                None => format!("{} exited {}", self.agent.program(), out.exit_code),
            };
            let class = classify::classify(
                self.agent.classify_exit(out.exit_code),
                failure.as_ref(),
                stderr,
            );
            (Some(with_notices(message, &built.notices)), Some(class))
        } else if !built.notices.is_empty() {
            // Completed anyway: the record still says what went wrong on the way.
            (Some(built.notices.join("\n")), None)
        } else {
            (None, None)
        };
        Ok(TurnReport {
            status: if failed { TurnStatus::Failed } else { TurnStatus::Completed },
            final_message: built.final_message,
            tool_calls: built.tool_calls,
            file_edits: built.file_edits,
            usage: built.usage,
            model: built.model.or_else(|| self.agent.fallback_model(self.model.as_deref())),
            error,
            error_class,
            events: built.events,
        })
    }

    async fn stop(&mut self, sandbox: &SandboxHandle) -> Result<(), HarnessError> {
        let Some(dir) = self.artifacts_dir.clone() else { return Ok(()) };
        let tar = match sandbox.download_dir(&self.home, HOME_ARCHIVE_LIMIT).await {
            Ok(tar) => tar,
            Err(SandboxError::NotFound { .. }) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        // Kept as the archive it is: an archive from the sandbox is never unpacked on the host.
        let path = dir.join(format!("{}-home.tar", self.agent.name()));
        let written = async {
            tokio::fs::create_dir_all(&dir).await?;
            tokio::fs::write(&path, &tar).await
        };
        written.await.map_err(|e| {
            self.failed(format!("failed to write {}: {e}", path.display()), ErrorClass::Infra)
        })
    }
}

/// A failure's message, followed by the non-fatal errors the CLI reported before it.
fn with_notices(message: String, notices: &[String]) -> String {
    if notices.is_empty() {
        return message;
    }
    format!("{message}\n(the CLI also reported: {})", notices.join("; "))
}

/// Reads one line of the CLI's stream into `turn`, and reports what it added
/// (tool calls, edits, the agent's message) as it happens. Whether the line was an event.
fn feed(
    parser: &mut dyn EventParser,
    turn: &mut TurnBuilder,
    line: &str,
    ctx: &TurnContext,
) -> bool {
    use reeval_core::harness::AgentEvent;
    let Some(event) = ndjson::parse_event(line) else { return false };
    let (calls, edits, said) =
        (turn.tool_calls.len(), turn.file_edits.len(), turn.final_message.clone());
    turn.events += 1;
    parser.event(&event, turn);
    for call in &turn.tool_calls[calls..] {
        ctx.report(AgentEvent::ToolCall { name: call.name.clone(), input: call.input.to_string() });
    }
    for edit in &turn.file_edits[edits..] {
        ctx.report(AgentEvent::Edit { path: edit.path.clone() });
    }
    if turn.final_message != said
        && let Some(text) = &turn.final_message
    {
        ctx.report(AgentEvent::Message { text: text.clone() });
    }
    true
}

#[cfg(test)]
mod tests;
