//! Networks as teams have them, against the real engine and this host's real
//! network stack:
//!
//! - an "internal" model server on a private address (`10.213.N.2`) that is
//!   neither this host's own nor the engine's bridge: it lives in a network
//!   namespace of its own, joined to this host by a veth pair (the host's end
//!   is `10.213.N.1`), where the static `reeval-relay` forwards it to the
//!   test's loopback model server through a unix socket. A harness reaches
//!   it only when the eval or the run opens it (`allow_internal`); without,
//!   the failure names the refused host and the opt-in that would open it.
//! - this host's own addresses (the veth's end, `docker0`) and link-local
//!   metadata refused even when the opt-in names them;
//! - an upstream proxy (a small CONNECT proxy written here) through which a
//!   brokered request reaches a TLS upstream, the key swapped and recorded.
//!
//! Needs root for `ip netns` (CI and this machine have it).

mod common;
#[path = "model_server/mod.rs"]
mod model_server;
#[path = "../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use reeval::egress::{Broker, EgressSettings, UpstreamProxySetting};
use reeval::prelude::*;
use reeval::{Eval, Outcome, Record};

/// A private network of one address beside this host: a network namespace
/// joined by a veth pair, `host` this host's end, `addr` the namespace's,
/// where connections to `addr:PORT` are relayed to `target` on loopback.
struct InternalNet {
    /// Deletes the namespace when the rest is gone.
    _ns: Namespace,
    host: Ipv4Addr,
    addr: Ipv4Addr,
    relay: Child,
    socket: PathBuf,
    forward: tokio::task::JoinHandle<()>,
}

impl InternalNet {
    const PORT: u16 = 8080;

    async fn start(target: SocketAddr) -> InternalNet {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let (id, k) = (std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        let n = ((id + k * 61) % 250) as u8 + 1;
        let (ns, host_if, ns_if) =
            (format!("reeval-t-{id}-{k}"), format!("rvh{id}x{k}"), format!("rvn{id}x{k}"));
        // Gone with the veth pair, whatever fails below.
        let namespace = Namespace(ns.clone());
        let (host, addr) = (Ipv4Addr::new(10, 213, n, 1), Ipv4Addr::new(10, 213, n, 2));
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().unwrap_or_else(|e| {
                panic!("this test needs `ip` (iproute2) and root for a network namespace: {e}")
            });
            assert!(
                out.status.success(),
                "this test needs root for a network namespace: `ip {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let _ = Command::new("ip").args(["netns", "del", &ns]).output();
        ip(&["netns", "add", &ns]);
        ip(&["link", "add", &host_if, "type", "veth", "peer", "name", &ns_if]);
        ip(&["link", "set", &ns_if, "netns", &ns]);
        ip(&["addr", "add", &format!("{host}/30"), "dev", &host_if]);
        ip(&["link", "set", &host_if, "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["netns", "exec", &ns, "ip"];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{addr}/30"), "dev", &ns_if]);
        inside(&["link", "set", &ns_if, "up"]);
        inside(&["link", "set", "lo", "up"]);
        // The namespace's listener relays to a unix socket (unix sockets are
        // not in a network namespace), which this process forwards to `target`.
        let dir = common::temp_dir("internal-net");
        let socket = dir.join("s.sock");
        let listener = tokio::net::UnixListener::bind(&socket).expect("bind the unix socket");
        let forward = tokio::spawn(async move {
            while let Ok((mut from, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut to) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut from, &mut to).await;
                    }
                });
            }
        });
        let relay_bin = dir.join("reeval-relay");
        std::fs::write(&relay_bin, reeval_gateway::relay::RELAY_BINARY).unwrap();
        let mut perms = std::fs::metadata(&relay_bin).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&relay_bin, perms).unwrap();
        let listen = format!("{addr}:{}", Self::PORT);
        let relay = Command::new("ip")
            .args(["netns", "exec", &ns])
            .arg(&relay_bin)
            .args(["serve", "--listen", &listen, "--socket"])
            .arg(&socket)
            .spawn()
            .expect("start the relay in the namespace");
        let net = InternalNet { _ns: namespace, host, addr, relay, socket, forward };
        // This host reaches the namespace's listener directly (the gateway will).
        for _ in 0..100 {
            if tokio::net::TcpStream::connect((addr, Self::PORT)).await.is_ok() {
                return net;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("the namespace's listener {listen} never accepted");
    }

    fn url(&self) -> String {
        format!("http://{}:{}", self.addr, Self::PORT)
    }

    /// The /30 that holds both ends.
    fn range(&self) -> String {
        let [a, b, c, _] = self.host.octets();
        format!("{a}.{b}.{c}.0/30")
    }
}

/// A network namespace, deleted when dropped (and with it its veth end, and so the pair).
struct Namespace(String);

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

impl Drop for InternalNet {
    fn drop(&mut self) {
        let _ = self.relay.kill();
        let _ = self.relay.wait();
        self.forward.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

fn find<'a>(records: &'a [Record], eval: &str) -> &'a Record {
    records.iter().find(|r| r.eval == eval).unwrap_or_else(|| panic!("no record of {eval}"))
}

/// The harness's turn: a chat completion from the model server at `url`, through the gateway.
fn ask(url: &str) -> String {
    format!(
        "curl -sS -m 10 {url}/v1/chat/completions -H 'content-type: application/json' \
         -d '{{\"model\":\"internal\",\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}'"
    )
}

fn asks_the_model(
    name: &'static str,
    url: String,
    env: impl Fn() -> Environment + Send + Sync + 'static,
) -> Eval {
    Eval::new(name, move |c| {
        let prompt = ask(&url);
        Box::pin(async move {
            let turn = c.send(prompt).await?;
            expect(turn.final_message.unwrap_or_default())
                .to_contain("hello from the internal model")?;
            Ok(())
        })
    })
    .harness("shell")
    .environment(env)
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn an_internal_model_server_is_reached_only_with_the_opt_in() {
    require_docker!();
    let server = model_server::ModelServer::start(|_, _| {
        model_server::openai::text("hello from the internal model")
    })
    .await;
    let net = InternalNet::start(server.addr).await;
    let (url, addr, range) = (net.url(), net.addr.to_string(), net.range());

    // Opened by the eval; and the same eval unopened.
    let allow = addr.clone();
    let opened = asks_the_model("opened_by_the_eval", url.clone(), {
        let (allow, range) = (allow.clone(), range.clone());
        move || Environment::new().allow_egress(allow.clone()).allow_internal(range.clone())
    });
    let closed = asks_the_model("not_opened", url.clone(), {
        let allow = allow.clone();
        move || Environment::new().allow_egress(allow.clone())
    });
    let runner = common::runner_with("internal-model", |_| {});
    let report = runner.run(vec![opened, closed]).await.expect("preflight");

    let r = find(&report.records, "opened_by_the_eval");
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);
    let asked = server.requests();
    assert_eq!(asked.len(), 1, "the model server was asked once, by the opened eval");
    assert_eq!(asked[0].path, "/v1/chat/completions");
    let entry = r.egress.iter().find(|e| e.host == addr).expect("the request is recorded");
    assert!(entry.allowed && entry.status == 200, "{entry:?}");
    let internal = entry.internal.as_ref().expect("recorded as opened by the opt-in");
    assert_eq!((internal.addr.as_str(), internal.by.as_str()), (addr.as_str(), range.as_str()));
    let gateway = r.phases.iter().find(|p| p.phase == "gateway").unwrap();
    assert!(gateway.detail.contains(&format!("opens internal {range}")), "{}", gateway.detail);
    let json = common::json(&report.run_dir.join(r.file_name()));
    assert_eq!(json["egress"][0]["internal"], serde_json::json!({"addr": addr, "by": range}));

    let r = find(&report.records, "not_opened");
    assert_eq!(r.outcome, Outcome::Fail(reeval::FailKind::Assertion), "{:?}", r.message);
    let message = r.message.clone().unwrap_or_default();
    let named = format!(
        "the egress gateway refused 1 request: {addr}:{} (resolves to {addr}, a private address: open it with allow_internal ({addr}))",
        InternalNet::PORT
    );
    assert!(message.contains(&named), "{message}");
    assert!(
        message.contains("Environment::allow_internal, --allow-internal, REEVAL_ALLOW_INTERNAL"),
        "{message}"
    );
    assert!(r.egress.iter().all(|e| !e.allowed && e.internal.is_none()), "{:#?}", r.egress);
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);

    // The run's own opt-in opens it for an eval that names none.
    let again = asks_the_model("opened_by_the_run", url.clone(), move || {
        Environment::new().allow_egress(allow.clone())
    });
    let runner = common::runner_with("internal-model-run", |c| {
        c.egress = EgressSettings { allow_internal: vec![addr.clone()], ..Default::default() };
    });
    let report = runner.run(vec![again]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);
    let internal = r.egress[0].internal.clone().expect("recorded as opened");
    assert_eq!(internal.by, format!("{addr}/32"));
    assert_eq!(server.requests().len(), 2);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn the_hosts_own_addresses_and_metadata_stay_closed_whatever_the_opt_in_names() {
    require_docker!();
    let server = model_server::ModelServer::start(|_, _| model_server::openai::text("x")).await;
    let net = InternalNet::start(server.addr).await;
    // A listener on every host address: the veth's end and docker0's among them.
    let canary = tokio::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).await.unwrap();
    let port = canary.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while canary.accept().await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let docker0 = Ipv4Addr::new(172, 17, 0, 1);
    assert!(std::net::UdpSocket::bind((docker0, 0)).is_ok(), "docker0 is this host's");
    let targets = [
        (format!("{}:{port}", net.host), "this host's own address"),
        (format!("{docker0}:{port}"), "this host's own address"),
        (
            "169.254.169.254:80".to_string(),
            "a link-local address (where cloud metadata services answer)",
        ),
    ];
    let shown = targets.clone();
    let eval = Eval::new("own_addresses", move |c| {
        let targets = targets.clone();
        Box::pin(async move {
            for (target, what) in &targets {
                let out =
                    c.send(format!("curl -s -m 10 -w ' %{{http_code}}' http://{target}/")).await?;
                let said = out.final_message.unwrap_or_default();
                expect(said.as_str()).to_contain(" 403")?;
                expect(said.as_str()).to_contain(what)?;
                expect(said.as_str())
                    .to_contain("which sandboxes never reach, whatever allow_internal says")?;
            }
            Ok(())
        })
    })
    .harness("shell")
    .environment({
        let (host, range) = (net.host.to_string(), net.range());
        move || {
            Environment::new()
                .allow_egress(host.clone())
                .allow_egress("172.17.0.1")
                .allow_egress("169.254.169.254")
                // Every range that holds them, named outright.
                .allow_internal(range.clone())
                .allow_internal("172.16.0.0/12")
                .allow_internal("169.254.0.0/16")
        }
    });
    let report = common::runner("own-addresses").run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);
    assert_eq!(hits.load(Ordering::SeqCst), 0, "a host address was reached");
    assert_eq!(r.egress.len(), shown.len(), "{:#?}", r.egress);
    assert!(r.egress.iter().all(|e| !e.allowed && e.status == 403));
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

const KEY: &str = "sk-proxy-REAL-0123456789abcdef";
/// `Basic` of `user:p@ss`.
const PROXY_AUTHORIZATION: &str = "Basic dXNlcjpwQHNz";

/// A brokered request to `api.test` (a `.test` name resolves nowhere: only
/// the proxy knows where it is) through a CONNECT proxy on `bind`, the
/// gateway where `engine` places it; on a remote engine the eval also tries
/// the gateway container's own bridge, opened by name. Checks the upstream,
/// the proxy, the record and the run's files; returns the gateway phase's detail.
async fn through_the_proxy(tag: &str, bind: &str, engine: Option<String>) -> String {
    let pki = upstreams::TestPki::new();
    let api =
        upstreams::upstream(Some(pki.server_config(&["api.test"])), upstreams::Behaviour::Echo)
            .await;
    let routes = vec![("api.test".into(), api.addr)];
    let proxy = upstreams::ConnectProxy::start_on(bind, routes, Some(PROXY_AUTHORIZATION)).await;
    let remote = engine.is_some();
    let eval = Eval::new("through_the_proxy", move |c| {
        Box::pin(async move {
            let turn = c
                .send("curl -sS -m 10 https://api.test/v1/messages -H \"x-api-key: $REEVAL_T_PROXY_KEY\"")
                .await?;
            expect(turn.final_message.unwrap_or_default()).to_equal("hello from upstream")?;
            if remote {
                // The gateway container's default route is the engine's bridge: never, even named.
                let turn = c.send("curl -s -m 10 http://172.17.0.1:9/").await?;
                let said = turn.final_message.unwrap_or_default();
                expect(said.as_str()).to_contain("172.17.0.1, the gateway of the egress gateway's network")?;
            }
            Ok(())
        })
    })
    .harness("shell")
    .environment(|| {
        Environment::new()
            .secret("REEVAL_T_PROXY_KEY")
            .broker("REEVAL_T_PROXY_KEY", Broker::header("api.test", "x-api-key"))
            .allow_egress("api.test")
            .allow_egress("172.17.0.1")
            .allow_internal("172.16.0.0/12")
    });
    let env = common::env_file(tag, &[("REEVAL_T_PROXY_KEY", KEY)]);
    let proxy_url = format!("http://user:p%40ss@{}", proxy.addr);
    let runner = common::runner_with(tag, |c| {
        c.settings.env_file = Some(env);
        c.egress = EgressSettings {
            extra_roots_pem: vec![pki.ca_pem.clone()],
            upstream_proxy: UpstreamProxySetting::Url(proxy_url),
            ..Default::default()
        };
        if let Some(host) = engine {
            c.settings.backend = reeval::sandbox::BackendConfig::Docker {
                engines: vec![reeval::sandbox::docker::EngineSpec { host, slots: Some(1) }],
            };
        }
    });
    let report = runner.run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);

    let seen = api.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["x-api-key"], KEY, "the key swapped in, through the proxy");
    let asked = proxy.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].line, "CONNECT api.test:443 HTTP/1.1");
    assert_eq!(asked[0].authorization.as_deref(), Some(PROXY_AUTHORIZATION));

    let entry = r.egress.iter().find(|e| e.host == "api.test").expect("recorded");
    assert_eq!((entry.route.as_str(), entry.status, entry.allowed), ("intercept", 200, true));
    assert_eq!(entry.brokered, ["REEVAL_T_PROXY_KEY"]);
    let written = common::all_files_text(&report.run_dir);
    for secret in [KEY, "p@ss", "p%40ss", PROXY_AUTHORIZATION] {
        assert!(!written.contains(secret), "{secret} reached a file the run wrote");
    }
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
    let gateway = r.phases.iter().find(|p| p.phase == "gateway").unwrap();
    let shown = format!("through the upstream proxy http://***@{}", proxy.addr);
    assert!(gateway.detail.contains(&shown), "{}", gateway.detail);
    gateway.detail.clone()
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_brokered_request_goes_through_the_upstream_proxy_with_the_key_swapped() {
    require_docker!();
    through_the_proxy("upstream-proxy", "127.0.0.1:0", None).await;
}

/// The same from a gateway container next to the sandbox (a remote engine:
/// here the local one reached over TCP), which takes the proxy from its
/// configuration and reaches it on the engine's bridge.
#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test(flavor = "multi_thread")]
async fn a_gateway_container_goes_through_the_upstream_proxy_too() {
    require_docker!();
    let engine = common::engine_over_tcp().await;
    let detail = through_the_proxy("upstream-proxy-remote", "172.17.0.1:0", Some(engine)).await;
    assert!(detail.contains("a container next to the sandbox"), "{detail}");
}
