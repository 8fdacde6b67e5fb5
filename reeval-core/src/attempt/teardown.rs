//! Teardown, whatever happened: the served ports closed, the egress closed
//! and recorded, the harness's session stopped while what an aborted turn left
//! is killed and the final workspace collected, the agent's commits kept, all
//! under the teardown deadline (`lifecycle/15_teardown.rs`). The sandbox is
//! destroyed by the caller, off the attempt's critical path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Attempt, SandboxState};
use crate::error::Error;
use crate::lifecycle;
use crate::phase::Phase;

impl Attempt {
    /// Closes the session and collects the final workspace, under its own
    /// deadline, whatever happened before. The sandbox is returned to be
    /// destroyed by the caller, off the attempt's critical path (see
    /// `runner/teardown.rs`); past the deadline it is destroyed here.
    pub(crate) async fn teardown(&mut self) -> Option<Arc<dyn crate::sandbox::Sandbox>> {
        for forward in self.forwards.drain(..) {
            forward.task.abort();
        }
        // Extra sandboxes first: nothing of theirs is collected.
        self.tear_down_extras().await;
        // Nothing leaves the sandbox from now on; what did is recorded.
        if let Some((records, summary)) = self.egress.close().await {
            self.record.egress = records;
            self.phases.log.event(summary);
        }
        let Some(handle) = self.handle().cloned() else {
            self.phases
                .run(Phase::Teardown, async { Ok(()) }, |_| "no sandbox was started".into())
                .await
                .ok();
            return None;
        };
        let mut events = Vec::new();
        let mut diff_ms = 0;
        // Whether the final collection ended (teardown's deadline may cut it short).
        let mut collection_ended = false;
        let Attempt { phases, given, sandbox, record, turns, .. } = self;
        let artifacts_dir = &given.artifacts_dir;
        let work = async {
            if let SandboxState::Ready(ready) = &*sandbox {
                // The session is closed (a CLI's: its config home kept) while the workspace is read.
                let stop = async {
                    match given.harness.as_deref_mut() {
                        Some(h) if ready.session => {
                            lifecycle::teardown::stop_harness(h, &handle.as_agent()).await
                        }
                        _ => None,
                    }
                };
                let collect = async {
                    // An aborted turn's processes must not change the workspace while it is read.
                    if turns.unsettled.load(std::sync::atomic::Ordering::SeqCst) {
                        lifecycle::teardown::kill_turns(handle.sandbox().as_ref()).await;
                    }
                    let began = Instant::now();
                    let collected = super::collect::collect_final(&handle, &ready.latest()).await;
                    (collected, began.elapsed())
                };
                let (stopped, ((now, said), collecting)) = tokio::join!(stop, collect);
                collection_ended = true;
                events.extend(stopped);
                // The last check's listing, when it waited, is this read (`checks.rs`):
                // what changed since is the check's, the rest the agent's.
                let mut baseline = ready.baseline.clone();
                if let (Some(index), Some(now)) = (ready.unlisted_check, &now) {
                    let changes = super::checks::absorb_check(&mut baseline, &ready.latest(), now);
                    if let Some(check) = record.checks.get_mut(index) {
                        check.changes = changes;
                    }
                }
                let diff = now.map(|now| baseline.diff(&now));
                if ready.session {
                    // What the harness kept (transcripts, its config home) belongs to the record.
                    let more =
                        lifecycle::teardown::harness_artifacts(artifacts_dir, &record.artifacts);
                    record.artifacts.extend(more);
                }
                record.workspace_collected = diff.is_some();
                record.final_diff = diff;
                events.extend(said);
                // The agent's commits, for a replay to have them as commits.
                let began = Instant::now();
                if ready.git_repo {
                    events.extend(crate::git_archive::capture(&handle, artifacts_dir).await);
                    let bundle =
                        format!("{}/{}", crate::turn_archive::DIR, crate::git_archive::BUNDLE);
                    if artifacts_dir.join(&bundle).is_file() {
                        record.artifacts.push(bundle);
                    }
                }
                // The final diff's own time: not the harness's stop, which ran beside it.
                diff_ms = (collecting + began.elapsed()).as_millis() as u64;
            }
            Ok::<_, Error>(())
        };
        // `Some(gone)` when the deadline passed and the sandbox was destroyed here.
        let bounded = async {
            match tokio::time::timeout(lifecycle::teardown::TEARDOWN_DEADLINE, work).await {
                Ok(r) => r.map(|()| None),
                Err(_) => {
                    let gone = matches!(
                        tokio::time::timeout(Duration::from_secs(30), handle.sandbox().destroy())
                            .await,
                        Ok(Ok(()))
                    );
                    Ok(Some(gone))
                }
            }
        };
        let destroyed = phases
            .run(Phase::Teardown, bounded, |destroyed| match destroyed {
                None => "session closed; the sandbox is destroyed in the background".into(),
                Some(true) => "sandbox destroyed after the teardown deadline passed".into(),
                Some(false) => {
                    "failed to destroy the sandbox; the run's end sweep or the next run removes it"
                        .into()
                }
            })
            .await;
        // Cut short by the deadline before the collection ended: the record says so.
        let ready = matches!(&*sandbox, SandboxState::Ready(_));
        if matches!(destroyed, Ok(Some(_))) && ready && !collection_ended {
            events.push(format!(
                "failed to collect the final workspace: teardown passed its deadline of {}s first",
                lifecycle::teardown::TEARDOWN_DEADLINE.as_secs()
            ));
        }
        self.phases.count_as_diff(Phase::Teardown, diff_ms);
        for e in events {
            self.phases.log.event(e);
        }
        match destroyed {
            Ok(None) => Some(handle.sandbox().clone()),
            // Already destroyed (or given up) under the deadline; a failed phase ran no destroy.
            Ok(Some(_)) => None,
            Err(_) => Some(handle.sandbox().clone()),
        }
    }
}
