//! One trial's directory of Harbor's job output, from one final record: its
//! `config.json` (`TrialConfig`), `result.json` (`TrialResult`), and the
//! files the attempt captured, unpacked where Harbor's trial leaves them.

use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use reeval_core::Outcome;
use reeval_core::phase::Phase;
use reeval_core::record::{Record, sanitize};
use reeval_core::turn::TurnStatus;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{JobAgent, JobOutput, JobTask, absolute, rfc3339, write_json};
use crate::dataset::TaskId;
use crate::task::ArtifactEntry;

/// One final record made a trial directory.
pub(super) struct Trial<'a> {
    pub(super) record: &'a Record,
    pub(super) task: &'a JobTask,
    pub(super) agent: &'a JobAgent,
    pub(super) job: &'a JobOutput,
    pub(super) job_id: &'a str,
    pub(super) digests: &'a Digests,
}

/// What a task's files hash to, computed once per task for all its trials.
#[derive(Debug, Clone)]
pub(super) struct Digests {
    /// `task_checksum` (see [`checksum`]).
    pub(super) checksum: String,
    /// Harbor's content hash, the trial lock's task digest (see `lock.rs`).
    pub(super) content: String,
}

/// The result.json of a trial as the job's stats read it.
#[derive(Debug, Clone)]
pub(super) struct TrialOutcome {
    pub(super) trial_name: String,
    pub(super) task_name: String,
    pub(super) evals_key: String,
    pub(super) rewards: Option<std::collections::BTreeMap<String, f64>>,
    /// The exception's type, when the trial has one.
    pub(super) exception: Option<String>,
    /// Whether its reward counts (Harbor's `reward_valid`).
    pub(super) reward_valid: bool,
    pub(super) finished_at: SystemTime,
    /// Its `lock.json`, which the job's lists.
    pub(super) lock: Value,
}

impl Trial<'_> {
    /// Writes the trial's directory; what the job's result needs of it.
    pub(super) fn write(&self, run_dir: &Path) -> io::Result<TrialOutcome> {
        let name = self.trial_name();
        let dir = self.job.dir.join(&name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let attempt = run_dir.join(self.record.artifacts_dir_name());
        self.unpack_phases(&attempt, &dir)?;
        let trajectory = run_dir.join("atif").join(self.record.file_name());
        if trajectory.is_file() {
            std::fs::create_dir_all(dir.join("agent"))?;
            std::fs::copy(&trajectory, dir.join("agent/trajectory.json"))?;
        }
        let config = self.config(&name);
        write_json(&dir.join("config.json"), &config)?;
        let lock = super::lock::trial_lock(self.task, &config, &self.digests.content);
        write_json(&dir.join("lock.json"), &lock)?;
        let exception = exception(self.record);
        if let Some((_, message)) = &exception {
            std::fs::write(dir.join("exception.txt"), message)?;
        }
        let finished =
            started_at(self.record) + Duration::from_millis(self.record.timings.total_ms);
        let result = self.result(&name, &dir, config, exception.as_ref(), finished);
        write_json(&dir.join("result.json"), &result)?;
        let reward_valid = self.record.reward.as_ref().is_some_and(|r| !r.is_empty())
            && exception.as_ref().is_none_or(|(kind, _)| graded_exception(kind));
        Ok(TrialOutcome {
            trial_name: name,
            task_name: self.task.task.name.clone(),
            evals_key: self.evals_key(),
            rewards: self.record.reward.clone(),
            exception: exception.map(|(kind, _)| kind),
            reward_valid,
            finished_at: finished,
            lock,
        })
    }

    /// Harbor's `TrialResult`.
    fn result(
        &self,
        name: &str,
        dir: &Path,
        config: Value,
        exception: Option<&(String, String)>,
        finished: SystemTime,
    ) -> Value {
        let started = started_at(self.record);
        let (model_name, provider) = self.model();
        let steps = self.task.task.config.steps.is_some();
        json!({
            "schema_version": 1,
            "id": uuid_of(&["trial", &self.record.run_id, &self.record.file_name()]),
            "task_name": self.task.task.name,
            "trial_name": name,
            "trial_uri": format!("file://{}", absolute(dir)),
            "task_id": task_id(&self.task.id),
            "source": self.task.source,
            "task_checksum": self.digests.checksum,
            "config": config,
            "agent_info": {
                "name": self.agent.name,
                "version": "unknown",
                "model_info": model_name.map(|n| json!({"name": n, "provider": provider})),
            },
            "agent_result": agent_result(self.record),
            "verifier_result": self.record.reward.as_ref().map(|r| json!({"rewards": r})),
            // Harbor's: the task's mode for one step, none for steps (resolved per step).
            "verifier_environment_mode": (!steps).then(|| match self.task.task.config.verifier_mode() {
                crate::task::VerifierMode::Shared => "shared",
                crate::task::VerifierMode::Separate => "separate",
            }),
            "exception_info": exception.map(|(kind, message)| json!({
                "exception_type": kind,
                "exception_message": message,
                "exception_traceback": "",
                "occurred_at": rfc3339(finished),
            })),
            "started_at": rfc3339(started),
            "finished_at": rfc3339(finished),
            "environment_setup": timing(self.record, started, &[
                Phase::Image, Phase::Container, Phase::Gateway, Phase::Env, Phase::Workspace,
                Phase::Files, Phase::Setup, Phase::Snapshot,
            ]),
            "agent_setup": timing(self.record, started, &[Phase::Harness]),
            "agent_execution": timing(self.record, started, &[Phase::Turn]),
            "verifier": verifier_timing(self.record, started),
            "step_results": steps.then(|| step_results(self.record)),
        })
    }

    /// Harbor's `model_info`: the model's name and its provider (`anthropic/x` → `x`, `anthropic`).
    fn model(&self) -> (Option<String>, Option<String>) {
        match &self.agent.model {
            Some(m) => match m.split_once('/') {
                Some((p, n)) => (Some(n.to_string()), Some(p.to_string())),
                None => (Some(m.clone()), None),
            },
            None => (None, None),
        }
    }

    /// The job stats' key: `agent__model__dataset`, or `agent__dataset` (`adhoc` for one task).
    fn evals_key(&self) -> String {
        let source = self.task.source.as_deref().unwrap_or("adhoc");
        match self.model().0 {
            Some(m) => format!("{}__{m}__{source}", self.agent.name),
            None => format!("{}__{source}", self.agent.name),
        }
    }

    /// Harbor's trial name: the task's directory name cut to 32 characters,
    /// `__`, and 7 characters of ShortUUID's alphabet (here from the attempt, so stable).
    fn trial_name(&self) -> String {
        let dir_name = match &self.task.id {
            TaskId::Local(p) | TaskId::Git { path: p, .. } => {
                p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
            }
        };
        let cut: String = dir_name.chars().take(32).collect();
        const ALPHABET: &[u8] = b"23456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        let hash = Sha256::digest(format!("{}/{}", self.record.run_id, self.record.file_name()));
        let id: String =
            hash.iter().take(7).map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char).collect();
        format!("{}__{id}", cut.trim_end_matches(['_', '-']))
    }

    /// Harbor's `TrialConfig`.
    fn config(&self, name: &str) -> Value {
        let s = &self.job.settings;
        let task = match &self.task.id {
            TaskId::Local(_) => json!({"path": absolute(&self.task.task.dir)}),
            TaskId::Git { url, commit, path } => {
                json!({"path": path, "git_url": url, "git_commit_id": commit})
            }
        };
        let mut task = task;
        task["source"] = json!(self.task.source);
        json!({
            "schema_version": 1,
            "task": task,
            "trial_name": name,
            "trials_dir": absolute(&self.job.dir),
            "timeout_multiplier": s.timeout_multiplier,
            "agent_timeout_multiplier": s.agent_timeout_multiplier,
            "verifier_timeout_multiplier": s.verifier_timeout_multiplier,
            "agent": {"name": self.agent.name, "model_name": self.agent.model},
            "environment": {"type": "docker", "force_build": s.force_build, "delete": true},
            "verifier": {"disable": s.disable_verification},
            "job_id": self.job_id,
        })
    }

    /// `agent/`, `verifier/` and `artifacts/` from the attempt's captures;
    /// each step's under `steps/<name>/` for a multi-step task.
    fn unpack_phases(&self, attempt: &Path, dir: &Path) -> io::Result<()> {
        match &self.task.task.config.steps {
            None => self.unpack_one(attempt, "", dir),
            Some(steps) => {
                for step in steps {
                    let prefix = format!("step-{}-", step.name);
                    self.unpack_one(attempt, &prefix, &dir.join("steps").join(&step.name))?;
                }
                Ok(())
            }
        }
    }

    fn unpack_one(&self, attempt: &Path, prefix: &str, dir: &Path) -> io::Result<()> {
        let captures = attempt.join("captures");
        for (log, into) in [
            ("agent", "agent"),
            ("verifier", "verifier"),
            ("artifacts", "artifacts/logs/artifacts"),
        ] {
            let tar = captures.join(format!("{}.tar", sanitize(&format!("{prefix}logs-{log}"))));
            if tar.is_file() {
                unpack_stripped(&tar, &dir.join(into))?;
            }
        }
        self.artifacts(&captures, prefix, &dir.join("artifacts"))
    }

    /// The declared artifacts at their paths under `artifacts/` and the
    /// manifest of every one (the `/logs/artifacts` convention first).
    fn artifacts(&self, captures: &Path, prefix: &str, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let convention = dir.join("logs/artifacts");
        let mut entries = vec![json!({
            "source": "/logs/artifacts",
            "destination": "artifacts/logs/artifacts",
            "type": "directory",
            "status": if convention.is_dir() { "ok" } else { "empty" },
            "service": null,
            "exclude": [],
        })];
        let workdir =
            || self.record.workspace_dir.as_deref().unwrap_or(reeval_core::environment::WORKSPACE);
        // `main`'s first, then the services' (Harbor's two passes); the first to name a path keeps it.
        let mut ordered: Vec<&ArtifactEntry> = self.task.task.config.artifacts.iter().collect();
        ordered.sort_by_key(|e| crate::declared::service_of(e).is_some());
        let mut claimed: Vec<PathBuf> = Vec::new();
        for entry in ordered {
            let source = entry.source();
            let service = crate::declared::service_of(entry);
            let absolute = if source.starts_with('/') {
                source.to_string()
            } else {
                format!("{}/{source}", workdir().trim_end_matches('/'))
            };
            let relative = match entry {
                ArtifactEntry::Config { destination: Some(d), .. } => {
                    d.trim_matches('/').to_string()
                }
                _ => absolute.trim_start_matches('/').to_string(),
            };
            let target = dir.join(&relative);
            let base = sanitize(&format!("{prefix}{}", crate::declared::capture_name(&absolute)));
            let skipped = claimed.contains(&target);
            claimed.push(target.clone());
            let (kind, status) = match capture_of(captures, &base) {
                _ if skipped => (
                    if Path::new(source).extension().is_some() { "file" } else { "directory" },
                    "skipped",
                ),
                Some(file) if file.extension().is_some_and(|e| e == "tar") => {
                    unpack_stripped(&file, &target)?;
                    ("directory", "ok")
                }
                Some(file) => {
                    std::fs::create_dir_all(target.parent().unwrap_or(dir))?;
                    std::fs::copy(&file, &target)?;
                    ("file", "ok")
                }
                // Not collected: the path was missing (or an empty directory).
                None => (
                    if Path::new(source).extension().is_some() { "file" } else { "directory" },
                    "failed",
                ),
            };
            let exclude = match entry {
                ArtifactEntry::Config { exclude, .. } if kind == "directory" => json!(exclude),
                _ => json!([]),
            };
            entries.push(json!({
                "source": source,
                "destination": format!("artifacts/{relative}"),
                "type": kind,
                "status": status,
                "service": service,
                "exclude": exclude,
            }));
        }
        write_json(&dir.join("manifest.json"), &Value::Array(entries))
    }
}

/// The capture whose name is `base` (`captures/<base>.<ext>`), if the attempt kept one.
fn capture_of(captures: &Path, base: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(captures).ok()?;
    entries.flatten().map(|e| e.path()).find(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        name.strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('.'))
            .is_some_and(|ext| !ext.is_empty() && !ext.contains('.'))
    })
}

/// The files of a capture's tar under `into`, its top directory dropped
/// (`agent/oracle.txt` → `into/oracle.txt`); links and odd paths are left out.
fn unpack_stripped(tar: &Path, into: &Path) -> io::Result<()> {
    std::fs::create_dir_all(into)?;
    let mut archive = tar::Archive::new(std::fs::File::open(tar)?);
    for entry in archive.entries()? {
        let mut entry = entry?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path()?.into_owned();
        let mut parts = path.components();
        parts.next();
        let rest: PathBuf = parts.as_path().to_path_buf();
        if rest.as_os_str().is_empty()
            || !rest.components().all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            continue;
        }
        let target = into.join(rest);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        entry.unpack(&target)?;
    }
    Ok(())
}

/// The record's outcome as Harbor's exception (type and message), if it is one:
/// a timed-out or failed agent turn is graded all the same, as in Harbor.
fn exception(record: &Record) -> Option<(String, String)> {
    let message = record.message.clone().unwrap_or_default();
    let kind = match record.outcome {
        Outcome::InfraError => "InfraError",
        Outcome::Config if message.contains("reward") => "RewardFileNotFoundError",
        Outcome::Config => "ConfigError",
        Outcome::Fail(_)
            if record.reward.is_none()
                && message.contains("verifier")
                && message.contains("timed out") =>
        {
            "VerifierTimeoutError"
        }
        Outcome::Fail(reeval_core::FailKind::Timeout) => "AgentTimeoutError",
        Outcome::Fail(_) if record.reward.is_none() => "AssertionError",
        Outcome::Pass | Outcome::Fail(_) => {
            let turn = |s: TurnStatus| record.turns.iter().any(|t| t.status == s);
            if turn(TurnStatus::TimedOut) {
                return Some((
                    "AgentTimeoutError".into(),
                    "the agent's turn ran past its limit".into(),
                ));
            }
            if turn(TurnStatus::Failed) {
                let why = record.turns.iter().find_map(|t| t.error.clone()).unwrap_or_default();
                return Some(("NonZeroAgentExitCodeError".into(), why));
            }
            return None;
        }
    };
    Some((kind.to_string(), message))
}

/// Whether an exception of `kind` leaves the reward valid (Harbor's error policy).
pub(super) fn graded_exception(kind: &str) -> bool {
    matches!(kind, "AgentTimeoutError" | "NonZeroAgentExitCodeError")
}

/// Harbor's `task_id`.
fn task_id(id: &TaskId) -> Value {
    match id {
        TaskId::Local(path) => json!({"path": absolute(path)}),
        TaskId::Git { url, commit, path } => {
            json!({"git_url": url, "git_commit_id": commit, "path": path})
        }
    }
}

/// Harbor's `AgentContext` from the record's usage: input counts cached tokens too.
fn agent_result(record: &Record) -> Value {
    let u = &record.usage;
    let cached = u.cache_read.unwrap_or(0);
    json!({
        "n_input_tokens": u.input.map(|i| i + cached),
        "n_cache_tokens": u.cache_read,
        "n_output_tokens": u.output,
        "cost_usd": null,
        "metadata": {"reeval_harness": record.harness, "reeval_outcome": record.outcome},
    })
}

/// Each step's reward (`step_results`).
fn step_results(record: &Record) -> Value {
    record
        .step_rewards
        .iter()
        .map(|s| {
            json!({
                "step_name": s.step,
                "verifier_result": s.reward.as_ref().map(|r| json!({"rewards": r})),
            })
        })
        .collect()
}

fn started_at(record: &Record) -> SystemTime {
    humantime::parse_rfc3339_weak(&record.started_at).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// The span of the record's phases of `phases`, as Harbor's `TimingInfo`.
fn timing(record: &Record, started: SystemTime, phases: &[Phase]) -> Value {
    let spans = record.phases.iter().filter(|p| phases.contains(&p.phase));
    span(spans.map(|p| (p.start_ms, p.start_ms + p.duration_ms)), started)
}

/// The verifier: the checks after the last turn.
fn verifier_timing(record: &Record, started: SystemTime) -> Value {
    let after = record
        .phases
        .iter()
        .filter(|p| p.phase == Phase::Turn)
        .map(|p| p.start_ms + p.duration_ms)
        .max()
        .unwrap_or(0);
    let checks = record.phases.iter().filter(|p| p.phase == Phase::Check && p.start_ms >= after);
    span(checks.map(|p| (p.start_ms, p.start_ms + p.duration_ms)), started)
}

fn span(spans: impl Iterator<Item = (u64, u64)>, started: SystemTime) -> Value {
    let (mut first, mut last) = (None::<u64>, None::<u64>);
    for (s, e) in spans {
        first = Some(first.map_or(s, |f| f.min(s)));
        last = Some(last.map_or(e, |l| l.max(e)));
    }
    match (first, last) {
        (Some(s), Some(e)) => json!({
            "started_at": rfc3339(started + Duration::from_millis(s)),
            "finished_at": rfc3339(started + Duration::from_millis(e)),
        }),
        _ => Value::Null,
    }
}

/// A UUID (version 4's layout) from `parts`, stable for the same parts.
pub(super) fn uuid_of(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p.as_bytes());
        h.update([0]);
    }
    let mut b: [u8; 16] = h.finalize()[..16].try_into().expect("16 bytes");
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// A SHA-256 of the task directory's files (paths and contents, in order).
/// Harbor's own is `dirhash`'s, which this is not: it only has to change when the task does.
pub(super) fn checksum(dir: &Path) -> String {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        h.update(f.strip_prefix(dir).unwrap_or(&f).to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(&f).unwrap_or_default());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}
