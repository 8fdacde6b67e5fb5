//! What a Harbor task does in its sandbox, phase by phase, as Harbor 0.26
//! does it: the agent's turn, the declared artifacts, the verifier and its
//! reward, the oracle. `eval.rs` builds the eval; `steps.rs` repeats these
//! per step of a multi-step task.

use reeval_core::sandbox::FileToWrite;
use std::collections::BTreeMap;
use std::time::Duration;

use super::eval::{HarborTask, LOG_DIRS, NO_AGENT_TIMEOUT_BUDGET};
use super::place::Place;
use super::reward::{self, REWARD_JSON, REWARD_TXT};
use super::shell::{USER_HOME, quote, workdir};
use reeval_core::Ctx;
use reeval_core::capture::Artifact;
use reeval_core::error::{Error, Result};
use reeval_core::exec::{Command, ExecOutput};
use reeval_core::turn::TurnOptions;

/// A task's files to upload.
pub(super) type Files = Vec<FileToWrite>;

/// A tar of `files` unpacked under `dir` as root, owned by the agent's user.
fn upload_for_agent(files: &Files, dir: &str) -> Result<Command> {
    let tar =
        reeval_core::sandbox::archive::tar_owned_by(files, reeval_core::sandbox::AgentUser::ID)?;
    Ok(Command::new("tar")
        .args(["-x", "-C", dir])
        .stdin(tar)
        .user("0")
        .step(format!("copy the step's workdir/ into {dir}")))
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
    let cmd = Command::shell(script).stdin(tar).user("0").step(what);
    expect_ok(place.exec(c, cmd).await?, what)
}

/// Copies `files` into the workspace, owned by the agent's user (a step's `workdir/`).
pub(super) async fn copy_in_for_agent(c: &mut Ctx, files: &Files, dir: &str) -> Result<()> {
    expect_ok(c.exec(upload_for_agent(files, dir)?).await?, "copy a step's workdir/ in")
}

/// One turn with `prompt`, limited to `limit` (an hour when the task has none).
/// A turn that timed out or that the agent ended non-zero is graded, as Harbor
/// grades `AgentTimeoutError` and `NonZeroAgentExitCodeError`.
pub(super) async fn turn(
    c: &mut Ctx,
    task: &HarborTask,
    prompt: &str,
    limit: Option<Duration>,
) -> Result<()> {
    let options = TurnOptions {
        timeout: Some(limit.unwrap_or(NO_AGENT_TIMEOUT_BUDGET)),
        env: task.agent_env.clone(),
    };
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

/// What a verifier left: its grade, and the end of its output.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Verified {
    /// The reward, or why there is none.
    pub(super) graded: Graded,
    /// The end of `/logs/verifier/test-stdout.txt` (what `test.sh` printed).
    pub(super) output: String,
}

/// A verifier's grade.
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
pub(super) async fn verify(c: &mut Ctx, v: &Verifier) -> Result<Verified> {
    verify_at(c, v, Place::Shared).await
}

/// [`verify`] where `place` says: the agent's sandbox, or the verifier's own
/// (whose image may hold `/tests` already).
pub(super) async fn verify_at(c: &mut Ctx, v: &Verifier, place: Place<'_>) -> Result<Verified> {
    let (workdir, logs): (String, &[&str]) = match place {
        Place::Shared => (workdir(c).await?, &LOG_DIRS),
        // The agent's logs stay in its sandbox (`separate.rs` captures them there).
        Place::Separate { workdir, .. } => (workdir.to_string(), &["/logs/verifier"]),
    };
    let clear = format!("rm -f {REWARD_TXT} {REWARD_JSON}");
    match place {
        Place::Separate { bundled_tests: true, .. } => {
            let prepare = Command::shell(format!("{clear} && chmod +x /tests/test.sh"))
                .user("0")
                .step("prepare /tests/test.sh of the verifier's image");
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
    // One listing: the log directories holding a file, the reward files, and
    // the end of what test.sh printed (for a failure to show).
    let listing = format!(
        "for d in {}; do [ -n \"$(find \"$d\" -type f -print -quit 2>/dev/null)\" ] && echo \"$d\"; done; \
         [ -e {REWARD_JSON} ] && echo json; [ -e {REWARD_TXT} ] && echo txt; \
         echo {OUTPUT_MARK}; tail -c {OUTPUT_TAIL} {TEST_STDOUT} 2>/dev/null; true",
        logs.join(" ")
    );
    let listing = Command::shell(listing).user("0").step("list what the verifier left");
    let present = place.exec(c, listing).await?;
    let (listed, output) =
        present.stdout.split_once(&format!("{OUTPUT_MARK}\n")).unwrap_or((&present.stdout, ""));
    let output = output.to_string();
    capture_logs(c, place, &v.prefix, listed).await?;
    if ran.timed_out {
        return Ok(Verified { graded: Graded::TimedOut(v.timeout), output });
    }
    let has = |what: &str| listed.lines().any(|l| l == what);
    let json = if has("json") { Some(place.read_bytes(c, REWARD_JSON).await?) } else { None };
    let txt = if has("txt") { Some(place.read_bytes(c, REWARD_TXT).await?) } else { None };
    let graded = match reward::parse(json.as_deref(), txt.as_deref()) {
        Ok(r) => Graded::Reward(r),
        Err(e) => Graded::NoReward(e.to_string()),
    };
    Ok(Verified { graded, output })
}

/// Where the verifier's output goes, as in Harbor.
const TEST_STDOUT: &str = "/logs/verifier/test-stdout.txt";
/// Where the oracle's output goes, as in Harbor.
const ORACLE_OUTPUT: &str = "/logs/agent/oracle.txt";
/// How much of an output a failure shows, at most.
const OUTPUT_TAIL: usize = 2000;
/// Separates the listing from the output's end in the listing's stdout.
const OUTPUT_MARK: &str = "--- reeval: test-stdout.txt ---";

/// What a failed attempt shows of why: the end of the verifier's output,
/// and under the oracle the end of `solve.sh`'s.
pub(super) async fn why(c: &mut Ctx, verifier_output: &str) -> String {
    let mut out = shown("the verifier's output", TEST_STDOUT, verifier_output);
    if c.runs_reference_solution() {
        let oracle = c.read_bytes(ORACLE_OUTPUT).await.unwrap_or_default();
        let text = String::from_utf8_lossy(&oracle);
        let tail = reeval_core::exec::tail(&text, OUTPUT_TAIL);
        out.push_str(&shown("the oracle's output", ORACLE_OUTPUT, tail));
    }
    out
}

/// `\n<what> (<path>) ends:\n  | line…`, or says it was empty.
fn shown(what: &str, path: &str, text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.is_empty() {
        return format!("\n{what} ({path}) was empty");
    }
    let last = &lines[lines.len().saturating_sub(20)..];
    let body: Vec<String> = last.iter().map(|l| format!("  | {l}")).collect();
    format!("\n{what} ({path}) ends:\n{}", body.join("\n"))
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
    why: &str,
) -> Result<()> {
    let threshold = task.reward_threshold;
    let passed = reward::passes(&reward, threshold);
    let shown = serde_json::to_string(&reward).unwrap_or_default();
    c.set_reward(reward);
    c.set_reward_threshold(threshold);
    if passed {
        Ok(())
    } else {
        Err(Error::assertion(format!("reward {shown} is below {threshold}{detail}{why}")))
    }
}

/// No reward is the task's failure to grade, never the agent's: a config
/// outcome, not retried (Harbor: `RewardFileNotFoundError`, not retried, no
/// reward). A verifier past its limit fails the attempt (see harbor.md).
pub(super) fn ungraded(task: &HarborTask, graded: Graded, step: &str, output: &str) -> Error {
    match graded {
        // Harbor fails such a trial (VerifierTimeoutError): the agent's work did not pass in time.
        Graded::TimedOut(limit) => Error::assertion(format!(
            "the verifier of Harbor task {}{step} (tests/test.sh) timed out after {:.0}s, so there is no reward{output}",
            task.name,
            limit.as_secs_f64()
        )),
        Graded::NoReward(why) => Error::Config(format!(
            "failed to grade Harbor task {}{step}: {why}; its tests/test.sh must write a reward{output}",
            task.name
        )),
        // Not reached (callers pass a reward to `judge`); were it, reeval's own fault.
        Graded::Reward(_) => {
            Error::infra("grade the Harbor task", "a reward was read but not judged")
        }
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
    // The agent's variables (`--ae`), `[solution].env` over them, as Harbor's oracle.
    for (k, v) in task.agent_env.iter().chain(&task.solution_env) {
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
                .user("0")
                .step("keep solve.sh's exit code in /logs/agent/exit-code.txt"),
        )
        .await?;
    }
    Ok(())
}
