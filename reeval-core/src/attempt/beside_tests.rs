//! A harness that starts apart from the workspace starts its session beside
//! the sandbox's first snapshot, on the fake backend.

use crate::settings::Settings;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;

use super::tests::{Script, scripted};
use crate::environment::Environment;
use crate::eval::Eval;
use crate::harness::{Harness, HarnessError, HarnessRegistry, SessionSetup, TurnContext};
use crate::outcome::Outcome;
use crate::phase::Phase;
use crate::record::{PhaseRecord, Record};
use crate::runner::{RunConfig, Runner};
use crate::sandbox::SandboxHandle;
use crate::sandbox::fake::FakeBackend;
use crate::turn::ErrorClass;
use crate::turn::TurnReport;

/// `Script`'s turns, a start that writes nothing in the workspace (counted), and
/// fails when told to.
#[derive(Debug)]
struct Apart {
    starts: Arc<AtomicUsize>,
    fails: bool,
}

#[async_trait]
impl Harness for Apart {
    fn name(&self) -> &str {
        "apart"
    }

    fn starts_apart_from(&self, _workspace: &str) -> bool {
        true
    }

    async fn start(
        &mut self,
        _sandbox: &SandboxHandle,
        _setup: &SessionSetup,
    ) -> Result<(), HarnessError> {
        self.starts.fetch_add(1, Ordering::SeqCst);
        if self.fails {
            return Err(HarnessError::Failed {
                harness: "apart".into(),
                message: "no config home on purpose".into(),
                class: ErrorClass::Infra,
            });
        }
        Ok(())
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        Script.turn(sandbox, prompt, turn).await
    }
}

async fn run(backend: &FakeBackend, fails: bool) -> (Record, usize) {
    let dir = std::env::temp_dir().join(format!(
        "reeval-fake-{}-{}",
        std::process::id(),
        crate::runner::new_run_id()
    ));
    let starts = Arc::new(AtomicUsize::new(0));
    let counted = starts.clone();
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("apart", move |_| Box::new(Apart { starts: counted.clone(), fails }));
    let config =
        RunConfig::from(Settings { record_dir: dir, infra_retries: 0, ..Settings::default() });
    let runner = Runner::new(config, harnesses).with_backend(Arc::new(backend.clone()));
    let eval = Eval::new("beside", |c| {
        Box::pin(async move {
            c.send("write hello.txt hi").await?;
            c.send("write again.txt hi").await?;
            Ok(())
        })
    })
    .environment(|| Environment::new().file("given.txt", "given"))
    .harness("apart");
    let report = runner.run(vec![eval]).await.expect("preflight");
    let record = report.records.into_iter().next_back().expect("a record");
    (record, starts.load(Ordering::SeqCst))
}

fn phase(r: &Record, which: Phase) -> &PhaseRecord {
    r.phases.iter().find(|p| p.phase == which).unwrap_or_else(|| panic!("no {which} phase"))
}

#[tokio::test]
async fn a_session_apart_from_the_workspace_starts_beside_the_snapshot() {
    // The snapshot's read of the workspace takes 300 ms; the session's start does not wait for it.
    let backend = scripted().slow_download(0, Duration::from_millis(300));
    let (r, starts) = run(&backend, false).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert_eq!(starts, 1, "one session for both turns");
    let (snapshot, harness) = (phase(&r, Phase::Snapshot), phase(&r, Phase::Harness));
    let snapshot_end = snapshot.start_ms + snapshot.duration_ms;
    assert!(snapshot.duration_ms >= 300, "{snapshot:?}");
    assert!(
        harness.start_ms + harness.duration_ms + 200 < snapshot_end,
        "{harness:?} {snapshot:?}"
    );
    assert!(phase(&r, Phase::Turn).start_ms >= snapshot_end, "{:?}", r.phases);
    assert_eq!(
        r.turns[0].diff.paths(),
        ["hello.txt"],
        "the snapshot is the workspace before the turn"
    );
    assert_eq!(r.turns[1].diff.paths(), ["again.txt"]);

    // A session that fails to start beside the snapshot fails the send, as one after it would.
    let (r, starts) = run(&scripted(), true).await;
    assert_eq!(r.outcome, Outcome::InfraError, "{:?}", r.message);
    assert_eq!(starts, 1);
    assert!(
        phase(&r, Phase::Harness).detail.contains("no config home on purpose"),
        "{:?}",
        r.phases
    );
    assert!(r.message.as_deref().unwrap_or_default().contains("no config home"), "{:?}", r.message);
    assert!(r.turns.is_empty());
}
