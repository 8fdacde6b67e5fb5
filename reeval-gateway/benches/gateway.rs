//! Latency the gateway adds, on loopback: p50/p99 of 2000 keep-alive
//! requests direct vs proxied (plain HTTP, and HTTPS intercepted with a
//! brokered key), and SSE time to first byte. Run with
//! `cargo bench -p reeval-gateway --bench gateway`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use common::*;
use reeval_gateway::{Binding, Egress, GatewayOptions, Policy, SecretString};

const REQUESTS: usize = 2000;
const WARMUP: usize = 100;
const SSE_RUNS: usize = 50;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn latencies(
    c: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    n: usize,
) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..WARMUP + n {
        let mut req = c.get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let start = Instant::now();
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        resp.bytes().await.unwrap();
        out.push(start.elapsed());
    }
    let mut out = out.split_off(WARMUP);
    out.sort();
    out
}

fn report(name: &str, direct: &[Duration], proxied: &[Duration]) {
    let (d50, d99, p50, p99) = (
        percentile(direct, 0.5),
        percentile(direct, 0.99),
        percentile(proxied, 0.5),
        percentile(proxied, 0.99),
    );
    println!(
        "{name:<28} direct p50 {:>8.3} ms p99 {:>8.3} ms | gateway p50 {:>8.3} ms p99 {:>8.3} ms | added p50 {:>7.3} ms",
        d50.as_secs_f64() * 1e3,
        d99.as_secs_f64() * 1e3,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        (p50.as_secs_f64() - d50.as_secs_f64()) * 1e3
    );
}

async fn ttfb(c: &reqwest::Client, url: &str) -> Vec<Duration> {
    let mut out = Vec::with_capacity(SSE_RUNS);
    for _ in 0..SSE_RUNS {
        let start = Instant::now();
        let mut resp = c.get(url).send().await.unwrap();
        resp.chunk().await.unwrap().unwrap();
        out.push(start.elapsed());
        // The rest is not timed; dropping the response closes that connection.
    }
    out.sort();
    out
}

pub fn main() {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let pki = TestPki::new();
        let plain = upstream(None, Behaviour::Echo).await;
        let tls = upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
        let sse = upstream(
            Some(pki.server_config(&["sse.anthropic.com"])),
            Behaviour::Sse { events: 3, gap: Duration::from_millis(1), sent: Arc::new(AtomicUsize::new(0)) },
        )
        .await;
        let binding = Binding::new("ANTHROPIC_API_KEY", "api.anthropic.com", "x-api-key", PLACEHOLDER, SecretString::from(SECRET)).unwrap();
        let sse_binding = Binding::new("SSE_KEY", "sse.anthropic.com", "x-api-key", "reeval-placeholder-SSE", SecretString::from("sk-sse")).unwrap();
        let h = gateway(
            GatewayOptions::default()
                .extra_root_pem(pki.ca_pem.clone())
                .resolve("plain.test", plain.addr)
                .resolve("api.anthropic.com", tls.addr)
                .resolve("sse.anthropic.com", sse.addr),
            Policy::new(Egress::list(["plain.test", "api.anthropic.com", "sse.anthropic.com"]).unwrap()).activate(["ANTHROPIC_API_KEY", "SSE_KEY"]),
            vec![binding, sse_binding],
        )
        .await;

        println!("reeval-gateway bench: {REQUESTS} sequential keep-alive requests each (after {WARMUP} warm-up), loopback");
        let direct = direct_client();
        let proxied = client(&h.proxy, &[]);
        report(
            "plain HTTP",
            &latencies(&direct, &format!("http://{}/bench", plain.addr), &[], REQUESTS).await,
            &latencies(&proxied, &format!("http://plain.test:{}/bench", plain.addr.port()), &[], REQUESTS).await,
        );

        let direct_tls = reqwest::Client::builder()
            .no_proxy()
            .resolve("api.anthropic.com", tls.addr)
            .resolve("sse.anthropic.com", sse.addr)
            .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem.as_bytes()).unwrap())
            .build()
            .unwrap();
        let intercepted = client(&h.proxy, &[h.gateway.ca_pem()]);
        report(
            "HTTPS intercepted + swap",
            &latencies(&direct_tls, &format!("https://api.anthropic.com:{}/v1/messages", tls.addr.port()), &[("x-api-key", "sk-direct")], REQUESTS).await,
            &latencies(&intercepted, "https://api.anthropic.com/v1/messages", &[("x-api-key", PLACEHOLDER)], REQUESTS).await,
        );
        report(
            "SSE time to first byte",
            &ttfb(&direct_tls, &format!("https://sse.anthropic.com:{}/v1/messages", sse.addr.port())).await,
            &ttfb(&intercepted, "https://sse.anthropic.com/v1/messages").await,
        );
        let counters = h.attempt.counters();
        println!("gateway recorded {} requests, {} refused", counters.requests, counters.refused);
    });
}
