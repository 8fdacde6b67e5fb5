//! The runner's side of a `reeval-gateway` process it is attached to (a
//! gateway container on a remote Docker engine, a gateway process in a
//! Kubernetes gateway pod): policies go down its stdin, one JSON line each,
//! acknowledged on its stdout; egress records and the sandbox's isolation
//! report come up its stdout, one JSON line each.

use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use reeval_gateway::EgressEntry;
use reeval_gateway::relay::RelayReport;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::SandboxError;

/// How long the gateway gets to acknowledge a policy.
const ACK_WITHIN: Duration = Duration::from_secs(15);

/// What the gateway said, as the reader task collected it.
#[derive(Debug, Default)]
pub(crate) struct Heard {
    pub(crate) entries: Vec<EgressEntry>,
    pub(crate) isolation: Option<RelayReport>,
    pub(crate) applied: u64,
    pub(crate) rejected: Option<String>,
    /// The stream ended (the gateway exited).
    pub(crate) ended: bool,
}

/// One line of the gateway's stdout: an egress record, the isolation report, or an acknowledgement.
pub(crate) fn hear(heard: &mut Heard, line: &[u8]) {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else { return };
    if let Some(report) = value.get("isolation") {
        if heard.isolation.is_none() {
            heard.isolation = serde_json::from_value(report.clone()).ok();
        }
    } else if let Some(n) = value.get("policyApplied").and_then(|n| n.as_u64()) {
        heard.applied = n;
    } else if let Some(why) = value.get("policyRejected") {
        heard.rejected = Some(why.to_string());
    } else if let Ok(entry) = serde_json::from_value::<EgressEntry>(value) {
        heard.entries.push(entry);
    }
}

type Input = Pin<Box<dyn AsyncWrite + Send>>;

/// An attached gateway process: its stdin, and a task reading its stdout.
#[derive(Default)]
pub(crate) struct GatewayStream {
    input: tokio::sync::Mutex<Option<Input>>,
    heard: watch::Sender<Heard>,
    sent: AtomicU64,
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for GatewayStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayStream").finish_non_exhaustive()
    }
}

impl GatewayStream {
    /// Takes the process's stdin and starts reading its stdout (the stream's chunks, any split).
    pub(crate) async fn attach(
        &self,
        input: Input,
        mut stdout: impl Stream<Item = Bytes> + Send + Unpin + 'static,
    ) {
        *self.input.lock().await = Some(input);
        let heard = self.heard.clone();
        let reader = tokio::spawn(async move {
            let mut pending = Vec::new();
            while let Some(chunk) = stdout.next().await {
                pending.extend_from_slice(&chunk);
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    heard.send_modify(|h| hear(h, &line));
                }
            }
            heard.send_modify(|h| h.ended = true);
        });
        *self.reader.lock().expect("reader lock") = Some(reader);
    }

    /// Sends a policy (a JSON object) and waits until the gateway applied it.
    ///
    /// # Errors
    /// [`SandboxError`] when it cannot be sent, is rejected, or is not acknowledged in 15 s.
    ///
    /// # Cancel safety
    /// A cancelled switch may still apply.
    pub(crate) async fn set_policy(&self, policy: &str) -> Result<(), SandboxError> {
        let n = self.sent.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut input = self.input.lock().await;
            let Some(input) = input.as_mut() else {
                return Err(SandboxError::engine_says(
                    "switch the gateway's policy",
                    "it is not attached",
                ));
            };
            let line = format!("{}\n", policy.replace('\n', " "));
            input
                .write_all(line.as_bytes())
                .await
                .map_err(|e| SandboxError::engine("switch the gateway's policy", e))?;
            input
                .flush()
                .await
                .map_err(|e| SandboxError::engine("switch the gateway's policy", e))?;
        }
        let mut rx = self.heard.subscribe();
        let acked = tokio::time::timeout(
            ACK_WITHIN,
            rx.wait_for(|h| h.applied >= n || h.rejected.is_some() || h.ended),
        )
        .await;
        let heard = self.heard.borrow();
        match (acked, &heard.rejected) {
            (_, Some(why)) => Err(SandboxError::engine_says("switch the gateway's policy", why)),
            (Ok(Ok(_)), None) if heard.applied >= n => Ok(()),
            _ => Err(SandboxError::engine_says(
                "switch the gateway's policy",
                "the gateway did not acknowledge it",
            )),
        }
    }

    /// The sandbox relay's isolation report, waiting up to `within`.
    ///
    /// # Errors
    /// [`SandboxError`] when none arrived.
    ///
    /// # Cancel safety
    /// Safe.
    pub(crate) async fn isolation(&self, within: Duration) -> Result<RelayReport, SandboxError> {
        let mut rx = self.heard.subscribe();
        let _ =
            tokio::time::timeout(within, rx.wait_for(|h| h.isolation.is_some() || h.ended)).await;
        self.heard.borrow().isolation.clone().ok_or_else(|| {
            SandboxError::engine_says(
                "verify the sandbox's isolation",
                format!("its relay sent the gateway no report within {within:?}"),
            )
        })
    }

    /// After the process was told to stop: waits up to `within` for its
    /// stdout to end, then takes what went out.
    pub(crate) async fn finish(&self, within: Duration) -> Vec<EgressEntry> {
        let reader = self.reader.lock().expect("reader lock").take();
        if let Some(mut reader) = reader
            && tokio::time::timeout(within, &mut reader).await.is_err()
        {
            reader.abort();
        }
        self.input.lock().await.take();
        std::mem::take(&mut self.heard.send_replace(Heard::default()).entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gateways_lines_are_told_apart() {
        let mut h = Heard::default();
        hear(&mut h, br#"{"policyApplied":2}"#);
        hear(&mut h, br#"{"isolation":{"tcp":[],"listening":true}}"#);
        hear(&mut h, br#"{"atUnixMs":1,"host":"a.test","port":443,"method":"CONNECT","path":"","status":403,"bytesUp":0,"bytesDown":0,"durationMs":0,"allowed":false,"route":"tunnel"}"#);
        hear(&mut h, b"not json");
        assert_eq!(h.applied, 2);
        assert_eq!(h.isolation.as_ref().and_then(|r| r.listening), Some(true));
        assert_eq!(h.entries.len(), 1);
        assert!(!h.entries[0].allowed);
    }
}
