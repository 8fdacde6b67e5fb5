//! The gateway end to end on loopback: fake upstreams (plain and TLS with a
//! test CA), the gateway on a TCP listener (one test on a unix socket), and
//! reqwest or raw clients.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::*;
use reeval_gateway::{
    Binding, Egress, EgressEntry, GatewayOptions, InternalRule, Policy, Refusal, Route,
    SecretString, base_url,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn anthropic_binding() -> Binding {
    Binding::new(
        "ANTHROPIC_API_KEY",
        "api.anthropic.com",
        "x-api-key",
        PLACEHOLDER,
        SecretString::from(SECRET),
    )
    .unwrap()
}

fn one(entries: &[EgressEntry], host: &str) -> EgressEntry {
    let matching: Vec<_> = entries.iter().filter(|e| e.host == host).collect();
    assert_eq!(matching.len(), 1, "one entry for {host} in {entries:?}");
    matching[0].clone()
}

fn assert_no_secret(entries: &[EgressEntry]) {
    let json = serde_json::to_string(entries).unwrap();
    assert!(!json.contains(SECRET), "the egress log holds the secret: {json}");
}

#[tokio::test]
async fn plain_http_allowed_host_is_forwarded_and_recorded_without_query() {
    let up = upstream(None, Behaviour::Echo).await;
    let h = gateway(
        GatewayOptions::default().resolve("plain.test", up.addr),
        Policy::new(Egress::list(["plain.test"]).unwrap()),
        vec![],
    )
    .await;
    let resp = client(&h.proxy, &[])
        .get("http://plain.test/some/path?token=hunter2")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "hello from upstream");
    let seen = up.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/some/path?token=hunter2");
    assert_eq!(seen[0].headers["host"], "plain.test");
    assert!(!seen[0].headers.contains_key("proxy-connection"));
    let e = one(&wait_log(&h.attempt, 1).await, "plain.test");
    assert!(e.allowed);
    assert_eq!(
        (e.method.as_str(), e.path.as_str(), e.status, e.route, e.port),
        ("GET", "/some/path", 200, Route::Http, 80)
    );
    assert_eq!(e.bytes_down, "hello from upstream".len() as u64);
    assert!(!serde_json::to_string(&e).unwrap().contains("hunter2"));
    let counters = h.attempt.counters();
    assert_eq!((counters.requests, counters.refused), (1, 0));
}

#[tokio::test]
async fn https_to_an_unbound_host_is_tunnelled_untouched() {
    let pki = TestPki::new();
    let up = upstream(Some(pki.server_config(&["tunnel.test"])), Behaviour::Echo).await;
    let h = gateway(
        GatewayOptions::default().resolve("tunnel.test", up.addr),
        Policy::new(Egress::list(["tunnel.test:443"]).unwrap()),
        vec![],
    )
    .await;
    // Only the test CA is trusted: a gateway certificate would fail the handshake, so success proves the tunnel.
    let c = client(&h.proxy, &[&pki.ca_pem]);
    let resp = c.post("https://tunnel.test/upload").body("0123456789").send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "hello from upstream");
    assert_eq!(up.accepted(), 1);
    drop(c); // the tunnel is recorded when it closes
    let e = one(&wait_log(&h.attempt, 1).await, "tunnel.test");
    assert_eq!(
        (e.method.as_str(), e.status, e.route, e.allowed, e.port),
        ("CONNECT", 200, Route::Tunnel, true, 443)
    );
    // TLS records both ways: more than the plaintext.
    assert!(e.bytes_up > 10 && e.bytes_down > 19, "{e:?}");
}

#[tokio::test]
async fn refused_hosts_get_403_and_nothing_is_dialled() {
    let pki = TestPki::new();
    let up = upstream(Some(pki.server_config(&["denied.test"])), Behaviour::Echo).await;
    let h = gateway(
        GatewayOptions::default().resolve("denied.test", up.addr),
        Policy::new(Egress::list(["allowed.test"]).unwrap()),
        vec![],
    )
    .await;
    let resp = client(&h.proxy, &[]).get("http://denied.test/x?q=1").send().await.unwrap();
    assert_eq!(resp.status(), 403);
    let body = resp.text().await.unwrap();
    assert!(
        body.contains(
            "reeval egress gateway: host denied.test (port 80) is not on this sandbox's allowlist"
        ),
        "{body}"
    );
    let (_, status, head) = raw_connect(h.addr, "denied.test:443").await;
    assert_eq!(status, 403, "{head}");
    let (mut s, _, head) = raw_connect(h.addr, "denied.test:443").await;
    assert!(read_body(&mut s, &head).await.contains("is not on this sandbox's allowlist"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(up.accepted(), 0, "the gateway dialled a refused host");
    let log = wait_log(&h.attempt, 3).await;
    assert!(
        log.iter().all(|e| !e.allowed && e.status == 403 && e.host == "denied.test"),
        "{log:?}"
    );
    assert_eq!(log.iter().filter(|e| e.method == "CONNECT" && e.route == Route::Tunnel).count(), 2);
    assert_eq!(log.iter().find(|e| e.method == "GET").unwrap().path, "/x");
    assert_eq!(h.attempt.counters().refused, 3);
}

#[tokio::test]
async fn wildcard_matches_subdomains_not_the_apex_or_lookalikes() {
    let up = upstream(None, Behaviour::Echo).await;
    let options = GatewayOptions::default()
        .resolve("a.example.com", up.addr)
        .resolve("example.com", up.addr)
        .resolve("badexample.com", up.addr);
    let h = gateway(options, Policy::new(Egress::list(["*.example.com"]).unwrap()), vec![]).await;
    let c = client(&h.proxy, &[]);
    assert_eq!(c.get("http://a.example.com/").send().await.unwrap().status(), 200);
    assert_eq!(c.get("http://example.com/").send().await.unwrap().status(), 403);
    assert_eq!(c.get("http://badexample.com/").send().await.unwrap().status(), 403);
    assert_eq!(up.accepted(), 1);
}

/// A fake api.anthropic.com (TLS, test CA) and an unbound other.test; the
/// binding is active.
struct Brokered {
    pki: TestPki,
    anthropic: Upstream,
    other: Upstream,
    h: Harness,
}

async fn brokered(active: bool) -> Brokered {
    let pki = TestPki::new();
    let anthropic =
        upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
    let other = upstream(Some(pki.server_config(&["other.test"])), Behaviour::Echo).await;
    let options = GatewayOptions::default()
        .extra_root_pem(pki.ca_pem.clone())
        .resolve("api.anthropic.com", anthropic.addr)
        .resolve("other.test", other.addr);
    let mut policy = Policy::new(Egress::list(["api.anthropic.com", "other.test"]).unwrap());
    if active {
        policy = policy.activate(["ANTHROPIC_API_KEY"]);
    }
    let h = gateway(options, policy, vec![anthropic_binding()]).await;
    Brokered { pki, anthropic, other, h }
}

#[tokio::test]
async fn intercept_swaps_only_the_bound_header_on_the_bound_host() {
    let b = brokered(true).await;
    let c = client(&b.h.proxy, &[b.h.gateway.ca_pem(), &b.pki.ca_pem]);
    let resp = c
        .post("https://api.anthropic.com/v1/messages?beta=true")
        .header("x-api-key", PLACEHOLDER)
        .header("x-other", PLACEHOLDER)
        .header("authorization", format!("Bearer {PLACEHOLDER}"))
        .body("{\"hi\":1}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "hello from upstream");
    let seen = b.anthropic.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["x-api-key"], SECRET, "the bound header got the real key");
    assert_eq!(seen[0].headers["x-other"], PLACEHOLDER, "another header is never swapped");
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {PLACEHOLDER}").as_str(),
        "another header is never swapped"
    );
    assert_eq!(seen[0].uri, "/v1/messages?beta=true");
    assert_eq!(seen[0].headers["host"], "api.anthropic.com");
    // The same placeholder to another allowed host (tunnelled: only the test CA is needed) arrives as sent.
    let resp = client(&b.h.proxy, &[&b.pki.ca_pem])
        .get("https://other.test/")
        .header("x-api-key", PLACEHOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap(); // frees the connection, so the tunnel closes and is recorded
    assert_eq!(b.other.seen()[0].headers["x-api-key"], PLACEHOLDER);
    // A longer value that contains the placeholder is not swapped either.
    c.get("https://api.anthropic.com/v1/models")
        .header("x-api-key", format!("{PLACEHOLDER}-x"))
        .send()
        .await
        .unwrap();
    assert_eq!(b.anthropic.seen()[1].headers["x-api-key"], format!("{PLACEHOLDER}-x").as_str());
    drop(c);
    let log = wait_log(&b.h.attempt, 3).await;
    let swapped: Vec<_> = log.iter().filter(|e| e.route == Route::Intercept).collect();
    assert_eq!(swapped.len(), 2, "{log:?}");
    assert_eq!(swapped[0].path, "/v1/messages");
    assert_eq!(swapped[0].brokered, vec!["ANTHROPIC_API_KEY"]);
    assert!(swapped[1].brokered.is_empty());
    assert_eq!(swapped[0].bytes_up, 8);
    assert_no_secret(&log);
}

#[tokio::test]
async fn base_url_route_swaps_and_forwards_over_tls() {
    let b = brokered(true).await;
    let url = format!("{}/v1/messages?beta=true", base_url(&b.h.proxy, "api.anthropic.com"));
    assert!(url.contains("/_reeval/upstream/api.anthropic.com/v1/messages"));
    let resp = direct_client()
        .post(&url)
        .header("x-api-key", PLACEHOLDER)
        .body("abc")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let seen = b.anthropic.seen();
    assert_eq!(seen[0].headers["x-api-key"], SECRET);
    assert_eq!(seen[0].uri, "/v1/messages?beta=true");
    assert_eq!(seen[0].method, "POST");
    // Base URL to an unbound host: forwarded, never swapped.
    let resp = direct_client()
        .get(format!("{}/x", base_url(&b.h.proxy, "other.test")))
        .header("x-api-key", PLACEHOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(b.other.seen()[0].headers["x-api-key"], PLACEHOLDER);
    // Outside the allowlist: refused before dialling.
    let resp = direct_client()
        .get(format!("{}/x", base_url(&b.h.proxy, "evil.test")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let log = wait_log(&b.h.attempt, 3).await;
    let e = one(&log, "api.anthropic.com");
    assert_eq!(
        (e.route, e.path.as_str(), e.status, e.port, e.bytes_up),
        (Route::BaseUrl, "/v1/messages", 200, 443, 3)
    );
    assert_eq!(e.brokered, vec!["ANTHROPIC_API_KEY"]);
    assert!(!one(&log, "evil.test").allowed);
    assert_no_secret(&log);
}

#[tokio::test]
async fn policy_switches_at_runtime() {
    let b = brokered(false).await;
    let c = client(&b.h.proxy, &[b.h.gateway.ca_pem(), &b.pki.ca_pem]);
    let send =
        || c.get("https://api.anthropic.com/v1/models").header("x-api-key", PLACEHOLDER).send();
    // Inactive binding: the placeholder goes through as is.
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(b.anthropic.seen()[0].headers["x-api-key"], PLACEHOLDER);
    // Activated on the same (kept-alive) intercepted connection.
    b.h.attempt
        .set_policy(
            Policy::new(Egress::list(["api.anthropic.com"]).unwrap())
                .activate(["ANTHROPIC_API_KEY"]),
        )
        .unwrap();
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(b.anthropic.seen()[1].headers["x-api-key"], SECRET);
    // No egress at all.
    b.h.attempt.set_policy(Policy::deny_all()).unwrap();
    let resp = send().await.unwrap();
    assert_eq!(resp.status(), 403);
    assert!(resp.text().await.unwrap().contains("no egress in its current phase"));
    assert_eq!(b.anthropic.seen().len(), 2);
    let plain = client(&b.h.proxy, &[]);
    assert_eq!(plain.get("http://other.test/").send().await.unwrap().status(), 403);
    // Any host (that resolves to a public address, or is a test override).
    b.h.attempt.set_policy(Policy::new(Egress::Any)).unwrap();
    assert_eq!(
        client(&b.h.proxy, &[&b.pki.ca_pem])
            .get("https://other.test/")
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    // An unknown binding name is an error and leaves the policy alone.
    assert!(b.h.attempt.set_policy(Policy::new(Egress::None).activate(["NOPE"])).is_err());
    assert_eq!(*b.h.attempt.policy(), Policy::new(Egress::Any));
}

#[tokio::test]
async fn egress_any_still_refuses_the_hosts_own_addresses_whatever_allow_internal_says() {
    let up = upstream(None, Behaviour::Echo).await;
    let rules = ["127.0.0.0/8", "localhost", "::1", "169.254.0.0/16"];
    let opened =
        Policy::new(Egress::Any).allow_internal(rules.map(|r| InternalRule::parse(r).unwrap()));
    for policy in [Policy::new(Egress::Any), opened] {
        let h = gateway(GatewayOptions::default(), policy, vec![]).await;
        let c = client(&h.proxy, &[]);
        for url in [
            format!("http://127.0.0.1:{}/", up.addr.port()),
            format!("http://localhost:{}/", up.addr.port()),
        ] {
            let resp = c.get(&url).send().await.unwrap();
            assert_eq!(resp.status(), 403, "{url}");
            let body = resp.text().await.unwrap();
            assert!(body.contains("a loopback address (this host's own services), which sandboxes never reach, whatever allow_internal says"), "{body}");
        }
        let (_, status, _) = raw_connect(h.addr, &format!("127.0.0.1:{}", up.addr.port())).await;
        assert_eq!(status, 403);
        assert_eq!(up.accepted(), 0);
        assert_eq!(h.attempt.counters().refused, 3);
        let entries = h.attempt.take_log();
        assert!(
            entries.iter().all(|e| matches!(e.refusal, Some(Refusal::Closed { .. }))),
            "{entries:#?}"
        );
    }
}

#[tokio::test]
async fn closing_policy_closes_open_tunnels() {
    let up = upstream(None, Behaviour::UpgradeEcho).await;
    let h = gateway(
        GatewayOptions::default().resolve("raw.test", up.addr),
        Policy::new(Egress::list(["raw.test"]).unwrap()),
        vec![],
    )
    .await;
    let (mut s, status, _) = raw_connect(h.addr, "raw.test:80").await;
    assert_eq!(status, 200);
    s.write_all(
        b"GET / HTTP/1.1\r\nHost: raw.test\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
    )
    .await
    .unwrap();
    let (status, _) = read_head(&mut s).await;
    assert_eq!(status, 101);
    s.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"ping");
    h.attempt.set_policy(Policy::deny_all()).unwrap();
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("the tunnel stayed open")
        .unwrap_or(0);
    assert_eq!(n, 0);
    let e = one(&wait_log(&h.attempt, 1).await, "raw.test");
    assert!(e.error.unwrap().contains("no longer allows"));
}

#[tokio::test]
async fn upstream_connect_failure_is_a_502_with_a_clear_body() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let pki = TestPki::new();
    let h = gateway(
        GatewayOptions::default()
            .resolve("down.test", closed)
            .resolve("api.anthropic.com", closed)
            .extra_root_pem(pki.ca_pem.clone()),
        Policy::new(Egress::Any).activate(["ANTHROPIC_API_KEY"]),
        vec![anthropic_binding()],
    )
    .await;
    let resp = client(&h.proxy, &[]).get("http://down.test/").send().await.unwrap();
    assert_eq!(resp.status(), 502);
    assert!(resp.text().await.unwrap().contains("failed to connect to down.test:80"));
    let (_, status, _) = raw_connect(h.addr, "down.test:443").await;
    assert_eq!(status, 502);
    let resp = direct_client()
        .get(format!("{}/v1/x", base_url(&h.proxy, "api.anthropic.com")))
        .header("x-api-key", PLACEHOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let log = wait_log(&h.attempt, 3).await;
    assert!(log.iter().all(|e| e.status == 502 && e.allowed && e.error.is_some()), "{log:?}");
    assert_no_secret(&log);
}

#[tokio::test]
async fn upstream_tls_failure_is_a_502() {
    // The upstream's certificate is from a CA the gateway does not trust.
    let pki = TestPki::new();
    let up = upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
    let h = gateway(
        GatewayOptions::default().resolve("api.anthropic.com", up.addr),
        Policy::new(Egress::list(["api.anthropic.com"]).unwrap()).activate(["ANTHROPIC_API_KEY"]),
        vec![anthropic_binding()],
    )
    .await;
    let resp = direct_client()
        .get(format!("{}/v1/x", base_url(&h.proxy, "api.anthropic.com")))
        .header("x-api-key", PLACEHOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 502);
    let body = resp.text().await.unwrap();
    assert!(body.contains("TLS handshake with upstream api.anthropic.com:443"), "{body}");
    assert!(up.seen().is_empty(), "no request may reach an unverified upstream");
}

async fn sse_first_event_arrives_early(url: &str, c: reqwest::Client, sent: Arc<AtomicUsize>) {
    let started = Instant::now();
    let mut resp = c.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let first = resp.chunk().await.unwrap().unwrap();
    let sent_then = sent.load(Ordering::SeqCst);
    assert!(String::from_utf8_lossy(&first).starts_with("data: event 0"), "{first:?}");
    assert!(
        sent_then < 50,
        "the first event arrived only after {sent_then} of 200 were sent: the body was buffered"
    );
    let ttfb = started.elapsed();
    let mut total = first.len();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        total += chunk.len();
    }
    let all = started.elapsed();
    assert_eq!(sent.load(Ordering::SeqCst), 200);
    assert!(total > 200 * 14);
    assert!(ttfb * 5 < all, "first byte after {ttfb:?}, all after {all:?}");
}

#[tokio::test]
async fn sse_streams_through_the_tunnel_and_the_intercept_route() {
    let pki = TestPki::new();
    let sent_t = Arc::new(AtomicUsize::new(0));
    let sent_i = Arc::new(AtomicUsize::new(0));
    let gap = Duration::from_millis(3);
    let tunnel = upstream(
        Some(pki.server_config(&["stream.test"])),
        Behaviour::Sse { events: 200, gap, sent: sent_t.clone() },
    )
    .await;
    let anthropic = upstream(
        Some(pki.server_config(&["api.anthropic.com"])),
        Behaviour::Sse { events: 200, gap, sent: sent_i.clone() },
    )
    .await;
    let h = gateway(
        GatewayOptions::default()
            .extra_root_pem(pki.ca_pem.clone())
            .resolve("stream.test", tunnel.addr)
            .resolve("api.anthropic.com", anthropic.addr),
        Policy::new(Egress::list(["stream.test", "api.anthropic.com"]).unwrap()),
        vec![anthropic_binding()],
    )
    .await;
    sse_first_event_arrives_early(
        "https://stream.test/events",
        client(&h.proxy, &[&pki.ca_pem]),
        sent_t,
    )
    .await;
    sse_first_event_arrives_early(
        "https://api.anthropic.com/v1/messages",
        client(&h.proxy, &[h.gateway.ca_pem()]),
        sent_i,
    )
    .await;
    let log = wait_log(&h.attempt, 2).await;
    let e = one(&log, "api.anthropic.com");
    assert_eq!(e.route, Route::Intercept);
    assert!(e.bytes_down > 200 * 14 && e.duration_ms >= 400, "{e:?}");
}

/// TLS to the gateway over a CONNECT'd stream, trusting only the gateway's CA.
async fn intercepted_tls(
    h: &Harness,
    host: &str,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let (stream, status, _) = raw_connect(h.addr, &format!("{host}:443")).await;
    assert_eq!(status, 200);
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(h.gateway.ca_pem().as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(host.to_owned().try_into().unwrap(), stream)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(alpn));
    tls
}

#[tokio::test]
async fn websocket_upgrade_through_the_intercept_route() {
    let pki = TestPki::new();
    let up =
        upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::UpgradeEcho).await;
    let h = gateway(
        GatewayOptions::default()
            .extra_root_pem(pki.ca_pem.clone())
            .resolve("api.anthropic.com", up.addr),
        Policy::new(Egress::list(["api.anthropic.com"]).unwrap()).activate(["ANTHROPIC_API_KEY"]),
        vec![anthropic_binding()],
    )
    .await;
    let mut tls = intercepted_tls(&h, "api.anthropic.com", b"http/1.1").await;
    let req = format!(
        "GET /v1/realtime HTTP/1.1\r\nHost: api.anthropic.com\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nx-api-key: {PLACEHOLDER}\r\n\r\n"
    );
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.push(tls.read_u8().await.unwrap());
    }
    assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
    tls.write_all(b"frames both ways").await.unwrap();
    let mut buf = [0u8; 16];
    tls.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"frames both ways");
    assert_eq!(up.seen()[0].headers["x-api-key"], SECRET);
    drop(tls);
    let e = one(&wait_log(&h.attempt, 1).await, "api.anthropic.com");
    assert_eq!((e.status, e.route, e.bytes_up, e.bytes_down), (101, Route::Intercept, 16, 16));
    assert_eq!(e.brokered, vec!["ANTHROPIC_API_KEY"]);
}

#[tokio::test]
async fn http2_through_the_intercept_route() {
    use http_body_util::{BodyExt, Empty};
    let pki = TestPki::new();
    let up = upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
    let b = gateway(
        GatewayOptions::default()
            .extra_root_pem(pki.ca_pem.clone())
            .resolve("api.anthropic.com", up.addr),
        Policy::new(Egress::list(["api.anthropic.com"]).unwrap()).activate(["ANTHROPIC_API_KEY"]),
        vec![anthropic_binding()],
    )
    .await;
    let tls = intercepted_tls(&b, "api.anthropic.com", b"h2").await;
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get("https://api.anthropic.com/v1/models")
        .header("x-api-key", PLACEHOLDER)
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.into_body().collect().await.unwrap().to_bytes(), "hello from upstream");
    let seen = up.seen();
    assert_eq!(seen[0].headers["x-api-key"], SECRET);
    assert_eq!(seen[0].headers["host"], "api.anthropic.com");
}

#[tokio::test]
async fn websocket_upgrade_through_the_base_url_route() {
    let pki = TestPki::new();
    let up = upstream(Some(pki.server_config(&["ws.test"])), Behaviour::UpgradeEcho).await;
    let h = gateway(
        GatewayOptions::default().extra_root_pem(pki.ca_pem.clone()).resolve("ws.test", up.addr),
        Policy::new(Egress::list(["ws.test"]).unwrap()),
        vec![],
    )
    .await;
    let mut s = tokio::net::TcpStream::connect(h.addr).await.unwrap();
    s.write_all(
        b"GET /_reeval/upstream/ws.test/chat?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let (status, head) = read_head(&mut s).await;
    assert_eq!(status, 101, "{head}");
    assert!(head.to_ascii_lowercase().contains("upgrade: websocket"));
    s.write_all(b"hello over the upgrade").await.unwrap();
    let mut buf = [0u8; 22];
    s.read_exact(&mut buf).await.unwrap();
    assert_eq!(&buf, b"hello over the upgrade");
    assert_eq!(up.seen()[0].headers["upgrade"], "websocket");
    drop(s);
    let e = one(&wait_log(&h.attempt, 1).await, "ws.test");
    assert_eq!((e.status, e.route, e.path.as_str()), (101, Route::BaseUrl, "/chat"));
    assert_eq!((e.bytes_up, e.bytes_down), (22, 22));
}

#[tokio::test]
async fn unix_socket_listener_serves_its_attempt() {
    let up = upstream(None, Behaviour::Echo).await;
    let gw = reeval_gateway::Gateway::new(GatewayOptions::default().resolve("plain.test", up.addr))
        .unwrap();
    let attempt = gw.attempt(Policy::new(Egress::list(["plain.test"]).unwrap()), vec![]).unwrap();
    let other = gw.attempt(Policy::deny_all(), vec![]).unwrap();
    let dir = std::env::temp_dir().join(format!("reeval-gateway-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gateway.sock");
    // A stale socket is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let serving = attempt.bind_unix(&path).unwrap();
    let other_tcp =
        other.serve_tcp(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o666);
    let mut s = tokio::net::UnixStream::connect(&path).await.unwrap();
    s.write_all(b"GET http://plain.test/over/unix HTTP/1.1\r\nHost: plain.test\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.ends_with("hello from upstream"));
    assert_eq!(one(&wait_log(&attempt, 1).await, "plain.test").path, "/over/unix");
    // The same request on the other attempt's listener is that attempt's, with its policy.
    let resp = client(&format!("http://{}", other_tcp.local_addr().unwrap()), &[])
        .get("http://plain.test/")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(other.counters().refused, 1);
    assert!(attempt.take_log().is_empty());
    serving.shutdown().await;
    assert!(!path.exists(), "the socket file outlived its listener");
    assert!(tokio::net::UnixStream::connect(&path).await.is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn dropping_serving_stops_accepting() {
    let h = gateway(GatewayOptions::default(), Policy::deny_all(), vec![]).await;
    let addr = h.addr;
    drop(h.serving);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[test]
fn debug_output_never_shows_secrets() {
    let binding = anthropic_binding();
    let options =
        GatewayOptions::default().resolve("api.anthropic.com", "127.0.0.1:1".parse().unwrap());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let gw = reeval_gateway::Gateway::new(options).unwrap();
    let attempt = rt.block_on(async {
        gw.attempt(Policy::new(Egress::Any).activate(["ANTHROPIC_API_KEY"]), vec![binding.clone()])
            .unwrap()
    });
    for shown in [
        format!("{binding:?}"),
        format!("{gw:?}"),
        format!("{attempt:?}"),
        format!("{:?}", GatewayOptions::default()),
    ] {
        assert!(!shown.contains(SECRET), "{shown}");
        assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    }
    assert!(format!("{binding:?}").contains("REDACTED"));
}

#[tokio::test]
async fn an_upstream_that_never_speaks_tls_times_out_as_a_502() {
    // Accepts TCP, then says nothing: the TLS handshake can only time out.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    });
    let h = gateway(
        GatewayOptions::default()
            .resolve("slow.test", addr)
            .connect_timeout(Duration::from_millis(300)),
        Policy::new(Egress::list(["slow.test"]).unwrap()),
        vec![],
    )
    .await;
    let started = Instant::now();
    let resp =
        direct_client().get(format!("{}/x", base_url(&h.proxy, "slow.test"))).send().await.unwrap();
    assert_eq!(resp.status(), 502);
    assert!(resp.text().await.unwrap().contains("failed to connect to slow.test:443 within 0.3s"));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn shutdown_closes_open_streams_and_records_them() {
    let pki = TestPki::new();
    let sent = Arc::new(AtomicUsize::new(0));
    let up = upstream(
        Some(pki.server_config(&["api.anthropic.com"])),
        Behaviour::Sse { events: 1000, gap: Duration::from_millis(5), sent },
    )
    .await;
    let h = gateway(
        GatewayOptions::default()
            .extra_root_pem(pki.ca_pem.clone())
            .resolve("api.anthropic.com", up.addr),
        Policy::new(Egress::list(["api.anthropic.com"]).unwrap()),
        vec![anthropic_binding()],
    )
    .await;
    let mut resp = client(&h.proxy, &[h.gateway.ca_pem()])
        .get("https://api.anthropic.com/v1/messages")
        .send()
        .await
        .unwrap();
    resp.chunk().await.unwrap().unwrap();
    let Harness { attempt, serving, .. } = h;
    tokio::time::timeout(Duration::from_secs(5), serving.shutdown()).await.expect("shutdown hung");
    let log = attempt.take_log();
    let e = one(&log, "api.anthropic.com");
    assert_eq!((e.status, e.route), (200, Route::Intercept));
    assert!(e.bytes_down > 0);
    // The client sees its stream end rather than hang.
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(_)) = resp.chunk().await {}
    })
    .await;
    assert!(rest.is_ok(), "the stream outlived the listener");
}

#[tokio::test]
async fn plain_http_to_a_bound_host_is_never_swapped() {
    // Secrets travel only over TLS: a plain-HTTP request to the bound host keeps its placeholder.
    let up = upstream(None, Behaviour::Echo).await;
    let h = gateway(
        GatewayOptions::default().resolve("api.anthropic.com", up.addr),
        Policy::new(Egress::list(["api.anthropic.com"]).unwrap()).activate(["ANTHROPIC_API_KEY"]),
        vec![anthropic_binding()],
    )
    .await;
    let resp = client(&h.proxy, &[])
        .get("http://api.anthropic.com/v1/models")
        .header("x-api-key", PLACEHOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(up.seen()[0].headers["x-api-key"], PLACEHOLDER);
    let e = one(&wait_log(&h.attempt, 1).await, "api.anthropic.com");
    assert_eq!(e.route, Route::Http);
    assert!(e.brokered.is_empty());
}
