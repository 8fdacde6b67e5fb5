//! The final collection of a sandbox lost at the end, when the engine
//! cannot read it: the record says why within the collection's own limits,
//! never silently at teardown's deadline (on the fake backend, in paused time).

use std::time::Duration;

use super::tests::run_one;
use crate::eval::Eval;
use crate::outcome::Outcome;
use crate::sandbox::SandboxState;
use crate::sandbox::archive::Entry;
use crate::sandbox::fake::{FakeBackend, FakeReply};

#[tokio::test(start_paused = true)]
async fn a_paused_sandbox_whose_files_cannot_be_read_is_named_in_the_record() {
    let backend = FakeBackend::new();
    let shared = backend.clone();
    let backend = backend.on_exec(move |exec, files| {
        let line = exec.line();
        if line.contains("freeze") {
            shared.set_state(SandboxState::Paused);
        } else if line.contains("write work.txt") {
            let bytes = b"done".to_vec();
            files.insert("/workspace/work.txt".into(), Entry::File { mode: 0o644, bytes });
        }
        FakeReply::ok("")
    });
    let eval = Eval::new("frozen", |c| {
        Box::pin(async move {
            c.send("write work.txt").await?;
            c.exec("freeze").await?;
            Ok(())
        })
    });
    // Reads 1 and 2 are the snapshot's and the turn's; the final collection's
    // (3) and the engine's archive after it (4) never end within a teardown.
    let stuck = Duration::from_secs(600);
    let backend = backend.slow_download(2, stuck).slow_download(3, stuck);
    let began = tokio::time::Instant::now();
    let r = run_one(&backend, eval).await;
    assert_eq!(backend.downloads().len(), 4, "{:?}", backend.downloads());
    // The grade stands: every check ran in a live sandbox.
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert!(!r.workspace_collected && r.final_diff.is_none());
    let said: Vec<&str> = r.events.iter().map(|e| e.message.as_str()).collect();
    assert!(
        said.iter().any(|e| e.starts_with("failed to collect the final workspace: the sandbox")
            && e.contains("paused")
            && e.contains("within 60s")),
        "{said:?}"
    );
    // Said within the collection's own limits, well before teardown's deadline (120 s).
    assert!(began.elapsed() < Duration::from_secs(90), "{:?}", began.elapsed());
}
