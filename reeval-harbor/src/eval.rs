//! One Harbor task read and made an [`Eval`](reeval_core::eval::Eval): the environment from
//! `environment/`, its limits, env and network, the eval's budget, tags and
//! oracle. What the eval does in the sandbox is `run.rs` (one step) and
//! `steps.rs` (`[[steps]]`).
//!
//! The workdir: Harbor runs every command in the task's workdir
//! (`[environment].workdir`, else the image's WORKDIR, often `/app`). It is
//! the sandbox's workspace ([`WorkspaceDir`]): the agent starts there, the
//! oracle and the verifier run there, and every diff reads it. The image's
//! WORKDIR comes from the backend that runs the attempt. A layer built on the
//! task's image (once, cached with it) gives the workdir's files to the
//! agent's user, who may edit them as Harbor's root agent may.

use reeval_core::sandbox::FileToWrite;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::HarborError;
use super::shell::quote;
use super::task::{NetworkMode, NetworkPolicy, TaskConfig, resolve_env};
use reeval_core::egress::Egress;
use reeval_core::environment::{Environment, Image, ImageSpec, WorkspaceDir};
use reeval_core::error::Result;

/// The turn's limit of a task without an agent timeout (Harbor has none then).
pub const NO_AGENT_TIMEOUT_BUDGET: Duration = Duration::from_secs(60 * 60);
/// Time left over the agent's and the verifier's limits for uploads and captures.
const BUDGET_MARGIN: Duration = Duration::from_secs(120);
/// An attempt passes when its reward reaches this, unless the task's
/// [`HarborTask::reward_threshold`] is set otherwise (Harbor's convention of 1.0 = solved).
pub const PASS_THRESHOLD: f64 = 1.0;

/// The log directories Harbor mounts (`/logs/agent`, `/logs/verifier`, `/logs/artifacts`).
pub(super) const LOG_DIRS: [&str; 3] = ["/logs/agent", "/logs/verifier", "/logs/artifacts"];

/// A Harbor task, read and checked: what its eval needs. Its `Debug` names
/// the variables of its env tables, never their values: a `${VAR}` template
/// resolved from the host may be a credential.
#[derive(Clone)]
pub struct HarborTask {
    /// `[task].name`, else the directory's name.
    pub name: String,
    /// The task's directory.
    pub dir: PathBuf,
    /// `task.toml`.
    pub config: TaskConfig,
    /// `instruction.md` (empty for a multi-step task).
    pub instruction: String,
    /// Each step's `steps/<name>/instruction.md`, in order.
    pub step_instructions: Vec<String>,
    /// Each step's verifier env (the task's, the step's over it), resolved.
    pub step_verifier_envs: Vec<Vec<(String, String)>>,
    /// `[environment].env`, resolved.
    pub environment_env: Vec<(String, String)>,
    /// `[verifier].env`, resolved.
    pub verifier_env: Vec<(String, String)>,
    /// `[solution].env`, resolved.
    pub solution_env: Vec<(String, String)>,
    /// Harbor's `--ae`: the agent's variables, on its turns (and the
    /// oracle's `solve.sh`), never the sandbox's: no check or verifier sees them.
    pub agent_env: Vec<(String, String)>,
    /// `[[environment.mcp_servers]]` as reeval's harnesses take them (`mcp.rs`).
    pub mcp_servers: Vec<reeval_core::environment::McpServer>,
    /// Multiplies the agent's timeout (`--agent-timeout-multiplier`).
    pub agent_timeout_multiplier: f64,
    /// Multiplies the verifier's timeout (`--verifier-timeout-multiplier`).
    pub verifier_timeout_multiplier: f64,
    /// An attempt passes when its reward (its `reward` key, else every key)
    /// reaches this: [`PASS_THRESHOLD`] unless set (`--reward-threshold`).
    pub reward_threshold: f64,
    /// `environment/docker-compose.yaml`: the services beside the sandbox, `main`'s env.
    pub compose: super::compose::Compose,
    /// What was read and ignored: `task.toml` keys Harbor does not know.
    pub warnings: Vec<String>,
    /// Harbor's `--disable-verification`: the agent runs, the verifier does
    /// not, and the attempt passes with no reward.
    pub disable_verification: bool,
    /// The verifier's own sandbox, when it does not share the agent's (`verifier_env.rs`).
    pub separate_verifier: Option<super::verifier_env::SeparateVerifier>,
    /// Each step's own verifier sandbox, when that step's does not share the agent's.
    pub step_separate_verifiers: Vec<Option<super::verifier_env::SeparateVerifier>>,
    image: ImageSpec,
    has_solution: bool,
    /// Values read from the host under a credential's name (`${OPENAI_API_KEY}`).
    host_credentials: Vec<String>,
    /// Whether the task image's own user is root, once an exec has told (`together.rs`).
    pub(crate) image_user: super::together::ImageUser,
}

/// Whether a variable's name says it holds a credential (`OPENAI_API_KEY`,
/// `GITHUB_TOKEN`, `DB_PASSWORD`, `AUTH_HEADER`…): its value is redacted.
fn looks_like_a_credential(name: &str) -> bool {
    // `GIT_AUTHOR_NAME` names a person, not a credential.
    let name = name.to_ascii_uppercase().replace("AUTHOR", "");
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"]
        .iter()
        .any(|word| name.contains(word))
}

/// `NAME=…` for each variable: what a `Debug` print may show of an env table.
fn names(env: &[(String, String)]) -> Vec<String> {
    env.iter().map(|(name, _)| format!("{name}=…")).collect()
}

impl std::fmt::Debug for HarborTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let services: Vec<&str> = self.compose.services.iter().map(|s| s.name.as_str()).collect();
        let step_verifier_envs: Vec<Vec<String>> =
            self.step_verifier_envs.iter().map(|env| names(env)).collect();
        f.debug_struct("HarborTask")
            .field("name", &self.name)
            .field("dir", &self.dir)
            .field("steps", &self.step_instructions.len())
            .field("environment_env", &names(&self.environment_env))
            .field("verifier_env", &names(&self.verifier_env))
            .field("step_verifier_envs", &step_verifier_envs)
            .field("solution_env", &names(&self.solution_env))
            .field("agent_env", &names(&self.agent_env))
            .field("compose_services", &services)
            .field("compose_main_env", &names(&self.compose.main_env))
            .field("mcp_servers", &self.mcp_servers.iter().map(|m| m.name()).collect::<Vec<_>>())
            .field("reward_threshold", &self.reward_threshold)
            .field("disable_verification", &self.disable_verification)
            .field("separate_verifier", &self.separate_verifier.is_some())
            .field("warnings", &self.warnings)
            .finish_non_exhaustive()
    }
}

impl HarborTask {
    /// Reads the task at `dir`, resolving env templates with `lookup`.
    ///
    /// # Errors
    /// A [`HarborError`] naming the task: a file missing or unreadable, an
    /// invalid `task.toml`, an unset variable, or a feature not supported yet.
    pub fn read(dir: &Path, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, HarborError> {
        // What the task reads from the host under a credential's name is redacted in the run.
        let host_credentials = std::cell::RefCell::new(Vec::new());
        let recording = |var: &str| {
            let value = lookup(var);
            if let Some(v) = value.as_ref().filter(|_| looks_like_a_credential(var)) {
                host_credentials.borrow_mut().push(v.clone());
            }
            value
        };
        let lookup: &dyn Fn(&str) -> Option<String> = &recording;
        let dir_name =
            dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path).map_err(|e| HarborError::Read {
                task: dir_name.clone(),
                path: path.clone(),
                message: e.to_string(),
            })
        };
        let text = read(dir.join("task.toml"))?;
        let config = TaskConfig::parse(&dir_name, &text)?;
        let mut warnings =
            text.parse::<toml::Table>().map(|t| super::keys::unknown(&t)).unwrap_or_default();
        let name = config
            .task
            .as_ref()
            .map(|t| t.name.clone())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| dir_name.clone());
        let unsupported =
            |what: &str| HarborError::Unsupported { task: name.clone(), what: what.to_string() };
        let missing = |path: PathBuf, message: &str| HarborError::Read {
            task: name.clone(),
            path,
            message: message.to_string(),
        };
        // Harbor reads `docker-compose.yaml` only (a `.yml` is not merged).
        let compose_file = dir.join("environment/docker-compose.yaml");
        let compose = match compose_file.is_file() {
            true => super::compose::read(
                &name,
                &dir.join("environment"),
                &read(compose_file.clone())?,
                lookup,
            )?,
            false => Default::default(),
        };
        super::verifier_env::refuse_unsupported(&name, &config.environment, "environment")?;
        super::collect::check(&name, &config, &compose)?;
        super::declared::check(&name, &config, &compose)?;
        // A verifier image of its own holds its /tests.
        let bundled = config.verifier_mode() == super::task::VerifierMode::Separate
            && (dir.join("tests/Dockerfile").is_file()
                || config.verifier.environment.as_ref().is_some_and(|e| e.docker_image.is_some()));
        if config.steps.is_none() && !bundled && !dir.join("tests/test.sh").is_file() {
            return Err(missing(dir.join("tests/test.sh"), "the task has no verifier script"));
        }
        // A multi-step task's instructions are its steps'.
        let instruction =
            if config.steps.is_some() { String::new() } else { read(dir.join("instruction.md"))? };
        let dockerfile = dir.join("environment/Dockerfile");
        // Harbor uses the prebuilt image unless --force-build (which reeval has not).
        let image = match (&config.environment.docker_image, dockerfile.is_file()) {
            (Some(reference), _) => Image::from(reference.clone()),
            (None, true) => Image::dockerfile(dockerfile),
            (None, false) => {
                return Err(unsupported(
                    "a task with neither environment/Dockerfile nor [environment].docker_image",
                ));
            }
        };
        if let Some(w) = &config.environment.workdir
            && (!w.starts_with('/') || w.split('/').any(|c| c == ".."))
        {
            return Err(HarborError::Parse {
                task: name.clone(),
                message: format!(
                    "[environment].workdir {w:?} must be an absolute path without `..`"
                ),
            });
        }
        let steps = super::steps_read::Read::of(&name, dir, &config, lookup, &image, &compose)?;
        let separate_verifier = match config.steps {
            Some(_) => None,
            None => super::verifier_env::read(&name, dir, &config, None, lookup, &image, &compose)?,
        };
        let environment_env = resolve_env(&name, "environment", &config.environment.env, lookup)?;
        let verifier_env = resolve_env(&name, "verifier", &config.verifier.env, lookup)?;
        let solution_env = resolve_env(&name, "solution", &config.solution.env, lookup)?;
        let (mcp_servers, left_out) = super::mcp::servers(&name, &config.environment.mcp_servers)?;
        warnings.extend(left_out);
        let has_solution = match &config.steps {
            None => dir.join("solution/solve.sh").is_file(),
            // Each step's own solution, else the task's.
            Some(steps) => steps.iter().all(|s| {
                dir.join("steps").join(&s.name).join("solution/solve.sh").is_file()
                    || dir.join("solution/solve.sh").is_file()
            }),
        };
        Ok(Self {
            separate_verifier,
            step_separate_verifiers: steps.separate_verifiers,
            has_solution,
            step_instructions: steps.instructions,
            step_verifier_envs: steps.verifier_envs,
            name,
            dir: dir.to_path_buf(),
            config,
            instruction,
            environment_env,
            verifier_env,
            solution_env,
            agent_env: Vec::new(),
            mcp_servers,
            agent_timeout_multiplier: 1.0,
            verifier_timeout_multiplier: 1.0,
            reward_threshold: PASS_THRESHOLD,
            compose,
            warnings,
            disable_verification: false,
            image,
            image_user: Default::default(),
            host_credentials: host_credentials.into_inner(),
        })
    }

    /// The values no sink of the run may show: what was read from the host
    /// under a credential's name, and the value of every variable of the
    /// task's (and `--ae`, `--ve`) whose own name is one.
    fn credentials(&self) -> impl Iterator<Item = &str> {
        let tables =
            [&self.environment_env, &self.verifier_env, &self.solution_env, &self.agent_env]
                .into_iter()
                .chain(&self.step_verifier_envs)
                .chain([&self.compose.main_env]);
        let named = tables.flatten().filter(|(k, _)| looks_like_a_credential(k)).map(|(_, v)| v);
        self.host_credentials.iter().chain(named).map(String::as_str)
    }

    /// Harbor's `--force-build`: the task's `environment/Dockerfile` is built
    /// even when `[environment].docker_image` names a prebuilt image. Whether
    /// the image changed (false: no Dockerfile, or no prebuilt image to replace).
    pub fn force_build(&mut self) -> bool {
        let dockerfile = self.dir.join("environment/Dockerfile");
        if self.config.environment.docker_image.is_none() || !dockerfile.is_file() {
            return false;
        }
        // The workdir is the built image's WORKDIR, as the backend reports it.
        self.image = Image::dockerfile(dockerfile);
        true
    }

    /// The files of the task's `sub` directory, as `prefix/...` paths.
    ///
    /// # Errors
    /// [`HarborError::Read`] when one cannot be read.
    pub fn files(&self, sub: &str, prefix: &str) -> Result<Vec<FileToWrite>, HarborError> {
        super::files::task_files(&self.name, &self.dir, sub, prefix)
    }

    /// The agent's limit: `[agent].timeout_sec` × the multiplier, if any.
    pub fn agent_timeout(&self) -> Option<Duration> {
        self.config.agent.timeout_sec.map(|s| secs(s * self.agent_timeout_multiplier))
    }

    /// A step's agent limit: its own `timeout_sec`, else the task's, × the multiplier.
    pub fn step_agent_timeout(&self, step: &super::task::StepConfig) -> Option<Duration> {
        step.agent
            .timeout_sec
            .or(self.config.agent.timeout_sec)
            .map(|s| secs(s * self.agent_timeout_multiplier))
    }

    /// A step's verifier limit: its own `timeout_sec` (600 unless set, as in
    /// Harbor, whose step default shadows the task's) × the multiplier.
    pub fn step_verifier_timeout(&self, step: &super::task::StepConfig) -> Duration {
        secs(step.verifier.timeout_sec * self.verifier_timeout_multiplier)
    }

    /// The verifier's limit: `[verifier].timeout_sec` × the multiplier.
    pub fn verifier_timeout(&self) -> Duration {
        secs(self.config.verifier.timeout_sec * self.verifier_timeout_multiplier)
    }

    /// Where the workspace lives, and so where the agent, the oracle and the
    /// verifier run: `[environment].workdir`, else the image's WORKDIR (as the
    /// backend reports it; `/workspace` when the image sets none or `/`).
    pub fn workspace_dir(&self) -> WorkspaceDir {
        match &self.config.environment.workdir {
            Some(w) if w.trim_end_matches('/').is_empty() => WorkspaceDir::Default,
            Some(w) => WorkspaceDir::At(w.trim_end_matches('/').to_string()),
            None => WorkspaceDir::ImageWorkdir,
        }
    }

    /// The task's image with a layer that gives the workdir to the agent's
    /// user and makes the log directories.
    fn image_for_agent(&self) -> ImageSpec {
        Image::layered(
            self.image.clone(),
            [agent_owns_workdir(&self.workspace_dir()), log_dirs_script()],
        )
    }

    /// The sandbox's environment: image (the log directories in its layer),
    /// workspace, limits, env, network, and the healthcheck as a setup step.
    pub fn environment(&self) -> Environment {
        let mut env =
            Environment::new().image(self.image_for_agent()).workspace_dir(self.workspace_dir());
        // `main`'s compose environment first: `[environment].env` wins, as in Harbor.
        for (k, v) in &self.compose.main_env {
            env = env.env(k.clone(), v.clone());
        }
        for service in &self.compose.services {
            env = env.service(service.clone());
        }
        for mount in &self.compose.main_mounts {
            env = env.mount(mount.clone());
        }
        for (k, v) in &self.environment_env {
            env = env.env(k.clone(), v.clone());
        }
        for value in self.credentials() {
            env = env.redact(value);
        }
        // Given to an agent that takes MCP servers; one that has none runs without, as Harbor's.
        for server in &self.mcp_servers {
            env = env.mcp_where_taken(server.clone());
        }
        // `skills_dir`: its skill folders copied where the agent reads skills, as Harbor's agents do.
        if let Some(dir) = &self.config.environment.skills_dir {
            env = env.skills_in_sandbox(dir.clone());
        }
        if let Some(cpus) = self.config.environment.cpus {
            env = env.cpus(cpus);
        }
        if let Some(mb) = self.config.environment.memory_mb {
            env = env.memory((mb as i64) << 20);
        }
        // The workdir's change of owner and the log directories are a layer
        // built on the task's image (once, cached with it): no setup exec at
        // start. A healthcheck, the only setup left, is not worth a setup image.
        env = env.setup_cache(false);
        // `[environment.healthcheck]`, waited for before the agent (`healthcheck.rs`).
        if let Some(h) = &self.config.environment.healthcheck {
            let script = super::healthcheck::script(h);
            env = env.setup_with_timeout(script, super::healthcheck::limit(h));
        }
        let c = &self.config;
        match c.phase_network(c.agent.network_mode, &c.agent.allowed_hosts) {
            NetworkPolicy { mode: NetworkMode::Public, .. } => env = env.allow_any_egress(true),
            NetworkPolicy { mode: NetworkMode::Allowlist, hosts } => {
                for host in hosts {
                    env = env.allow_egress(host);
                }
            }
            NetworkPolicy { mode: NetworkMode::NoNetwork, .. } => {}
        }
        match c.phase_network(c.verifier.network_mode, &c.verifier.allowed_hosts) {
            NetworkPolicy { mode: NetworkMode::Public, .. } => env = env.check_network(Egress::Any),
            NetworkPolicy { mode: NetworkMode::Allowlist, hosts } => {
                env = env.check_network(Egress::allow(hosts));
            }
            NetworkPolicy { mode: NetworkMode::NoNetwork, .. } => {}
        }
        env
    }

    /// The eval's budget: each step's agent limit (an hour without one) and
    /// verifier limit, with a margin for the copies and captures.
    pub fn budget(&self) -> Duration {
        let limits: Duration = match &self.config.steps {
            None => {
                self.agent_timeout().unwrap_or(NO_AGENT_TIMEOUT_BUDGET) + self.verifier_timeout()
            }
            Some(steps) => steps
                .iter()
                .map(|s| {
                    self.step_agent_timeout(s).unwrap_or(NO_AGENT_TIMEOUT_BUDGET)
                        + self.step_verifier_timeout(s)
                        + BUDGET_MARGIN
                })
                .sum(),
        };
        limits + BUDGET_MARGIN
    }

    /// Whether every step (or the task) has a `solve.sh`: the eval has an oracle.
    pub fn has_solution(&self) -> bool {
        self.has_solution
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

/// The build step that makes the log directories (Harbor's bind mounts,
/// writable by all) in the task image's layer, as root.
fn log_dirs_script() -> String {
    let dirs = LOG_DIRS.join(" ");
    format!("mkdir -p {dirs} && chmod 777 {dirs}")
}

/// The build step that gives the workdir's files to the agent user (uid
/// 1000), once per task image, so the attempt's own preparation (which changes
/// only what the agent does not own yet) finds nothing to change: on an
/// overlay file system each change of owner copies the file up. A layer's
/// build step runs in the image's WORKDIR, so `$PWD` is it when the task does
/// not name one; `/` is never given away.
fn agent_owns_workdir(dir: &WorkspaceDir) -> String {
    let dir = match dir {
        WorkspaceDir::At(w) => quote(w),
        WorkspaceDir::ImageWorkdir => "\"$PWD\"".to_string(),
        WorkspaceDir::Default => quote(reeval_core::environment::WORKSPACE),
    };
    format!(
        "d={dir}; if [ \"$d\" != / ]; then mkdir -p \"$d\" && chown -R {AGENT_UID}:{AGENT_UID} \"$d\"; fi"
    )
}

/// The agent user's uid and gid (the lifecycle's snapshot step makes the user).
const AGENT_UID: u32 = 1000;

/// A task name made an eval name: the part after `org/`, with every
/// character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn eval_name(task_name: &str) -> String {
    let short = task_name.rsplit_once('/').map_or(task_name, |(_, n)| n);
    let name: String = short
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if name.is_empty() { "task".into() } else { name }
}

#[cfg(test)]
#[path = "eval_tests.rs"]
mod tests;
