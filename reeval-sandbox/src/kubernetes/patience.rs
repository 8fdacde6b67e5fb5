//! Calls to the API server that wait out a moment when it cannot be reached
//! (its connection refused: a restart, an upgrade, a failover), so that an
//! attempt's start and its teardown survive it. A refused connection carried
//! no request, so any call may be made again; any answer, an error too, ends
//! the wait. A command already running in a pod is not made again: its
//! stream breaks, and the attempt says so.
//!
//! A kept-alive connection the server closes just as a call goes out on it
//! breaks under that call (the API server closes idle connections after 90 s,
//! hyper's pool keeps them as long, so the two race). Such a call is made
//! again a few times: reads and deletes as they are (a delete that finds
//! nothing is gone already), creates through [`create_patiently`], where a
//! conflict after a broken try is the broken try's own object (every name
//! reeval creates is new).

use std::future::Future;
use std::time::{Duration, Instant};

/// How long a call waits for the API server to be reachable again.
pub(super) const UNREACHABLE_WITHIN: Duration = Duration::from_secs(60);

/// How many times a call whose connection broke under it is made again.
const BROKEN_AGAIN: u32 = 3;

/// `call`, made again while its error is a refused connection, for up to
/// [`UNREACHABLE_WITHIN`], or a connection that broke under it, up to
/// [`BROKEN_AGAIN`] times. Use [`create_patiently`] for a create.
///
/// # Errors
/// The last error of `call`.
///
/// # Cancel safety
/// Safe when `call` is.
pub(super) async fn patiently<T, F, Fut>(call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    patiently_noting_breaks(call).await.0
}

/// `create`, made as [`patiently`] makes a call, where an `AlreadyExists`
/// conflict after a try whose connection broke is that try's object, created.
///
/// # Errors
/// The last error of `create`; a conflict when no try broke.
///
/// # Cancel safety
/// Safe when `create` is (an object it created stays; the caller's destroy deletes it by name).
pub(super) async fn create_patiently<T, F, Fut>(create: F) -> Result<(), kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    match patiently_noting_breaks(create).await {
        (Ok(_), _) => Ok(()),
        (Err(kube::Error::Api(s)), true) if s.code == 409 && s.reason == "AlreadyExists" => Ok(()),
        (Err(e), _) => Err(e),
    }
}

/// [`patiently`]'s loop; also says whether a try's connection broke under it.
async fn patiently_noting_breaks<T, F, Fut>(mut call: F) -> (Result<T, kube::Error>, bool)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let began = Instant::now();
    let mut pause = Duration::from_millis(200);
    let mut broken = 0;
    loop {
        match call().await {
            Err(e) if refused(&e) && began.elapsed() < UNREACHABLE_WITHIN => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(e) if broke(&e) && broken < BROKEN_AGAIN => broken += 1,
            result => return (result, broken > 0),
        }
    }
}

/// The errors `err` carries, itself first.
fn chain(err: &kube::Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(Some(err as &(dyn std::error::Error + 'static)), |e| e.source())
}

/// Whether the API server refused the connection (nothing was sent).
fn refused(err: &kube::Error) -> bool {
    chain(err).any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// Whether the call's connection closed or broke under it, before an answer:
/// the request may or may not have reached the server.
fn broke(err: &kube::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    chain(err).any(|e| {
        e.downcast_ref::<hyper::Error>()
            .is_some_and(|h| h.is_incomplete_message() || h.is_canceled() || h.is_closed())
            || e.downcast_ref::<std::io::Error>().is_some_and(|io| {
                matches!(
                    io.kind(),
                    ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
                )
            })
    })
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

    /// An API server on loopback that answers each connection's one request
    /// as `answers` says for that connection (`None`: closes it unanswered),
    /// and counts the connections.
    async fn server(
        answers: fn(usize) -> Option<&'static str>,
    ) -> (kube::Client, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = std::sync::Arc::new(AtomicUsize::new(0));
        let count = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                let n = count.fetch_add(1, Ordering::SeqCst);
                // The whole request read (head, then the body its length says):
                // closing with bytes unread would reset, not close.
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                loop {
                    let read = conn.read(&mut buf).await.unwrap();
                    request.extend_from_slice(&buf[..read]);
                    let text = String::from_utf8_lossy(&request).to_lowercase();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                        if request.len() >= end + 4 + length || read == 0 {
                            break;
                        }
                    }
                }
                if let Some(body) = answers(n) {
                    let status =
                        if body.contains("AlreadyExists") { "409 Conflict" } else { "201 Created" };
                    let reply = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    conn.write_all(reply.as_bytes()).await.unwrap();
                    // Keep-alive: the client closes it.
                    tokio::spawn(async move {
                        let _ = conn.read(&mut buf).await;
                    });
                }
            }
        });
        let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
        (client, seen)
    }

    const CONFLICT: &str = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"x\" already exists","reason":"AlreadyExists","code":409}"#;
    const CREATED: &str = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}"#;

    async fn create(client: &kube::Client) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::ConfigMap;
        let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "default");
        let mut map = ConfigMap::default();
        map.metadata.name = Some("x".into());
        let post = kube::api::PostParams::default();
        create_patiently(|| api.create(&post, &map)).await
    }

    #[tokio::test]
    async fn a_create_whose_connection_closed_under_it_is_made_again_and_its_conflict_is_its_own() {
        let (client, seen) = server(|n| if n == 0 { None } else { Some(CONFLICT) }).await;
        create(&client).await.expect("the conflict is the closed try's object");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2, "made again once");

        let (client, seen) = server(|n| if n == 0 { None } else { Some(CREATED) }).await;
        create(&client).await.expect("created on the second try");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_conflict_with_no_broken_try_is_an_error_and_a_connection_closed_every_time_ends() {
        let (client, seen) = server(|_| Some(CONFLICT)).await;
        let e = create(&client).await.unwrap_err();
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 409), "{e:?}");
        assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1, "not made again");

        let (client, seen) = server(|_| None).await;
        let e = create(&client).await.unwrap_err();
        assert!(broke(&e), "{e:?}");
        assert_eq!(
            seen.load(std::sync::atomic::Ordering::SeqCst),
            1 + BROKEN_AGAIN as usize,
            "made again {BROKEN_AGAIN} times, then its error"
        );
        // The engine error says what broke, not only the client's "SendRequest".
        let said = crate::SandboxError::engine("create configmap x", e).to_string();
        assert!(said.contains("connection closed before message completed"), "{said}");
    }
}
