//! Harbor's job directory, written beside reeval's records so Harbor's own
//! tools (`harbor view`, its result models) read a reeval run:
//! `<jobs dir>/<job name>/` with the job's `config.json` and `result.json`,
//! and one trial directory per trial (the final try of each: Harbor removes
//! a retried trial's directory too) with its `config.json`, `result.json`,
//! `agent/` (`oracle.txt`, `exit-code.txt`, `trajectory.json` in ATIF),
//! `verifier/` (`test-stdout.txt`, the reward file, whatever `test.sh`
//! wrote), `artifacts/` (`manifest.json`, `logs/artifacts/`, declared
//! artifacts by their path) and `exception.txt` when the trial has an exception.
//!
//! [`JobOutput`] is a reporter on the run's event stream: it writes the
//! directory from the records and captures when the run ends. What reeval's
//! outcomes are in Harbor's terms (`exception_info`) is `trial.rs`.

mod lock;
mod stats;
mod trial;

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use reeval_core::RunReport;
use reeval_core::report::Reporter;
use reeval_core::report::events::RunEvent;
use serde_json::{Value, json};

use super::dataset::TaskId;
use super::eval::{HarborTask, eval_name};

/// How the run's tasks were chosen, as Harbor's job config records it.
#[derive(Debug, Clone)]
pub enum JobSource {
    /// One task directory (`-p TASK`).
    Task(PathBuf),
    /// A dataset directory (`-p DIR`).
    Dir(PathBuf),
    /// A registry dataset (`-d NAME@VERSION`).
    Registry {
        /// The dataset.
        name: String,
        /// Its version.
        version: Option<String>,
        /// `--registry-path`.
        registry_path: Option<PathBuf>,
        /// `--registry-url`.
        registry_url: Option<String>,
    },
}

/// A harness spec of the run with the Harbor agent and model it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobAgent {
    /// reeval's spec (`claude-code:claude-sonnet-4-5`), as records name it.
    pub spec: String,
    /// Harbor's agent name (`claude-code`).
    pub name: String,
    /// Harbor's model (`anthropic/claude-sonnet-4-5`).
    pub model: Option<String>,
}

impl JobAgent {
    /// A spec that came as reeval's own (`--harness shell`): its name and model.
    pub fn of_spec(spec: &str) -> Self {
        let (name, model) = reeval_core::harness::split_spec(spec);
        JobAgent {
            spec: spec.to_string(),
            name: name.to_string(),
            model: model.map(str::to_string),
        }
    }
}

/// What the run was asked, in the job config's terms.
#[derive(Debug, Clone)]
pub struct JobSettings {
    /// Where the tasks came from.
    pub source: JobSource,
    /// `-i`.
    pub include: Vec<String>,
    /// `-x`.
    pub exclude: Vec<String>,
    /// `-l`.
    pub n_tasks: Option<usize>,
    /// `-k` (trials).
    pub n_attempts: u32,
    /// `-n` (attempts at once).
    pub n_concurrent: usize,
    /// `-r` (infra retries).
    pub max_retries: u32,
    /// `--timeout-multiplier`.
    pub timeout_multiplier: f64,
    /// `--agent-timeout-multiplier`.
    pub agent_timeout_multiplier: Option<f64>,
    /// `--verifier-timeout-multiplier`.
    pub verifier_timeout_multiplier: Option<f64>,
    /// `--force-build`.
    pub force_build: bool,
    /// `--disable-verification`.
    pub disable_verification: bool,
    /// The run's agents (one per harness spec).
    pub agents: Vec<JobAgent>,
}

/// One task of the job: the task read, how it was found, its dataset's name.
#[derive(Debug, Clone)]
pub struct JobTask {
    /// The task (a clone of the one run: its resolved workdir is shared).
    pub task: HarborTask,
    /// How it was found (`task_id` of its results).
    pub id: TaskId,
    /// Harbor's `source`: the dataset's name; none for one task (`adhoc`).
    pub source: Option<String>,
}

/// The reporter that writes Harbor's job directory when the run ends.
#[derive(Debug)]
pub struct JobOutput {
    dir: PathBuf,
    name: String,
    settings: JobSettings,
    tasks: Vec<JobTask>,
    started_at: SystemTime,
}

impl JobOutput {
    /// Writes `<jobs_dir>/<job_name>/` when the run ends.
    pub fn new(
        jobs_dir: &Path,
        job_name: &str,
        settings: JobSettings,
        tasks: Vec<JobTask>,
    ) -> Self {
        JobOutput {
            dir: jobs_dir.join(job_name),
            name: job_name.to_string(),
            settings,
            tasks,
            started_at: SystemTime::now(),
        }
    }

    /// The job directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The job's directory from the run's report.
    ///
    /// # Errors
    /// An I/O error writing a file, or reading a capture.
    pub fn write(&self, report: &RunReport) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let job_id = trial::uuid_of(&["job", &report.run_id]);
        write_json(&self.dir.join("config.json"), &self.job_config())?;
        let finals = report.final_records();
        let mut results = Vec::new();
        // A task's files are read and hashed once for all its trials.
        let mut digests: std::collections::HashMap<PathBuf, trial::Digests> = Default::default();
        for record in &finals {
            let Some(task) = self.tasks.iter().find(|t| eval_name(&t.task.name) == record.eval)
            else {
                continue;
            };
            let agent = self
                .settings
                .agents
                .iter()
                .find(|a| a.spec == record.harness)
                .cloned()
                .unwrap_or_else(|| JobAgent::of_spec(&record.harness));
            let digests = digests.entry(task.task.dir.clone()).or_insert_with(|| trial::Digests {
                checksum: trial::checksum(&task.task.dir),
                content: lock::content_digest(&task.task.name, &task.task.dir),
            });
            let trial =
                trial::Trial { record, task, agent: &agent, job: self, job_id: &job_id, digests };
            results.push(trial.write(&report.run_dir)?);
        }
        let n_retries = report.records.len() - finals.len();
        let s = &self.settings;
        let trials = results.iter().map(|r| r.lock.clone()).collect();
        let lock = lock::job_lock(self.started_at, s.n_concurrent, s.max_retries, trials);
        write_json(&self.dir.join("lock.json"), &lock)?;
        let result = stats::job_result(&job_id, self.started_at, &results, n_retries);
        write_json(&self.dir.join("result.json"), &result)?;
        write_log(&self.dir.join("job.log"), report, &results)
    }

    /// Harbor's `JobConfig`: what was asked.
    fn job_config(&self) -> Value {
        let s = &self.settings;
        let agents: Vec<Value> =
            s.agents.iter().map(|a| json!({"name": a.name, "model_name": a.model})).collect();
        let filters = |mut v: Value| {
            v["task_names"] = (!s.include.is_empty()).then(|| json!(s.include)).into();
            v["exclude_task_names"] = (!s.exclude.is_empty()).then(|| json!(s.exclude)).into();
            v["n_tasks"] = json!(s.n_tasks);
            v
        };
        let (datasets, tasks) = match &s.source {
            JobSource::Task(path) => (json!([]), json!([{"path": absolute(path)}])),
            JobSource::Dir(path) => (json!([filters(json!({"path": absolute(path)}))]), json!([])),
            JobSource::Registry { name, version, registry_path, registry_url } => {
                let mut d = json!({"name": name, "version": version});
                if let Some(p) = registry_path {
                    d["registry_path"] = json!(absolute(p));
                }
                if let Some(u) = registry_url {
                    d["registry_url"] = json!(u);
                }
                (json!([filters(d)]), json!([]))
            }
        };
        json!({
            "schema_version": 1,
            "job_name": self.name,
            "jobs_dir": absolute(self.dir.parent().unwrap_or(Path::new("."))),
            "n_attempts": s.n_attempts,
            "timeout_multiplier": s.timeout_multiplier,
            "agent_timeout_multiplier": s.agent_timeout_multiplier,
            "verifier_timeout_multiplier": s.verifier_timeout_multiplier,
            "n_concurrent_trials": s.n_concurrent.max(1),
            "quiet": false,
            "retry": {"max_retries": s.max_retries},
            "environment": {"type": "docker", "force_build": s.force_build, "delete": true},
            "verifier": {"disable": s.disable_verification},
            "agents": agents,
            "datasets": datasets,
            "tasks": tasks,
        })
    }
}

impl Reporter for JobOutput {
    fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        if matches!(event, RunEvent::Planned { .. }) {
            self.started_at = SystemTime::now();
        }
        Ok(())
    }

    fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        self.write(report).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("failed to write Harbor's job directory {}: {e}", self.dir.display()),
            )
        })
    }
}

/// `path` made absolute against the current directory (as Harbor's config records paths).
fn absolute(path: &Path) -> String {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

/// `value` as indented JSON at `path`.
/// `job.log`: what reeval ran, a line per trial (Harbor's holds its own log lines).
fn write_log(path: &Path, report: &RunReport, trials: &[trial::TrialOutcome]) -> io::Result<()> {
    let mut log = format!(
        "reeval {} run {}: {} trials, records in {}\n",
        env!("CARGO_PKG_VERSION"),
        report.run_id,
        trials.len(),
        absolute(&report.run_dir)
    );
    for t in trials {
        let reward = t.rewards.as_ref().map(|r| serde_json::to_string(r).unwrap_or_default());
        let said = t.exception.clone().or(reward).unwrap_or_else(|| "no reward".into());
        log.push_str(&format!("trial {} ({}): {said}\n", t.trial_name, t.task_name));
    }
    std::fs::write(path, log)
}

/// A time as Harbor writes one (RFC 3339, milliseconds, UTC).
fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

fn write_json(path: &Path, value: &Value) -> io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(io::Error::other)?;
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests;
