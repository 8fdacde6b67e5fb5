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
use super::together::{ImageUser, Script, Together, copy_and_run};
use reeval_core::Ctx;
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
    /// Whether the task image's own user is root, once told.
    pub(super) image_user: ImageUser,
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
    // As root, copy, run and listing are one exec (`together.rs`).
    let together = match place {
        Place::Shared => {
            let listing = listing_script(logs);
            let script = Script {
                before: &clear,
                files: &v.tests,
                after: "chmod +x /tests/test.sh",
                env: &v.env,
                run: TEST_RUN,
                then: &listing,
                user: v.user.as_deref(),
                workdir: workdir.clone(),
                timeout: Some(v.timeout),
                what: "copy tests/ into /tests, run tests/test.sh, list what it left",
            };
            copy_and_run(c, script, &v.image_user).await?
        }
        Place::Separate { .. } => Together::Apart,
    };
    let (ran, listed) = match together {
        Together::Ran { out, then } => (out, then),
        Together::Apart => (run_apart(c, v, place, &clear, workdir).await?, None),
    };
    // The listing, unless the run's exec made it (it did not when ended at its limit).
    let present = match listed {
        Some(listed) => listed,
        None => place.exec(c, listing(logs)).await?.stdout,
    };
    let left = Left::parse(&present);
    let output = left.output.to_string();
    capture_logs(c, place, &v.prefix, &left.listed.join("\n")).await?;
    if ran.timed_out {
        return Ok(Verified { graded: Graded::TimedOut(v.timeout), output });
    }
    // A reward the listing carried whole is read from it; else from the file.
    let json = match (left.has("json"), left.json) {
        (_, Some(bytes)) => Some(bytes.as_bytes().to_vec()),
        (true, None) => Some(place.read_bytes(c, REWARD_JSON).await?),
        (false, None) => None,
    };
    let txt = match (left.has("txt"), left.txt) {
        (_, Some(bytes)) => Some(bytes.as_bytes().to_vec()),
        (true, None) => Some(place.read_bytes(c, REWARD_TXT).await?),
        (false, None) => None,
    };
    let graded = match reward::parse(json.as_deref(), txt.as_deref()) {
        Ok(r) => Graded::Reward(r),
        Err(e) => Graded::NoReward(e.to_string()),
    };
    Ok(Verified { graded, output })
}

/// How a verifier's test.sh runs.
const TEST_RUN: &str = "(/tests/test.sh) > /logs/verifier/test-stdout.txt 2>&1";

/// The verifier's copy (or its image's /tests prepared) and its run, each
/// an exec: the run as the verifier's user, who is not root.
async fn run_apart(
    c: &mut Ctx,
    v: &Verifier,
    place: Place<'_>,
    clear: &str,
    workdir: String,
) -> Result<ExecOutput> {
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
            let after = "chmod +x /tests/test.sh";
            copy_in_between(c, place, clear, &v.tests, after, "copy tests/ into /tests").await?
        }
    }
    let mut run = Command::new("bash")
        .arg("-c")
        .arg(format!("{USER_HOME}{TEST_RUN}"))
        .workdir(workdir)
        .timeout(v.timeout);
    for (k, val) in &v.env {
        run = run.env(k.clone(), val.clone());
    }
    if let Some(user) = &v.user {
        run = run.user(user.clone());
    }
    place.exec(c, run).await
}

/// The verifier's final listing, one exec as root: the log directories
/// holding a file, which reward files exist (`json`, `txt`), then each
/// reward file that is a regular file of at most [`REWARD_INLINE`] bytes
/// whole (`json <size>`, its bytes, a newline), and the end of what test.sh
/// printed (for a failure to show). A reward read here costs no read of its own.
fn listing(logs: &[&str]) -> Command {
    Command::shell(listing_script(logs)).user("0").step("list what the verifier left")
}

/// [`listing`]'s script.
fn listing_script(logs: &[&str]) -> String {
    let inline = |tag: &str, file: &str| {
        format!(
            "if [ -f {file} ] && [ -r {file} ]; then n=$(wc -c < {file}) && [ \"$n\" -le {REWARD_INLINE} ] \
             && echo \"{tag} $n\" && cat {file} && echo; fi; "
        )
    };
    format!(
        "for d in {}; do [ -n \"$(find \"$d\" -type f -print -quit 2>/dev/null)\" ] && echo \"$d\"; done; \
         [ -e {REWARD_JSON} ] && echo json; [ -e {REWARD_TXT} ] && echo txt; \
         {}{}echo {OUTPUT_MARK}; tail -c {OUTPUT_TAIL} {TEST_STDOUT} 2>/dev/null; true",
        logs.join(" "),
        inline("json", REWARD_JSON),
        inline("txt", REWARD_TXT),
    )
}

/// The largest reward file the listing carries (a reward is a few bytes).
const REWARD_INLINE: usize = 4096;

/// What the listing said.
#[derive(Debug, Default, PartialEq)]
struct Left<'a> {
    /// Its first lines: the log directories holding a file, `json`, `txt`.
    listed: Vec<&'a str>,
    /// `reward.json`'s bytes, when carried whole.
    json: Option<&'a str>,
    /// `reward.txt`'s bytes, when carried whole.
    txt: Option<&'a str>,
    /// The end of test.sh's output.
    output: &'a str,
}

impl<'a> Left<'a> {
    /// Parses the listing's stdout. Rewards carried are taken only when
    /// every one came as announced, byte for byte (the stdout is text: a
    /// file that is not UTF-8 does not), else the reward files are read.
    fn parse(stdout: &'a str) -> Self {
        let mut left = Left::default();
        let mut rest = stdout;
        while let Some((line, after)) = rest.split_once('\n') {
            if line == OUTPUT_MARK || carried(line).is_some() {
                break;
            }
            left.listed.push(line);
            rest = after;
        }
        match left.carried(rest) {
            Some(output) => left.output = output,
            None => {
                (left.json, left.txt) = (None, None);
                left.output =
                    rest.split_once(&format!("{OUTPUT_MARK}\n")).map_or("", |(_, out)| out);
            }
        }
        left
    }

    /// Takes the rewards carried at the start of `rest`; what follows the mark.
    fn carried(&mut self, mut rest: &'a str) -> Option<&'a str> {
        loop {
            let (line, after) = rest.split_once('\n')?;
            if line == OUTPUT_MARK {
                return Some(after);
            }
            let (json, n) = carried(line)?;
            let body = after.get(..n).filter(|b| !b.contains('\u{FFFD}'))?;
            (after.as_bytes().get(n) == Some(&b'\n')).then_some(())?;
            *(if json { &mut self.json } else { &mut self.txt }) = Some(body);
            rest = &after[n + 1..];
        }
    }

    /// Whether the listing named `what` (a directory, `json`, `txt`).
    fn has(&self, what: &str) -> bool {
        self.listed.contains(&what)
    }
}

/// A reward's announcement, `json <size>` or `txt <size>`: whether it is the JSON one, and the size.
fn carried(line: &str) -> Option<(bool, usize)> {
    let (tag, n) = line.split_once(' ')?;
    let json = match tag {
        "json" => true,
        "txt" => false,
        _ => return None,
    };
    Some((json, n.parse().ok()?))
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
/// nothing to keep (and a capture of one fails). Two or more are one read
/// of `/logs` (`Ctx::capture_dirs`), each kept as its own capture.
pub(super) async fn capture_logs(
    c: &mut Ctx,
    place: Place<'_>,
    prefix: &str,
    listed: &str,
) -> Result<()> {
    let dirs: Vec<(String, String)> = listed
        .lines()
        .filter(|d| LOG_DIRS.contains(d))
        .map(|dir| {
            let name = dir.trim_start_matches('/').replace('/', "-");
            (format!("{prefix}{name}"), dir.to_string())
        })
        .collect();
    place.capture_dirs(c, dirs).await
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
    let workdir = workdir(c).await?;
    let mut env = vec![("DEBIAN_FRONTEND".to_string(), "noninteractive".to_string())];
    // The agent's variables (`--ae`), `[solution].env` over them, as Harbor's oracle.
    env.extend(task.agent_env.iter().chain(&task.solution_env).cloned());
    // As root, the copy and the run are one exec (`together.rs`), which keeps the exit code too.
    let script = Script {
        before: "rm -rf /solution",
        files: solution,
        after: "chmod +x /solution/solve.sh",
        env: &env,
        run: SOLVE_RUN,
        then: "[ \"$code\" = 0 ] || printf %s \"$code\" > /logs/agent/exit-code.txt",
        user: user.as_deref(),
        workdir: workdir.clone(),
        timeout: limit,
        what: "copy solution/ into /solution, run solution/solve.sh",
    };
    let out = match copy_and_run(c, script, &task.image_user).await? {
        Together::Ran { then: Some(_), .. } => return Ok(()),
        Together::Ran { out, then: None } => out,
        Together::Apart => {
            let after = "chmod +x /solution/solve.sh";
            let what = "copy solution/ into /solution";
            copy_in_between(c, Place::Shared, "rm -rf /solution", solution, after, what).await?;
            let mut run = Command::new("bash")
                .arg("-c")
                .arg(format!("{USER_HOME}{SOLVE_RUN}"))
                .workdir(workdir);
            for (k, v) in env {
                run = run.env(k, v);
            }
            if let Some(user) = user {
                run = run.user(user);
            }
            if let Some(limit) = limit {
                run = run.timeout(limit);
            }
            c.exec(run).await?
        }
    };
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

/// How the oracle's solve.sh runs.
const SOLVE_RUN: &str = "(/solution/solve.sh) > /logs/agent/oracle.txt 2>&1";

#[cfg(test)]
mod tests {
    use super::*;

    fn out(listed: &str, carried: &str, tail: &str) -> String {
        format!("{listed}{carried}{OUTPUT_MARK}\n{tail}")
    }

    #[test]
    fn the_listing_carries_the_rewards_whole() {
        let stdout = out(
            "/logs/agent\n/logs/verifier\njson\ntxt\n",
            "json 13\n{\"reward\": 1}\ntxt 2\n0\n\n",
            "ok\n",
        );
        let left = Left::parse(&stdout);
        assert_eq!(left.listed, ["/logs/agent", "/logs/verifier", "json", "txt"]);
        assert_eq!(left.json, Some("{\"reward\": 1}"));
        assert_eq!(left.txt, Some("0\n"), "byte for byte, its own newline kept");
        assert_eq!(left.output, "ok\n");
        assert!(left.has("txt") && !left.has("/logs/artifacts"));
    }

    #[test]
    fn a_reward_not_carried_whole_is_read_from_its_file() {
        // A file that was not UTF-8 came with replacement characters.
        let stdout = out("/logs/verifier\ntxt\n", "txt 4\n1\u{FFFD}\n", "");
        let left = Left::parse(&stdout);
        assert_eq!((left.has("txt"), left.txt), (true, None));
        // Shorter than announced (cat failed), or larger than carried (not announced).
        for carried in ["json 40\n{}\n", ""] {
            let stdout = out("json\n", carried, "the end\n");
            let left = Left::parse(&stdout);
            assert_eq!((left.has("json"), left.json), (true, None), "{carried:?}");
        }
        assert_eq!(Left::parse(&out("json\n", "", "the end\n")).output, "the end\n");
        // A body's lines are never listed directories.
        let stdout = out("txt\n", "txt 99\n/logs/agent\n", "");
        assert_eq!(Left::parse(&stdout).listed, ["txt"]);
        // No reward at all.
        let stdout = out("", "", "boom\n");
        let left = Left::parse(&stdout);
        assert_eq!(
            (left.listed.len(), left.json, left.txt, left.output),
            (0, None, None, "boom\n")
        );
    }
}
