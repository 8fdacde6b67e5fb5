//! The egress gateway against the real engine: sandboxes whose only way out
//! is the gateway, with loopback upstreams (plain HTTP, and TLS with a test
//! CA) standing in for the APIs through the gateway's test-only `resolve`
//! mapping. Covers isolation, the allowlist, refusals, brokering on both
//! routes, checks-only secrets, SSE streaming, stand-in CLIs that make real
//! HTTPS calls, and the relay killed mid-attempt.

mod common;
#[path = "../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

use reeval::settings::Settings;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reeval::egress::{Broker, Egress, EgressSettings};
use reeval::prelude::*;
use reeval::{Error, Eval, Outcome, Record, RunConfig};
use upstreams::{Behaviour, TestPki, Upstream, upstream};

const KEY: &str = "sk-ant-egress-REAL-0123456789abcdef";
const OPENAI_KEY: &str = "sk-openai-egress-REAL-0123456789abcdef";
const CHECK_KEY: &str = "sk-check-egress-REAL-0123456789abcdef";
const PLACEHOLDER: &str = "reeval-placeholder-ANTHROPIC_API_KEY";
const CHECK_PLACEHOLDER: &str = "reeval-placeholder-REEVAL_T_CHECK_KEY";

/// Fake upstreams: one plain, one TLS host per name, all on 127.0.0.1.
struct Upstreams {
    pki: TestPki,
    plain: Upstream,
    tls: Vec<(&'static str, Upstream)>,
}

impl Upstreams {
    async fn start(names: &[&'static str]) -> Self {
        let pki = TestPki::new();
        let plain = upstream(None, Behaviour::Echo).await;
        let mut tls = Vec::new();
        for name in names {
            let behaviour = if name.starts_with("sse") {
                Behaviour::Sse {
                    events: 200,
                    gap: Duration::from_millis(10),
                    sent: Arc::new(AtomicUsize::new(0)),
                }
            } else {
                Behaviour::Echo
            };
            tls.push((*name, upstream(Some(pki.server_config(&[name])), behaviour).await));
        }
        Self { pki, plain, tls }
    }

    fn tls(&self, name: &str) -> &Upstream {
        &self.tls.iter().find(|(n, _)| *n == name).expect("a TLS upstream of that name").1
    }

    /// The runner's gateway settings: the test CA, and every name mapped to its upstream.
    fn settings(&self) -> EgressSettings {
        let mut resolve = vec![
            ("plain.test".to_string(), self.plain.addr),
            ("refused.test".to_string(), self.plain.addr),
        ];
        resolve.extend(self.tls.iter().map(|(n, u)| (n.to_string(), u.addr)));
        EgressSettings {
            extra_roots_pem: vec![self.pki.ca_pem.clone()],
            resolve,
            ..EgressSettings::default()
        }
    }
}

fn runner(tag: &str, ups: &Upstreams) -> (reeval::Runner, std::path::PathBuf) {
    let env = common::env_file(
        tag,
        &[
            ("ANTHROPIC_API_KEY", KEY),
            ("OPENAI_API_KEY", OPENAI_KEY),
            ("REEVAL_T_CHECK_KEY", CHECK_KEY),
        ],
    );
    let dir = common::temp_dir(tag);
    let config = RunConfig {
        egress: ups.settings(),
        ..RunConfig::from(Settings {
            record_dir: dir.clone(),
            infra_retries: 0,
            env_file: Some(env),
            ..Settings::default()
        })
    };
    (reeval::Runner::new(config, reeval::harness_registry()), dir)
}

fn find<'a>(records: &'a [Record], eval: &str) -> &'a Record {
    records.iter().find(|r| r.eval == eval).unwrap_or_else(|| panic!("no record of {eval}"))
}

fn header<'a>(seen: &'a [upstreams::Seen], path: &str, name: &str) -> Option<&'a str> {
    seen.iter()
        .find(|s| s.uri.starts_with(path))
        .and_then(|s| s.headers.get(name))
        .and_then(|v| v.to_str().ok())
}

/// Every file under `dir`, as text.
fn all_text(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.push_str(&all_text(&path));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()));
        }
    }
    out
}

/// The host's IPv4 addresses (loopback aside), `docker0`'s among them.
fn host_addresses() -> Vec<Ipv4Addr> {
    let text = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let (mut found, mut last) = (Vec::new(), None);
    for line in text.lines().map(str::trim) {
        if let Some(ip) = line.strip_prefix("|-- ").and_then(|a| a.parse::<Ipv4Addr>().ok()) {
            last = Some(ip);
        } else if line.contains("/32 host LOCAL")
            && let Some(ip) = last.filter(|ip| !ip.is_loopback() && !found.contains(ip))
        {
            found.push(ip);
        }
    }
    found
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_sandbox_reaches_nothing_but_the_gateway() {
    require_docker!();
    let ups = Upstreams::start(&[]).await;
    // A listener on every host address: the sandbox must not reach it by any of them.
    let canary = tokio::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0)).await.unwrap();
    let port = canary.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while canary.accept().await.is_ok() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });
    let addresses = host_addresses();
    assert!(addresses.iter().any(|a| a.octets()[0] == 172), "docker0 is among {addresses:?}");
    let targets: Vec<String> = addresses
        .iter()
        .map(|a| format!("{a}:{port}"))
        .chain(["1.1.1.1:443".to_string()])
        .collect();
    let eval = Eval::new("isolated", move |c| {
        let targets = targets.clone();
        Box::pin(async move {
            for target in &targets {
                // Direct, not through the proxy: it must fail.
                let probe = c
                    .exec(format!("curl --noproxy '*' -s -m 3 http://{target}/ -o /dev/null"))
                    .await?;
                expect(probe).to_fail()?;
            }
            let dns = c
                .exec("python3 -c \"import socket; socket.getaddrinfo('example.com', 443)\"")
                .await?;
            expect(dns).to_fail()?;
            // The interfaces the sandbox has: loopback only.
            expect(c.exec("cat /proc/net/dev").await?.stdout).not().to_contain("eth0")?;
            // Through the gateway, the allowed host answers.
            let through = c.exec("curl -s -m 10 http://plain.test/hello").await?;
            expect(through.stdout).to_equal("hello from upstream")?;
            Ok(())
        })
    })
    .environment(|| Environment::new().check_network(Egress::allow(["plain.test"])));
    let (runner, _) = runner("egress-isolation", &ups);
    let report = runner.run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let gateway = r.phases.iter().find(|p| p.phase == "gateway").expect("a gateway phase");
    assert!(gateway.detail.contains("isolation verified"), "{}", gateway.detail);
    assert!(r.phases.iter().any(|p| p.phase == "container" && p.detail.contains("only way out")));
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the host's 0.0.0.0 listener was reached");
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn requests_go_through_the_allowlist_and_secrets_only_to_their_host() {
    require_docker!();
    let ups = Upstreams::start(&["api.anthropic.com", "tunnel.test", "checks.test"]).await;
    let ca = ups.pki.ca_pem.clone();
    let agent = r#"
        curl -s -m 10 http://plain.test/plain -H "x-api-key: $ANTHROPIC_API_KEY" > plain.txt
        curl -sS -m 10 --cacert /etc/reeval-test-ca.pem https://tunnel.test/tunnel > tunnel.txt 2> tunnel.err
        curl -s -m 10 http://refused.test/refused > refused.txt
        curl -s -m 10 https://api.anthropic.com/v1/messages -H "x-api-key: $ANTHROPIC_API_KEY" -H "x-other: $ANTHROPIC_API_KEY" > api.txt
        curl -s -m 10 https://checks.test/turn -H "x-check-key: reeval-placeholder-REEVAL_T_CHECK_KEY" > checks-turn.txt
        env > /tmp/agent-env.txt
        cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' > /tmp/agent-procs.txt
        true
    "#;
    let eval = Eval::new("brokered", move |c| {
        Box::pin(async move {
            c.send(agent).await?;
            expect(c.read_file("plain.txt").await?).to_equal("hello from upstream")?;
            let tunnel = format!("{}{}", c.read_file("tunnel.txt").await?, c.read_file("tunnel.err").await?);
            expect(tunnel).to_equal("hello from upstream")?;
            expect(c.read_file("refused.txt").await?).to_contain("not on this sandbox's allowlist")?;
            expect(c.read_file("api.txt").await?).to_equal("hello from upstream")?;
            for file in ["/tmp/agent-env.txt", "/tmp/agent-procs.txt"] {
                let text = c.read_file(file).await?;
                expect(text.as_str()).to_contain(PLACEHOLDER)?;
                expect(text.as_str()).not().to_contain(KEY)?;
                expect(text.as_str()).not().to_contain("REEVAL_T_CHECK_KEY")?;
            }
            // A check's checks-only secret, brokered: a placeholder in its environment, swapped on the wire.
            let check = c.exec("curl -s -m 10 https://checks.test/check -H \"x-check-key: $REEVAL_T_CHECK_KEY\"").await?;
            expect(check.stdout).to_equal("hello from upstream")?;
            expect(c.exec("printf %s \"$REEVAL_T_CHECK_KEY\"").await?.stdout).to_equal(CHECK_PLACEHOLDER)?;
            // Checks reach nothing else.
            expect(c.exec("curl -s -m 10 http://plain.test/from-check").await?.stdout).to_contain("not on this sandbox's allowlist")?;
            Ok(())
        })
    })
    .environment(move || {
        Environment::new()
            .file("/etc/reeval-test-ca.pem", ca.clone())
            .secret("ANTHROPIC_API_KEY")
            .broker("ANTHROPIC_API_KEY", Broker::header("api.anthropic.com", "x-api-key"))
            .secret_for_checks("REEVAL_T_CHECK_KEY")
            .broker("REEVAL_T_CHECK_KEY", Broker::header("checks.test", "x-check-key"))
            .allow_egress("api.anthropic.com")
            .allow_egress("plain.test")
            .allow_egress("tunnel.test")
            .allow_egress("checks.test")
            .check_network(Egress::allow(["checks.test"]))
    });
    let (runner, dir) = runner("egress-brokered", &ups);
    let report = runner.run(vec![eval]).await.expect("preflight");
    let r = find(&report.records, "brokered");
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);

    // The upstreams saw the real key only where it is bound, and only then.
    let api = ups.tls("api.anthropic.com").seen();
    assert_eq!(
        header(&api, "/v1/messages", "x-api-key"),
        Some(KEY),
        "the bound header carries the real key"
    );
    assert_eq!(
        header(&api, "/v1/messages", "x-other"),
        Some(PLACEHOLDER),
        "another header keeps the placeholder"
    );
    assert_eq!(
        header(&ups.plain.seen(), "/plain", "x-api-key"),
        Some(PLACEHOLDER),
        "an unbound host gets the placeholder"
    );
    let checks = ups.tls("checks.test").seen();
    assert_eq!(
        header(&checks, "/turn", "x-check-key"),
        Some(CHECK_PLACEHOLDER),
        "not swapped during a turn"
    );
    assert_eq!(header(&checks, "/check", "x-check-key"), Some(CHECK_KEY), "swapped during a check");
    assert!(
        ups.plain
            .seen()
            .iter()
            .all(|s| !s.uri.contains("refused") && !s.uri.contains("from-check")),
        "refusals are never dialled"
    );

    // Every request is in the record, refusals too; no header value is.
    let route = |host: &str| {
        r.egress.iter().find(|e| e.host == host).map(|e| (e.route.as_str(), e.allowed, e.status))
    };
    assert_eq!(route("plain.test"), Some(("http", true, 200)));
    assert_eq!(route("tunnel.test"), Some(("tunnel", true, 200)));
    assert_eq!(route("refused.test"), Some(("http", false, 403)));
    assert_eq!(route("api.anthropic.com"), Some(("intercept", true, 200)));
    let brokered = r.egress.iter().find(|e| e.host == "api.anthropic.com").unwrap();
    assert_eq!(brokered.brokered, ["ANTHROPIC_API_KEY"]);
    assert!(r.events.iter().any(|e| e.message.starts_with("egress: ")), "{:?}", r.events);

    let written = all_text(&dir);
    for secret in [KEY, CHECK_KEY, OPENAI_KEY] {
        assert!(!written.contains(secret), "a secret value reached a file the run wrote");
    }
    assert!(written.contains("api.anthropic.com"), "the egress records were written");
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn a_stream_arrives_event_by_event_and_a_killed_relay_only_cuts_the_way_out() {
    require_docker!();
    let ups = Upstreams::start(&["sse.test"]).await;
    let ca = ups.pki.ca_pem.clone();
    // The sandbox notes when the first and the last event arrive.
    let reader = r#"
import json, os, ssl, time, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler(), urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile="/etc/reeval-test-ca.pem")))
times = []
with opener.open("https://sse.test/sse", timeout=30) as resp:
    for line in resp:
        if line.startswith(b"data:"):
            times.append(time.time())
json.dump({"count": len(times), "first": times[0], "last": times[-1]}, open("sse.json", "w"))
"#;
    let sse = Eval::new("sse", move |c| {
        Box::pin(async move {
            c.write_file("read_sse.py", reader).await?;
            c.send("python3 read_sse.py").await?;
            let times: serde_json::Value =
                serde_json::from_str(&c.read_file("sse.json").await?).map_err(Error::other)?;
            expect(times["count"].as_u64()).to_equal(Some(200))?;
            // 200 events 10 ms apart: buffered whole, the first would arrive with the last.
            let spread = times["last"].as_f64().unwrap() - times["first"].as_f64().unwrap();
            expect(spread > 1.0).to_equal(true)?;
            Ok(())
        })
    })
    .environment(move || {
        Environment::new().file("/etc/reeval-test-ca.pem", ca.clone()).allow_egress("sse.test")
    });
    let killed = Eval::new("relay_killed", |c| {
        Box::pin(async move {
            expect(c.exec("curl -s -m 10 http://plain.test/before").await?.stdout).to_equal("hello from upstream")?;
            // The agent cannot kill the relay (it runs as root); a check can.
            c.send("for p in $(pgrep -f '[r]eeval-relay serve'); do echo found $p; kill $p && echo killed $p; done > kill.txt 2>&1; true").await?;
            let tried = c.read_file("kill.txt").await?;
            expect(tried.as_str()).to_contain("found")?;
            expect(tried.as_str()).to_contain("Operation not permitted")?;
            expect(tried.as_str()).not().to_contain("killed")?;
            expect(c.exec("curl -s -m 10 http://plain.test/still").await?.stdout).to_equal("hello from upstream")?;
            expect(c.exec("pkill -f '[r]eeval-relay serve'").await?).to_succeed()?;
            expect(c.exec("sleep 0.3; curl -s -m 5 http://plain.test/after").await?).to_fail()?;
            // Nothing else is lost: the sandbox, its files, its checks.
            c.write_file("still.txt", "here").await?;
            expect(c.exec("cat still.txt").await?.stdout).to_equal("here")?;
            Ok(())
        })
    })
    .environment(|| Environment::new().allow_egress("plain.test").check_network(Egress::allow(["plain.test"])));
    let (runner, _) = runner("egress-sse", &ups);
    let report = runner.run(vec![sse, killed]).await.expect("preflight");
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}", r.eval, r.message);
    }
    assert!(ups.plain.seen().iter().all(|s| s.uri != "/after"));
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}

const COMMON: &[u8] = include_bytes!("standins/standin_common.py");

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn stand_in_clis_reach_their_apis_by_base_url_and_by_interception() {
    require_docker!();
    let ups = Upstreams::start(&["api.anthropic.com", "api.openai.com"]).await;
    let cli_env = |bin: &'static str, script: &'static [u8]| {
        move || {
            Environment::new()
                .image(Image::from("reeval/base:latest"))
                .file_with_mode(bin, script, 0o755)
                .file_with_mode("/usr/local/lib/reeval-standins/standin_common.py", COMMON, 0o644)
        }
    };
    let claude = Eval::new("claude_base_url", |c| {
        Box::pin(async move {
            let turn = c.send("SCENARIO:api").await?;
            expect(turn.final_message.unwrap_or_default()).to_equal("hello from upstream")?;
            Ok(())
        })
    })
    .harness("claude-code")
    .environment(cli_env("/usr/local/bin/claude", include_bytes!("standins/claude.py")));
    let codex = Eval::new("codex_intercepted", |c| {
        Box::pin(async move {
            let turn = c.send("SCENARIO:api").await?;
            expect(turn.final_message.unwrap_or_default()).to_equal("hello from upstream")?;
            Ok(())
        })
    })
    .harness("codex")
    .environment(cli_env("/usr/local/bin/codex", include_bytes!("standins/codex.py")));
    let (runner, dir) = runner("egress-clis", &ups);
    let report = runner.run(vec![claude, codex]).await.expect("preflight");
    for r in &report.records {
        assert_eq!(r.outcome, Outcome::Pass, "{}: {:?}", r.eval, r.message);
    }
    let anthropic = ups.tls("api.anthropic.com").seen();
    assert_eq!(header(&anthropic, "/v1/messages", "x-api-key"), Some(KEY));
    let openai = ups.tls("api.openai.com").seen();
    assert_eq!(
        header(&openai, "/v1/responses", "authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    let routes: Vec<(&str, &str)> = report
        .records
        .iter()
        .flat_map(|r| r.egress.iter().map(|e| (e.host.as_str(), e.route.as_str())))
        .collect();
    assert!(routes.contains(&("api.anthropic.com", "base_url")), "{routes:?}");
    assert!(routes.contains(&("api.openai.com", "intercept")), "{routes:?}");
    let written = all_text(&dir);
    assert!(
        !written.contains(KEY) && !written.contains(OPENAI_KEY),
        "a key reached a file the run wrote (a transcript?)"
    );
    assert_eq!(common::containers_of_run(&report.run_id).await, 0);
}
