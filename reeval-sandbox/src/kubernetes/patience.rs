//! Calls to the API server that wait out a moment when it cannot be reached
//! (its connection refused: a restart, an upgrade, a failover), so that an
//! attempt's start and its teardown survive it. A refused connection carried
//! no request, so any call may be made again; any answer, an error too, ends
//! the wait. A command already running in a pod is not made again: its
//! stream breaks, and the attempt says so.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a call waits for the API server to be reachable again.
pub(super) const UNREACHABLE_WITHIN: Duration = Duration::from_secs(60);

/// `call`, made again while its error is a refused connection, for up to
/// [`UNREACHABLE_WITHIN`].
///
/// # Errors
/// The last error of `call`.
///
/// # Cancel safety
/// Safe when `call` is.
pub(super) async fn patiently<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let began = Instant::now();
    let mut pause = Duration::from_millis(200);
    loop {
        match call().await {
            Err(e) if refused(&e) && began.elapsed() < UNREACHABLE_WITHIN => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            result => return result,
        }
    }
}

/// Whether the API server refused the connection (nothing was sent).
pub(super) fn refused(err: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_is_waited_out_and_an_answer_ends_the_wait() {
        // Nothing listens on port 9 of loopback: refused.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        let client = kube::Client::try_from(config).unwrap();
        let e = client.apiserver_version().await.unwrap_err();
        assert!(refused(&e), "{e:?}");
        let mut calls = 0;
        let answer = patiently(|| {
            calls += 1;
            let client = client.clone();
            async move {
                if calls < 3 { client.apiserver_version().await.map(|_| 0) } else { Ok(calls) }
            }
        })
        .await
        .unwrap();
        assert_eq!(answer, 3, "made again until it answered");
        let api = kube::Error::Api(Box::new(kube::core::Status::failure("no", "Forbidden")));
        assert!(!refused(&api), "an answer is not a refusal");
    }
}
