//! What reeval adds to a trivial attempt of the real Claude Code and Codex
//! (`cargo bench --bench real_clis`; needs Docker, the base image and the
//! images of `scripts/fetch-real-clis.sh`, which it runs; `REEVAL_BENCH_N`
//! attempts per arm, default 5). Target (issue 29): at most 0.2 s more per attempt.
//!
//! For each CLI, arms interleaved, against the same scripted model server
//! (one turn, answered "Hello."):
//! 1. the CLI run directly: `docker run --rm --network host` of the same image,
//!    talking plain HTTP to the server on loopback (Codex with the same
//!    startup config the harness writes, in a home as fresh as a sandbox's),
//!    timed whole; and the same as uid 1000 with a home of its own, the user
//!    reeval runs every agent as (on this engine's `fuse-overlayfs`, a user
//!    that does not own `/` pays an ACL round trip per absolute lookup:
//!    Claude Code starts 60 to 120 ms later; reeval's preparation takes `/`'s
//!    group bits off where that is safe, this arm keeps them);
//! 2. a reeval attempt of an eval that sends one prompt: sandbox, gateway with
//!    the key brokered, TLS to the server, harness session setup, the turn,
//!    diff and teardown, timed from the attempt's start to its record.
//!
//! `REEVAL_BENCH_PROBE=1` then runs Claude Code directly in variants that
//! take one of reeval's conditions at a time (its sandbox's environment, the
//! agent user, the config home, both, `docker exec` into a running container),
//! and prints for each when the CLI started (inside the container) and when
//! its model request reached the server, after the launch.

#[path = "../tests/model_server/mod.rs"]
mod model_server;
#[path = "../tests/real_cli/images.rs"]
#[allow(dead_code, reason = "the bench runs Claude Code and Codex, not mini-swe-agent")]
mod real_cli_images;
#[path = "../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

use reeval::settings::Settings;
use std::time::{Duration, Instant};

use model_server::streams::{Billed, anthropic, responses};
use model_server::{Answer, ModelServer, Options, Recorded};
use reeval::egress::EgressSettings;
use reeval::prelude::*;
use reeval::{Eval, Outcome, RunConfig, Runner};

const CODEX_MODEL: &str = "gpt-5.5";

/// When each model request reached a server (for the probe).
static ARRIVED: std::sync::Mutex<Vec<std::time::SystemTime>> = std::sync::Mutex::new(Vec::new());

fn hello(_: usize, req: &Recorded) -> Answer {
    ARRIVED.lock().unwrap().push(std::time::SystemTime::now());
    let billed = Billed { input: 10, output: 2, ..Billed::default() };
    if req.path.contains("messages") {
        anthropic::message("msg_1", &[anthropic::text("Hello.")], billed)
    } else if req.body["generate"] == false {
        responses::response("resp_warm", CODEX_MODEL, &[], Billed::default())
    } else {
        responses::response("resp_1", CODEX_MODEL, &[responses::message("Hello.")], billed)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

async fn direct(args: &[String]) -> Duration {
    let began = Instant::now();
    let out = tokio::process::Command::new("docker")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("docker run");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Hello."),
        "the direct run failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    began.elapsed()
}

/// One attempt under reeval: its total, and each phase's duration (the gaps
/// between phases, reeval's own bookkeeping, as `(between)`).
async fn under_reeval(
    runner: &Runner,
    harness: &str,
    image: &str,
) -> (Duration, Vec<(String, u64)>) {
    let image = image.to_string();
    let eval = Eval::new("hello", |c| {
        Box::pin(async move {
            let t = c.send("Say hello.").await?;
            expect(t.final_message.unwrap_or_default()).to_equal("Hello.")?;
            Ok(())
        })
    })
    .harness(harness)
    .environment(move || Environment::new().image(Image::from(image.as_str())));
    let report = runner.run(vec![eval]).await.expect("preflight");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert!(r.egress.iter().all(|e| e.allowed), "a refused request: {:?}", r.egress);
    if std::env::var_os("REEVAL_BENCH_EVENTS").is_some() {
        for p in &r.phases {
            eprintln!("  {:>5} +{:>4} {} {}", p.start_ms, p.duration_ms, p.phase, p.detail);
        }
        for e in &r.events {
            eprintln!("  {:>5} event {}", e.at_ms, e.message);
        }
        let t = &r.timings;
        eprintln!("  timings: agent {} ms, diff {} ms", t.agent_ms, t.diff_ms);
        for e in &r.egress {
            eprintln!(
                "  {:>5} egress {} {}{} {} in {} ms",
                e.at_ms, e.method, e.host, e.path, e.status, e.duration_ms
            );
        }
    }
    let mut phases: Vec<(String, u64)> = Vec::new();
    let mut end = r.phases.first().map_or(0, |p| p.start_ms);
    for p in r.phases.iter().filter(|p| p.phase != reeval::Phase::Preflight) {
        let name = p.phase.to_string();
        match phases.iter_mut().find(|(n, _)| *n == name) {
            Some((_, ms)) => *ms += p.duration_ms,
            None => phases.push((name, p.duration_ms)),
        }
        let gap = p.start_ms.saturating_sub(end);
        match phases.iter_mut().find(|(n, _)| n == "(between)") {
            Some((_, ms)) => *ms += gap,
            None => phases.push(("(between)".into(), gap)),
        }
        end = end.max(p.start_ms + p.duration_ms);
    }
    (Duration::from_millis(r.timings.total_ms), phases)
}

/// One direct run of the probe: ms from the launch to the CLI's start in the
/// container, from that start to the model request's arrival, and from then to the end.
async fn probed(args: &[String]) -> [u64; 3] {
    ARRIVED.lock().unwrap().clear();
    let launched = std::time::SystemTime::now();
    let out = tokio::process::Command::new("docker")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("docker");
    let ended = std::time::SystemTime::now();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("Hello."), "probe failed: {stdout}");
    let started: u128 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("cli-start "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the start line");
    let started = std::time::UNIX_EPOCH + Duration::from_nanos(started as u64);
    let arrived = *ARRIVED.lock().unwrap().first().expect("a request");
    let ms = |a: std::time::SystemTime, b: std::time::SystemTime| {
        b.duration_since(a).unwrap_or_default().as_millis() as u64
    };
    [ms(launched, started), ms(started, arrived), ms(arrived, ended)]
}

/// Claude Code directly, one of reeval's conditions at a time (see the module's note).
async fn probe(image: &str, url: &str, ca: &std::path::Path, n: usize) {
    let cli = "echo cli-start $(date +%s%N); echo 'Say hello.' | claude --print --output-format stream-json --verbose --permission-mode bypassPermissions --model sonnet";
    let env = [
        ("ANTHROPIC_API_KEY", "sk-ant-bench".to_string()),
        ("ANTHROPIC_BASE_URL", url.to_string()),
        ("IS_SANDBOX", "1".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("DISABLE_AUTOUPDATER", "1".into()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
    ];
    let mut sandbox_env: Vec<(&str, String)> =
        reeval_gateway::relay::sandbox_env().into_iter().map(|(k, v)| (k, v.to_string())).collect();
    sandbox_env.retain(|(k, _)| *k != "NODE_EXTRA_CA_CERTS");
    sandbox_env.push(("NODE_EXTRA_CA_CERTS", "/probe-ca.pem".into()));
    let agent_home = "mkdir -p /tmp/agent/.claude && echo '{\"hasCompletedOnboarding\":true,\"mcpServers\":{}}' > /tmp/agent/.claude/.claude.json; ";
    // `user`: as uid 1000; `home`: the relocated config home with the harness's `.claude.json`.
    let variant = |extra: &[(&str, String)], user: bool, home: bool, exec: bool| {
        let mut args: Vec<String> = if exec {
            ["exec", "-w", "/workspace"].map(String::from).to_vec()
        } else {
            ["run", "--rm", "--network", "host", "-w", "/workspace"].map(String::from).to_vec()
        };
        for (k, v) in env.iter().chain(extra) {
            args.extend(["-e".into(), format!("{k}={v}")]);
        }
        let mut script = cli.to_string();
        if user || home {
            args.extend(["-e", "HOME=/tmp/agent"].map(String::from));
            script = format!("mkdir -p /tmp/agent; {script}");
        }
        if home {
            args.extend(["-e", "CLAUDE_CONFIG_DIR=/tmp/agent/.claude"].map(String::from));
            script = format!("{agent_home}{script}");
        }
        if user && !exec {
            args.extend(["--user".into(), "1000:1000".into()]);
        }
        if !exec {
            args.extend([
                "-v".into(),
                format!("{}:/probe-ca.pem:ro", ca.display()),
                image.to_string(),
            ]);
        } else {
            args.push("probe-target".into());
        }
        args.extend(["sh".into(), "-c".into(), script]);
        args
    };
    let variants = [
        ("direct", variant(&[], false, false, false)),
        ("+ sandbox env", variant(&sandbox_env, false, false, false)),
        ("+ agent user", variant(&[], true, false, false)),
        ("+ config home", variant(&[], false, true, false)),
        ("+ agent user and home", variant(&[], true, true, false)),
        ("docker exec", variant(&[], false, false, true)),
    ];
    let mut each: Vec<Vec<[u64; 3]>> = vec![Vec::new(); variants.len()];
    for round in 0..=n {
        for (i, (_, args)) in variants.iter().enumerate() {
            let exec = args[0] == "exec";
            if exec {
                let up = std::process::Command::new("docker")
                    .args(["run", "-d", "--rm", "--name", "probe-target", "--network", "host"])
                    .args(["-w", "/workspace", image, "sleep", "120"])
                    .output()
                    .expect("docker run -d");
                assert!(up.status.success(), "{}", String::from_utf8_lossy(&up.stderr));
            }
            let took = probed(args).await;
            if exec {
                let _ = std::process::Command::new("docker")
                    .args(["rm", "-f", "probe-target"])
                    .output();
            }
            if round > 0 {
                each[i].push(took); // the first round warms
            }
        }
    }
    println!("probe, claude-code, {n} per variant (medians, ms):");
    for ((name, _), runs) in variants.iter().zip(each) {
        let med = |k: usize| {
            median(runs.iter().map(|r| Duration::from_millis(r[k])).collect()).as_millis()
        };
        println!(
            "  {name:<24} launch->cli {:>4}  cli->request {:>4}  request->end {:>4}",
            med(0),
            med(1),
            med(2)
        );
    }
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("REEVAL_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(5);
    let images = real_cli_images::images();
    let (claude_image, codex_image) = (images.claude.clone(), images.codex.clone());
    let plain = ModelServer::start_with(
        Options { tls: None, websocket: true, ..Options::default() },
        hello,
    )
    .await;
    let pki = upstreams::TestPki::new();
    let tls = pki.server_config(&["api.anthropic.com", "api.openai.com"]);
    let secure = ModelServer::start_with(
        Options { tls: Some(tls), websocket: true, ..Options::default() },
        hello,
    )
    .await;

    let dir = std::env::temp_dir().join(format!("reeval-bench-clis-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let env = dir.join("bench.env");
    std::fs::write(&env, "ANTHROPIC_API_KEY=sk-ant-bench\nOPENAI_API_KEY=sk-bench\n").expect("env");
    let runner = Runner::new(
        RunConfig {
            egress: EgressSettings {
                extra_roots_pem: vec![pki.ca_pem.clone()],
                resolve: vec![
                    ("api.anthropic.com".into(), secure.addr),
                    ("api.openai.com".into(), secure.addr),
                ],
                ..EgressSettings::default()
            },
            ..RunConfig::from(Settings {
                record_dir: dir.join("runs"),
                test_threads: 1,
                infra_retries: 0,
                env_file: Some(env),
                ..Settings::default()
            })
        },
        reeval::harness_registry(),
    );

    // Codex's config for the direct run: the startup config the harness writes (the
    // catalog baked into the image, its provider without retries), its base URL on
    // loopback. It is copied into a home in the container's own file system, fresh in
    // each run as a sandbox's is (a home mounted from the host and kept between runs
    // would spare the CLI its first-run work, state databases and system skills, and
    // their writes through the container's file system).
    let home = dir.join("codex-config");
    std::fs::create_dir_all(&home).expect("codex config");
    std::fs::write(
        home.join("config.toml"),
        format!(
            "model_catalog_json = \"{}\"\nsqlite_home = \"/tmp/codex-home-state\"\nmodel_provider = \"{}\"\n\n[features]\nplugins = false\nremote_plugin = false\n\n[analytics]\nenabled = false\n{}",
            reeval::harnesses::cli::codex::BAKED_CATALOG,
            reeval::harnesses::cli::codex::PROVIDER_ID,
            reeval::harnesses::cli::codex::provider_table(&format!("{}/v1", plain.url)),
        ),
    )
    .expect("config");

    // `as_agent`: as the agent user reeval runs every CLI as (uid 1000, a home of its own).
    let run = |image: &str, env: &[(&str, String)], argv: &[&str], as_agent: bool| {
        let mut args: Vec<String> =
            ["run", "--rm", "--network", "host", "-w", "/workspace"].map(String::from).to_vec();
        if as_agent {
            args.extend(["--user", "1000:1000", "-e", "HOME=/tmp"].map(String::from));
        }
        for (k, v) in env {
            args.push("-e".into());
            args.push(format!("{k}={v}"));
        }
        if image.contains("codex") {
            args.push("-v".into());
            args.push(format!("{}:/codex-config:ro", home.display()));
        }
        args.push(image.to_string());
        args.extend(argv.iter().map(|a| a.to_string()));
        args
    };
    let claude_direct = |as_agent| {
        run(
            &claude_image,
            &[
                ("ANTHROPIC_API_KEY", "sk-ant-bench".into()),
                ("ANTHROPIC_BASE_URL", plain.url.clone()),
                ("IS_SANDBOX", "1".into()),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
                ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
            ],
            &[
                "sh",
                "-c",
                "echo 'Say hello.' | claude --print --output-format stream-json --verbose --permission-mode bypassPermissions --model sonnet",
            ],
            as_agent,
        )
    };
    let codex_direct = |as_agent| {
        run(
            &codex_image,
            &[("OPENAI_API_KEY", "sk-bench".into()), ("CODEX_HOME", "/tmp/codex-home".into())],
            &[
                "sh",
                "-c",
                &format!(
                    "mkdir -p $CODEX_HOME && cp /codex-config/config.toml $CODEX_HOME/ && exec codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check --model {CODEX_MODEL} -- 'Say hello.'"
                ),
            ],
            as_agent,
        )
    };

    if std::env::var_os("REEVAL_BENCH_PROBE").is_some() {
        let ca = dir.join("probe-ca.pem");
        std::fs::write(&ca, &pki.ca_pem).expect("ca");
        probe(&claude_image, &plain.url, &ca, n).await;
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    for (name, harness, image, argv, as_agent) in [
        (
            "claude-code",
            "claude-code:sonnet".to_string(),
            &claude_image,
            claude_direct(false),
            claude_direct(true),
        ),
        (
            "codex",
            format!("codex:{CODEX_MODEL}"),
            &codex_image,
            codex_direct(false),
            codex_direct(true),
        ),
    ] {
        // Warm every path once (page cache, image layers).
        direct(&argv).await;
        direct(&as_agent).await;
        under_reeval(&runner, &harness, image).await;
        let (mut raw, mut raw_agent, mut ours, mut phases) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            raw.push(direct(&argv).await);
            raw_agent.push(direct(&as_agent).await);
            let (total, by_phase) = under_reeval(&runner, &harness, image).await;
            ours.push(total);
            phases.push(by_phase);
        }
        let (raw, raw_agent, ours) = (median(raw), median(raw_agent), median(ours));
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!("{name}: attempts {n} per arm");
        println!("  docker run directly: median {:.0} ms", ms(raw));
        println!("  the same as uid 1000: median {:.0} ms", ms(raw_agent));
        println!("  under reeval:        median {:.0} ms", ms(ours));
        println!(
            "  reeval adds {:+.0} ms, ratio {:.2} (target: at most +200 ms); {:+.0} ms over the run as uid 1000",
            ms(ours) - ms(raw),
            ours.as_secs_f64() / raw.as_secs_f64(),
            ms(ours) - ms(raw_agent)
        );
        // Each phase's median over the attempts, in the order they ran.
        let names: Vec<String> = phases[0].iter().map(|(n, _)| n.clone()).collect();
        let each: Vec<String> = names
            .iter()
            .map(|name| {
                let ms: Vec<Duration> = phases
                    .iter()
                    .map(|p| {
                        let ms = p.iter().find(|(n, _)| n == name).map_or(0, |(_, ms)| *ms);
                        Duration::from_millis(ms)
                    })
                    .collect();
                format!("{name} {}", median(ms).as_millis())
            })
            .collect();
        println!("  phases (medians, ms): {}", each.join(", "));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
