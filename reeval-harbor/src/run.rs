//! What a Harbor task does in its sandbox, phase by phase, as Harbor 0.26
//! does it: the agent's turn, the declared artifacts, the verifier and its
//! reward, the oracle. `eval.rs` builds the eval; `steps.rs` repeats these
//! per step of a multi-step task.

use std::collections::BTreeMap;
use std::time::Duration;

use super::eval::{HarborTask, LOG_DIRS, NO_AGENT_TIMEOUT_BUDGET, quote};
use super::place::Place;
use super::reward::{self, REWARD_JSON, REWARD_TXT};
use reeval_core::Ctx;
use reeval_core::capture::Artifact;
use reeval_core::error::{Error, Result};
use reeval_core::exec::{Command, ExecOutput};
use reeval_core::turn::TurnOptions;

/// Harbor runs every command through `docker compose exec -u USER`, so its
/// `HOME` is USER's home in the image's `/etc/passwd` (`/` without an
/// entry), where reeval gives every command the agent's (`/home/agent`): a
/// `solve.sh` or `test.sh` run as root would miss root's `~/.gitconfig`.
/// This prefix of a `bash -c` script sets it as Docker does, in bash alone
/// (not every image has `getent`).
pub(super) const USER_HOME: &str = "HOME=/; while IFS=: read -r _ _ u _ _ d _; do \
    if [ \"$u\" = \"$EUID\" ]; then HOME=$d; break; fi; done < /etc/passwd; export HOME; ";

/// Files as `(path, bytes, mode)`.
pub(super) type Files = Vec<(String, Vec<u8>, u32)>;

/// Where the task's commands run: the sandbox's workspace, which is the
/// task's workdir (`HarborTask::workspace_dir`).
pub(super) async fn workdir(c: &mut Ctx) -> Result<String> {
    Ok(c.sandbox_handle().await?.workspace().to_string())
}

/// A tar of `files` unpacked under `dir` as root, owned by the agent's user.
fn upload_for_agent(files: &Files, dir: &str) -> Result<Command> {
    let tar =
        reeval_core::sandbox::archive::tar_owned_by(files, reeval_core::sandbox::AgentUser::ID)?;
    Ok(Command::new("tar").args(["-x", "-C", dir]).stdin(tar).user("0"))
}

fn expect_ok(out: ExecOutput, what: &str) -> Result<()> {
    if out.success() {
        return Ok(());
    }
    Err(Error::infra(what, format!("exit {}: {}", out.exit_code, out.stderr.trim())))
}

/// `before`, then `files` unpacked under `/` (owners and modes as in the
/// tar), then `after`: one exec as root, where Harbor makes three (each of
/// reeval's execs costs a round trip to the engine).
async fn copy_in_between(
    c: &mut Ctx,
    place: Place<'_>,
    before: &str,
    files: &Files,
    after: &str,
    what: &str,
) -> Result<()> {
    let tar = reeval_core::sandbox::archive::tar_of(files)?;
    let script = format!("{before} && tar -x -o -C / && {after}");
    expect_ok(place.exec(c, Command::shell(script).stdin(tar).user("0")).await?, what)
}

/// Copies `files` into the workspace, owned by the agent's user (a step's `workdir/`).
pub(super) async fn copy_in_for_agent(c: &mut Ctx, files: &Files, dir: &str) -> Result<()> {
    expect_ok(c.exec(upload_for_agent(files, dir)?).await?, "copy a step's workdir/ in")
}

/// One turn with `prompt`, limited to `limit` (an hour when the task has none).
/// A turn that timed out or that the agent ended non-zero is graded, as Harbor
/// grades `AgentTimeoutError` and `NonZeroAgentExitCodeError`.
pub(super) async fn turn(c: &mut Ctx, prompt: &str, limit: Option<Duration>) -> Result<()> {
    let options = TurnOptions { timeout: Some(limit.unwrap_or(NO_AGENT_TIMEOUT_BUDGET)) };
    match c.send_with(prompt.to_string(), options).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.root(), Error::Agent { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The task's declared `artifacts`, kept as captures (see `artifacts.rs`).
pub(super) async fn collect_artifacts(c: &mut Ctx, task: &HarborTask, prefix: &str) -> Result<()> {
    super::artifacts::collect(c, task, &[], prefix).await
}

/// The capture name of a declared artifact at `path` (`artifact-srv-log-x.txt`),
/// which Harbor's job output reads back ([`crate::job`]).
pub(crate) fn artifact_capture_name(path: &str) -> String {
    let name: String = path
        .trim_matches('/')
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() || ".-_".contains(ch) { ch } else { '-' })
        .collect();
    format!("artifact-{name}")
}

/// One run of a verifier: what it gets.
pub(super) struct Verifier {
    /// `tests/` (merged with a step's own), as `tests/...` paths.
    pub(super) tests: Files,
    /// `[verifier].env` (and a step's).
    pub(super) env: Vec<(String, String)>,
    /// Its user, when not the image's.
    pub(super) user: Option<String>,
    /// Its limit.
    pub(super) timeout: Duration,
    /// Captures are named `<prefix>logs-verifier` and so on.
    pub(super) prefix: String,
}

/// What a verifier left.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Graded {
    /// A reward.
    Reward(BTreeMap<String, f64>),
    /// No usable reward file (Harbor's `RewardFileNotFoundError` and kin).
    NoReward(String),
    /// It ran past its limit (`VerifierTimeoutError`).
    TimedOut(Duration),
}

/// The verifier, as Harbor's `Verifier.verify`: stale rewards removed,
/// `tests/` copied to `/tests` now, `test.sh` run (its exit status ignored),
/// the log directories captured, the reward read.
pub(super) async fn verify(c: &mut Ctx, v: &Verifier) -> Result<Graded> {
    verify_at(c, v, Place::Shared).await
}

/// [`verify`] where `place` says: the agent's sandbox, or the verifier's own
/// (whose image may hold `/tests` already).
pub(super) async fn verify_at(c: &mut Ctx, v: &Verifier, place: Place<'_>) -> Result<Graded> {
    let (workdir, logs): (String, &[&str]) = match place {
        Place::Shared => (workdir(c).await?, &LOG_DIRS),
        // The agent's logs stay in its sandbox (`separate.rs` captures them there).
        Place::Separate { workdir, .. } => (workdir.to_string(), &["/logs/verifier"]),
    };
    let clear = format!("rm -f {REWARD_TXT} {REWARD_JSON}");
    match place {
        Place::Separate { bundled_tests: true, .. } => {
            let prepare = Command::shell(format!("{clear} && chmod +x /tests/test.sh")).user("0");
            expect_ok(
                place.exec(c, prepare).await?,
                "prepare /tests/test.sh of the verifier's image",
            )?;
        }
        _ => {
            copy_in_between(
                c,
                place,
                &clear,
                &v.tests,
                "chmod +x /tests/test.sh",
                "copy tests/ into /tests",
            )
            .await?
        }
    }
    let mut run = Command::new("bash")
        .arg("-c")
        .arg(format!("{USER_HOME}(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1"))
        .workdir(workdir)
        .timeout(v.timeout);
    for (k, val) in &v.env {
        run = run.env(k.clone(), val.clone());
    }
    if let Some(user) = &v.user {
        run = run.user(user.clone());
    }
    let ran = place.exec(c, run).await?;
    // One listing: the log directories holding a file, and the reward files.
    let listing = format!(
        "for d in {}; do [ -n \"$(find \"$d\" -type f -print -quit 2>/dev/null)\" ] && echo \"$d\"; done; \
         [ -e {REWARD_JSON} ] && echo json; [ -e {REWARD_TXT} ] && echo txt; true",
        logs.join(" ")
    );
    let present = place.exec(c, Command::shell(listing).user("0")).await?;
    capture_logs(c, place, &v.prefix, &present.stdout).await?;
    if ran.timed_out {
        return Ok(Graded::TimedOut(v.timeout));
    }
    let has = |what: &str| present.stdout.lines().any(|l| l == what);
    let json = if has("json") { Some(place.read_bytes(c, REWARD_JSON).await?) } else { None };
    let txt = if has("txt") { Some(place.read_bytes(c, REWARD_TXT).await?) } else { None };
    Ok(match reward::parse(json.as_deref(), txt.as_deref()) {
        Ok(r) => Graded::Reward(r),
        Err(e) => Graded::NoReward(e.to_string()),
    })
}

/// `/logs/agent`, `/logs/verifier`, `/logs/artifacts` as captures, those of
/// them `listed` (a line each) as holding a file: an empty directory has
/// nothing to keep (and a capture of one fails).
pub(super) async fn capture_logs(
    c: &mut Ctx,
    place: Place<'_>,
    prefix: &str,
    listed: &str,
) -> Result<()> {
    for dir in listed.lines().filter(|d| LOG_DIRS.contains(d)) {
        let name = dir.trim_start_matches('/').replace('/', "-");
        place.capture(c, &format!("{prefix}{name}"), Artifact::dir(dir)).await?;
    }
    Ok(())
}

/// The outcome of a reward: pass at the task's threshold (1.0 unless set),
/// else a fail saying it; the reward and the threshold are recorded.
pub(super) fn judge(
    c: &mut Ctx,
    task: &HarborTask,
    reward: BTreeMap<String, f64>,
    detail: &str,
) -> Result<()> {
    let threshold = task.reward_threshold;
    let passed = reward::passes(&reward, threshold);
    let shown = serde_json::to_string(&reward).unwrap_or_default();
    c.set_reward(reward);
    c.set_reward_threshold(threshold);
    if passed {
        Ok(())
    } else {
        Err(Error::other(format!("reward {shown} is below {threshold}{detail}")))
    }
}

/// No reward is the task's failure to grade, never the agent's: a config
/// outcome, not retried (Harbor: `RewardFileNotFoundError`, not retried, no
/// reward). A verifier past its limit fails the attempt (see harbor.md).
pub(super) fn ungraded(task: &HarborTask, graded: Graded, step: &str) -> Error {
    match graded {
        Graded::TimedOut(limit) => Error::other(format!(
            "the verifier of Harbor task {}{step} (tests/test.sh) timed out after {:.0}s, so there is no reward",
            task.name,
            limit.as_secs_f64()
        )),
        Graded::NoReward(why) => Error::Config(format!(
            "failed to grade Harbor task {}{step}: {why}; its tests/test.sh must write a reward (see captures/logs-verifier for test-stdout.txt)",
            task.name
        )),
        Graded::Reward(_) => Error::other("a reward is not ungraded"),
    }
}

/// The oracle, as Harbor's `OracleAgent`: `solution` uploaded to
/// `/solution`, `solve.sh` run in the workdir with the solution's env; its
/// exit status is kept in `/logs/agent/exit-code.txt`, never the verdict.
pub(super) async fn solve(
    c: &mut Ctx,
    task: &HarborTask,
    solution: &Files,
    user: Option<String>,
    limit: Option<Duration>,
) -> Result<()> {
    copy_in_between(
        c,
        Place::Shared,
        "rm -rf /solution",
        solution,
        "chmod +x /solution/solve.sh",
        "copy solution/ into /solution",
    )
    .await?;
    let mut run = Command::new("bash")
        .arg("-c")
        .arg(format!("{USER_HOME}(/solution/solve.sh) > /logs/agent/oracle.txt 2>&1"))
        .workdir(workdir(c).await?)
        .env("DEBIAN_FRONTEND", "noninteractive");
    for (k, v) in &task.solution_env {
        run = run.env(k.clone(), v.clone());
    }
    if let Some(user) = user {
        run = run.user(user);
    }
    if let Some(limit) = limit {
        run = run.timeout(limit);
    }
    let out = c.exec(run).await?;
    if !out.success() {
        let code = if out.timed_out { "timeout".to_string() } else { out.exit_code.to_string() };
        c.exec(
            Command::shell(format!("printf %s {} > /logs/agent/exit-code.txt", quote(&code)))
                .user("0"),
        )
        .await?;
    }
    Ok(())
}

/// A single-step task's body: the instruction as the one turn, the
/// artifacts, then the verifier and its reward as the outcome.
pub(super) async fn single(c: &mut Ctx, task: &HarborTask) -> Result<()> {
    turn(c, &task.instruction, task.agent_timeout()).await?;
    super::collect::run(c, &task.config.verifier.collect).await?;
    collect_artifacts(c, task, "").await?;
    if task.disable_verification {
        return Ok(());
    }
    let verifier = Verifier {
        tests: task.files("tests", "tests").map_err(|e| Error::Config(e.to_string()))?,
        env: task.verifier_env.clone(),
        user: task.config.verifier.user.as_ref().map(|u| u.spec()),
        timeout: task.verifier_timeout(),
        prefix: String::new(),
    };
    let graded = match &task.separate_verifier {
        Some(separate) => super::separate::verify(c, task, separate, &verifier).await?,
        None => verify(c, &verifier).await?,
    };
    match graded {
        Graded::Reward(r) => judge(c, task, r, ""),
        other => Err(ungraded(task, other, "")),
    }
}

/// A single-step task's oracle.
pub(super) async fn single_oracle(c: &mut Ctx, task: &HarborTask) -> Result<()> {
    let solution = task.files("solution", "solution").map_err(|e| Error::Config(e.to_string()))?;
    let user = task.config.agent.user.as_ref().map(|u| u.spec());
    solve(c, task, &solution, user, task.agent_timeout()).await
}
