//! The snapshot before a sandbox's first turn on a local engine (issue 29):
//! the diff helper is mounted read-only, and one exec prepares the agent user,
//! becomes the helper's session and answers the first listing. Seen from the
//! engine's own events: before the turn's exec, the sandbox had that one exec
//! and no other; and what it prepared holds (owners, the git repository noted).

mod common;

use reeval::prelude::*;
use reeval::{Eval, Outcome};

/// The engine's `exec_create` events of the run's containers since `since`
/// (unix seconds), in order: each exec's command.
fn execs_of_run(run_id: &str, since: u64) -> Vec<String> {
    let until = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        + 1;
    let out = std::process::Command::new("docker")
        .args(["events", "--since", &since.to_string(), "--until", &until.to_string()])
        .args(["--filter", &format!("label=dev.reeval.run={run_id}")])
        // One line per event: a command's script may hold newlines.
        .args(["--filter", "event=exec_create", "--format", "{{json .Action}}"])
        .output()
        .expect("docker events");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<String>(l).expect("a JSON string"))
        .map(|l| l.strip_prefix("exec_create: ").unwrap_or(&l).to_string())
        .collect()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn one_exec_prepares_the_agent_user_and_answers_the_first_listing() {
    require_docker!();
    let run_id = format!("snapshot-exec-{}", std::process::id());
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        - 1;
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
    .environment(|| {
        Environment::new().file("given.txt", "given\n").setup(
            "git init -q . && git add given.txt && git -c user.email=a@b -c user.name=a commit -qm base",
        )
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

    let execs = execs_of_run(&report.run_id, since);
    // The turn's exec: the shell harness runs the agent's command.
    let turn = execs.iter().position(|e| e.contains("owners.txt")).expect("the turn's exec");
    let before: Vec<&String> = execs[..turn].iter().filter(|e| !e.contains("git init")).collect();
    assert_eq!(before.len(), 1, "one exec before the turn (the setup's apart): {execs:#?}");
    assert!(
        before[0].contains("reeval-prepared") && before[0].contains("/run/reeval-diff/"),
        "the session from the mount, preparing first: {}",
        before[0]
    );
}
