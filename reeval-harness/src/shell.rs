//! The `shell` harness: a turn runs the prompt as a bash script in the
//! workspace; its stdout is the turn's final message. It exercises the whole
//! lifecycle with no model.

use async_trait::async_trait;
use reeval_core::Command;
use reeval_core::harness::{ErrorClass, Harness, HarnessError, TurnContext};
use reeval_core::runner::events::AgentEvent;
use reeval_core::sandbox::SandboxHandle;
use reeval_core::turn::{TurnReport, TurnStatus};

/// Runs each prompt with `bash -c <prompt>` (the prompt is one argv element).
/// The most of a script's output kept as the turn's final message (its end).
const FINAL_MESSAGE_LIMIT: usize = 64 * 1024;

#[derive(Debug, Default)]
pub struct ShellHarness;

#[async_trait]
impl Harness for ShellHarness {
    fn name(&self) -> &str {
        "shell"
    }

    fn reads_context_summary(&self) -> bool {
        false
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<bytes::Bytes>();
        let exec = sandbox.exec_turn(Command::new("bash").arg("-c").arg(prompt), tx);
        // The script's output, a line at a time as it arrives (`--stream`).
        let stream = async {
            let mut pending: Vec<u8> = Vec::new();
            while let Some(chunk) = rx.recv().await {
                pending.extend_from_slice(&chunk);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let text = String::from_utf8_lossy(&line).trim_end().to_string();
                    turn.report(AgentEvent::Message { text });
                }
            }
            if !pending.is_empty() {
                turn.report(AgentEvent::Message { text: String::from_utf8_lossy(&pending).into() });
            }
        };
        let (out, ()) = tokio::join!(exec, stream);
        let out = out?;
        let failed = out.exit_code != 0;
        // No bash in the image: the turn never started, which is the platform's failure, not the script's.
        let never_started =
            out.exit_code == 127 && out.stderr.lines().any(|l| l.ends_with("bash: not found"));
        Ok(TurnReport {
            status: if failed { TurnStatus::Failed } else { TurnStatus::Completed },
            // The last 64 KiB: a script printing megabytes must not make every record (and a
            // run's memory, which holds them all) that large.
            final_message: Some(out.stdout_tail(FINAL_MESSAGE_LIMIT).trim_end().to_string()),
            error: failed.then(|| {
                format!(
                    "script exited {}: {}",
                    out.exit_code,
                    reeval_core::exec::tail(out.stderr.trim_end(), 2000)
                )
            }),
            error_class: failed.then_some(ErrorClass::Agent),
            events: u64::from(!never_started),
            ..TurnReport::default()
        })
    }
}
