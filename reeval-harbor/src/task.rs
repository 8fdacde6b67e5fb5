//! A Harbor task's `task.toml`, read as Harbor 0.26 reads it
//! (`harbor/models/task/config.py`): unknown keys are ignored, deprecated
//! keys are mapped (`version`, `allow_internet`, `memory`/`storage` strings),
//! and `${VAR}` / `${VAR:-default}` values of the env tables are resolved
//! from the host's environment (`harbor/utils/env.py`).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::HarborError;

/// Harbor's default verifier timeout.
pub const DEFAULT_VERIFIER_TIMEOUT_SEC: f64 = 600.0;

/// `task.toml`, typed. Every table is optional, as in Harbor.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TaskConfig {
    /// `schema_version` (the legacy `version` is read into it).
    #[serde(alias = "version")]
    pub schema_version: Option<String>,
    /// `[task]`: the task's name, description and keywords.
    pub task: Option<PackageInfo>,
    /// `[metadata]`: free-form, kept as TOML.
    pub metadata: BTreeMap<String, toml::Value>,
    /// `[agent]`.
    pub agent: AgentConfig,
    /// `[verifier]`.
    pub verifier: VerifierConfig,
    /// `[environment]`.
    pub environment: EnvironmentConfig,
    /// `[solution]`.
    pub solution: SolutionConfig,
    /// `[[steps]]`: a multi-step task's steps, in order.
    pub steps: Option<Vec<StepConfig>>,
    /// `mean` (default) or `final`.
    pub multi_step_reward_strategy: Option<RewardStrategy>,
    /// `artifacts`: paths collected after the agent, before the verifier.
    pub artifacts: Vec<ArtifactEntry>,
}

/// One step of a multi-step task (`[[steps]]`).
#[derive(Debug, Clone, Deserialize)]
pub struct StepConfig {
    /// Its directory under `steps/`.
    pub name: String,
    /// Its agent settings (`timeout_sec`, `user`) over the task's.
    #[serde(default)]
    pub agent: AgentConfig,
    /// Its verifier: `timeout_sec` (600 unless set, as Harbor's default), `env`
    /// on top of the task's, `user` over the task's.
    #[serde(default)]
    pub verifier: VerifierConfig,
    /// Later steps run only when this step's reward reaches it.
    #[serde(default)]
    pub min_reward: Option<MinReward>,
    /// Run until healthy after the step's setup, before its agent.
    #[serde(default)]
    pub healthcheck: Option<HealthcheckConfig>,
    /// Artifacts of this step, after the task's.
    #[serde(default)]
    pub artifacts: Vec<ArtifactEntry>,
}

/// A step's gate: a float gates the `reward` key; a table gates each key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum MinReward {
    /// On `reward`.
    Reward(f64),
    /// On each key (a missing key is below any threshold).
    Keys(BTreeMap<String, f64>),
}

impl MinReward {
    /// The first key below its threshold, as `key=actual below min_reward t`.
    pub fn failure(&self, reward: Option<&BTreeMap<String, f64>>) -> Option<String> {
        let thresholds = match self {
            MinReward::Reward(t) => BTreeMap::from([("reward".to_string(), *t)]),
            MinReward::Keys(k) => k.clone(),
        };
        thresholds.into_iter().find_map(|(key, t)| {
            let actual = reward.and_then(|r| r.get(&key)).copied().unwrap_or(f64::NEG_INFINITY);
            (actual < t).then(|| format!("{key}={actual} below min_reward {t}"))
        })
    }
}

/// How a multi-step task's reward comes from its steps'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RewardStrategy {
    /// Per key, the mean over the steps that have a reward (a missing key counts 0).
    Mean,
    /// The last step's that ran.
    Final,
}

impl RewardStrategy {
    /// The task's reward from its steps' (`None`: a step without a reward).
    pub fn combine(self, steps: &[Option<BTreeMap<String, f64>>]) -> Option<BTreeMap<String, f64>> {
        match self {
            RewardStrategy::Final => steps.last().cloned().flatten(),
            RewardStrategy::Mean => {
                let rewarded: Vec<&BTreeMap<String, f64>> = steps.iter().flatten().collect();
                let keys: std::collections::BTreeSet<&String> =
                    rewarded.iter().flat_map(|r| r.keys()).collect();
                if keys.is_empty() {
                    return None;
                }
                let n = rewarded.len() as f64;
                Some(
                    keys.into_iter()
                        .map(|k| {
                            let sum: f64 =
                                rewarded.iter().map(|r| r.get(k).copied().unwrap_or(0.0)).sum();
                            (k.clone(), sum / n)
                        })
                        .collect(),
                )
            }
        }
    }
}

/// One declared artifact: a path, or a table with its `source`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ArtifactEntry {
    /// A path in the container.
    Path(String),
    /// `{ source = "/x", destination, exclude, service }`.
    Config {
        /// The path in the container.
        source: String,
        /// Where Harbor puts it on the host (reeval: ignored; it is a capture).
        #[serde(default)]
        destination: Option<String>,
        /// tar `--exclude` patterns (not applied by reeval).
        #[serde(default)]
        exclude: Vec<String>,
        /// A compose service (only `main` is supported).
        #[serde(default)]
        service: Option<String>,
    },
}

impl ArtifactEntry {
    /// The path in the container.
    pub fn source(&self) -> &str {
        match self {
            ArtifactEntry::Path(p) | ArtifactEntry::Config { source: p, .. } => p,
        }
    }
}

/// `[task]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PackageInfo {
    /// `org/name`.
    pub name: String,
    /// A one-line description.
    pub description: String,
    /// Keywords: reeval's tags.
    pub keywords: Vec<String>,
}

/// A user as Harbor takes it: a name or a uid.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum User {
    /// A user name.
    Name(String),
    /// A uid.
    Id(i64),
}

impl User {
    /// The form the engine takes.
    pub fn spec(&self) -> String {
        match self {
            User::Name(n) => n.clone(),
            User::Id(i) => i.to_string(),
        }
    }
}

/// Where a phase may go (`network_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// Anywhere (Harbor's default).
    Public,
    /// Nowhere.
    NoNetwork,
    /// Only `allowed_hosts`.
    Allowlist,
}

/// `[agent]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AgentConfig {
    /// No timeout when absent.
    pub timeout_sec: Option<f64>,
    /// The agent's user (reeval's agents always run unprivileged; the oracle uses it).
    pub user: Option<User>,
    /// This phase's own network mode, over `[environment]`'s.
    pub network_mode: Option<NetworkMode>,
    /// This phase's own allowlist.
    pub allowed_hosts: Option<Vec<String>>,
}

/// `[verifier]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct VerifierConfig {
    /// 600 unless set.
    pub timeout_sec: f64,
    /// The verifier's environment variables (templates resolved).
    pub env: BTreeMap<String, String>,
    /// The verifier's user.
    pub user: Option<User>,
    /// `shared` or `separate` (`verifier_env.rs`); unset: separate when
    /// `environment` is set, else shared.
    pub environment_mode: Option<VerifierMode>,
    /// The separate verifier's environment (`[verifier.environment]`, the
    /// schema of `[environment]`).
    pub environment: Option<Box<EnvironmentConfig>>,
    /// `[[verifier.collect]]`: commands run in compose services after the
    /// agent and before the artifacts are collected (`collect.rs`).
    pub collect: Vec<CollectConfig>,
    /// This phase's own network mode.
    pub network_mode: Option<NetworkMode>,
    /// This phase's own allowlist.
    pub allowed_hosts: Option<Vec<String>>,
}

/// Where the verifier runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifierMode {
    /// In the agent's sandbox.
    Shared,
    /// In a sandbox of its own, started after the agent.
    Separate,
}

/// One `[[verifier.collect]]` hook.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CollectConfig {
    /// A shell command (`bash -c` in `main`, `sh -c` in a service).
    pub command: String,
    /// The compose service it runs in (`main` unless set).
    #[serde(default = "main_service")]
    pub service: String,
    /// Its limit (60 s unless set).
    #[serde(default = "collect_timeout")]
    pub timeout_sec: f64,
    /// Its user, when not the container's.
    #[serde(default)]
    pub user: Option<User>,
}

fn main_service() -> String {
    "main".into()
}

fn collect_timeout() -> f64 {
    60.0
}

/// `[environment.healthcheck]` (and a step's `healthcheck`), as Docker's HEALTHCHECK.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HealthcheckConfig {
    /// A shell command; exit 0 is healthy.
    pub command: String,
    /// Between checks after the start period (5 s).
    #[serde(default = "five")]
    pub interval_sec: f64,
    /// One check's limit (30 s).
    #[serde(default = "thirty")]
    pub timeout_sec: f64,
    /// Failures in it do not count (0 s).
    #[serde(default)]
    pub start_period_sec: f64,
    /// Between checks during the start period (5 s).
    #[serde(default = "five")]
    pub start_interval_sec: f64,
    /// Failures in a row that fail it (3).
    #[serde(default = "three")]
    pub retries: u32,
}

fn five() -> f64 {
    5.0
}

fn thirty() -> f64 {
    30.0
}

fn three() -> u32 {
    3
}

impl Default for VerifierConfig {
    fn default() -> Self {
        Self {
            timeout_sec: DEFAULT_VERIFIER_TIMEOUT_SEC,
            env: BTreeMap::new(),
            user: None,
            environment_mode: None,
            environment: None,
            collect: Vec::new(),
            network_mode: None,
            allowed_hosts: None,
        }
    }
}

impl VerifierConfig {
    /// Its mode at its own level: `environment_mode`, else separate when it
    /// has an `environment`; `None` when it says neither (Harbor's `_resolve_mode`).
    fn own_mode(&self) -> Option<VerifierMode> {
        match (self.environment_mode, &self.environment) {
            (Some(mode), _) => Some(mode),
            (None, Some(_)) => Some(VerifierMode::Separate),
            (None, None) => None,
        }
    }
}

/// `[environment]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct EnvironmentConfig {
    /// A prebuilt image, used in place of `environment/Dockerfile`.
    pub docker_image: Option<String>,
    /// `linux` or `windows` (refused).
    pub os: Option<String>,
    /// CPU limit.
    pub cpus: Option<f64>,
    /// Memory limit in MB.
    pub memory_mb: Option<u64>,
    /// Deprecated: `"2G"`, `"512M"`; mapped to `memory_mb`.
    pub memory: Option<String>,
    /// Not enforced by Docker (nor by reeval).
    pub storage_mb: Option<u64>,
    /// Deprecated form of `storage_mb`.
    pub storage: Option<String>,
    /// GPUs (refused when above 0).
    pub gpus: Option<u64>,
    /// Environment variables of every command (templates resolved).
    pub env: BTreeMap<String, String>,
    /// Where commands run; the image's WORKDIR when absent.
    pub workdir: Option<String>,
    /// Deprecated: `true` is `public`, `false` is `no-network` (when `network_mode` is absent).
    pub allow_internet: Option<bool>,
    /// `public` (default), `no-network`, `allowlist`.
    pub network_mode: Option<NetworkMode>,
    /// The hosts of `allowlist`.
    pub allowed_hosts: Option<Vec<String>>,
    /// Run until healthy after the start, before the agent.
    pub healthcheck: Option<HealthcheckConfig>,
    /// MCP servers for the agent (read; not given to reeval's harnesses yet).
    pub mcp_servers: Vec<toml::Value>,
    /// A directory in the image whose skill folders go where the agent reads skills
    /// (`Environment::skills_in_sandbox`).
    pub skills_dir: Option<String>,
    /// TPUs (refused).
    pub tpu: Option<toml::Value>,
}

/// `[solution]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SolutionConfig {
    /// The oracle's environment variables (templates resolved).
    pub env: BTreeMap<String, String>,
}

/// One phase's network policy, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// The mode.
    pub mode: NetworkMode,
    /// The hosts of an allowlist.
    pub hosts: Vec<String>,
}

impl TaskConfig {
    /// Parses `task.toml` text, mapping the deprecated keys.
    ///
    /// # Errors
    /// [`HarborError::Parse`] naming the task when the TOML or a value is invalid.
    pub fn parse(task: &str, text: &str) -> Result<Self, HarborError> {
        let parse = |message: String| HarborError::Parse { task: task.to_string(), message };
        let mut config: TaskConfig = toml::from_str(text).map_err(|e| parse(e.to_string()))?;
        config.environment.normalize().map_err(parse)?;
        let steps = config.steps.iter_mut().flatten();
        let verifiers = std::iter::once(("verifier".to_string(), &mut config.verifier))
            .chain(steps.map(|s| (format!("steps.{}.verifier", s.name), &mut s.verifier)));
        for (table, verifier) in verifiers {
            if let Some(env) = verifier.environment.as_mut() {
                env.normalize().map_err(parse)?;
            }
            if verifier.environment_mode == Some(VerifierMode::Shared)
                && verifier.environment.is_some()
            {
                return Err(parse(format!(
                    "[{table}].environment_mode='shared' is incompatible with [{table}.environment]; either omit the environment or set environment_mode='separate'"
                )));
            }
        }
        Ok(config)
    }
}

impl EnvironmentConfig {
    /// Maps the deprecated keys (`memory`, `storage`, `allow_internet`).
    fn normalize(&mut self) -> Result<(), String> {
        let env = self;
        if let Some(memory) = env.memory.take() {
            let mb = size_to_mb(&memory)?;
            if env.memory_mb.is_some_and(|m| m != mb) {
                return Err(format!(
                    "conflicting 'memory' and 'memory_mb' values: memory={memory:?} ({mb} MB) != memory_mb={}",
                    env.memory_mb.unwrap_or_default()
                ));
            }
            env.memory_mb.get_or_insert(mb);
        }
        if let Some(storage) = env.storage.take() {
            let mb = size_to_mb(&storage)?;
            env.storage_mb.get_or_insert(mb);
        }
        // `allow_internet` counts only when no network_mode or allowed_hosts is set.
        if let Some(allow) = env.allow_internet.take()
            && env.network_mode.is_none()
            && env.allowed_hosts.is_none()
        {
            env.network_mode =
                Some(if allow { NetworkMode::Public } else { NetworkMode::NoNetwork });
        }
        Ok(())
    }

    /// This environment's network policy (its baseline).
    pub fn baseline_network(&self) -> NetworkPolicy {
        NetworkPolicy {
            mode: self.network_mode.unwrap_or(NetworkMode::Public),
            hosts: self.allowed_hosts.clone().unwrap_or_default(),
        }
    }
}

impl TaskConfig {
    /// The verifier's mode: `environment_mode`, else separate when
    /// `[verifier.environment]` is set, else shared (Harbor's `_resolve_mode`).
    pub fn verifier_mode(&self) -> VerifierMode {
        self.verifier.own_mode().unwrap_or(VerifierMode::Shared)
    }

    /// A step's verifier mode: the step's own (its `environment_mode`, else
    /// separate when it has an environment), else the task's (Harbor's
    /// `resolve_step_verifier_mode`).
    pub fn step_verifier_mode(&self, step: &StepConfig) -> VerifierMode {
        step.verifier.own_mode().unwrap_or_else(|| self.verifier_mode())
    }

    /// The environment's network policy, the agent's baseline.
    pub fn baseline_network(&self) -> NetworkPolicy {
        self.environment.baseline_network()
    }

    /// A phase's policy: its own when set, else the baseline.
    pub fn phase_network(
        &self,
        mode: Option<NetworkMode>,
        hosts: &Option<Vec<String>>,
    ) -> NetworkPolicy {
        phase_over(mode, hosts, self.baseline_network())
    }
}

/// A phase's policy: its own `mode`/`hosts` when set, else `baseline`.
pub fn phase_over(
    mode: Option<NetworkMode>,
    hosts: &Option<Vec<String>>,
    baseline: NetworkPolicy,
) -> NetworkPolicy {
    match (mode, hosts) {
        (None, None) => baseline,
        (mode, hosts) => NetworkPolicy {
            mode: mode.unwrap_or(if hosts.is_some() {
                NetworkMode::Allowlist
            } else {
                NetworkMode::Public
            }),
            hosts: hosts.clone().unwrap_or_default(),
        },
    }
}

/// Harbor's `_parse_size_to_mb`: `"2G"` → 2048, `"512M"` → 512, `"2048K"` → 2.
fn size_to_mb(size: &str) -> Result<u64, String> {
    let s = size.trim().to_ascii_uppercase();
    let bad = || format!("invalid size format: {s}. Expected format like '1G', '512M', etc.");
    let (number, factor) = match s.chars().last() {
        Some('G') => (&s[..s.len() - 1], 1024.0),
        Some('M') => (&s[..s.len() - 1], 1.0),
        Some('K') => (&s[..s.len() - 1], 1.0 / 1024.0),
        _ => return Err(bad()),
    };
    let n: f64 = number.parse().map_err(|_| bad())?;
    Ok((n * factor) as u64)
}

/// Resolves `${VAR}` / `${VAR:-default}` values (the whole value, as Harbor
/// matches them) from `lookup`; other values pass through unchanged.
///
/// # Errors
/// [`HarborError::EnvVar`] naming the task, the table and the variable when a
/// variable without a default is not set.
pub fn resolve_env(
    task: &str,
    table: &str,
    env: &BTreeMap<String, String>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, HarborError> {
    env.iter()
        .map(|(key, value)| {
            let Some((var, default)) = template(value) else {
                return Ok((key.clone(), value.clone()));
            };
            match (lookup(var), default) {
                (Some(v), _) => Ok((key.clone(), v)),
                (None, Some(d)) => Ok((key.clone(), d.to_string())),
                (None, None) => Err(HarborError::EnvVar {
                    task: task.to_string(),
                    table: table.to_string(),
                    key: key.clone(),
                    var: var.to_string(),
                }),
            }
        })
        .collect()
}

/// `${NAME}` → (`NAME`, None); `${NAME:-d}` → (`NAME`, Some(`d`)); else None.
/// Harbor's pattern: `\$\{([^}:]+)(?::-(.*))?\}` matched against the whole value.
fn template(value: &str) -> Option<(&str, Option<&str>)> {
    let inner = value.strip_prefix("${")?.strip_suffix('}')?;
    let (name, default) = match inner.split_once(":-") {
        Some((name, default)) => (name, Some(default)),
        None => (inner, None),
    };
    if name.is_empty() || name.contains(['}', ':']) {
        return None;
    }
    Some((name, default))
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
