//! The `shell` harness: a turn runs the prompt as a bash script in the
//! workspace; its stdout is the turn's final message. It exercises the whole
//! lifecycle with no model.

use async_trait::async_trait;
use reeval_core::Command;
use reeval_core::harness::AgentEvent;
use reeval_core::harness::{Harness, HarnessError, TurnContext};
use reeval_core::sandbox::SandboxHandle;
use reeval_core::turn::ErrorClass;
use reeval_core::turn::{TurnReport, TurnStatus};

/// The most of a script's output kept as the turn's final message (its end).
const FINAL_MESSAGE_LIMIT: usize = 64 * 1024;

/// Runs each prompt with `bash -c <prompt>` (the prompt is one argv element).
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
        let mut script = Command::new("bash").arg("-c").arg(prompt);
        for (k, v) in &turn.env {
            script = script.env(k.clone(), v.clone());
        }
        let exec = sandbox.exec_turn(script, tx);
        // The script's output, a line at a time as it arrives (`--stream`).
        // Chunks are dropped as soon as they are read: a queued chunk holds the
        // engine stream's whole read buffer, and a script may print megabytes.
        let stream = async {
            if turn.events.is_none() {
                while rx.recv().await.is_some() {}
                return;
            }
            let mut pending: Vec<u8> = Vec::new();
            while let Some(chunk) = rx.recv().await {
                complete_lines(&mut pending, &chunk, |text| {
                    turn.report(AgentEvent::Message { text })
                });
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

/// Appends `chunk` to `pending` and hands over each line it completes, without
/// its line end; one drain per chunk, not one per line (a chunk may hold
/// thousands).
fn complete_lines(pending: &mut Vec<u8>, chunk: &[u8], mut line: impl FnMut(String)) {
    pending.extend_from_slice(chunk);
    let mut start = 0;
    while let Some(end) = pending[start..].iter().position(|b| *b == b'\n') {
        line(String::from_utf8_lossy(&pending[start..start + end]).trim_end().to_string());
        start += end + 1;
    }
    pending.drain(..start);
}

#[cfg(test)]
mod tests {
    use super::complete_lines;

    #[test]
    fn lines_split_across_chunks_come_out_whole_and_in_order() {
        let mut pending = Vec::new();
        let mut lines = Vec::new();
        for chunk in [&b"a\nb"[..], b"c\r\n\nd", b"", b"e\nf\ng\n"] {
            complete_lines(&mut pending, chunk, |l| lines.push(l));
        }
        assert_eq!(lines, ["a", "bc", "", "de", "f", "g"]);
        assert!(pending.is_empty());
        complete_lines(&mut pending, b"no end", |l| lines.push(l));
        assert_eq!(pending, b"no end");
        assert_eq!(lines.len(), 6);
    }
}
