//! The snapshot before a sandbox's first turn on a local engine (issue 29):
//! the diff helper is mounted read-only, and one session prepares the agent
//! user, becomes the helper's session and answers the first listing. With a
//! gateway, that session was started with the sandbox by its relay and waits
//! on the main process's stdin: no exec at all before the turn, one attach.
//! Without, it is one exec. Seen from the engine's own events; and what it
//! prepared holds (owners, the git repository noted).

mod common;

use reeval::prelude::*;
use reeval::{Eval, Outcome};

/// Runs the eval whose turn checks what the preparation did, with a gateway
/// or without: the run's execs before the turn's, or the check's where the
/// session starts the turn (the setup's apart), and its attaches.
async fn prepared_then_turn(gateway: bool) -> (Vec<String>, Vec<String>) {
    prepared_then_turn_in(gateway, None).await
}

/// [`prepared_then_turn`], in the image `image` when given.
async fn prepared_then_turn_in(
    gateway: bool,
    image: Option<std::path::PathBuf>,
) -> (Vec<String>, Vec<String>) {
    let mine = if image.is_some() { "image" } else { "base" };
    let run_id = format!("snapshot-exec-{}-{gateway}-{mine}", std::process::id());
    let since = common::events_since_now();
    let id = run_id.clone();
    let runner = common::runner_with("snapshot-exec", |c| c.settings.run_id = id);
    let eval = Eval::new("prepared", |c| {
        Box::pin(async move {
            // As the agent: the workspace, what the environment gave and its home are its own,
            // and it commits to the repository the environment made.
            let turn = c
                .send(
                    "stat -c %u:%g . given.txt .git /home/agent > owners.txt \
                     && echo work > work.txt && git add work.txt \
                     && git -c user.email=a@b -c user.name=a commit -qm work",
                )
                .await?;
            expect(turn.diff.paths()).to_equal(vec!["owners.txt", "work.txt"])?;
            expect(c.exec("cat owners.txt").await?.stdout).to_equal("1000:1000\n".repeat(4))?;
            Ok(())
        })
    })
    .environment(move || {
        let env = match &image {
            Some(dockerfile) => Environment::new().image(Image::dockerfile(dockerfile.clone())),
            None => Environment::new(),
        };
        let env = env.file("given.txt", "given\n").setup(
            "git init -q . && git add given.txt && git -c user.email=a@b -c user.name=a commit -qm base",
        );
        // A way out (to a host nothing asks for): the gateway's relay is the main process.
        if gateway { env.allow_egress("nothing.test") } else { env }
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    let events: Vec<&str> = r.events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {events:?}", r.message);
    // The workspace was noted as a git repository: the agent's commit is kept.
    assert!(
        r.artifacts.iter().any(|a| a == "workspace/commits.bundle"),
        "{:?} {events:?}",
        r.artifacts
    );
    let execs = common::execs_of_run(&report.run_id, since);
    // The turn's: the shell harness runs the agent's command (by an exec, or
    // started by the session waiting in the sandbox: `tests/turn_in_session.rs`);
    // then the check's.
    let turn = execs.iter().position(|e| e.contains("owners.txt")).expect("the turn's or check's");
    let before = execs[..turn].iter().filter(|e| !e.contains("git init")).cloned().collect();
    (before, common::engine_actions(&report.run_id, since, "attach"))
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn one_exec_prepares_the_agent_user_and_answers_the_first_listing() {
    require_docker!();
    let (before, attaches) = prepared_then_turn(false).await;
    assert_eq!(before.len(), 1, "one exec before the turn (the setup's apart): {before:#?}");
    assert!(
        before[0].contains("reeval-prepared") && before[0].contains("/run/reeval-diff/"),
        "the session from the mount, preparing first: {}",
        before[0]
    );
    assert!(attaches.is_empty(), "no attach without a relay: {attaches:?}");
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn with_a_gateway_the_session_waiting_in_the_sandbox_prepares_and_no_exec_does() {
    require_docker!();
    let (before, attaches) = prepared_then_turn(true).await;
    // Nor for the turn, which that session starts: the first exec is the check's.
    assert!(before.is_empty(), "no exec before the check (the setup's apart): {before:#?}");
    assert_eq!(attaches.len(), 1, "one attach, the snapshot's: {attaches:?}");
}

/// The Docker backend's side: a sandbox made with `main_stdin` has its main
/// process read the stdin that one attach writes, and whose output it reads;
/// a second attach, or one of a sandbox made without, is refused at once.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_main_process_reads_what_its_one_attach_writes() {
    use futures_util::StreamExt;
    use reeval::sandbox::{Backend, DockerBackend, Limits, NetworkSpec, SandboxSpec, Sweep};
    use tokio::io::AsyncWriteExt;
    require_docker!();
    let backend = DockerBackend::connect().await.expect("the engine answers");
    assert!(backend.capabilities().main_stdin);
    let run_id = format!("main-stdin-{}", std::process::id());
    let spec = |main_stdin: bool| SandboxSpec {
        image: "reeval/base:latest".into(),
        labels: std::collections::BTreeMap::from([
            ("dev.reeval.run".to_string(), run_id.clone()),
            ("dev.reeval.attempt".to_string(), "main.t1.try1".to_string()),
        ]),
        workdir: "/workspace".into(),
        limits: Limits::default(),
        network: NetworkSpec::None,
        main_process: Some(
            ["sh", "-c", "read l; echo \"main heard $l\"; exec sleep infinity"]
                .map(String::from)
                .to_vec(),
        ),
        main_stdin,
        ..Default::default()
    };
    let sandbox = backend.create(&spec(true)).await.expect("created");
    sandbox.start().await.expect("started");
    let mut stream = sandbox.attach_main().await.expect("attached");
    stream.input.write_all(b"hello\n").await.unwrap();
    stream.input.flush().await.unwrap();
    let mut said = Vec::new();
    while !said.ends_with(b"\n") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), stream.output.next())
            .await
            .expect("an answer within 10 s")
            .expect("the stream goes on")
            .expect("no engine error");
        said.extend_from_slice(&chunk);
    }
    assert_eq!(String::from_utf8_lossy(&said), "main heard hello\n");
    let Err(again) = sandbox.attach_main().await else { panic!("a second attach was taken") };
    assert!(again.to_string().contains("attached before"), "{again}");

    let without = backend.create(&spec(false)).await.expect("created");
    without.start().await.expect("started");
    assert!(without.attach_main().await.is_err(), "no stdin of its own");
    backend.sweep(Sweep::OwnRun(&run_id)).await.expect("sweep");
}

/// Where the prepared session cannot prepare (an image whose own user is
/// not root: its exec runs as that user), it is tried once, and the exec
/// that prepares as root does it: one exec of the session's script.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_session_that_cannot_prepare_is_tried_once() {
    require_docker!();
    let dir = common::temp_dir("snapshot-exec-nobody");
    let dockerfile = dir.join("Dockerfile");
    std::fs::write(&dockerfile, "FROM reeval/base:latest\nRUN mkdir -p /workspace && chown nobody /workspace\nWORKDIR /workspace\nUSER nobody\n")
        .unwrap();
    let (before, _) = prepared_then_turn_in(false, Some(dockerfile)).await;
    let sessions = before.iter().filter(|e| e.contains("reeval-session")).count();
    assert_eq!(sessions, 1, "the prepared session tried once: {before:#?}");
    assert!(
        before.iter().any(|e| e.contains("/run/reeval-diff/") && !e.contains("reeval-session")),
        "then the exec that prepares and lists: {before:#?}"
    );
}
