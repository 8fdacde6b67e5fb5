//! An upstream that ends its TLS connection by closing TCP without a
//! close_notify (common among servers and load balancers): the gateway
//! relays what the upstream meant. A body delimited by the close is complete
//! and ends cleanly; a body whose own framing (Content-Length) says it is
//! complete is relayed complete; one cut short of its framing ends as an
//! error, so the client sees it was cut.

mod common;

use common::*;
use reeval_gateway::{Binding, Egress, GatewayOptions, Policy, SecretString};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const EVENTS: &str =
    "event: message_start\ndata: {\"n\":1}\n\nevent: message_stop\ndata: {\"n\":2}\n\n";

/// A TLS upstream on loopback that answers each request with the raw head and
/// body its path names, then drops the TCP connection without close_notify.
async fn abrupt_upstream(pki: &TestPki) -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(&["abrupt.test"]));
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { return };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tls.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head);
                let answer = if head.starts_with("GET /close-delimited ") {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{EVENTS}"
                    )
                } else if head.starts_with("GET /complete-length ") {
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{EVENTS}", EVENTS.len())
                } else {
                    // Promises more than it sends.
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{EVENTS}",
                        EVENTS.len() + 100
                    )
                };
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.flush().await;
                // Close TCP under TLS: no close_notify.
                let (tcp, _) = tls.into_inner();
                drop(tcp);
            });
        }
    });
    addr
}

async fn through_gateway() -> (Harness, reqwest::Client) {
    let pki = TestPki::new();
    let addr = abrupt_upstream(&pki).await;
    let h = gateway(
        GatewayOptions::default().extra_root_pem(pki.ca_pem.clone()).resolve("abrupt.test", addr),
        Policy::new(Egress::list(["abrupt.test"]).unwrap()),
        // A brokered key: the gateway intercepts the host (as it does a provider's).
        vec![
            Binding::new("K", "abrupt.test", "x-api-key", PLACEHOLDER, SecretString::from(SECRET))
                .unwrap(),
        ],
    )
    .await;
    // Intercepted when the client trusts the gateway's CA (as a sandbox does).
    let client = client(&h.proxy, &[h.gateway.ca_pem()]);
    (h, client)
}

#[tokio::test]
async fn a_body_ended_by_the_close_is_relayed_complete() {
    let (_h, client) = through_gateway().await;
    let resp = client.get("https://abrupt.test/close-delimited").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.expect("a clean end, not a broken stream");
    assert_eq!(body, EVENTS);
}

#[tokio::test]
async fn a_framed_body_is_relayed_complete_or_ends_as_cut() {
    let (h, client) = through_gateway().await;
    let resp = client.get("https://abrupt.test/complete-length").send().await.unwrap();
    assert_eq!(resp.text().await.expect("complete by its Content-Length"), EVENTS);
    let resp = client.get("https://abrupt.test/short-length").send().await.unwrap();
    let cut = resp.bytes().await;
    assert!(cut.is_err(), "a body short of its Content-Length must not look complete: {cut:?}");
    // The egress record says so too: a 200 with no error would read as whole.
    let log = wait_log(&h.attempt, 2).await;
    let entry = |path: &str| log.iter().find(|e| e.path == path).expect("recorded");
    assert_eq!(entry("/complete-length").error, None);
    let error = entry("/short-length").error.clone().unwrap_or_default();
    assert!(error.starts_with("failed to relay the upstream's body: "), "{error}");
}
