//! The replay harness (`harness = "replay:RUN_ID"`) and regrade: each `send`
//! is answered from a recorded attempt of the same eval, trial and arm
//! (its turn's final message, tool calls, usage and model), and the turn's
//! recorded changes ([`crate::turn_archive`]) are applied to the fresh
//! sandbox, so the eval's checks and judge see the agent's work again without
//! the agent: iterating on checks costs no agent tokens.
//!
//! `RUN_ID` is a run under the same record directory, or a run directory's
//! path; `replay:RUN_ID@HARNESS` picks the recorded harness when the run had
//! more than one for the eval.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::environment::ImageSpec;
use crate::harness::{Harness, HarnessError, SessionSetup, TurnContext};
use crate::outcome::Outcome;
use crate::record::{Record, RegradeOf};
use crate::sandbox::SandboxHandle;
use crate::turn::ErrorClass;
use crate::turn::TurnReport;
use crate::turn_archive::{self, Manifest};

/// The replay harness's name.
pub const REPLAY: &str = "replay";

/// A recorded attempt that cannot be replayed, or a run that cannot be regraded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// `replay` without a run.
    #[error("failed to replay: name the recorded run, like replay:RUN_ID")]
    NoRun,
    /// The recorded run cannot be read.
    #[error("failed to replay run {run}: {source}")]
    Run {
        /// The run as named.
        run: String,
        /// Why it cannot be read.
        #[source]
        source: crate::report::runs::RunsError,
    },
    /// The run recorded no attempt of this eval and trial (with that harness, when named).
    #[error("failed to replay run {run}: it recorded no attempt of {eval} trial {trial}{}", harness.as_ref().map(|h| format!(" with harness {h}")).unwrap_or_default())]
    NoAttempt {
        /// The run.
        run: String,
        /// The eval.
        eval: String,
        /// The trial.
        trial: u32,
        /// The harness named after `@`.
        harness: Option<String>,
    },
    /// The run ran the eval with several harnesses and none was named.
    #[error("failed to replay run {run}: {eval} ran with {}; name one, like replay:{run}@{}", harnesses.join(", "), harnesses[0])]
    Ambiguous {
        /// The run.
        run: String,
        /// The eval.
        eval: String,
        /// Its harnesses.
        harnesses: Vec<String>,
    },
    /// The recorded attempt ended in an infra error.
    #[error(
        "failed to replay {attempt}: the recorded attempt ended in an infra error, so its workspace is not the agent's whole work"
    )]
    InfraError {
        /// The recorded record's file.
        attempt: String,
    },
    /// The archive of the recorded workspace is incomplete.
    #[error("failed to replay {attempt}: the recorded workspace is incomplete: {source}")]
    Incomplete {
        /// The recorded record's file.
        attempt: String,
        /// What is missing.
        #[source]
        source: turn_archive::ArchiveError,
    },
    /// A run that cannot be regraded.
    #[error("failed to regrade run {run}: {message}")]
    Regrade {
        /// The run.
        run: String,
        /// Why.
        message: String,
    },
}

/// Whether `spec` names the replay harness.
pub fn is_replay(spec: &str) -> bool {
    crate::harness::split_spec(spec).0 == REPLAY
}

/// A recorded attempt to replay.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Its run's directory.
    pub run_dir: PathBuf,
    /// Its record.
    pub record: Record,
    /// Its archive of turns, checked complete.
    pub manifest: Manifest,
}

impl Recorded {
    /// The attempt's directory (artifacts and archive).
    pub fn attempt_dir(&self) -> PathBuf {
        self.run_dir.join(self.record.artifacts_dir_name())
    }

    /// The new record's `regradeOf`.
    pub fn regrade_of(&self) -> RegradeOf {
        RegradeOf { run: self.record.run_id.clone(), attempt: self.record.file_name() }
    }
}

/// The recorded attempt that `spec` (`replay:RUN[@HARNESS]`) replays for
/// `eval`'s `trial` in `arm`, from a run beside `current_run_dir` (the run directory of the attempt replaying it).
///
/// # Errors
/// A [`ReplayError`] saying what is missing: the run, an attempt of this
/// eval and trial, a single harness to pick, or a complete archive of its workspace.
pub fn find(
    spec: &str,
    current_run_dir: &Path,
    eval: &str,
    trial: u32,
    arm: Option<&str>,
) -> Result<Recorded, ReplayError> {
    let source = crate::harness::split_spec(spec).1.ok_or(ReplayError::NoRun)?;
    let (run, harness) = match source.rsplit_once('@') {
        Some((run, harness)) => (run, Some(harness)),
        None => (source, None),
    };
    let run_dir = if run.contains('/') {
        PathBuf::from(run)
    } else {
        current_run_dir.parent().unwrap_or(Path::new(".")).join(run)
    };
    let records = crate::report::runs::records(&run_dir)
        .map_err(|source| ReplayError::Run { run: run.to_string(), source })?;
    let mut of_trial: Vec<Record> = records
        .into_iter()
        .filter(|r| r.eval == eval && r.trial == trial && r.arm.as_deref() == arm)
        .filter(|r| harness.is_none_or(|h| r.harness == h))
        .collect();
    let mut harnesses: Vec<String> = of_trial.iter().map(|r| r.harness.clone()).collect();
    harnesses.sort_unstable();
    harnesses.dedup();
    match harnesses.len() {
        0 => {
            return Err(ReplayError::NoAttempt {
                run: run.to_string(),
                eval: eval.to_string(),
                trial,
                harness: harness.map(str::to_string),
            });
        }
        1 => {}
        _ => {
            return Err(ReplayError::Ambiguous {
                run: run.to_string(),
                eval: eval.to_string(),
                harnesses,
            });
        }
    }
    of_trial.sort_by_key(|r| r.try_);
    let record = of_trial.pop().expect("one harness, so one record at least");
    if record.outcome == Outcome::InfraError || record.outcome == Outcome::Config {
        return Err(ReplayError::InfraError { attempt: record.file_name() });
    }
    let attempt_dir = run_dir.join(record.artifacts_dir_name());
    let manifest = turn_archive::load(&attempt_dir, record.turns.len())
        .map_err(|source| ReplayError::Incomplete { attempt: record.file_name(), source })?;
    Ok(Recorded { run_dir, record, manifest })
}

/// The harness `replay:RUN_ID@HARNESS` names as recorded (`HARNESS`), when it names one.
pub fn recorded_harness(source: Option<&str>) -> Option<&str> {
    source?.rsplit_once('@').map(|(_, harness)| harness).filter(|h| !h.is_empty())
}

/// The harness of `replay:RUN_ID`.
#[derive(Debug)]
pub struct ReplayHarness {
    spec: String,
    recorded: Option<Recorded>,
    /// The recorded harness's own image and the name it is keyed by: the
    /// checks then run with the tools the agent had.
    image: Option<(ImageSpec, String)>,
}

impl ReplayHarness {
    /// Replays the run `source` names (`RUN_ID`, a run directory, either with `@HARNESS`).
    pub fn new(source: Option<&str>) -> Self {
        let spec = match source {
            Some(s) => format!("{REPLAY}:{s}"),
            None => REPLAY.to_string(),
        };
        Self { spec, recorded: None, image: None }
    }

    /// Runs in the image of `recorded`, the harness that made the recorded
    /// attempts ([`recorded_harness`]), when it has an image of its own.
    #[must_use]
    pub fn in_image_of(mut self, recorded: Option<&dyn Harness>) -> Self {
        self.image = recorded.and_then(|h| Some((h.image()?, h.image_key().to_string())));
        self
    }
}

fn config(message: String) -> HarnessError {
    HarnessError::Failed { harness: REPLAY.into(), message, class: ErrorClass::Config }
}

#[async_trait]
impl Harness for ReplayHarness {
    fn name(&self) -> &str {
        REPLAY
    }

    fn reads_context_summary(&self) -> bool {
        false
    }

    fn image(&self) -> Option<ImageSpec> {
        self.image.as_ref().map(|(image, _)| image.clone())
    }

    fn image_key(&self) -> &str {
        self.image.as_ref().map_or(REPLAY, |(_, key)| key)
    }

    async fn start(
        &mut self,
        _sandbox: &SandboxHandle,
        setup: &SessionSetup,
    ) -> Result<(), HarnessError> {
        let run_dir =
            setup.artifacts_dir.as_deref().and_then(Path::parent).ok_or_else(|| {
                config("failed to replay: the attempt has no run directory".into())
            })?;
        self.recorded = Some(
            find(&self.spec, run_dir, &setup.eval, setup.trial, setup.arm.as_deref())
                .map_err(|e| config(e.to_string()))?,
        );
        Ok(())
    }

    /// A regrade names what it re-graded and carries the agent's usage as
    /// recorded, not summed again.
    fn conclude(&mut self, record: &mut Record, run_dir: &Path) {
        let recorded = match self.recorded.take() {
            Some(recorded) => Ok(recorded),
            None => find(&self.spec, run_dir, &record.eval, record.trial, record.arm.as_deref()),
        };
        if let Ok(recorded) = recorded {
            record.regrade_of = Some(recorded.regrade_of());
            record.usage = recorded.record.usage.clone();
        }
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        _prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        let recorded = self.recorded.as_ref().expect("start ran");
        let index = turn.index;
        let Some(answer) = recorded.record.turns.get(index as usize - 1) else {
            return Err(config(format!(
                "failed to replay turn {index}: the recorded attempt had {} turns (did the eval change its sends?)",
                recorded.record.turns.len()
            )));
        };
        let changes = turn_archive::read_turn(&recorded.attempt_dir(), &recorded.manifest, index)
            .map_err(|e| config(format!("failed to replay turn {index}: {e}")))?;
        turn_archive::apply(sandbox, &changes).await?;
        // After the last turn's files, the agent's commits as commits (see `git_archive`).
        if index as usize == recorded.record.turns.len()
            && let Some(commits) = &recorded.manifest.commits
        {
            crate::git_archive::apply(sandbox, &recorded.attempt_dir(), commits)
                .await
                .map_err(|e| config(format!("failed to replay the agent's commits: {e}")))?;
        }
        Ok(TurnReport {
            status: answer.status,
            final_message: answer.final_message.clone(),
            tool_calls: answer.tool_calls.clone(),
            file_edits: answer.file_edits.clone(),
            usage: answer.usage.clone(),
            model: answer.model.clone(),
            error: answer.error.clone(),
            error_class: answer.error.as_ref().map(|_| ErrorClass::Agent),
            events: 1,
        })
    }
}

/// What `--regrade RUN` runs: every recorded cell with `replay:RUN@HARNESS`.
#[derive(Debug, Clone)]
pub struct RegradePlan {
    /// The recorded run's directory.
    pub run_dir: PathBuf,
    /// One replay harness per recorded harness.
    pub harnesses: Vec<String>,
    /// The cells (eval, replay harness) to run.
    pub cells: Vec<(String, String)>,
    /// Trials per cell: the most the run recorded.
    pub trials: u32,
    /// The recorded final tries, to count what changed.
    pub recorded: Vec<Record>,
}

/// The regrade of `run` (a run id under `record_dir`, or a run directory).
///
/// # Errors
/// [`ReplayError::Run`] when the run cannot be read, [`ReplayError::Regrade`]
/// when it holds no attempt or compared arms (not supported yet).
pub fn regrade_plan(record_dir: &Path, run: &str) -> Result<RegradePlan, ReplayError> {
    let run_dir = if Path::new(run).is_dir() { PathBuf::from(run) } else { record_dir.join(run) };
    let records = crate::report::runs::records(&run_dir)
        .map_err(|source| ReplayError::Run { run: run.to_string(), source })?;
    let refuse =
        |message: &str| ReplayError::Regrade { run: run.to_string(), message: message.into() };
    if records.is_empty() {
        return Err(refuse("it recorded no attempt"));
    }
    if records.iter().any(|r| r.arm.is_some()) {
        return Err(refuse("it compared arms; regrading a comparison is not supported yet"));
    }
    // The replay names the run by its path, so the regrade may be recorded anywhere.
    let source = std::fs::canonicalize(&run_dir).unwrap_or(run_dir.clone());
    let spec = |harness: &str| format!("{REPLAY}:{}@{harness}", source.display());
    let recorded: Vec<Record> =
        crate::report::summary::final_tries(&records).into_iter().cloned().collect();
    let mut harnesses: Vec<String> = recorded.iter().map(|r| spec(&r.harness)).collect();
    harnesses.sort();
    harnesses.dedup();
    let mut cells: Vec<(String, String)> =
        recorded.iter().map(|r| (r.eval.clone(), spec(&r.harness))).collect();
    cells.sort();
    cells.dedup();
    let trials = recorded.iter().map(|r| r.trial).max().unwrap_or(1);
    Ok(RegradePlan { run_dir, harnesses, cells, trials, recorded })
}

/// What a regrade changed: verdicts up (fail → pass) and down (pass → fail), one line each.
pub fn regrade_delta(plan: &RegradePlan, records: &[Record]) -> String {
    let finals = crate::report::summary::final_tries(records);
    let (mut up, mut down, mut unknown, mut same) = (Vec::new(), Vec::new(), Vec::new(), 0);
    for new in finals {
        let Some(of) = &new.regrade_of else { continue };
        let Some(old) = plan.recorded.iter().find(|r| r.file_name() == of.attempt) else {
            continue;
        };
        let line = format!(
            "  {} #{} [{}]: {} → {}\n",
            old.eval,
            old.trial,
            old.harness,
            old.outcome.as_str(),
            new.outcome.as_str()
        );
        match (old.outcome == Outcome::Pass, new.outcome == Outcome::Pass) {
            (false, true) => up.push(line),
            // A replay without the agent's commits cannot say the agent's work got worse.
            (true, false) if let Some(why) = commits_not_replayed(plan, old) => {
                unknown.push(format!("{}    (not compared: {why})\n", line.trim_end()))
            }
            (true, false) => down.push(line),
            _ => same += 1,
        }
    }
    let mut out = format!(
        "reeval: regrade of {}: {} verdicts changed, {} up (to pass), {} down (from pass); {same} unchanged{}\n",
        plan.run_dir.display(),
        up.len() + down.len(),
        up.len(),
        down.len(),
        match unknown.len() {
            0 => String::new(),
            n => format!("; {n} not compared (the agent's commits were not replayed)"),
        }
    );
    out.extend(up);
    out.extend(down);
    out.extend(unknown);
    out
}

/// Why the recorded attempt's commits were not replayed, when it made some that were not kept.
fn commits_not_replayed(plan: &RegradePlan, old: &Record) -> Option<String> {
    let dir = plan.run_dir.join(old.artifacts_dir_name());
    let commits = turn_archive::load(&dir, old.turns.len()).ok()?.commits?;
    if commits.bundle.is_some() {
        return None;
    }
    Some(format!(
        "the agent made {} commits, which were not kept: {}",
        commits.count,
        commits.not_kept.as_deref().unwrap_or("no bundle")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::FailKind;

    #[test]
    fn a_pass_lost_without_the_agents_commits_is_not_counted_as_a_regression() {
        let run_dir = std::env::temp_dir().join(format!("reeval-regrade-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&run_dir);
        let plan_of = |recorded: Vec<Record>| RegradePlan {
            run_dir: run_dir.clone(),
            harnesses: Vec::new(),
            cells: Vec::new(),
            trials: 1,
            recorded,
        };
        let mut old = Record::new("old", "commits", "shell", 1, 1);
        old.outcome = Outcome::Pass;
        let mut new = Record::new("new", "commits", "replay:old@shell", 1, 1);
        new.outcome = Outcome::Fail(FailKind::Assertion);
        new.regrade_of = Some(RegradeOf { run: "old".into(), attempt: old.file_name() });
        let plan = plan_of(vec![old.clone()]);
        // Commits that were kept are replayed: a pass lost is a regression.
        let kept = crate::turn_archive::Commits {
            count: 2,
            head: "refs/heads/main".into(),
            bundle: Some(crate::git_archive::BUNDLE.into()),
            not_kept: None,
        };
        let attempt_dir = run_dir.join(old.artifacts_dir_name());
        turn_archive::record_commits(&attempt_dir, kept.clone()).unwrap();
        let delta = regrade_delta(&plan, std::slice::from_ref(&new));
        assert!(delta.contains("1 down (from pass); 0 unchanged\n"), "{delta}");
        // Commits that were not kept: the replay cannot say.
        let lost = crate::turn_archive::Commits {
            bundle: None,
            not_kept: Some("the repository's bundle is 99999999 bytes".into()),
            ..kept
        };
        turn_archive::record_commits(&attempt_dir, lost).unwrap();
        let delta = regrade_delta(&plan, &[new]);
        assert!(delta.contains("0 down (from pass); 0 unchanged; 1 not compared"), "{delta}");
        assert!(delta.contains("not compared: the agent made 2 commits, which were not kept: the repository's bundle is 99999999 bytes"), "{delta}");
        let _ = std::fs::remove_dir_all(&run_dir);
    }
}
