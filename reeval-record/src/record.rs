//! The record every attempt leaves, and the run's summary beside them.
//! Schema version 1; keys are camelCase.

use serde::{Deserialize, Serialize};

use crate::diff::Diff;
use crate::outcome::Outcome;
use crate::turn::{ToolCall, Turn, Usage};

/// The version of the record's schema. Bump on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// One phase of the lifecycle as it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhaseRecord {
    /// The phase (`image`, `container`, …, `turn`, `check`, `judge`, `teardown`).
    pub phase: crate::phase::Phase,
    /// Milliseconds since the attempt started.
    pub start_ms: u64,
    /// How long it took.
    pub duration_ms: u64,
    /// A one-line detail.
    pub detail: String,
}

/// Something worth knowing that is not a phase: a retry, a failed collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Milliseconds since the attempt started.
    pub at_ms: u64,
    /// What happened.
    pub message: String,
}

/// How much of a command's output a record keeps: the last 4 KiB (a
/// check's stdout and stderr, the result of a judge's tool call).
pub const OUTPUT_TAIL: usize = 4096;

/// One `exec` check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckRecord {
    /// The command as run.
    pub command: String,
    /// Its exit code (`-1` when killed).
    pub exit_code: i64,
    /// Wall time.
    pub duration_ms: u64,
    /// The last 4 KiB of stdout.
    pub stdout_tail: String,
    /// The last 4 KiB of stderr.
    pub stderr_tail: String,
    /// Whether the sandbox's OOM killer killed a process during the check.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_killed: bool,
    /// What the check changed in the workspace (a `__pycache__` its import
    /// wrote, a file a formatter rewrote), when it changed anything. These
    /// changes are the check's: they are in no turn's diff, nor the final diff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<crate::diff::Diff>,
    /// The extra sandbox it ran in (`Ctx::start_sandbox`), by name; absent
    /// for the attempt's own sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    /// The service beside the sandbox it ran in (`Ctx::exec_in_service`), by
    /// name; absent for the sandbox itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// Set when the command was a step of the eval's own machinery (a Harbor
    /// task's copy of `tests/` into the sandbox, a listing of what it left),
    /// not a check the eval grades by: what the step does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// One judge verdict on one criterion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The criterion judged.
    pub criterion: String,
    /// Score in 0..1.
    pub score: f64,
    /// Whether it passed its threshold.
    pub pass: bool,
    /// The judge's reasoning.
    pub reasoning: String,
    /// The threshold applied.
    pub threshold: f64,
    /// The judge model.
    pub model: Option<String>,
    /// Judge usage (kept apart from the agent's).
    pub usage: Usage,
    /// The judge's failure, when it could not give a verdict.
    pub error: Option<String>,
    /// Tool calls of an agentic judge.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
}

/// One request through the egress gateway (a CONNECT tunnel is one request;
/// a refusal is one too). No header or body value is ever recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressRecord {
    /// Milliseconds since the attempt started.
    #[serde(default)]
    pub at_ms: u64,
    /// Host.
    pub host: String,
    /// Port.
    #[serde(default)]
    pub port: u16,
    /// Method (`CONNECT` for tunnels).
    pub method: String,
    /// Path, without its query string.
    pub path: String,
    /// Status, or 403 when refused.
    pub status: u16,
    /// Bytes both ways.
    pub bytes: u64,
    /// Bytes sent upstream.
    #[serde(default)]
    pub bytes_up: u64,
    /// Bytes received from upstream.
    #[serde(default)]
    pub bytes_down: u64,
    /// From the request to the end of its response (a tunnel: to its close).
    #[serde(default)]
    pub duration_ms: u64,
    /// Whether the gateway let it through.
    #[serde(default = "yes")]
    pub allowed: bool,
    /// How it left: `http`, `tunnel`, `intercept` or `base_url`.
    #[serde(default)]
    pub route: String,
    /// Secrets swapped in (names only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brokered: Vec<String>,
    /// Why the gateway refused or failed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The private or reserved address it reached because the run or the
    /// eval opened it (`allow_internal`); absent for public addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal: Option<EgressInternal>,
}

/// A request the opt-in for private and reserved addresses let through: the
/// record's `"internal": {"addr": "10.0.3.7", "by": "10.0.0.0/8"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressInternal {
    /// The address the host resolved to.
    pub addr: String,
    /// The `allow_internal` entry that opened it (a host pattern or a range).
    pub by: String,
}

fn yes() -> bool {
    true
}

/// Time spent per part of the attempt, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Timings {
    /// Preflight through harness start (image, container, workspace, setup, snapshot).
    pub setup_ms: u64,
    /// Agent turns, diffs excluded.
    pub agent_ms: u64,
    /// Diffs after turns and the final diff.
    pub diff_ms: u64,
    /// `exec` checks.
    pub checks_ms: u64,
    /// Judge calls, retries included.
    pub judge_ms: u64,
    /// Teardown.
    pub teardown_ms: u64,
    /// The whole attempt.
    pub total_ms: u64,
}

/// One attempt's record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Record {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: String,
    /// The eval's name.
    pub eval: String,
    /// The harness spec.
    pub harness: String,
    /// The arm of a comparison this attempt ran in (`control`, a variant,
    /// or the harness of `--harness a --vs b`); none outside a comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
    /// 1-based trial.
    pub trial: u32,
    /// 1-based try of this trial (infra errors are retried).
    #[serde(rename = "try")]
    pub try_: u32,
    /// The outcome with the kind of a fail (the keys `outcome` and `kind`).
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The failure's message.
    pub message: Option<String>,
    /// Where the eval is defined (`file:line`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Wall-clock start, RFC 3339.
    pub started_at: String,
    /// Time per part.
    pub timings: Timings,
    /// Agent usage summed over turns.
    pub usage: Usage,
    /// Phases in order.
    pub phases: Vec<PhaseRecord>,
    /// Other events.
    pub events: Vec<Event>,
    /// Every turn.
    pub turns: Vec<Turn>,
    /// Every check.
    pub checks: Vec<CheckRecord>,
    /// Every verdict.
    pub verdicts: Vec<Verdict>,
    /// Egress requests.
    pub egress: Vec<EgressRecord>,
    /// The diff from the snapshot to the final workspace.
    pub final_diff: Option<Diff>,
    /// Whether the final workspace was collected.
    pub workspace_collected: bool,
    /// Artifact file names, relative to the attempt's directory.
    pub artifacts: Vec<String>,
    /// The sandbox's image, when one was started.
    pub image: Option<String>,
    /// The sandbox's container id, when one was started.
    pub container: Option<String>,
    /// The engine the attempt ran on (`unix:///var/run/docker.sock`, `ssh://host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The eval's tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The pass rate at which the eval's cell counts as passing (`min_pass_rate`), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_pass_rate: Option<f64>,
    /// The `Ctx` call that ended the attempt (`c.exec at evals.rs:12:5`): the
    /// call whose error the eval returned, the call running when the budget
    /// ran out, or where the eval panicked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The recorded attempt this one re-graded (the replay harness): its
    /// usage is copied from there, not summed again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regrade_of: Option<RegradeOf>,
    /// Whether the run was interrupted (Ctrl-C, SIGTERM) while this attempt ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// What the eval itself printed (`println!`, `eprintln!`, a subprocess it ran)
    /// under the suite binary, stdout and stderr interleaved: its last 64 KiB
    /// (see the book's options page, libtest's flags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The reward the eval recorded (`Ctx::set_reward`): a Harbor
    /// task's `reward.json` (every key) or `reward.txt` (`{"reward": x}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<std::collections::BTreeMap<String, f64>>,
    /// The threshold the eval held its reward to (`Ctx::set_reward_threshold`;
    /// a Harbor task's is 1.0 unless set): the attempt passed when the reward's
    /// `reward` key, else every key, reached it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward_threshold: Option<f64>,
    /// Each step's reward of a multi-step eval (a Harbor task's `[[steps]]`),
    /// in the order the steps ran (`Ctx::set_step_rewards`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub step_rewards: Vec<StepReward>,
    /// The image the eval named, when `[images]` in `reeval.toml` mapped it to
    /// the one in `image`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_mapped_from: Option<String>,
    /// Where the workspace lived in the sandbox, when not `/workspace` (the
    /// environment's `workspace_dir`: a Harbor task's workdir, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_dir: Option<String>,
}

/// One step's reward in a multi-step eval: the record's `stepRewards`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StepReward {
    /// The step's name.
    pub step: String,
    /// Its reward (every key); none when its verifier left none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<std::collections::BTreeMap<String, f64>>,
    /// Why it has no reward, or why the steps after it did not run (a `min_reward` gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Which recorded attempt a regrade re-graded: the record's `regradeOf`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegradeOf {
    /// The recorded run.
    pub run: String,
    /// The recorded attempt's record file, in that run's directory.
    pub attempt: String,
}

impl Record {
    /// A fresh record for an attempt.
    pub fn new(run_id: &str, eval: &str, harness: &str, trial: u32, try_: u32) -> Self {
        Self {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.to_string(),
            eval: eval.to_string(),
            harness: harness.to_string(),
            arm: None,
            trial,
            try_,
            outcome: Outcome::Pass,
            message: None,
            source: None,
            started_at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
            timings: Timings::default(),
            usage: Usage::default(),
            phases: Vec::new(),
            events: Vec::new(),
            turns: Vec::new(),
            checks: Vec::new(),
            verdicts: Vec::new(),
            egress: Vec::new(),
            final_diff: None,
            workspace_collected: false,
            artifacts: Vec::new(),
            image: None,
            container: None,
            engine: None,
            tags: Vec::new(),
            min_pass_rate: None,
            location: None,
            regrade_of: None,
            interrupted: false,
            output: None,
            reward: None,
            reward_threshold: None,
            step_rewards: Vec::new(),
            image_mapped_from: None,
            workspace_dir: None,
        }
    }

    /// The attempt as people name it: `eval#trial [harness] try N` (with the arm after the harness).
    pub fn attempt_label(&self) -> String {
        let arm = self.arm.as_deref().map(|a| format!(" {a}")).unwrap_or_default();
        format!("{}#{} [{}{arm}] try {}", self.eval, self.trial, self.harness, self.try_)
    }

    /// The file name of this record in the run directory.
    pub fn file_name(&self) -> String {
        format!("{}.json", self.artifacts_dir_name())
    }

    /// The attempt's artifact directory name in the run directory.
    pub fn artifacts_dir_name(&self) -> String {
        format!(
            "{}.t{}.try{}",
            cell_stem(&self.eval, &self.harness, self.arm.as_deref()),
            self.trial,
            self.try_
        )
    }

    /// The record's cell: eval, harness, and arm in a comparison.
    pub fn cell(&self) -> CellKey {
        (self.eval.clone(), self.harness.clone(), self.arm.clone())
    }
}

/// A cell: eval, harness, and the arm of a comparison.
pub type CellKey = (String, String, Option<String>);

/// The start of the file names of a cell's records: `eval.harness`, and
/// `eval.harness.arm` in a comparison whose arm is not the harness itself.
pub fn cell_stem(eval: &str, harness: &str, arm: Option<&str>) -> String {
    match arm {
        Some(arm) if arm != harness => {
            format!("{}.{}.{}", sanitize(eval), sanitize(harness), sanitize(arm))
        }
        _ => format!("{}.{}", sanitize(eval), sanitize(harness)),
    }
}

/// A file-name-safe form of a name.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || "-_".contains(c) { c } else { '_' })
        .collect()
}

/// Per-cell (eval × harness) figures of the summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CellSummary {
    /// Eval name.
    pub eval: String,
    /// Harness spec.
    pub harness: String,
    /// The arm of a comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arm: Option<String>,
    /// Trials that passed.
    pub passed: u32,
    /// Trials that failed.
    pub failed: u32,
    /// Trials that ended in an infra error (after retries).
    pub infra: u32,
    /// passed / (passed + failed); `None` when nothing was graded.
    pub pass_rate: Option<f64>,
    /// Unbiased pass@k for k = 1..=trials.
    pub pass_at_k: Vec<f64>,
    /// pass^k: probability that k trials all pass.
    pub pass_pow_k: Vec<f64>,
    /// The pass rate's 95 % Wilson interval, `[low, high]`; `None` when nothing was graded.
    #[serde(default)]
    pub pass_rate_interval: Option<[f64; 2]>,
    /// pass@k and pass^k labelled with their k, for k = 1..=graded trials.
    #[serde(default)]
    pub by_k: Vec<AtK>,
    /// The pass rate at which the cell passes (`min_pass_rate`); without one, every trial must pass.
    #[serde(default)]
    pub min_pass_rate: Option<f64>,
    /// Whether the cell passes: no fail, or a pass rate at or above `minPassRate`;
    /// `null` when no attempt was graded (only infra or config errors).
    #[serde(default)]
    pub ok: Option<bool>,
    /// `passed`, `failed` or `no_graded_attempts` (what `ok` says, in words).
    #[serde(default)]
    pub status: CellStatus,
    /// Agent usage summed over every try of the cell.
    #[serde(default)]
    pub usage: Usage,
    /// What that usage cost in US dollars, from the price table; `None` where a price is unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// The mean reward with its interval, when the cell's attempts recorded rewards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reward: Option<crate::stats::reward::RewardSummary>,
}

/// pass@k and pass^k for one k.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AtK {
    /// k.
    pub k: u32,
    /// Unbiased pass@k.
    pub pass_at_k: f64,
    /// pass^k.
    pub pass_pow_k: f64,
}

/// The suite's git state when the run started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GitState {
    /// The commit checked out.
    pub commit: String,
    /// Whether the work tree had changes.
    pub dirty: bool,
}

/// Where and how a run ran: enough to reproduce it or to tell two runs apart.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    /// Wall-clock start, RFC 3339.
    pub started_at: Option<String>,
    /// Wall-clock end, RFC 3339.
    pub ended_at: Option<String>,
    /// From start to end.
    pub duration_ms: Option<u64>,
    /// The command line (program and arguments). For a run of several
    /// processes (cargo-nextest), what they all had in common; each one's is in `commands`.
    pub command: Vec<String>,
    /// Each process's command line, in a run of several processes (cargo-nextest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<Vec<String>>,
    /// The suite's git commit and whether its tree was dirty.
    pub git: Option<GitState>,
    /// reeval's version.
    pub reeval_version: String,
    /// The engine and its version (`Docker Engine 20.10.24 (API 1.41)`).
    pub engine: Option<String>,
    /// Each harness's agent CLI version, where it reports one.
    pub harness_versions: std::collections::BTreeMap<String, String>,
}

/// The run's summary, written as `summary.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run.
    pub run_id: String,
    /// Attempts that passed.
    pub passed: u32,
    /// Attempts that failed, by kind.
    pub failed: std::collections::BTreeMap<String, u32>,
    /// Attempts that ended in an infra error (final tries only).
    pub infra: u32,
    /// Per cell.
    pub cells: Vec<CellSummary>,
    /// Record files, relative to the run directory.
    pub records: Vec<String>,
    /// The process exit code.
    pub exit_code: i32,
    /// Why the exit code is what it is (`2 cells below their threshold`, `all cells passed`).
    #[serde(default)]
    pub exit_reason: String,
    /// Agent usage summed over every attempt.
    #[serde(default)]
    pub usage: Usage,
    /// What the run's usage cost in US dollars; `None` where a price is unknown.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Start, end, command line, git state, versions.
    #[serde(default, flatten)]
    pub provenance: Provenance,
    /// The paired analysis of a comparison run (`--compare`, `--vs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<crate::comparison::Comparison>,
    /// Oracle cells below 100 %: the eval or its environment is broken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub broken_evals: Vec<String>,
    /// Records and reports that could not be written (a full disk), each
    /// naming its path and attempt: the run then exits non-zero.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write_errors: Vec<String>,
    /// The suite binary that ran (`--rerun-failed` and `--resume` take only its runs);
    /// `None` for a run through the API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<SuiteIdentity>,
    /// The part of a partitioned run this run was (`hash:2/3`, `--partition`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The runs this one combines (`reeval report RUN RUN...`): their run ids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<String>,
}

/// Which suite binary made a run, and the evals it knows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SuiteIdentity {
    /// The binary's name without cargo's hash suffix (`evals` for `evals-0123456789abcdef`).
    pub binary: String,
    /// Every eval it knows, selected or not.
    pub evals: Vec<String>,
}

impl SuiteIdentity {
    /// The identity of a suite binary named `binary` knowing `evals`.
    pub fn new(binary: impl Into<String>, evals: Vec<String>) -> Self {
        Self { binary: binary.into(), evals }
    }

    /// This process's binary name, cargo's `-<16 hex digits>` suffix taken off.
    pub fn current_binary() -> String {
        let exe = std::env::current_exe().ok();
        let name = exe
            .as_deref()
            .and_then(|p| p.file_stem())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        strip_cargo_hash(&name).to_string()
    }
}

/// `evals` for `evals-0123456789abcdef` (cargo's test binaries), else `name`.
fn strip_cargo_hash(name: &str) -> &str {
    match name.rsplit_once('-') {
        Some((stem, hash)) if hash.len() == 16 && hash.chars().all(|c| c.is_ascii_hexdigit()) => {
            stem
        }
        _ => name,
    }
}

/// Whether a cell passed, failed, or had nothing graded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// No fail, or a pass rate at or above its `minPassRate`.
    #[default]
    Passed,
    /// A fail and no threshold, or a pass rate under it.
    Failed,
    /// Every trial ended in an infra or config error: neither passed nor failed.
    NoGradedAttempts,
}

impl CellStatus {
    /// `passed`, `failed`, `no_graded_attempts`.
    pub fn as_str(self) -> &'static str {
        match self {
            CellStatus::Passed => "passed",
            CellStatus::Failed => "failed",
            CellStatus::NoGradedAttempts => "no_graded_attempts",
        }
    }
}

pub use crate::stats::{pass_at_k, pass_pow_k};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_float_reads_back_as_the_same_float() {
        // Without serde_json's float_roundtrip these read back one unit off in
        // the last place, so a summary read and written again (resume, nextest's
        // combined summary) changed its figures.
        let floats = [0.9856906946328695, 0.21291890726713458, 0.9259338926496359];
        let mut r = Record::new("run", "e", "shell", 1, 1);
        r.reward = Some(floats.iter().enumerate().map(|(i, f)| (format!("k{i}"), *f)).collect());
        let text = serde_json::to_string(&r).unwrap();
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(back.reward, r.reward);
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    #[test]
    fn record_uses_camel_case_and_try() {
        let r = Record::new("run", "e", "shell", 1, 2);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["schemaVersion"], 1);
        assert_eq!(v["try"], 2);
        assert!(v.get("workspaceCollected").is_some());
        assert!(v["usage"]["cacheRead"].is_null());
        // The reward's fields are optional: absent when unset, and a record without them reads.
        for key in ["reward", "rewardThreshold", "stepRewards", "imageMappedFrom"] {
            assert!(v.get(key).is_none(), "{key}");
        }
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        let mut stepped = r.clone();
        stepped.step_rewards =
            vec![StepReward { step: "one".into(), reward: None, note: Some("no reward".into()) }];
        let v = serde_json::to_value(&stepped).unwrap();
        assert_eq!(v["stepRewards"], serde_json::json!([{"step": "one", "note": "no reward"}]));
    }

    #[test]
    fn a_summary_cell_without_rewards_reads_and_writes_as_before() {
        let cell: CellSummary = serde_json::from_value(serde_json::json!({
            "eval": "e", "harness": "shell", "passed": 1, "failed": 0, "infra": 0,
            "passRate": 1.0, "passAtK": [1.0], "passPowK": [1.0]
        }))
        .unwrap();
        assert_eq!(cell.reward, None);
        assert!(serde_json::to_value(&cell).unwrap().get("reward").is_none());
    }
}
