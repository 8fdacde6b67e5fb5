//! The six CLI harnesses against stand-ins in real containers.
//!
//! No agent CLI or model API can be reached here, so each CLI is replaced by
//! a stand-in (`tests/standins/<cli>.py`) that accepts the CLI's real flags,
//! reads the task the way the CLI does, keeps its session in the relocated
//! config home and replays the CLI's documented event format for the scenario
//! named in the task (`SCENARIO:edit`, `tool_error`, `rate_limit`, `auth`,
//! `stall`, `hang`, `echo`, `config`). Each test runs one CLI's evals through
//! the real runner and checks the records: parsed turns, usage, model, tool
//! calls, file edits, diffs, resumed sessions, status and classification.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use reeval::prelude::*;
use reeval::{EditKind, Eval, FailKind, Outcome, Record, RunReport, TurnStatus, Usage};

/// A prompt that would do damage if any part of it reached a shell.
const HOSTILE: &str = "SCENARIO:echo it's \"quoted\" $(touch /tmp/pwned) `touch /tmp/pwned2` ; touch /tmp/pwned3 && echo $HOME\n\
                       second line\twith a tab, a backslash \\ and 'single' quotes; | cat /etc/passwd > x\n\
                       -p --resume evil -- --model x ünïcödé 🙂\n";

const COMMON: &[u8] = include_bytes!("standins/standin_common.py");

/// One CLI under test and what its stand-in's `edit` scenario reports.
struct Cli {
    /// The harness spec, with a model.
    spec: &'static str,
    /// The harness name.
    name: &'static str,
    /// Where the CLI is found in the sandbox.
    bin: &'static str,
    /// The stand-in.
    script: &'static [u8],
    /// The model the turn should report.
    model: &'static str,
    /// Usage of one `edit` turn.
    usage: Usage,
    /// The harness's rules file.
    rules_file: &'static str,
    /// Whether the CLI takes MCP servers.
    mcp: bool,
}

const fn usage(
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    reasoning: Option<u64>,
) -> Usage {
    Usage { input, output, cache_read, cache_write, reasoning, partial: false }
}

static CLAUDE: Cli = Cli {
    spec: "claude-code:sonnet",
    name: "claude-code",
    bin: "/usr/local/bin/claude",
    script: include_bytes!("standins/claude.py"),
    model: "claude-sonnet-4-5-20250929",
    // The result's totals; each assistant event's snapshot has output 1.
    usage: usage(Some(7), Some(32), Some(100), Some(100), None),
    rules_file: "CLAUDE.md",
    mcp: true,
};
static CODEX: Cli = Cli {
    spec: "codex:gpt-5",
    name: "codex",
    bin: "/usr/local/bin/codex",
    script: include_bytes!("standins/codex.py"),
    model: "gpt-5",
    // input_tokens 1200 include 1000 cached. The stand-in reports the thread's running
    // totals, as codex does: the second turn is recorded with its own share.
    usage: usage(Some(200), Some(50), Some(1000), None, Some(30)),
    rules_file: "AGENTS.md",
    mcp: true,
};
static CURSOR: Cli = Cli {
    spec: "cursor:composer-2.5",
    name: "cursor",
    bin: "/usr/local/bin/cursor-agent",
    script: include_bytes!("standins/cursor.py"),
    model: "Composer 2.5",
    usage: usage(Some(120), Some(30), Some(80), Some(5), None),
    rules_file: "AGENTS.md",
    mcp: true,
};
static GEMINI: Cli = Cli {
    spec: "gemini:gemini-2.5-pro",
    name: "gemini",
    bin: "/usr/local/bin/gemini",
    script: include_bytes!("standins/gemini.py"),
    model: "gemini-2.5-pro",
    usage: usage(Some(400), Some(300), Some(800), None, None),
    rules_file: "GEMINI.md",
    mcp: true,
};
static OPENCODE: Cli = Cli {
    spec: "opencode:anthropic/claude-sonnet-4-5",
    name: "opencode",
    bin: "/usr/local/bin/opencode",
    script: include_bytes!("standins/opencode.py"),
    model: "anthropic/claude-sonnet-4-5",
    usage: usage(Some(130), Some(70), Some(120), Some(5), Some(10)),
    rules_file: "AGENTS.md",
    mcp: true,
};
static PI: Cli = Cli {
    spec: "pi:claude-sonnet-4-5",
    name: "pi",
    bin: "/usr/local/bin/pi",
    script: include_bytes!("standins/pi.py"),
    model: "claude-sonnet-4-5",
    usage: usage(Some(110), Some(55), Some(140), Some(10), None),
    rules_file: "AGENTS.md",
    mcp: false,
};

/// Credentials the harnesses ask for, as a `.env` file read by preflight.
fn env_file(tag: &str) -> PathBuf {
    common::env_file(
        tag,
        &[
            ("ANTHROPIC_API_KEY", "sk-test-anthropic_api_key-0123456789"),
            ("OPENAI_API_KEY", "sk-test-openai_api_key-0123456789"),
            ("CURSOR_API_KEY", "sk-test-cursor_api_key-0123456789"),
            ("GEMINI_API_KEY", "sk-test-gemini_api_key-0123456789"),
        ],
    )
}

/// A skill directory on the host.
fn skill_dir(dir: &Path) -> PathBuf {
    let skill = dir.join("greeter");
    std::fs::create_dir_all(&skill).expect("create the skill dir");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: greeter\ndescription: Greets.\n---\nSay hello.\n",
    )
    .expect("write SKILL.md");
    skill
}

/// The base image with the stand-in installed where the CLI would be.
fn environment(cli: &'static Cli) -> Environment {
    Environment::new()
        .image(Image::from("reeval/base:latest"))
        .file_with_mode(cli.bin, cli.script, 0o755)
        .file_with_mode("/usr/local/lib/reeval-standins/standin_common.py", COMMON, 0o644)
}

/// `<cli>_<what>`, as eval names go.
fn eval_name(cli: &Cli, what: &str) -> String {
    format!("{}_{what}", cli.name.replace('-', "_"))
}

/// The evals of one CLI: a multi-turn success, the failures, the timeouts.
fn evals(cli: &'static Cli, skill: PathBuf) -> Vec<Eval> {
    let success = Eval::new(eval_name(cli, "success"), move |c| {
        Box::pin(async move {
            let first = c.send("SCENARIO:edit create hello.py").await?;
            expect(first.diff.paths().join(",")).to_equal("hello.py")?;
            let second = c.send("SCENARIO:edit extend hello.py").await?;
            expect(second.diff.paths().join(",")).to_equal("hello.py")?;
            c.send("SCENARIO:tool_error").await?;
            c.send(HOSTILE).await?;
            let echoed = c.read_bytes("prompt.txt").await?;
            expect(String::from_utf8_lossy(&echoed).into_owned()).to_equal(HOSTILE)?;
            expect(c.exec("ls /tmp/pwned /tmp/pwned2 /tmp/pwned3 2>&1").await?).to_fail()?;
            let config = c.send("SCENARIO:config").await?;
            let mcp = if cli.mcp { "api,fs" } else { "none" };
            // `greeter` from the host, `linter` copied from a directory in the sandbox.
            expect(config.final_message.unwrap_or_default())
                .to_equal(format!("mcp={mcp}; skills=greeter,linter"))?;
            expect(c.read_file(cli.rules_file).await?).to_contain("Be brief.")?;
            Ok(())
        })
    })
    .harness(cli.spec)
    .environment(move || {
        // A server given where taken: in the config of a CLI that takes MCP, left out (not
        // refused) by one that has none.
        let env = environment(cli)
            .rules("Be brief.")
            .skill(skill.clone())
            .file("/opt/task-skills/linter/SKILL.md", "---\nname: linter\n---\nLint.\n")
            .skills_in_sandbox("/opt/task-skills")
            .skills_in_sandbox("/opt/no-such-skills")
            .mcp_where_taken(McpServer::http("api", "http://mcp.invalid/mcp"));
        if cli.mcp {
            env.mcp(McpServer::stdio("fs", ["mcp-fs", "--root", "/workspace"]))
        } else {
            env
        }
    });

    let rate_limit = Eval::new(eval_name(cli, "rate_limit"), |c| {
        Box::pin(async move {
            c.send("SCENARIO:rate_limit").await?;
            Ok(())
        })
    });
    let auth = Eval::new(eval_name(cli, "auth"), |c| {
        Box::pin(async move {
            c.send("SCENARIO:auth").await?;
            Ok(())
        })
    });
    // Events, then silence: a per-turn limit ends the turn, the budget ends the attempt.
    let stall = Eval::new(eval_name(cli, "stall"), |c| {
        Box::pin(async move {
            let t = c
                .send_with(
                    "SCENARIO:stall",
                    TurnOptions { timeout: Some(Duration::from_secs(4)), ..Default::default() },
                )
                .await?;
            expect(t.status).to_equal(TurnStatus::TimedOut)?;
            c.send("SCENARIO:stall").await?;
            Ok(())
        })
    })
    // Room for the stand-in to start and speak under load before its turn limit.
    .timeout(Duration::from_secs(10));
    // Silence from the start: the agent never had a fair try.
    let hang = Eval::new(eval_name(cli, "hang"), |c| {
        Box::pin(async move {
            c.send("SCENARIO:hang").await?;
            Ok(())
        })
    })
    .timeout(Duration::from_secs(2));

    let plain = |e: Eval| e.harness(cli.spec).environment(move || environment(cli));
    vec![success, plain(rate_limit), plain(auth), plain(stall), plain(hang)]
}

fn record<'a>(report: &'a RunReport, eval: &str) -> &'a Record {
    report.records.iter().find(|r| r.eval == eval).unwrap_or_else(|| panic!("no record of {eval}"))
}

/// `key=value` out of the stand-in's summary line.
fn field<'a>(message: &'a str, key: &str) -> &'a str {
    message
        .split("; ")
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {message:?}"))
}

async fn check(cli: &'static Cli) {
    let since = common::events_since_now();
    let tmp = common::temp_dir(&format!("clis-{}", cli.name));
    let env = env_file(&format!("clis-env-{}", cli.name));
    let skill = skill_dir(&tmp);
    let runner = common::runner_with(cli.name, |c| {
        c.settings.env_file = Some(env);
        c.settings.test_threads = 5;
    });
    let report = runner.run(evals(cli, skill)).await.expect("preflight passes");
    let show = |r: &Record| serde_json::to_string_pretty(r).unwrap_or_default();

    // Success over five turns, the second resuming the first's session.
    let r = record(&report, &eval_name(cli, "success"));
    assert_eq!(r.outcome, Outcome::Pass, "{}", show(r));
    assert_eq!(r.turns.len(), 5, "{}", show(r));
    let (first, second) = (&r.turns[0], &r.turns[1]);
    for t in &r.turns {
        assert_eq!(t.status, TurnStatus::Completed, "{}", show(r));
    }
    assert_eq!(first.model.as_deref(), Some(cli.model), "{}", show(r));
    assert_eq!(first.usage, cli.usage, "{}", show(r));
    assert_eq!(second.usage, cli.usage, "{}", show(r));
    assert_eq!(
        first.file_edits,
        vec![reeval::FileEdit { path: "hello.py".into(), kind: EditKind::Add }],
        "{}",
        show(r)
    );
    assert_eq!(
        second.file_edits,
        vec![reeval::FileEdit { path: "hello.py".into(), kind: EditKind::Update }],
        "{}",
        show(r)
    );
    assert!(first.diff.patch.contains("+print('hello')"), "{}", show(r));
    assert!(second.diff.patch.contains("+print('hello again')"), "{}", show(r));
    assert!(
        !first.tool_calls.is_empty() && first.tool_calls.iter().all(|t| t.error.is_none()),
        "{}",
        show(r)
    );
    let m1 = first.final_message.as_deref().unwrap_or_default();
    let m2 = second.final_message.as_deref().unwrap_or_default();
    assert_eq!(field(m1, "resumed"), "no", "{m1}");
    assert_eq!(
        field(m2, "resumed"),
        field(m1, "session"),
        "the second turn resumes the first's session: {m2}"
    );
    let tool_error = &r.turns[2];
    assert_eq!(tool_error.tool_calls.len(), 2, "{}", show(r));
    assert!(tool_error.tool_calls[0].error.is_some(), "{}", show(r));
    assert!(
        tool_error.tool_calls[1].error.is_none() && tool_error.tool_calls[1].result.is_some(),
        "{}",
        show(r)
    );
    assert_eq!(tool_error.final_message.as_deref(), Some("Recovered from a failed tool call."));
    assert_eq!(r.turns[3].diff.paths(), vec!["prompt.txt"]);
    let sum = r.turns.iter().fold(Usage::default(), |mut acc, t| {
        acc.add(&t.usage);
        acc
    });
    assert_eq!(r.usage, sum, "the record sums usage over turns");
    let home = runner_artifacts(&report, r).join(format!("{}-home.tar", cli.name));
    let tar = std::fs::read(&home).unwrap_or_else(|e| panic!("{} is missing: {e}", home.display()));
    assert!(tar.len() > 1024, "the config home archive holds the session");
    // Laid out as the engine's archive of the home: the home first, everything under it,
    // the session's files with their bytes (read by the diff helper's session, or the engine).
    let entries = home_entries(&tar);
    let (top, kind, _) = &entries[0];
    assert_eq!(*kind, tar::EntryType::Directory, "{entries:?}");
    let top = top.trim_end_matches('/');
    assert!(
        entries
            .iter()
            .all(|(p, _, _)| p.trim_end_matches('/') == top || p.starts_with(&format!("{top}/"))),
        "{entries:?}"
    );
    assert!(
        entries.iter().any(|(_, k, size)| *k == tar::EntryType::Regular && *size > 0),
        "{entries:?}"
    );
    // The home came through the session the snapshot left (a gateway: the relay started it),
    // not the engine's archive: that container's only `archive-path`s are the eval's own two
    // reads (`read_bytes("prompt.txt")`, `read_file` of the rules).
    let container =
        r.phases.iter().find(|p| p.phase == reeval::Phase::Container).expect("a container phase");
    let short_id = container.detail.split(' ').next().expect("its id");
    assert_eq!(archives_of(&report.run_id, short_id, since), 2, "{}", show(r));
    assert!(
        runner_artifacts(&report, r).join(format!("{}-turn1.ndjson", cli.name)).is_file(),
        "the first turn's transcript is kept"
    );
    for kept in [format!("{}-home.tar", cli.name), format!("{}-turn5.ndjson", cli.name)] {
        assert!(r.artifacts.contains(&kept), "{kept} is listed in {:?}", r.artifacts);
    }

    // A rate limit is the platform's trouble.
    let r = record(&report, &eval_name(cli, "rate_limit"));
    assert_eq!(r.outcome, Outcome::InfraError, "{}", show(r));
    assert_eq!(r.turns[0].status, TurnStatus::Failed);

    // Rejected credentials are the run's configuration.
    let r = record(&report, &eval_name(cli, "auth"));
    assert_eq!(r.outcome, Outcome::Config, "{}", show(r));
    // Claude Code names API errors' messages `<synthetic>`: never a turn's model.
    for r in &report.records {
        assert!(r.turns.iter().all(|t| t.model.as_deref() != Some("<synthetic>")), "{}", show(r));
    }

    // A per-turn limit times the turn out and the eval goes on; the budget aborts the next.
    let r = record(&report, &eval_name(cli, "stall"));
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout), "{}", show(r));
    assert_eq!(
        r.turns.iter().map(|t| t.status).collect::<Vec<_>>(),
        vec![TurnStatus::TimedOut, TurnStatus::Aborted],
        "{}",
        show(r)
    );
    for t in &r.turns {
        // The stream ended with the killed process: what was parsed is kept.
        assert_eq!(t.final_message.as_deref(), Some("Working on it..."), "{}", show(r));
        assert_eq!(t.model.as_deref(), Some(cli.model), "{}", show(r));
        // Killed before the CLI reported its totals: the record says the figure is partial.
        if matches!(cli.name, "claude-code" | "codex") {
            assert!(t.usage.partial, "{}", show(r));
        }
    }

    // No event before the budget ran out: infra, with the measured time.
    let r = record(&report, &eval_name(cli, "hang"));
    assert_eq!(r.outcome, Outcome::InfraError, "{}", show(r));
    assert_eq!(r.turns[0].status, TurnStatus::Aborted, "{}", show(r));
    assert!(r.message.as_deref().unwrap_or_default().contains("produced no event"), "{}", show(r));

    assert_eq!(report.records.len(), 5, "no retries (infra_retries = 0)");
    assert_eq!(common::containers_of_run(&report.run_id).await, 0, "every sandbox is removed");
}

/// Each entry of a tar: its path, type and size.
fn home_entries(tar: &[u8]) -> Vec<(String, tar::EntryType, u64)> {
    let mut archive = tar::Archive::new(tar);
    let entries = archive.entries().expect("a tar");
    entries
        .map(|e| {
            let e = e.expect("an entry");
            let h = e.header();
            (
                String::from_utf8_lossy(&h.path_bytes()).into_owned(),
                h.entry_type(),
                h.size().unwrap_or(0),
            )
        })
        .collect()
}

/// How many times the engine archived a path of the run's container whose id starts with `short_id`, since `since`.
fn archives_of(run_id: &str, short_id: &str, since: u64) -> usize {
    let ids = common::engine_events(run_id, since, "archive-path", "{{.Actor.ID}}");
    ids.iter().filter(|id| id.starts_with(short_id)).count()
}

fn runner_artifacts(report: &RunReport, r: &Record) -> PathBuf {
    report.run_dir.join(r.artifacts_dir_name())
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_against_its_stand_in() {
    require_docker!();
    check(&CLAUDE).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_against_its_stand_in() {
    require_docker!();
    check(&CODEX).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_against_its_stand_in() {
    require_docker!();
    check(&CURSOR).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_against_its_stand_in() {
    require_docker!();
    check(&GEMINI).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_against_its_stand_in() {
    require_docker!();
    check(&OPENCODE).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_against_its_stand_in() {
    require_docker!();
    check(&PI).await;
}

/// Codex's non-fatal error items (code mode unavailable) reach the record of a turn that completed anyway.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_keeps_a_non_fatal_error_notice() {
    require_docker!();
    let env = env_file("clis-codex-notice");
    let runner = common::runner_with("codex-notice", |c| c.settings.env_file = Some(env));
    let e = Eval::new("codex_notice", |c| {
        Box::pin(async move {
            c.send("SCENARIO:notice").await?;
            Ok(())
        })
    })
    .harness(CODEX.spec)
    .environment(|| environment(&CODEX));
    let report = runner.run(vec![e]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{r:?}");
    let t = &r.turns[0];
    assert_eq!(t.status, TurnStatus::Completed, "{r:?}");
    assert!(t.tool_calls.is_empty(), "{r:?}");
    assert!(t.error.as_deref().unwrap_or_default().contains("codex-code-mode-host"), "{r:?}");
}

/// pi has no MCP support: asking for a server is a configuration error, not a silent drop.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pi_refuses_mcp_servers() {
    require_docker!();
    let env = env_file("clis-pi-mcp");
    let runner = common::runner_with("pi-mcp", |c| c.settings.env_file = Some(env));
    let e = Eval::new("pi_mcp", |c| {
        Box::pin(async move {
            c.send("SCENARIO:answer").await?;
            Ok(())
        })
    })
    .harness(PI.spec)
    .environment(|| environment(&PI).mcp(McpServer::stdio("fs", ["mcp-fs"])));
    let report = runner.run(vec![e]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Config, "{r:?}");
    assert!(r.message.as_deref().unwrap_or_default().contains("no MCP support"), "{r:?}");
}

/// A missing credential stops the run in preflight, naming the variable.
#[tokio::test]
async fn a_missing_credential_is_named_in_preflight() {
    let tmp = common::temp_dir("clis-cred");
    let empty = tmp.join("empty.env");
    std::fs::write(&empty, "").expect("write");
    let runner = common::runner_with("cred", |c| c.settings.env_file = Some(empty));
    let e =
        Eval::new("needs_cursor_key", |c| Box::pin(async move { c.send("hi").await.map(|_| ()) }))
            .harness("cursor");
    if std::env::var_os("CURSOR_API_KEY").is_some() {
        // The host has a real key, so it cannot be missing: say so rather than pass silently.
        assert!(
            !common::docker_required(),
            "CURSOR_API_KEY is set on this host, so the missing-credential check cannot run (REEVAL_REQUIRE_DOCKER=1: nothing may skip)"
        );
        eprintln!(
            "SKIPPED, NOT TESTED: the missing-credential check (CURSOR_API_KEY is set on this host)"
        );
        return;
    }
    let err = runner.run(vec![e]).await.expect_err("preflight fails");
    assert!(err.missing.iter().any(|m| m.contains("CURSOR_API_KEY")), "{err}");
}
