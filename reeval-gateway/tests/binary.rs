//! The `reeval-gateway` binary: gen-ca, a config with a loaded CA, a
//! binding read from an environment variable, one brokered request, its
//! JSON line on stdout, a policy switch over the control listener, and a
//! clean exit on SIGTERM.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use reeval_gateway::{EgressEntry, Route};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStderr, ChildStdout, Command};

const EXE: &str = env!("CARGO_BIN_EXE_reeval-gateway");

async fn line<R: tokio::io::AsyncBufRead + Unpin>(lines: &mut Lines<R>, what: &str) -> String {
    tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("no {what} within 10 s"))
        .unwrap()
        .unwrap_or_else(|| panic!("the gateway closed its output before {what}"))
}

async fn addr_after(stderr: &mut Lines<BufReader<ChildStderr>>, prefix: &str) -> String {
    let l = line(stderr, prefix).await;
    l.strip_prefix(prefix)
        .unwrap_or_else(|| panic!("expected {prefix:?}, got {l:?}"))
        .trim()
        .strip_prefix("tcp:")
        .unwrap()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_brokers_logs_switches_policy_and_exits_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("reeval-gateway-bin-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (ca_cert, ca_key) = (dir.join("ca.pem"), dir.join("ca.key"));
    let status = Command::new(EXE)
        .arg("gen-ca")
        .arg("--cert")
        .arg(&ca_cert)
        .arg("--key")
        .arg(&ca_key)
        .status()
        .await
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::metadata(&ca_key).unwrap().permissions().mode() & 0o777, 0o600);

    let pki = TestPki::new();
    let up = upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
    let roots = dir.join("test-ca.pem");
    std::fs::write(&roots, &pki.ca_pem).unwrap();
    let config = serde_json::json!({
        "listen": "tcp:127.0.0.1:0",
        "control": "tcp:127.0.0.1:0",
        "ca": { "certFile": ca_cert, "keyFile": ca_key },
        "policy": { "egress": ["api.anthropic.com"], "activeBindings": ["ANTHROPIC_API_KEY"] },
        "bindings": [{ "name": "ANTHROPIC_API_KEY", "host": "api.anthropic.com", "header": "x-api-key",
                       "placeholder": PLACEHOLDER, "secretEnv": "REEVAL_TEST_ANTHROPIC_KEY" }],
        "extraRootFiles": [roots],
        "resolve": [{ "host": "api.anthropic.com", "addr": up.addr.to_string() }]
    });
    let config_path = dir.join("gateway.json");
    std::fs::write(&config_path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    assert!(
        !std::fs::read_to_string(&config_path).unwrap().contains(SECRET),
        "the secret must not be on disk"
    );

    let mut child = Command::new(EXE)
        .arg("--config")
        .arg(&config_path)
        .env("REEVAL_TEST_ANTHROPIC_KEY", SECRET)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout: Lines<BufReader<ChildStdout>> =
        BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let proxy = addr_after(&mut stderr, "reeval-gateway: listening on").await;
    let control = addr_after(&mut stderr, "reeval-gateway: control on").await;

    // One brokered request through the loaded CA.
    let ca_pem = std::fs::read_to_string(&ca_cert).unwrap();
    let c = client(&format!("http://{proxy}"), &[&ca_pem]);
    let resp = c
        .post("https://api.anthropic.com/v1/messages?key=x")
        .header("x-api-key", PLACEHOLDER)
        .body("hi")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "hello from upstream");
    assert_eq!(up.seen()[0].headers["x-api-key"], SECRET);
    let json = line(&mut stdout, "an egress line").await;
    assert!(!json.contains(SECRET), "{json}");
    let entry: EgressEntry = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (entry.host.as_str(), entry.path.as_str(), entry.status, entry.route),
        ("api.anthropic.com", "/v1/messages", 200, Route::Intercept)
    );
    assert_eq!(entry.brokered, vec!["ANTHROPIC_API_KEY"]);
    assert!(json.contains("\"bytesUp\":2"), "{json}");

    // The per-phase switch over the control listener.
    let ctl = direct_client();
    let resp = ctl
        .put(format!("http://{control}/policy"))
        .body(r#"{"egress":"none"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let resp = ctl
        .put(format!("http://{control}/policy"))
        .body(r#"{"egress":"none","activeBindings":["NOPE"]}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 422);
    let resp = c
        .get("https://api.anthropic.com/v1/models")
        .header("x-api-key", PLACEHOLDER)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let refused: EgressEntry =
        serde_json::from_str(&line(&mut stdout, "a refusal line").await).unwrap();
    assert!(!refused.allowed);
    let counters =
        ctl.get(format!("http://{control}/counters")).send().await.unwrap().text().await.unwrap();
    assert!(counters.contains("\"refused\":1"), "{counters}");

    // SIGTERM: a clean exit.
    let pid = child.id().unwrap();
    assert!(
        Command::new("kill").arg("-TERM").arg(pid.to_string()).status().await.unwrap().success()
    );
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("no exit within 10 s after SIGTERM")
        .unwrap();
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn binary_reports_a_bad_config_and_exits_non_zero() {
    let dir = std::env::temp_dir().join(format!("reeval-gateway-badcfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.json");
    std::fs::write(
        &path,
        r#"{"listen":"tcp:127.0.0.1:0","bindings":[{"name":"K","host":"h.example","header":"x-k","placeholder":"placeholder-k","secretEnv":"REEVAL_TEST_SURELY_UNSET"}]}"#,
    )
    .unwrap();
    let out = Command::new(EXE).arg("--config").arg(&path).output().await.unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("failed to load the gateway configuration")
            && stderr.contains("REEVAL_TEST_SURELY_UNSET"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
