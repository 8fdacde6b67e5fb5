//! The gateway's upstream failing under an agent's turn (shell harness, curl
//! in the sandbox): a refused connection, a connection reset mid-stream, and
//! a TLS stream ended without close_notify (an intercepted host, its key
//! brokered). Fake upstreams on loopback stand in for the APIs through the
//! gateway's test-only `resolve` mapping, as in `tests/egress.rs`.

use reeval::settings::Settings;
use std::net::SocketAddr;
use std::time::Duration;

use reeval::egress::{Broker, EgressSettings};
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record, RunConfig, RunReport};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::require_docker;
use crate::upstreams::TestPki;
use crate::{SECRET, common};

/// The key brokered to the intercepted host: on the wire only, never written.
const UP_KEY: &str = "sk-up-fault-run-REAL-58e1b7c2";

const EVENTS: &str =
    "event: message_start\ndata: {\"n\":1}\n\nevent: message_stop\ndata: {\"n\":2}\n\n";

/// Reads a request's head.
async fn read_head(s: &mut (impl AsyncRead + Unpin)) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// The raw answer to a request for `path`: a head and as much body as is sent.
fn answer(head: &str) -> String {
    if head.starts_with("GET /close-delimited ") {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{EVENTS}"
        )
    } else if head.starts_with("GET /short-length ") {
        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{EVENTS}", EVENTS.len() + 100)
    } else {
        // An event stream that goes on: the reset comes in its middle.
        format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{EVENTS}")
    }
}

async fn write_answer(s: &mut (impl AsyncWrite + Unpin), head: &str) {
    let _ = s.write_all(answer(head).as_bytes()).await;
    let _ = s.flush().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
}

/// A plain upstream that answers with the start of an event stream, then
/// resets the connection (RST: linger 0).
async fn resetting_upstream() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Some(head) = read_head(&mut tcp).await else { return };
                write_answer(&mut tcp, &head).await;
                let _ = tcp.set_zero_linger();
                drop(tcp);
            });
        }
    });
    addr
}

/// A TLS upstream that answers, then closes TCP under TLS: no close_notify.
async fn abrupt_tls_upstream(pki: &TestPki) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(&["abrupt.test"]));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Some(head) = read_head(&mut tls).await else { return };
                write_answer(&mut tls, &head).await;
                let (tcp, _) = tls.into_inner();
                drop(tcp);
            });
        }
    });
    addr
}

/// An address nothing listens on.
async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// Runs one eval with the gateway's names mapped as `resolve` says.
async fn run(tag: &str, egress: EgressSettings, eval: Eval) -> RunReport {
    let env = common::env_file(tag, &[("UP_KEY", UP_KEY), ("REEVAL_T_FAULT_SECRET", SECRET)]);
    let config = RunConfig {
        egress,
        ..RunConfig::from(Settings {
            record_dir: common::temp_dir(tag),
            infra_retries: 0,
            setup_cache: false,
            env_file: Some(env),
            ..Settings::default()
        })
    };
    reeval::Runner::new(config, reeval::harness_registry())
        .run(vec![eval])
        .await
        .expect("preflight passes")
}

/// An eval whose turn runs `agent` (curl through the gateway, writing what it
/// saw under out/), whose checks then hold each `(file, text)`.
fn curls(
    agent: &'static str,
    want: &'static [(&'static str, &'static str)],
    env: impl Fn() -> Environment + Send + Sync + 'static,
) -> Eval {
    Eval::new("upstream", move |c| {
        Box::pin(async move {
            c.send(agent).await?;
            for (file, text) in want {
                expect(c.read_file(file).await?).to_contain(text)?;
            }
            expect(c.exec("echo $REEVAL_T_FAULT_SECRET >/dev/null").await?).to_succeed()
        })
    })
    .environment(move || env().secret_for_checks("REEVAL_T_FAULT_SECRET"))
}

/// The gateway's error on the request to `host`, as the record has it.
fn egress_error<'a>(r: &'a Record, host: &str) -> &'a str {
    let e = r.egress.iter().find(|e| e.host == host).unwrap_or_else(|| panic!("{:?}", r.egress));
    e.error.as_deref().unwrap_or("")
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_upstream_refuses_the_connection() {
    require_docker!();
    let egress = EgressSettings {
        resolve: vec![("refused.test".into(), closed_port().await)],
        ..EgressSettings::default()
    };
    let agent = "mkdir -p out; curl -sS -m 20 -o out/body.txt -w '%{http_code}' \
                 http://refused.test/v1 > out/status.txt 2> out/err.txt; echo $? > out/exit.txt; true";
    let eval = curls(agent, &[("out/status.txt", "502"), ("out/exit.txt", "0")], || {
        Environment::new().allow_egress("refused.test")
    });
    let report = run("fr-up-refused", egress, eval).await;
    let r = crate::faults::only(&report);
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let says = "failed to connect to refused.test:80: Connection refused";
    let error = egress_error(r, "refused.test");
    assert!(error.contains(says), "{error}");
    let what = "the gateway's upstream refuses the connection (plain HTTP): the agent gets a 502";
    crate::row_as_seen(&report, "upstream-1-refused", what, "turn (gateway)", says, &[UP_KEY])
        .await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_upstream_resets_mid_stream() {
    require_docker!();
    let egress = EgressSettings {
        resolve: vec![("reset.test".into(), resetting_upstream().await)],
        ..EgressSettings::default()
    };
    // The events sent before the reset arrive; curl then sees the stream cut (not a clean end).
    let agent = "mkdir -p out; curl -sS -N -m 20 -o out/body.txt http://reset.test/v1/stream \
                 2> out/err.txt; echo $? > out/exit.txt; true";
    let eval = curls(agent, &[("out/body.txt", "message_stop"), ("out/exit.txt", "18")], || {
        Environment::new().allow_egress("reset.test")
    });
    let report = run("fr-up-reset", egress, eval).await;
    let r = crate::faults::only(&report);
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.egress);
    let says = "failed to relay the upstream's body: error reading a body from connection: Connection reset by peer";
    let error = egress_error(r, "reset.test");
    assert!(error.contains(says), "{error}");
    let what = "the gateway's upstream resets the connection mid-stream (plain HTTP): the agent gets the events sent before, then a cut stream";
    crate::row_as_seen(&report, "upstream-2-reset", what, "turn (gateway)", says, &[UP_KEY]).await;
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_upstream_ends_tls_without_close_notify() {
    require_docker!();
    let pki = TestPki::new();
    let egress = EgressSettings {
        extra_roots_pem: vec![pki.ca_pem.clone()],
        resolve: vec![("abrupt.test".into(), abrupt_tls_upstream(&pki).await)],
        ..EgressSettings::default()
    };
    // Intercepted (a brokered key): the gateway ends each stream as the upstream meant it.
    let agent = "mkdir -p out; cd out; \
                 curl -sS -m 20 -H \"x-api-key: $UP_KEY\" -o close.txt https://abrupt.test/close-delimited 2> close.err; echo $? > close.exit; \
                 curl -sS -m 20 -H \"x-api-key: $UP_KEY\" -o short.txt https://abrupt.test/short-length 2> short.err; [ $? -ne 0 ] && echo cut > short.exit; true";
    let eval = curls(
        agent,
        &[
            ("out/close.txt", "message_stop"),
            ("out/close.exit", "0"),
            ("out/short.txt", "message_stop"),
            ("out/short.exit", "cut"),
        ],
        || {
            Environment::new()
                .secret("UP_KEY")
                .broker("UP_KEY", Broker::header("abrupt.test", "x-api-key"))
                .allow_egress("abrupt.test")
        },
    );
    let report = run("fr-up-tls", egress, eval).await;
    let r = crate::faults::only(&report);
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.egress);
    let close = r.egress.iter().find(|e| e.path == "/close-delimited").expect("recorded");
    assert_eq!((close.status, close.error.as_deref()), (200, None), "{close:?}");
    let says = "failed to relay the upstream's body: error reading a body from connection: end of file before message length reached";
    let short = r.egress.iter().find(|e| e.path == "/short-length").expect("recorded");
    let error = short.error.as_deref().unwrap_or("");
    assert!(error.contains(says), "a body cut short of its length says so: {short:?}");
    let what = "the gateway's upstream ends a TLS stream without close_notify (intercepted, key brokered): a body delimited by the close comes whole, one short of its Content-Length comes cut";
    crate::row_as_seen(
        &report,
        "upstream-3-tls-no-close-notify",
        what,
        "turn (gateway)",
        says,
        &[UP_KEY],
    )
    .await;
}
