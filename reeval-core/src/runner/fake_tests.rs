//! The runner on the in-memory fake backend: statistics and thresholds,
//! selection and resumption, preflight's checks, and what an attempt cut
//! short keeps (no kernel, milliseconds each).

use crate::settings::Settings;
use std::sync::Arc;
use std::time::Duration;

use crate::attempt::tests::{Script, scripted};
use crate::environment::Environment;
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::matchers::expect;
use crate::outcome::{FailKind, Outcome};
use crate::record::Record;
use crate::runner::{RunConfig, Runner};
use crate::sandbox::fake::{FakeBackend, FakeReply};
use crate::turn::TurnStatus;

fn config() -> RunConfig {
    let dir = std::env::temp_dir().join(format!(
        "reeval-runner-{}-{}",
        std::process::id(),
        crate::runner::new_run_id()
    ));
    RunConfig::from(Settings { record_dir: dir, infra_retries: 0, ..Settings::default() })
}

fn runner(backend: &FakeBackend, config: RunConfig) -> Runner {
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    Runner::new(config, harnesses).with_backend(Arc::new(backend.clone()))
}

/// Passes on every trial but the third.
fn flaky() -> Eval {
    Eval::new("flaky", |c| {
        Box::pin(async move {
            let trial = c.record().trial;
            expect(c.exec(format!("exit {}", u8::from(trial == 3))).await?).to_succeed()
        })
    })
    .harness("script")
    .trials(3)
}

#[tokio::test]
async fn a_min_pass_rate_turns_a_flaky_cell_green_and_the_exit_code_follows() {
    let backend = scripted();
    let report = runner(&backend, config()).run(vec![flaky()]).await.expect("preflight");
    assert_eq!(report.exit_code(), 1, "{}", report.summary.exit_reason);
    let cell = &report.summary.cells[0];
    assert_eq!((cell.passed, cell.failed, cell.ok), (2, 1, Some(false)));

    let report = runner(&backend, config()).run(vec![flaky().min_pass_rate(0.66)]).await.unwrap();
    assert_eq!(report.exit_code(), 0, "{}", report.summary.exit_reason);
    let cell = &report.summary.cells[0];
    assert_eq!((cell.min_pass_rate, cell.ok), (Some(0.66), Some(true)));
    assert!(report.summary.exit_reason.contains("by reaching its min pass rate"));
    assert!(report.records.iter().all(|r| r.min_pass_rate == Some(0.66)), "in every record");

    // The run's own threshold (`--min-pass-rate`) replaces the eval's.
    let strict = RunConfig::from(Settings { min_pass_rate: Some(0.9), ..config().settings });
    let report = runner(&backend, strict).run(vec![flaky().min_pass_rate(0.66)]).await.unwrap();
    assert_eq!(report.exit_code(), 1);
}

#[tokio::test]
async fn a_resumed_run_keeps_finished_trials_and_runs_the_rest() {
    let backend = scripted();
    let mut done = Record::new("run", "flaky", "script", 1, 1);
    done.outcome = Outcome::Pass;
    let mut cut = Record::new("run", "flaky", "script", 3, 1);
    cut.outcome = Outcome::InfraError;
    cut.interrupted = true;
    let report = runner(&backend, config())
        .resuming(vec![done, cut])
        .run(vec![flaky()])
        .await
        .expect("preflight");
    let ran: Vec<(u32, u32)> = report.records.iter().map(|r| (r.trial, r.try_)).collect();
    assert_eq!(ran.len(), 3, "{ran:?}");
    assert_eq!(backend.created(), 2, "trial 1 was kept; trials 2 and 3 ran");
    assert_eq!(
        (report.summary.passed, report.summary.failed.get("assertion")),
        (2, Some(&1)),
        "the summary covers the kept trial too"
    );
}

#[tokio::test]
async fn only_the_cells_asked_for_run() {
    let backend = scripted();
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    harnesses.register("other", |_| Box::new(Script));
    let eval = || {
        Eval::new("two", |c| Box::pin(async move { expect(c.exec("true").await?).to_succeed() }))
            .harness("script")
            .harness("other")
    };
    let report = Runner::new(config(), harnesses)
        .with_backend(Arc::new(backend.clone()))
        .only_cells(vec![("two".into(), "other".into())])
        .run(vec![eval()])
        .await
        .unwrap();
    let cells: Vec<&str> = report.records.iter().map(|r| r.harness.as_str()).collect();
    assert_eq!(cells, ["other"]);
}

#[tokio::test]
async fn an_unwritable_record_dir_stops_the_run_in_preflight() {
    // Before the fix: exit 0, no records, and a closing line naming records that do not exist.
    let file = std::env::temp_dir().join(format!("reeval-a-file-{}", std::process::id()));
    std::fs::write(&file, "").unwrap();
    for dir in ["/proc/reeval-records".into(), file.join("runs")] {
        let backend = scripted();
        let config = RunConfig::from(Settings { record_dir: dir.clone(), ..config().settings });
        let e = runner(&backend, config).run(vec![flaky()]).await.unwrap_err();
        assert!(
            e.missing.iter().any(|m| m.starts_with("failed to write records under")
                && m.contains(&dir.display().to_string())),
            "{e}"
        );
        assert_eq!(backend.created(), 0, "no sandbox started");
    }
}

#[tokio::test]
async fn a_missing_secret_says_where_secrets_come_from() {
    let backend = scripted();
    let eval = Eval::new("keyed", |_c| Box::pin(async { Ok(()) }))
        .harness("script")
        .environment(|| crate::Environment::new().secret("REEVAL_TEST_NEVER_SET"));
    let e = runner(&backend, config()).run(vec![eval]).await.unwrap_err().to_string();
    assert!(
        e.contains("REEVAL_TEST_NEVER_SET")
            && e.contains("env_file of reeval.toml")
            && e.contains("REEVAL_ENV_FILE")
            && e.contains("--skip keyed"),
        "{e}"
    );
}

#[tokio::test]
async fn failures_name_the_line_of_the_call() {
    let backend = scripted();
    let missing = Eval::new("missing", |c| {
        Box::pin(async move {
            c.read_file("nope.txt").await?;
            Ok(())
        })
    })
    .harness("script");
    let panics = Eval::new("panics", |c| {
        Box::pin(async move {
            c.exec("true").await?;
            panic!("boom");
        })
    })
    .harness("script");
    let report = runner(&backend, config()).run(vec![missing, panics]).await.unwrap();
    let find = |n: &str| report.records.iter().find(|r| r.eval == n).expect("record");
    let at = find("missing").location.clone().unwrap_or_default();
    assert!(at.starts_with("c.read_file() at reeval-core/src/runner/fake_tests.rs:"), "{at}");
    let at = find("panics").location.clone().unwrap_or_default();
    assert!(at.starts_with("reeval-core/src/runner/fake_tests.rs:"), "{at}");
    let message = find("panics").message.clone().unwrap_or_default();
    assert!(message.starts_with(&format!("the eval panicked at {at}: boom")), "{message}");
}

/// A fake whose turns (`say …`) take 5 seconds.
fn slow_turns() -> FakeBackend {
    FakeBackend::new().on_exec(move |exec, _files| match exec.argv.last().map(String::as_str) {
        Some(script) if script.starts_with("say ") => FakeReply::Sleep(Duration::from_secs(5)),
        _ => FakeReply::ok(""),
    })
}

#[tokio::test]
async fn a_turn_that_overran_is_recorded_even_when_its_diff_outlasts_the_grace() {
    // Before the fix the aborted turn was missing (`turns: []`) when its diff was slow.
    // Takes the abort grace (15 s): the turn's diff (the first read of the workspace)
    // outlasts it on purpose, as with thousands of files written.
    let backend = slow_turns().slow_download(0, Duration::from_secs(30));
    let eval = Eval::new("overran", |c| {
        Box::pin(async move {
            c.send("say working").await?;
            Ok(())
        })
    })
    .harness("script")
    .timeout(Duration::from_millis(300));
    let report = runner(&backend, config()).run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Fail(FailKind::Timeout), "{:?}", r.message);
    assert_eq!(r.turns.len(), 1, "the turn that started is in the record");
    assert_eq!(r.turns[0].status, TurnStatus::Aborted);
    assert_eq!(r.turns[0].prompt, "say working");
    let message = r.message.clone().unwrap_or_default();
    assert!(
        message.contains("while c.send() at reeval-core/src/runner/fake_tests.rs:"),
        "{message}"
    );
}

#[tokio::test]
async fn an_interrupted_turn_is_kept_as_interrupted() {
    // Before the fix Ctrl-C during a turn left `turns: []`.
    let backend = slow_turns();
    let eval = Eval::new("stopped", |c| {
        Box::pin(async move {
            c.send("say working").await?;
            Ok(())
        })
    })
    .harness("script");
    let runner = runner(&backend, config());
    let shutdown = runner.shutdown_token();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        shutdown.cancel();
    });
    let report = runner.run(vec![eval]).await.unwrap();
    let r = &report.records[0];
    assert!(r.interrupted);
    assert_eq!(r.outcome, Outcome::InfraError);
    assert_eq!(r.turns.len(), 1, "{:?}", r.turns);
    assert_eq!(r.turns[0].status, TurnStatus::Interrupted);
    assert_eq!(backend.live(), 0, "torn down");
}

/// Without the feature, asking for Kubernetes stops the run in preflight and says what to build.
#[cfg(not(feature = "kubernetes"))]
#[tokio::test]
async fn kubernetes_without_the_feature_is_a_preflight_miss() {
    let config = RunConfig::from(Settings {
        backend: crate::sandbox::BackendConfig::Kubernetes(Default::default()),
        ..config().settings
    });
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    let e = Runner::new(config, harnesses).run(vec![flaky()]).await.unwrap_err().to_string();
    assert!(e.contains("`kubernetes` feature"), "{e}");
}

/// A backend whose sandboxes report `state` once a command containing `lose` ran (exit 137).
fn losing(state: crate::sandbox::SandboxState) -> FakeBackend {
    let backend = FakeBackend::new();
    let shared = backend.clone();
    backend.on_exec(move |exec, _| {
        if exec.line().contains("lose") {
            shared.set_state(state.clone());
            FakeReply::fail(137, "")
        } else {
            FakeReply::ok("")
        }
    })
}

#[tokio::test]
async fn a_step_that_failed_in_a_lost_sandbox_is_an_infra_error_and_oom_stays_named() {
    use crate::sandbox::SandboxState;
    let check = || {
        Eval::new("check", |c| Box::pin(async move { expect(c.exec("lose").await?).to_succeed() }))
            .harness("script")
    };
    let turn = || {
        Eval::new("turn", |c| {
            Box::pin(async move {
                c.send("lose").await?;
                Ok(())
            })
        })
        .harness("script")
    };
    let killed = SandboxState::Stopped { exit_code: Some(137), oom_killed: false };
    for (state, eval, outcome, says) in [
        (killed.clone(), check(), Outcome::InfraError, "failed to run the check: the sandbox fake"),
        (
            killed,
            turn(),
            Outcome::InfraError,
            "stopped (exit 137, container not running) during turn 1",
        ),
        (SandboxState::Paused, check(), Outcome::InfraError, "was paused"),
        (
            SandboxState::Restarted { how: "restart count 1".into() },
            turn(),
            Outcome::InfraError,
            "was restarted (restart count 1) during turn 1",
        ),
        (SandboxState::Gone, check(), Outcome::InfraError, "was removed"),
        // The agent's memory use stays the agent's; a sandbox that runs, the command's result.
        (
            SandboxState::Stopped { exit_code: Some(137), oom_killed: true },
            turn(),
            Outcome::Fail(FailKind::Agent),
            "",
        ),
        (SandboxState::Running, check(), Outcome::Fail(FailKind::Assertion), "exit code 137"),
    ] {
        let backend = losing(state.clone());
        let report = runner(&backend, config()).run(vec![eval]).await.expect("preflight");
        let r = &report.records[0];
        let message = r.message.as_deref().unwrap_or("");
        assert_eq!(r.outcome, outcome, "{state:?}: {message}");
        assert!(message.contains(says), "{state:?}: {message}");
        assert_eq!(backend.live(), 0, "destroyed");
    }
}

#[tokio::test]
async fn an_unknown_harness_is_named_once_with_the_nearest_known_one() {
    // Before the fix: "harness `scirpt` of eval flaky is not known", once per eval, no suggestion.
    let backend = scripted();
    let named = RunConfig::from(Settings { harnesses: vec!["scirpt".into()], ..config().settings });
    let two = vec![flaky(), Eval::new("other", |_c| Box::pin(async { Ok(()) }))];
    let e = runner(&backend, named).run(two).await.unwrap_err();
    assert_eq!(e.missing.len(), 1, "{e}");
    assert!(
        e.missing[0].starts_with("harness `scirpt` (from --harness")
            && e.missing[0].contains("did you mean `script`? known: script"),
        "{e}"
    );
    let own = Eval::new("own", |_c| Box::pin(async { Ok(()) })).harness("shcript:model");
    let e = runner(&backend, config()).run(vec![own]).await.unwrap_err().to_string();
    assert!(
        e.contains("harness `shcript:model` of eval own") && e.contains("did you mean `script`")
    );
    let far = Eval::new("far", |_c| Box::pin(async { Ok(()) })).harness("claude-code");
    let e = runner(&backend, config()).run(vec![far]).await.unwrap_err().to_string();
    assert!(e.contains("is not known; known: script") && !e.contains("did you mean"), "{e}");
    assert_eq!(backend.created(), 0, "nothing started");
}

// Moved from the settings' tests: settings name nothing of the runner.
#[tokio::test]
async fn preflight_names_an_env_file_that_does_not_exist() {
    let config = RunConfig::from(Settings {
        env_file: Some(std::path::PathBuf::from("/nonexistent/suite.env")),
        ..Settings::default()
    });
    let runner = crate::runner::Runner::new(config, crate::harness::HarnessRegistry::new());
    let e = runner.run(Vec::new()).await.unwrap_err();
    assert!(
        e.missing
            .iter()
            .any(|m| m.starts_with("failed to read the env file /nonexistent/suite.env")),
        "{e}"
    );
}

#[tokio::test]
async fn the_environment_is_built_once_per_eval_however_many_attempts_and_harnesses() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let built = Arc::new(AtomicUsize::new(0));
    let counted = |trials: u32, harnesses: &[&str]| {
        let built = built.clone();
        let mut eval = Eval::new("counted", |c| {
            Box::pin(async move { expect(c.exec("exit 0").await?).to_succeed() })
        })
        .trials(trials)
        .environment(move || {
            built.fetch_add(1, Ordering::SeqCst);
            crate::environment::Environment::new().env("COUNTED", "yes")
        });
        for h in harnesses {
            eval = eval.harness(*h);
        }
        eval
    };
    let backend = scripted();
    // One slot and containers made ahead: preflight, dispatch, prestart and
    // every attempt all read the one plan of the cell.
    let config = RunConfig::from(Settings { test_threads: 1, prestart: 2, ..config().settings });
    let report = runner(&backend, config).run(vec![counted(5, &["script"])]).await.unwrap();
    assert_eq!(report.records.len(), 5);
    assert_eq!(report.exit_code(), 0, "{}", report.summary.exit_reason);
    assert_eq!(
        built.load(Ordering::SeqCst),
        1,
        "the environment's function ran once for 5 attempts"
    );

    built.store(0, Ordering::SeqCst);
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    harnesses.register("other", |_| Box::new(Script));
    let report = Runner::new(config_two(), harnesses)
        .with_backend(Arc::new(backend.clone()))
        .run(vec![counted(3, &["script", "other"])])
        .await
        .unwrap();
    assert_eq!(report.records.len(), 6);
    assert_eq!(built.load(Ordering::SeqCst), 1, "once for the eval's two cells");
}

fn config_two() -> RunConfig {
    RunConfig::from(Settings { test_threads: 2, ..config().settings })
}

/// A harness of another name that runs the eval's reference solution: the hook decides, not the name.
#[derive(Debug)]
struct Solver;

#[async_trait::async_trait]
impl crate::harness::Harness for Solver {
    fn name(&self) -> &str {
        "solver"
    }

    fn runs_reference_solution(&self) -> bool {
        true
    }

    async fn turn(
        &mut self,
        _sandbox: &crate::sandbox::SandboxHandle,
        _prompt: &str,
        _turn: &crate::harness::TurnContext,
    ) -> Result<crate::turn::TurnReport, crate::harness::HarnessError> {
        Ok(crate::turn::TurnReport {
            status: TurnStatus::Completed,
            events: 1,
            ..Default::default()
        })
    }
}

#[tokio::test]
async fn a_harness_that_runs_the_reference_solution_runs_it_at_the_first_send() {
    let solved = Eval::new("solved", |c| {
        Box::pin(async move {
            c.send("solve it").await?;
            expect(c.exec("exit 0").await?).to_succeed()
        })
    })
    .oracle(|c| Box::pin(async move { c.write_file("solution.txt", "done").await }))
    .harness("solver");
    let unsolved = Eval::new("unsolved", |c| {
        Box::pin(async move {
            c.send("solve it").await?;
            Ok(())
        })
    })
    .harness("solver");
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("solver", |_| Box::new(Solver));
    let report = Runner::new(config(), harnesses)
        .with_backend(Arc::new(scripted()))
        .run(vec![solved, unsolved])
        .await
        .unwrap();
    let of = |eval: &str| report.records.iter().find(|r| r.eval == eval).unwrap();
    let solved = of("solved");
    assert_eq!(solved.outcome, Outcome::Pass, "{:?}", solved.message);
    let files: Vec<&str> = solved.turns[0].diff.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["solution.txt"], "the turn's diff is the solution's work");
    let unsolved = of("unsolved");
    assert_eq!(unsolved.outcome, Outcome::Config);
    assert!(unsolved.message.as_deref().unwrap().contains("names no reference solution"));
}

/// `[images]` reaches the image a variant names (`--compare`): the map is
/// applied to each cell's environment after its variant's change, a
/// Dockerfile's `FROM` included, and each record names what was mapped.
#[tokio::test]
async fn images_a_variant_names_are_mapped_too() {
    use crate::environment::{Environment, Image, ImageSpec};
    let dir = config().settings.record_dir.with_extension("dockerfile");
    std::fs::create_dir_all(&dir).unwrap();
    let dockerfile = dir.join("Dockerfile");
    std::fs::write(&dockerfile, "FROM debian:12 AS base\nFROM base\n").unwrap();
    let eval = Eval::new("mapped", |c| {
        Box::pin(async move { expect(c.exec("true").await?).to_succeed() })
    })
    .harness("script")
    .environment(|| Environment::new().image(Image::from("ubuntu:24.04")));
    let in_variant = dockerfile.clone();
    let variant = crate::compare::Variant::new("own_image", move |env| {
        env.image(Image::dockerfile(in_variant.clone()))
    });
    let images = [("ubuntu:24.04", "mirror/ubuntu:24.04"), ("debian:12", "mirror/debian:12")];
    let config = RunConfig {
        compare: Some(crate::compare::Arms::Variants(crate::compare::Variant::control(), variant)),
        ..RunConfig::from(Settings {
            images: crate::image_map::ImageMap::new(
                &images.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
            )
            .unwrap(),
            ..config().settings
        })
    };
    let backend = scripted();
    let report = runner(&backend, config).run(vec![eval]).await.expect("preflight");
    let arm = |name: &str| {
        report.records.iter().find(|r| r.arm.as_deref() == Some(name)).expect("a record").clone()
    };
    let control = arm("control");
    assert_eq!(control.outcome, Outcome::Pass, "{:?}", control.message);
    assert_eq!(control.image.as_deref(), Some("mirror/ubuntu:24.04"));
    assert_eq!(control.image_mapped_from.as_deref(), Some("ubuntu:24.04"));
    let own = arm("own_image");
    assert_eq!(own.outcome, Outcome::Pass, "{:?}", own.message);
    assert_eq!(own.image_mapped_from.as_deref(), Some("debian:12"));
    let phase = own.phases.iter().find(|p| p.phase == crate::phase::Phase::Image).unwrap();
    assert!(
        phase.detail.contains("its Dockerfile names debian:12; [images] maps them"),
        "{}",
        phase.detail
    );
    // The build gets the rewritten text; the file on disk is the user's still.
    let rewritten = ImageSpec::DockerfileText {
        path: dockerfile.clone(),
        text: "FROM mirror/debian:12 AS base\nFROM base\n".into(),
    };
    assert!(backend.images().contains(&rewritten), "{:?}", backend.images());
    assert_eq!(
        std::fs::read_to_string(&dockerfile).unwrap(),
        "FROM debian:12 AS base\nFROM base\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A judge's key is resolved apart from the cell's secrets: no broker, sandbox
/// or check can take it from there, and the run's redactor still masks it.
#[tokio::test]
async fn a_judges_key_is_kept_apart_from_the_cells_secrets() {
    use crate::secrets::ExposeSecret;
    let dir = std::env::temp_dir().join(format!("reeval-judge-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let env_file = dir.join("keys.env");
    std::fs::write(&env_file, "OPENAI_API_KEY=sk-judge-from-file\nREEVAL_TEST_TOKEN=tok-1\n")
        .unwrap();
    let backend = scripted();
    let eval = Eval::new("judged", |_c| Box::pin(async { Ok(()) }))
        .harness("script")
        .judge("openai:gpt-4.1")
        .environment(|| crate::Environment::new().secret("REEVAL_TEST_TOKEN"));
    let runner = runner(
        &backend,
        RunConfig::from(Settings { env_file: Some(env_file), ..config().settings }),
    );
    let ready = super::preflight::preflight(&runner, &[eval]).await.expect("preflight passes");
    let plan = &ready.plans[0][0];
    let names = |s: &[crate::secrets::Secret]| s.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&plan.secrets), ["REEVAL_TEST_TOKEN"]);
    assert!(names(&plan.judge_keys).contains(&"OPENAI_API_KEY".to_string()));
    let key = plan.judge_keys.iter().find(|s| s.name == "OPENAI_API_KEY").unwrap();
    let key = key.value.expose_secret().to_string();
    assert!(!ready.redactor.redact(&format!("key={key}")).contains(&key));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Evals that cannot run take no slot and start nothing, but keep their
/// turn in the plan's order: the evals after them run (a run of one slot
/// would wait for ever on a turn never taken).
#[tokio::test]
async fn evals_that_cannot_run_are_config_outcomes_and_the_rest_run() {
    let backend = FakeBackend::new();
    let dir = std::env::temp_dir().join(format!("reeval-cannot-run-{}", std::process::id()));
    let config = RunConfig::from(Settings {
        record_dir: dir.clone(),
        harnesses: vec!["shell".into()],
        test_threads: 1,
        trials: Some(2),
        ..Settings::default()
    });
    let mut harnesses = crate::harness::HarnessRegistry::new();
    harnesses.register("shell", |_| Box::new(crate::oracle::OracleHarness));
    let runner = Runner::new(config, harnesses).with_backend(Arc::new(backend.clone()));
    let ok = |name: &str| Eval::new(name, |_c| Box::pin(async { Ok(()) }));
    let evals = vec![
        Eval::cannot_run("broken", "failed to parse task.toml of Harbor task broken"),
        ok("fine_a"),
        Eval::cannot_run("unsupported", "a task that asks for GPUs"),
        ok("fine_b"),
    ];
    let report = tokio::time::timeout(std::time::Duration::from_secs(30), runner.run(evals))
        .await
        .expect("the run ends")
        .expect("preflight passes");
    let mut got: Vec<(String, Outcome)> =
        report.records.iter().map(|r| (r.eval.clone(), r.outcome)).collect();
    got.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        got,
        [
            ("broken".into(), Outcome::Config),
            ("broken".into(), Outcome::Config),
            ("fine_a".into(), Outcome::Pass),
            ("fine_a".into(), Outcome::Pass),
            ("fine_b".into(), Outcome::Pass),
            ("fine_b".into(), Outcome::Pass),
            ("unsupported".into(), Outcome::Config),
            ("unsupported".into(), Outcome::Config),
        ]
    );
    let broken = report.records.iter().find(|r| r.eval == "broken").unwrap();
    assert_eq!(broken.message.as_deref(), Some("failed to parse task.toml of Harbor task broken"));
    assert!(broken.phases.is_empty(), "nothing started: {:?}", broken.phases);
    assert_eq!(backend.created(), 0, "the fine evals start no sandbox either");
    assert_eq!(report.exit_code(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An eval refused alone: a fault of its own found in preflight (here, a
/// secret the host lacks) makes its cells config outcomes and the run goes
/// on; the same fault of an eval not refused alone stops the run.
#[tokio::test]
async fn an_eval_refused_alone_does_not_stop_the_run() {
    let dir = std::env::temp_dir().join(format!("reeval-refuse-alone-{}", std::process::id()));
    let run = |alone: bool| {
        let backend = FakeBackend::new();
        let config = RunConfig::from(Settings {
            record_dir: dir.clone(),
            harnesses: vec!["shell".into()],
            ..Settings::default()
        });
        let mut harnesses = crate::harness::HarnessRegistry::new();
        harnesses.register("shell", |_| Box::new(crate::oracle::OracleHarness));
        let runner = Runner::new(config, harnesses).with_backend(Arc::new(backend));
        let needs_secret = Eval::new("needs_secret", |_c| Box::pin(async { Ok(()) }))
            .environment(|| Environment::new().secret("REEVAL_SURELY_UNSET_SECRET_42"))
            .refuse_alone(alone);
        let fine = Eval::new("fine", |_c| Box::pin(async { Ok(()) }));
        async move { runner.run(vec![needs_secret, fine]).await }
    };
    let e = run(false).await.expect_err("the run stops").to_string();
    assert!(e.contains("secret REEVAL_SURELY_UNSET_SECRET_42 of eval needs_secret"), "{e}");
    let report = run(true).await.expect("the run goes on");
    let refused = report.records.iter().find(|r| r.eval == "needs_secret").unwrap();
    assert_eq!(refused.outcome, Outcome::Config);
    let message = refused.message.as_deref().unwrap_or_default();
    assert!(
        message
            .starts_with("failed to run eval needs_secret: secret REEVAL_SURELY_UNSET_SECRET_42"),
        "{message}"
    );
    assert_eq!(report.records.iter().find(|r| r.eval == "fine").unwrap().outcome, Outcome::Pass);
    let _ = std::fs::remove_dir_all(&dir);
}
