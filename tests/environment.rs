//! The environment against the real engine: images, env and secrets,
//! workspaces, files and rules, setup, context summary, limits.

mod common;

use reeval::settings::Settings;
use std::path::Path;
use std::process::Command as HostCommand;
use std::time::Duration;

use reeval::prelude::*;
use reeval::{
    Eval, HarnessRegistry, Outcome, RunConfig, Runner, SandboxHandle, TurnContext, TurnReport,
};
use sha2::{Digest, Sha256};

const AGENT_SECRET: &str = "sk-agent-0a1b2c3d4e5f-never-in-records";
const CHECK_SECRET: &str = "sk-check-9f8e7d6c5b4a-never-in-records";

fn env_file(tag: &str) -> std::path::PathBuf {
    common::env_file(
        tag,
        &[
            ("REEVAL_T_AGENT_SECRET", AGENT_SECRET),
            ("REEVAL_T_CHECK_SECRET", CHECK_SECRET),
            ("ANTHROPIC_API_KEY", "sk-ant-test-key-123456"),
            ("GEMINI_API_KEY", "gem-test-key-123456"),
            ("OPENAI_API_KEY", "sk-oai-test-key-123456"),
        ],
    )
}

fn runner_with_secrets(tag: &str) -> (Runner, std::path::PathBuf) {
    let dir = common::temp_dir(tag);
    let file = env_file(tag);
    let records = dir.join("runs");
    (
        common::runner_with(tag, |c| {
            c.settings.env_file = Some(file);
            c.settings.record_dir = records.clone();
        }),
        records,
    )
}

fn secret_env() -> Environment {
    Environment::new()
        .secret("REEVAL_T_AGENT_SECRET")
        .secret_for_checks("REEVAL_T_CHECK_SECRET")
        .env("GREETING", "hi")
}

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_agent_sees_placeholders_and_only_checks_see_checks_secrets() {
    require_docker!();
    let isolation = Eval::new("secret_isolation", |c| {
        Box::pin(async move {
            // The agent's environment, and that of every process it leaves running.
            c.send("env > agent_env.txt; nohup sleep 300 >/dev/null 2>&1 & sleep 0.2; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' > procs_env.txt")
                .await?;
            let agent_env = c.read_file("agent_env.txt").await?;
            // The agent is unprivileged; checks run as the image's user (root).
            c.send("id -u > agent_uid.txt").await?;
            expect(c.read_file("agent_uid.txt").await?).to_equal("1000\n")?;
            expect(c.exec("id -u").await?.stdout).to_equal("0\n")?;
            for var in ["CI=1", "TERM=dumb", "NO_COLOR=1", "GREETING=hi", "REEVAL_T_AGENT_SECRET=reeval-placeholder-REEVAL_T_AGENT_SECRET"] {
                expect(agent_env.as_str()).to_contain(var)?;
            }
            expect(agent_env.as_str()).not().to_contain("REEVAL_T_CHECK_SECRET")?;
            expect(agent_env.as_str()).not().to_contain(AGENT_SECRET)?;
            let procs = c.read_file("procs_env.txt").await?;
            expect(procs.as_str()).to_contain("GREETING=hi")?;
            expect(procs.as_str()).not().to_contain("REEVAL_T_CHECK_SECRET")?;
            expect(procs.as_str()).not().to_contain(CHECK_SECRET)?;
            // A check has the real value of a checks-only secret, and no other.
            let digest = c.exec("printf %s \"$REEVAL_T_CHECK_SECRET\" | sha256sum | cut -c1-64").await?;
            expect(digest.stdout.trim()).to_equal(sha256_hex(CHECK_SECRET).as_str())?;
            let agent_secret_in_check = c.exec("printf %s \"$REEVAL_T_AGENT_SECRET\"").await?;
            expect(agent_secret_in_check.stdout).to_equal("reeval-placeholder-REEVAL_T_AGENT_SECRET")?;
            // A daemon the agent leaves behind reads every environment it can while a check with the secret runs.
            c.send(
                "nohup sh -c 'while true; do cat /proc/[0-9]*/environ 2>/dev/null | tr \"\\000\" \"\\n\" >> /tmp/seen.txt; sleep 0.05; done' >/dev/null 2>&1 &",
            )
            .await?;
            c.exec("sleep 1.5; test -n \"$REEVAL_T_CHECK_SECRET\"").await?;
            let seen = c.exec("cat /tmp/seen.txt").await?.stdout;
            expect(seen.as_str()).to_contain("GREETING=hi")?;
            expect(seen.as_str()).not().to_contain("REEVAL_T_CHECK_SECRET")?;
            expect(seen.as_str()).not().to_contain("[redacted]")?;
            // The eval's own code is trusted: a check's output comes back as it is, so a
            // checks-only secret can be matched in it; only what is written is redacted.
            let echoed = c.exec("echo \"value=$REEVAL_T_CHECK_SECRET\"").await?;
            expect(echoed.stdout).to_equal(format!("value={CHECK_SECRET}\n"))?;
            Ok(())
        })
    })
    .environment(secret_env);
    let leaky = Eval::new("secret_leaks_are_redacted", |c| {
        Box::pin(async move {
            c.exec("echo $REEVAL_T_CHECK_SECRET; echo $REEVAL_T_CHECK_SECRET >&2; echo $REEVAL_T_CHECK_SECRET > leaked.txt").await?;
            c.capture("leak", reeval::Artifact::file("leaked.txt")).await?;
            Err(reeval::Error::other(format!("an eval that puts {CHECK_SECRET} and {AGENT_SECRET} in its error")))
        })
    })
    .environment(secret_env);
    let (runner, records) = runner_with_secrets("secrets");
    let report = runner.run(vec![isolation, leaky]).await.expect("preflight");
    let find = |n: &str| report.records.iter().find(|r| r.eval == n).unwrap();
    assert_eq!(
        find("secret_isolation").outcome,
        Outcome::Pass,
        "{:?}",
        find("secret_isolation").message
    );
    assert!(find("secret_leaks_are_redacted").outcome.is_fail());
    let written = common::all_files_text(&records);
    assert!(written.contains("[redacted]"), "the leaks were written, redacted");
    assert!(
        !written.contains(CHECK_SECRET) && !written.contains(AGENT_SECRET),
        "a secret value reached a file under the record directory"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn images_are_built_once_by_content_digest_and_reused() {
    require_docker!();
    // A step unique to this test run, so the first attempt really builds.
    let marker = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let step = format!("echo {marker} > /built-marker");
    let eval = Eval::new("install_image", |c| {
        Box::pin(async move { expect(c.exec("cat /built-marker").await?).to_succeed() })
    })
    .environment(move || {
        Environment::new().image(Image::install("reeval/base:latest", [step.clone()]))
    })
    .trials(3);
    let runner = common::runner_with("images", |c| c.settings.test_threads = 3);
    let report = runner.run(vec![eval.clone()]).await.unwrap();
    let details: Vec<String> = report
        .records
        .iter()
        .map(|r| r.phases.iter().find(|p| p.phase == "image").unwrap().detail.clone())
        .collect();
    assert!(
        report.records.iter().all(|r| r.outcome == Outcome::Pass),
        "{:?}",
        report.records.iter().map(|r| &r.message).collect::<Vec<_>>()
    );
    // The runner ensures images while attempts wait for a slot, so the one
    // build happens either in an attempt's image phase or ahead of all of
    // them; either way every attempt uses the same image (a second build of
    // this step would be another image id) and at most one attempt built it.
    let built = details.iter().filter(|d| d.starts_with("built reeval/img:")).count();
    let hits = details.iter().filter(|d| d.starts_with("cache hit reeval/img:")).count();
    assert!(built <= 1 && built + hits == 3, "three concurrent attempts build once: {details:?}");
    let ids: std::collections::BTreeSet<&str> = details
        .iter()
        .map(|d| {
            d.split_once("(sha256:").and_then(|(_, r)| r.split_once(')')).expect("an image id").0
        })
        .collect();
    assert_eq!(ids.len(), 1, "one image for all three attempts: {details:?}");
    let again = common::runner("images2").run(vec![eval.trials(1)]).await.unwrap();
    let detail = &again.records[0].phases.iter().find(|p| p.phase == "image").unwrap().detail;
    assert!(detail.starts_with("cache hit reeval/img:") && detail.contains("ms"), "{detail}");
    let tag = report.records[0].image.clone().unwrap();
    let _ = HostCommand::new("docker").args(["rmi", "-f", &tag]).output();

    // A Dockerfile with its context directory.
    let ctx_dir = common::temp_dir("dockerfile");
    std::fs::write(ctx_dir.join("hello.txt"), "from the build context\n").unwrap();
    std::fs::write(ctx_dir.join("Dockerfile"), format!("FROM reeval/base:latest\nCOPY hello.txt /opt/hello.txt\nRUN echo {marker} > /opt/marker\n")).unwrap();
    let df = ctx_dir.join("Dockerfile");
    let eval = Eval::new("dockerfile_image", |c| {
        Box::pin(async move {
            expect(c.read_file("/opt/hello.txt").await?).to_equal("from the build context\n")
        })
    })
    .environment(move || Environment::new().image(Image::dockerfile(df.clone())));
    let report = common::runner("dockerfile").run(vec![eval]).await.unwrap();
    assert_eq!(report.records[0].outcome, Outcome::Pass, "{:?}", report.records[0].message);
    let _ = HostCommand::new("docker")
        .args(["rmi", "-f", report.records[0].image.as_deref().unwrap()])
        .output();

    // An image that is neither present nor buildable: preflight says so, nothing starts.
    let eval =
        Eval::new("missing_image", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(|| Environment::new().image(Image::from("reeval/does-not-exist:1")));
    let e = common::runner("missing").run(vec![eval]).await.unwrap_err();
    assert!(e.to_string().contains("failed to find image reeval/does-not-exist:1"), "{e}");
}

fn git(dir: &Path, args: &[&str]) {
    let out = HostCommand::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn workspaces_come_from_git_or_a_directory() {
    require_docker!();
    let root = common::temp_dir("git");
    let src = root.join("src");
    std::fs::create_dir_all(src.join("lib")).unwrap();
    std::fs::write(src.join("README.md"), "# fixture\n").unwrap();
    std::fs::write(src.join("lib/util.py"), "X = 1\n").unwrap();
    git(&src, &["init", "-q", "-b", "main"]);
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-qm", "one"]);
    std::fs::write(src.join("README.md"), "# fixture v2\n").unwrap();
    git(&src, &["commit", "-qam", "two"]);
    let bare = root.join("remote.git");
    git(&root, &["clone", "-q", "--bare", src.to_str().unwrap(), bare.to_str().unwrap()]);
    let url = bare.to_string_lossy().into_owned();

    let u = url.clone();
    let from_git = Eval::new("git_workspace", |c| {
        Box::pin(async move {
            expect(c.read_file("README.md").await?).to_equal("# fixture v2\n")?;
            expect(c.exec("git log --oneline | wc -l").await?.stdout.trim()).to_equal("1")?;
            expect(c.exec("git status --porcelain").await?.stdout).to_equal("")?;
            c.send("echo 'Y = 2' >> lib/util.py").await?;
            Ok(())
        })
    })
    .environment(move || {
        Environment::new().workspace(Workspace::git(u.clone(), "main").init(true))
    });
    let fixture = src.clone();
    let from_dir = Eval::new("dir_workspace", |c| {
        Box::pin(async move { expect(c.read_file("lib/util.py").await?).to_equal("X = 1\n") })
    })
    .environment(move || Environment::new().workspace(Workspace::dir(fixture.join("."))));
    let broken =
        Eval::new("bad_remote", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(|| {
                Environment::new().workspace(Workspace::git("/nonexistent/remote.git", "main"))
            });
    let report = common::runner_with("git", |c| c.settings.test_threads = 3)
        .run(vec![from_git, from_dir, broken])
        .await
        .unwrap();
    let find = |n: &str| report.records.iter().find(|r| r.eval == n).unwrap();
    let r = find("git_workspace");
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(
        r.final_diff.as_ref().unwrap().paths(),
        ["lib/util.py"],
        "the repository's files are in the snapshot, .git never shows"
    );
    assert!(
        r.phases.iter().any(|p| p.phase == "workspace" && p.detail.contains(".git of one commit"))
    );
    assert_eq!(find("dir_workspace").outcome, Outcome::Pass, "{:?}", find("dir_workspace").message);
    let r = find("bad_remote");
    assert_eq!(r.outcome, Outcome::InfraError);
    assert!(
        r.message
            .as_deref()
            .unwrap()
            .contains("failed to fetch workspace /nonexistent/remote.git at main"),
        "{:?}",
        r.message
    );
}

/// A harness that reports the prompt it got, to see what reached the agent.
#[derive(Debug)]
struct EchoPrompt(&'static str);

#[async_trait::async_trait]
impl reeval::Harness for EchoPrompt {
    fn name(&self) -> &str {
        "echo-prompt"
    }
    fn rules_file(&self) -> &str {
        self.0
    }
    async fn turn(
        &mut self,
        _s: &SandboxHandle,
        prompt: &str,
        _t: &TurnContext,
    ) -> Result<TurnReport, reeval::HarnessError> {
        Ok(TurnReport {
            final_message: Some(prompt.to_string()),
            events: 1,
            ..TurnReport::default()
        })
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn files_rules_setup_and_context_summary() {
    require_docker!();
    let blob: Vec<u8> = (0..=255u8).rev().cycle().take(70_000).collect();
    let blob_sha = Sha256::digest(&blob).iter().map(|b| format!("{b:02x}")).collect::<String>();
    let b = blob.clone();
    let env = move || {
        Environment::new()
            .file_with_mode("bin/tool.bin", b.clone(), 0o755)
            .file("/etc/reeval-given.conf", "outside the workspace\n")
            .rules("Always write tests.")
            .setup("echo first > setup-order.txt")
            .setup("echo second >> setup-order.txt")
            .context_summary(true)
            .image(Image::from("reeval/base:latest"))
    };
    let sha = blob_sha.clone();
    let given = Eval::new("files_and_setup", move |c| {
        let sha = sha.clone();
        Box::pin(async move {
            let out = c.exec("stat -c %a bin/tool.bin; sha256sum bin/tool.bin | cut -c1-64; cat /etc/reeval-given.conf setup-order.txt").await?;
            expect(out.stdout).to_equal(format!("755\n{sha}\noutside the workspace\nfirst\nsecond\n"))?;
            let turn = c.send("summarise").await?;
            expect(turn.final_message.unwrap_or_default()).to_contain("# What this task comes with")?;
            expect(c.read_file("CONTEXT.md").await?).to_contain("- File: bin/tool.bin")?;
            expect(c.diff().await?.files.len()).to_equal(0)?;
            Ok(())
        })
    })
    .harness("echo-prompt")
    .environment(env.clone());
    // Rules land in the file each harness reads.
    let mut evals = vec![given];
    for (harness, file) in [
        ("shell", "AGENTS.md"),
        ("claude-code:sonnet", "CLAUDE.md"),
        ("gemini", "GEMINI.md"),
        ("codex", "AGENTS.md"),
    ] {
        let e = env.clone();
        evals.push(
            Eval::new(format!("rules_for_{}", harness.split(':').next().unwrap()), move |c| {
                Box::pin(
                    async move { expect(c.read_file(file).await?).to_equal("Always write tests.") },
                )
            })
            .harness(harness)
            .environment(move || e().secret("REEVAL_T_AGENT_SECRET")),
        );
    }
    let slow = Eval::new("setup_step_timeout", |c| {
        Box::pin(async move { c.exec("true").await.map(|_| ()) })
    })
    .environment(|| {
        Environment::new()
            .setup("echo before")
            .setup_with_timeout("echo waiting; sleep 30", Duration::from_secs(1))
            .setup("echo never")
    });
    let dir = common::temp_dir("files");
    let file = env_file("files");
    let mut registry: HarnessRegistry = reeval::harness_registry();
    registry.register("echo-prompt", |_| Box::new(EchoPrompt("AGENTS.md")));
    let runner = Runner::new(
        RunConfig::from(Settings {
            record_dir: dir.join("runs"),
            infra_retries: 0,
            env_file: Some(file),
            // A test's setup images must not outlive it.
            setup_cache: false,
            ..Settings::default()
        }),
        registry,
    );
    let report = runner.run(evals.into_iter().chain([slow]).collect()).await.expect("preflight");
    for r in &report.records {
        if r.eval == "setup_step_timeout" {
            assert_eq!(r.outcome, Outcome::InfraError);
            let m = r.message.as_deref().unwrap();
            assert!(
                m.contains(
                    "failed to run setup step 2 `echo waiting; sleep 30`: timed out after 1s"
                ) && m.contains("waiting"),
                "{m}"
            );
            let log = std::fs::read_to_string(
                report.run_dir.join(r.artifacts_dir_name()).join("setup.log"),
            )
            .unwrap();
            assert!(
                log.contains("$ echo before\nbefore")
                    && log.contains("timed out")
                    && !log.contains("never"),
                "{log}"
            );
        } else {
            assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}", r.eval, r.message);
        }
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_oom_kill_is_reported_as_such() {
    require_docker!();
    let eval = Eval::new("oom", |c| {
        Box::pin(async move {
            let out =
                c.exec("python3 -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'").await?;
            expect(out).to_exit_with(137)
        })
    })
    .environment(|| Environment::new().memory(64 << 20).pids(64).cpus(0.5));
    let report = common::runner("oom").run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert!(r.checks[0].oom_killed, "{:?}", r.checks);
    assert!(
        r.events.iter().any(|e| e.message.contains("OOM kill") && e.message.contains("64 MiB")),
        "{:?}",
        r.events
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn preflight_lists_every_problem_and_starts_nothing() {
    require_docker!();
    let eval =
        Eval::new("misconfigured", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(|| {
                Environment::new()
                    .file("../escape.txt", "x")
                    .workspace(Workspace::dir("/nonexistent/fixture"))
                    .secret("REEVAL_T_NOT_SET_ONE")
                    .secret_for_checks("REEVAL_T_NOT_SET_TWO")
            });
    let runner = common::runner("preflight");
    let err = runner.run(vec![eval]).await.expect_err("preflight must fail");
    let all = err.missing.join("\n");
    for needle in [
        "`../escape.txt`",
        "/nonexistent/fixture does not exist",
        "REEVAL_T_NOT_SET_ONE",
        "REEVAL_T_NOT_SET_TWO",
    ] {
        assert!(all.contains(needle), "{needle} missing from:\n{all}");
    }
}

/// An in-process harness that tries to read a root-only file through its handle.
#[derive(Debug)]
struct Snooper;

#[async_trait::async_trait]
impl reeval::Harness for Snooper {
    fn name(&self) -> &str {
        "snooper"
    }
    async fn turn(
        &mut self,
        s: &SandboxHandle,
        _prompt: &str,
        _t: &TurnContext,
    ) -> Result<TurnReport, reeval::HarnessError> {
        let shadow = s
            .read_file("/etc/shadow")
            .await
            .map(|_| "read it".to_string())
            .unwrap_or_else(|e| e.to_string());
        s.write_file("mine.txt", b"agent-owned", 0o644).await?;
        let mine = String::from_utf8(s.read_file("mine.txt").await?).unwrap();
        Ok(TurnReport {
            final_message: Some(format!("{shadow}|{mine}")),
            events: 1,
            ..TurnReport::default()
        })
    }
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn an_in_process_harness_acts_with_the_agent_users_permissions() {
    require_docker!();
    let eval = Eval::new("snooping", |c| {
        Box::pin(async move {
            let turn = c.send("go").await?;
            expect(turn.final_message.unwrap_or_default()).to_equal(
                "failed to read /etc/shadow in the sandbox: no such file or directory|agent-owned",
            )?;
            expect(c.exec("stat -c %u mine.txt").await?.stdout).to_equal("1000\n")?;
            Ok(())
        })
    })
    .harness("snooper");
    let mut registry: HarnessRegistry = reeval::harness_registry();
    registry.register("snooper", |_| Box::new(Snooper));
    let runner = Runner::new(
        RunConfig::from(Settings {
            record_dir: common::temp_dir("snoop"),
            infra_retries: 0,
            setup_cache: false,
            ..Settings::default()
        }),
        registry,
    );
    let report = runner.run(vec![eval]).await.unwrap();
    assert_eq!(report.records[0].outcome, Outcome::Pass, "{:?}", report.records[0].message);
}
