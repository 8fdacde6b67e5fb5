//! Harbor tasks as evals, against the real Docker engine: the tasks under
//! `tests/harbor/tasks/` (written for these tests, FROM reeval/base so they
//! build offline), each run with the oracle (`solution/solve.sh`) and with the
//! scripted shell agent (the shell harness runs `instruction.md` as a bash
//! script), their outcomes, rewards and artifacts checked against what
//! Harbor 0.26's semantics say.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use reeval::{FailKind, Outcome, Record, TurnStatus};

fn tasks_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/tasks")
}

/// Runs every test task with `harness`; the records by eval name, and the run dir.
async fn run_all(harness: &str) -> (BTreeMap<String, Record>, PathBuf) {
    let evals = reeval::harbor::tasks(tasks_dir()).expect("the test tasks load");
    let runner = common::runner_with(&format!("harbor-{harness}"), |c| {
        c.settings.harnesses = vec![harness.to_string()];
        c.settings.test_threads = 3;
    });
    let report = runner.run(evals).await.expect("preflight passes");
    let records: BTreeMap<String, Record> =
        report.records.iter().map(|r| (r.eval.clone(), r.clone())).collect();
    assert_eq!(records.len(), 8, "one attempt per task, none retried: {:?}", records.keys());
    (records, report.run_dir)
}

fn reward(r: &Record) -> BTreeMap<String, f64> {
    r.reward.clone().unwrap_or_else(|| panic!("{} has no reward: {:?}", r.eval, r.message))
}

fn one(key: &str, value: f64) -> BTreeMap<String, f64> {
    BTreeMap::from([(key.to_string(), value)])
}

/// A file of a captured log directory (`logs-agent`, `logs-verifier`, `logs-artifacts`).
fn captured(run_dir: &Path, r: &Record, capture: &str, file: &str) -> Option<String> {
    let listed = r
        .artifacts
        .iter()
        .find(|a| a.contains(&format!("captures/{capture}")))
        .unwrap_or_else(|| panic!("{}: no capture {capture} in {:?}", r.eval, r.artifacts));
    let tar = std::fs::read(run_dir.join(r.artifacts_dir_name()).join(listed))
        .expect("the capture is on disk");
    let mut archive = tar::Archive::new(tar.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        if path.trim_end_matches('/').ends_with(&format!("/{file}")) || path == file {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
            return Some(text);
        }
    }
    None
}

fn record_json(run_dir: &Path, r: &Record) -> serde_json::Value {
    common::json(&run_dir.join(r.file_name()))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_oracle_solves_every_gradable_task() {
    require_docker!();
    let (r, run_dir) = run_all("oracle").await;

    let hello = &r["hello-shell"];
    assert_eq!(hello.outcome, Outcome::Pass, "{:?}", hello.message);
    assert_eq!(reward(hello), one("reward", 1.0));
    assert_eq!(hello.tags, ["shell", "smoke"], "[task].keywords are the tags");
    assert_eq!(record_json(&run_dir, hello)["reward"], serde_json::json!({"reward": 1.0}));
    let agent = |name: &str| captured(&run_dir, hello, "logs-agent", name);
    assert_eq!(agent("frontend.txt").as_deref(), Some("noninteractive\n"));
    assert_eq!(agent("oracle-saw-tests.txt"), None, "/tests is copied in only after the agent");
    assert!(agent("oracle.txt").is_some(), "solve.sh's output is in /logs/agent/oracle.txt");
    assert_eq!(agent("exit-code.txt"), None, "solve.sh exited 0");
    assert_eq!(
        agent("home.txt").as_deref(),
        Some("/root\n"),
        "HOME is its user's, as docker exec -u sets it"
    );
    let verifier = |name: &str| captured(&run_dir, hello, "logs-verifier", name);
    assert_eq!(verifier("cwd.txt").as_deref(), Some("/app\n"), "the verifier runs in the workdir");
    assert_eq!(verifier("test-stdout.txt").as_deref(), Some("checked greeting\n"));
    assert_eq!(verifier("reward.txt").as_deref(), Some("1\n"));

    let python = &r["python_reward-txt"];
    assert_eq!(python.outcome, Outcome::Pass, "{:?}", python.message);
    assert_eq!(reward(python), one("reward", 1.0));
    assert_eq!(
        captured(&run_dir, python, "logs-verifier", "user.txt").as_deref(),
        Some("nobody\n"),
        "test.sh runs as [verifier].user"
    );
    assert_eq!(
        captured(&run_dir, python, "logs-verifier", "home.txt").as_deref(),
        Some("/nonexistent\n"),
        "with its HOME from /etc/passwd, not the agent's"
    );

    let multi = &r["multi-key-json"];
    assert_eq!(multi.outcome, Outcome::Pass, "{:?}", multi.message);
    let expected: BTreeMap<String, f64> =
        [("accuracy", 0.75), ("files", 2.0), ("reward", 1.0)].map(|(k, v)| (k.into(), v)).into();
    assert_eq!(reward(multi), expected, "reward.json wins over reward.txt, every key kept");
    assert_eq!(captured(&run_dir, multi, "logs-artifacts", "note.txt").as_deref(), Some("kept\n"));
    // Declared `artifacts`: a file and a directory relative to the workdir; a missing path is left out.
    let notes = multi.artifacts.iter().find(|a| a.contains("artifact-tmp-agent-notes"));
    let notes = notes.unwrap_or_else(|| panic!("{:?}", multi.artifacts));
    let notes =
        std::fs::read_to_string(run_dir.join(multi.artifacts_dir_name()).join(notes)).unwrap();
    assert!(notes.contains("oracle was here"), "{notes}");
    assert_eq!(
        captured(&run_dir, multi, "artifact-workspace-out", "result.txt").as_deref(),
        Some("result\n")
    );
    assert!(!multi.artifacts.iter().any(|a| a.contains("nowhere")), "{:?}", multi.artifacts);

    let fails = &r["solve-fails"];
    assert_eq!(
        fails.outcome,
        Outcome::Pass,
        "a failing solve.sh is not the verdict: {:?}",
        fails.message
    );
    assert_eq!(reward(fails), one("reward", 1.0), "[solution].env reached solve.sh");
    assert_eq!(captured(&run_dir, fails, "logs-agent", "exit-code.txt").as_deref(), Some("3"));

    let timeout = &r["agent-timeout"];
    assert_eq!(
        timeout.outcome,
        Outcome::Pass,
        "graded after the agent's timeout: {:?}",
        timeout.message
    );
    assert_eq!(
        captured(&run_dir, timeout, "logs-agent", "exit-code.txt").as_deref(),
        Some("timeout")
    );

    // Multi-step: each step's solution (the task's for a step without one), all rewards 1.
    let steps = &r["multi-step"];
    assert_eq!(steps.outcome, Outcome::Pass, "{:?}", steps.message);
    assert_eq!(reward(steps), one("reward", 1.0), "the mean of three 1.0s");
    assert_eq!(steps.turns.len(), 3, "one turn per step");
    let names: Vec<&str> = steps.step_rewards.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(names, ["write", "extend", "final"], "every step's reward is recorded");
    assert!(
        steps.step_rewards.iter().all(|s| s.reward == Some(one("reward", 1.0)) && s.note.is_none())
    );
    let env = captured(&run_dir, steps, "step-extend-logs-verifier", "env.txt");
    assert_eq!(
        env.as_deref(),
        Some("SHARED=from-task\nSTEP=extend\n"),
        "the step's env over the task's"
    );
    let listed = captured(&run_dir, steps, "step-extend-logs-verifier", "tests.txt").unwrap();
    assert_eq!(
        listed, "common.sh\ntest.sh\n",
        "/tests emptied between steps, the task's tests merged"
    );

    let none = &r["no-reward"];
    assert_eq!(none.outcome, Outcome::Config, "not the agent's: {:?}", none.message);
    let message = none.message.clone().unwrap_or_default();
    assert!(
        message.contains("failed to grade Harbor task reeval-tests/no-reward")
            && message.contains("no reward file found"),
        "{message}"
    );
    assert_eq!(none.reward, None);
    assert!(
        captured(&run_dir, none, "logs-verifier", "test-stdout.txt")
            .is_some_and(|t| t.contains("forgets to write a reward")),
        "the verifier's output is kept to see why"
    );
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_scripted_shell_agent_is_graded_by_the_reward() {
    require_docker!();
    let (r, run_dir) = run_all("shell").await;

    let hello = &r["hello-shell"];
    assert_eq!(hello.outcome, Outcome::Pass, "{:?}", hello.message);
    assert_eq!(reward(hello), one("reward", 1.0));
    let agent = |name: &str| captured(&run_dir, hello, "logs-agent", name);
    assert_eq!(
        agent("visible.txt").as_deref(),
        Some(""),
        "no /tests nor /solution during the turn"
    );
    assert_eq!(agent("env.txt").as_deref(), Some("task-env\n"), "[environment].env, its default");
    assert_eq!(
        agent("cwd.txt").as_deref(),
        Some("/app\n"),
        "the agent starts in the task's workdir, which is the workspace"
    );
    // The workdir is the workspace: the image's files are in the snapshot, the agent's one new file is its diff.
    let diff = &hello.turns[0].diff;
    let paths: Vec<&str> = diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["greeting.txt"], "{paths:?}");

    let python = &r["python_reward-txt"];
    assert_eq!(python.outcome, Outcome::Fail(FailKind::Assertion), "{:?}", python.message);
    assert_eq!(reward(python), one("reward", 0.5), "half the checks pass");
    assert!(python.message.as_deref().unwrap_or("").contains("below 1"), "{:?}", python.message);

    let multi = &r["multi-key-json"];
    assert_eq!(multi.outcome, Outcome::Fail(FailKind::Assertion), "{:?}", multi.message);
    assert_eq!(reward(multi)["files"], 1.0);
    assert_eq!(reward(multi)["reward"], 0.0);

    let fails = &r["solve-fails"];
    assert_eq!(fails.turns[0].status, TurnStatus::Failed, "the script exited 4");
    assert_eq!(
        fails.outcome,
        Outcome::Pass,
        "a non-zero agent exit is graded: {:?}",
        fails.message
    );

    let timeout = &r["agent-timeout"];
    assert_eq!(timeout.turns[0].status, TurnStatus::TimedOut, "[agent].timeout_sec ended the turn");
    assert_eq!(timeout.outcome, Outcome::Pass, "{:?}", timeout.message);
    assert_eq!(reward(timeout), one("reward", 1.0));

    assert_eq!(r["no-reward"].outcome, Outcome::Config, "{:?}", r["no-reward"].message);

    // Multi-step: the agent passes "write", gets "extend" wrong, and its gate stops "final".
    let steps = &r["multi-step"];
    assert_eq!(steps.outcome, Outcome::Fail(FailKind::Assertion), "{:?}", steps.message);
    assert_eq!(reward(steps), one("reward", 0.5), "the mean over the two steps that ran");
    assert_eq!(steps.turns.len(), 2, "the gate stopped the third step before its turn");
    let message = steps.message.clone().unwrap_or_default();
    assert!(
        message.contains("write {\"reward\":1.0}, extend {\"reward\":0.0}; 2 of 3 ran"),
        "{message}"
    );
    assert!(!steps.artifacts.iter().any(|a| a.contains("step-final")), "{:?}", steps.artifacts);
    // Each step's reward is in the record, the gate that stopped the task said.
    let per_step: Vec<(&str, Option<f64>)> = steps
        .step_rewards
        .iter()
        .map(|s| (s.step.as_str(), s.reward.as_ref().map(|r| r["reward"])))
        .collect();
    assert_eq!(per_step, [("write", Some(1.0)), ("extend", Some(0.0))]);
    let gate = steps.step_rewards[1].note.clone().unwrap_or_default();
    assert!(
        gate.contains("below min_reward 1") && gate.contains("the steps after it were not run"),
        "{gate}"
    );
    assert_eq!(steps.step_rewards[0].note, None);
    assert_eq!(
        record_json(&run_dir, steps)["stepRewards"][0],
        serde_json::json!({"step": "write", "reward": {"reward": 1.0}})
    );
    assert_eq!(
        captured(&run_dir, steps, "step-write-logs-verifier", "reward.txt").as_deref(),
        Some("1\n"),
        "each step's verifier output is kept"
    );
    assert_eq!(
        captured(&run_dir, hello, "logs-verifier", "env.txt").as_deref(),
        Some("task-env\n"),
        "the verifier has [environment].env too"
    );

    // The cells' mean rewards, beside their pass rates, in the run's summary.
    let summary = common::json(&run_dir.join("summary.json"));
    let cell = |eval: &str| {
        summary["cells"].as_array().unwrap().iter().find(|c| c["eval"] == eval).unwrap().clone()
    };
    assert_eq!(cell("python_reward-txt")["reward"]["mean"], 0.5);
    assert_eq!(cell("python_reward-txt")["reward"]["threshold"], 1.0);
    assert_eq!(cell("python_reward-txt")["passRate"], 0.0);
    let keys = &cell("multi-key-json")["reward"]["keys"];
    assert_eq!(keys["files"]["mean"], 1.0, "every key of a multi-key reward: {keys:#}");
    assert!(cell("no-reward").get("reward").is_none(), "a config outcome is not graded");
    let slow = cell("verifier-timeout");
    assert!(slow.get("reward").is_none(), "a fail without a reward has no mean: {slow:#}");

    // A verifier past its limit leaves no reward, even one it wrote: a fail, said so.
    let slow = &r["verifier-timeout"];
    assert_eq!(slow.outcome, Outcome::Fail(FailKind::Assertion), "{:?}", slow.message);
    assert_eq!(slow.reward, None);
    let message = slow.message.clone().unwrap_or_default();
    assert!(message.contains("timed out after 2s"), "{message}");
}

#[test]
fn unsupported_tasks_and_unset_variables_are_refused_by_name() {
    let dir = common::temp_dir("harbor-refused");
    let task = |name: &str, toml: &str| {
        let t = dir.join(name);
        std::fs::create_dir_all(t.join("environment")).unwrap();
        std::fs::create_dir_all(t.join("tests")).unwrap();
        std::fs::write(t.join("task.toml"), toml).unwrap();
        std::fs::write(t.join("instruction.md"), "do it").unwrap();
        std::fs::write(t.join("environment/Dockerfile"), "FROM reeval/base:latest\n").unwrap();
        std::fs::write(t.join("tests/test.sh"), "echo 1 > /logs/verifier/reward.txt\n").unwrap();
        t
    };
    let steps = task("steps", "[task]\nname = \"o/steps\"\n[[steps]]\nname = \"one\"\n");
    let e = reeval::harbor::load(&steps).unwrap_err().to_string();
    assert!(e.contains("o/steps") && e.contains("steps/one/instruction.md"), "{e}");

    // Compose services load (tests/harbor_services.rs runs them); a key reeval
    // does not support is refused, naming the service and the key.
    let compose = task("compose", "[task]\nname = \"o/compose\"\n");
    let file = compose.join("environment/docker-compose.yaml");
    std::fs::write(&file, "services:\n  db:\n    image: postgres:16\n").unwrap();
    assert_eq!(reeval::harbor::tasks(&compose).expect("a service loads").len(), 1);
    std::fs::write(&file, "services:\n  db:\n    image: postgres:16\n    privileged: true\n")
        .unwrap();
    let e = reeval::harbor::load(&compose).unwrap_err().to_string();
    assert_eq!(
        e,
        "failed to load Harbor task o/compose: docker-compose.yaml service db: key `privileged` is not supported"
    );
    // Volumes load (tests/harbor_volumes.rs runs them); a bind mount of the host's files is refused.
    std::fs::write(
        &file,
        "services:\n  db:\n    image: postgres:16\n    volumes: [\"/etc:/etc-of-host:ro\"]\n",
    )
    .unwrap();
    let e = reeval::harbor::load(&compose).unwrap_err().to_string();
    assert!(e.contains("service db: volumes: `/etc` is outside the task's directory"), "{e}");
    std::fs::remove_file(&file).unwrap();

    // What cannot be had here: that task alone is refused, naming the feature.
    for (name, toml, says) in [
        ("windows", "[environment]\nos = \"windows\"", "an OS other than linux ([environment].os)"),
        ("gpus", "[environment]\ngpus = 1", "GPUs ([environment].gpus)"),
        ("verifier-gpus", "[verifier.environment]\ngpus = 2", "GPUs ([verifier.environment].gpus)"),
    ] {
        let t = task(name, &format!("[task]\nname = \"o/{name}\"\n{toml}\n"));
        let e = reeval::harbor::load(&t).unwrap_err();
        assert!(matches!(e, reeval::harbor::HarborError::Unsupported { .. }), "{e}");
        let e = e.to_string();
        assert!(e.contains(&format!("Harbor task o/{name}")) && e.contains(says), "{e}");
    }

    let unset = task(
        "unset",
        "[task]\nname = \"o/unset\"\n[verifier]\nenv = { TOKEN = \"${REEVAL_HARBOR_SURELY_UNSET_123}\" }\n",
    );
    let e = reeval::harbor::load(&unset).unwrap_err().to_string();
    assert!(
        e.starts_with("failed to resolve [verifier].env.TOKEN of Harbor task o/unset")
            && e.contains("REEVAL_HARBOR_SURELY_UNSET_123"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[path = "../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

/// `allowlist` is the gateway's allowlist for the agent and the verifier;
/// `public` reaches any host through the gateway; `no-network` is no way out at all. A loopback upstream stands in for the
/// hosts through the gateway's test-only `resolve` mapping.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn networks_go_through_the_gateway_or_nowhere() {
    require_docker!();
    let plain = upstreams::upstream(None, upstreams::Behaviour::Echo).await;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/network");
    let mut evals = reeval::harbor::tasks(&dir).expect("the network tasks load");
    // Its own test below: it reaches PyPI as this machine does.
    evals.retain(|e| e.name() != "pip-install");
    let runner = common::runner_with("harbor-network", |c| {
        c.settings.harnesses = vec!["shell".into()];
        c.egress = reeval::egress::EgressSettings {
            resolve: vec![
                ("plain.test".to_string(), plain.addr),
                ("refused.test".to_string(), plain.addr),
            ],
            ..Default::default()
        };
    });
    let report = runner.run(evals).await.expect("preflight passes");
    let r: BTreeMap<String, Record> =
        report.records.iter().map(|r| (r.eval.clone(), r.clone())).collect();

    let allow = &r["allowlist"];
    assert_eq!(allow.outcome, Outcome::Pass, "{:?}\negress: {:#?}", allow.message, allow.egress);
    assert_eq!(reward(allow), one("reward", 1.0));
    let paths: Vec<String> = plain.seen().iter().map(|s| s.uri.clone()).collect();
    assert!(paths.contains(&"/agent".to_string()), "the agent reached plain.test: {paths:?}");
    assert!(paths.contains(&"/verifier".to_string()), "so did the verifier: {paths:?}");
    assert!(!allow.egress.is_empty(), "the requests are recorded");

    let public = &r["public"];
    assert_eq!(public.outcome, Outcome::Pass, "{:?}\negress: {:#?}", public.message, public.egress);
    let paths: Vec<String> = plain.seen().iter().map(|s| s.uri.clone()).collect();
    for path in ["/public-agent", "/public-verifier"] {
        assert!(paths.contains(&path.to_string()), "public reaches any host: {paths:?}");
    }

    let none = &r["no-network"];
    assert_eq!(none.outcome, Outcome::Pass, "{:?}", none.message);
    assert!(none.egress.is_empty());
    assert_eq!(plain.seen().len(), paths.len(), "nothing came from the no-network task");
}

/// What `host` resolves to here, if every address is private or reserved
/// (a mirror's or an intercepting proxy's, as on the machines this runs on).
fn internal_addresses(host: &str) -> Result<Vec<std::net::IpAddr>, String> {
    use std::net::ToSocketAddrs;
    let found: Vec<std::net::IpAddr> = (host, 443)
        .to_socket_addrs()
        .map_err(|e| format!("{host} does not resolve here ({e})"))?
        .map(|a| a.ip())
        .collect();
    let internal = |ip: &std::net::IpAddr| match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_private()
                || v4.is_documentation()
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240
        }
        std::net::IpAddr::V6(v6) => v6.is_unique_local(),
    };
    if found.is_empty() || !found.iter().all(internal) {
        return Err(format!(
            "{host} resolves to {found:?} here, not to a mirror's private or reserved address"
        ));
    }
    Ok(found)
}

/// A verifier that `pip install`s, on a machine whose PyPI resolves to a
/// reserved address (every download goes through an intercepting proxy
/// there, whose CA this host trusts): refused without the opt-in, and the
/// failure names the refused host and what would open it; with the run's
/// opt-in for that address it reaches PyPI as Harbor's own run does, the
/// sandbox trusting what this host trusts.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_verifier_reaches_pypi_on_a_reserved_address_only_with_the_opt_in() {
    require_docker!();
    let mut opened = Vec::new();
    for host in ["pypi.org", "files.pythonhosted.org"] {
        match internal_addresses(host) {
            Ok(found) => opened.extend(found.iter().map(|ip| ip.to_string())),
            Err(why) => {
                assert!(
                    !common::docker_required(),
                    "{why}: this test needs PyPI behind a mirror or an intercepting proxy on a private or reserved address, as on the machines it runs on (REEVAL_REQUIRE_DOCKER=1: nothing may skip)"
                );
                eprintln!("SKIPPED, NOT TESTED: {why}");
                return;
            }
        }
    }
    opened.dedup();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/network/pip-install");
    let run = |tag: &'static str, allow_internal: Vec<String>| {
        let dir = dir.clone();
        async move {
            let evals = reeval::harbor::tasks(&dir).expect("the task loads");
            let runner = common::runner_with(tag, |c| {
                c.settings.harnesses = vec!["shell".into()];
                c.egress.allow_internal = allow_internal;
            });
            let report = runner.run(evals).await.expect("preflight passes");
            assert_eq!(common::containers_of_run(&report.run_id).await, 0);
            report.records[0].clone()
        }
    };

    let refused = run("harbor-pip-closed", Vec::new()).await;
    assert_eq!(reward(&refused), one("reward", 0.0), "{:?}", refused.message);
    assert!(matches!(refused.outcome, Outcome::Fail(_)), "{:?}", refused.outcome);
    let message = refused.message.clone().unwrap_or_default();
    assert!(
        message.contains("the egress gateway refused")
            && message.contains(&format!("pypi.org:443 (resolves to {}", opened[0]))
            && message.contains("open it with allow_internal (pypi.org or "),
        "the failure names the refused host and the opt-in: {message}"
    );
    assert!(message.contains("--allow-internal"), "{message}");

    let reached = run("harbor-pip-open", opened.clone()).await;
    assert_eq!(
        reached.outcome,
        Outcome::Pass,
        "{:?}\negress: {:#?}",
        reached.message,
        reached.egress
    );
    assert_eq!(reward(&reached), one("reward", 1.0));
    let pypi: Vec<_> = reached
        .egress
        .iter()
        .filter(|e| e.host == "pypi.org" || e.host == "files.pythonhosted.org")
        .collect();
    assert!(pypi.len() >= 2, "the index and the wheel: {:#?}", reached.egress);
    assert!(
        pypi.iter()
            .all(|e| e.allowed && e.internal.as_ref().is_some_and(|i| opened.contains(&i.addr))),
        "each recorded as opened by the opt-in: {pypi:#?}"
    );
}

/// A threshold other than 1.0 (`reeval harbor run --reward-threshold 0.5`):
/// the Python task's half reward under the scripted agent then passes, and
/// the record says what it had to reach.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_lower_reward_threshold_passes_a_half_reward() {
    require_docker!();
    let mut tasks = reeval::harbor::load(&tasks_dir().join("python-reward-txt")).unwrap();
    tasks[0].reward_threshold = 0.5;
    let evals = tasks.into_iter().map(|t| t.into_eval()).collect();
    let runner =
        common::runner_with("harbor-threshold", |c| c.settings.harnesses = vec!["shell".into()]);
    let report = runner.run(evals).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(reward(r), one("reward", 0.5));
    assert_eq!(r.outcome, Outcome::Pass, "0.5 reaches 0.5: {:?}", r.message);
    assert_eq!(r.reward_threshold, Some(0.5));
    let cell = report.summary.cells[0].reward.clone().expect("a mean reward");
    assert_eq!((cell.mean, cell.threshold), (0.5, Some(0.5)));
}

/// An image whose own user is not root (`USER nobody`): Harbor runs solve.sh
/// and test.sh as it, so their files are copied in by root in an exec of their
/// own and the scripts run apart (`together.rs` learns the image's user once).
/// The sandbox starts as root, so root's preparation (the agent user, the
/// logs' directories) keeps its capabilities.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_scripts_run_as_an_image_user_that_is_not_root() {
    require_docker!();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/harbor/users");
    let evals = reeval::harbor::tasks(&dir).expect("the task loads");
    let runner = common::runner_with("harbor-image-user", |c| {
        c.settings.harnesses = vec!["oracle".to_string()];
        c.settings.trials = Some(2);
        c.settings.test_threads = 1;
    });
    let report = runner.run(evals).await.expect("preflight passes");
    assert_eq!(report.records.len(), 2);
    for own in &report.records {
        assert_eq!(own.outcome, Outcome::Pass, "{:?}", own.message);
        let who = |capture: &str| captured(&report.run_dir, own, capture, "whoami.txt");
        assert_eq!(
            who("logs-agent").as_deref(),
            Some("nobody\n"),
            "solve.sh ran as the image's user"
        );
        assert_eq!(who("logs-verifier").as_deref(), Some("nobody\n"), "test.sh too");
    }
}
