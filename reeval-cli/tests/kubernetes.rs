//! The `reeval` tool built with its `kubernetes` feature, as installed with
//! `cargo install reeval-cli --features kubernetes`, against the test cluster
//! of `scripts/kube.sh` (`backend = "kubernetes"` in `reeval.toml`): a Harbor
//! task run with the oracle gets its reward there, and `reeval clean` sweeps
//! the cluster. Skipped unless `REEVAL_TEST_KUBECONFIG` is set
//! (`REEVAL_REQUIRE_KUBE=1` makes that a failure).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cluster() -> Option<String> {
    let path = std::env::var("REEVAL_TEST_KUBECONFIG").ok().filter(|p| !p.is_empty());
    if path.is_none() {
        assert!(
            !std::env::var("REEVAL_REQUIRE_KUBE").is_ok_and(|v| v == "1"),
            "REEVAL_REQUIRE_KUBE=1 but REEVAL_TEST_KUBECONFIG is not set: run eval \"$(scripts/kube.sh start)\""
        );
        eprintln!("skipping: no test cluster (eval \"$(scripts/kube.sh start)\")");
    }
    path
}

/// A `reeval.toml` choosing the test cluster with its settings (see tests/kubernetes.rs).
fn config(dir: &Path) -> PathBuf {
    let node = std::env::var("REEVAL_TEST_KUBE_NODE").unwrap_or_else(|_| "reeval-node".into());
    let registry = std::env::var("REEVAL_TEST_KUBE_REGISTRY").expect("scripts/kube.sh env sets it");
    let path = dir.join("reeval.toml");
    std::fs::write(
        &path,
        format!(
            "backend = \"kubernetes\"\nnamespace = \"default\"\n\n[kubernetes]\nnode_name = \"{node}\"\nhost_network = true\nrequests = {{ cpu = \"10m\", memory = \"32Mi\" }}\nregistry = \"{registry}\"\nready_timeout_secs = 120\n"
        ),
    )
    .unwrap();
    path
}

fn reeval(args: &[&str], kubeconfig: &str, dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reeval"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("REEVAL_CONFIG", config(dir))
        .env("REEVAL_RECORD_DIR", dir.join("runs"))
        .output()
        .expect("run reeval")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn harbor_run_and_clean_use_the_cluster() {
    let Some(kubeconfig) = cluster() else { return };
    let dir = std::env::temp_dir().join(format!("reeval-cli-kube-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tasks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/harbor/tasks");
    let tasks = tasks.to_str().unwrap();

    let out = reeval(
        &["harbor", "run", tasks, "--harness", "oracle", "--tag", "smoke"],
        &kubeconfig,
        &dir,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(stdout.contains("test hello-shell ... ok"), "{stdout}");
    let run = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir());
    let record = run.expect("a run directory").join("hello-shell.oracle.t1.try1.json");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert_eq!(record["reward"], serde_json::json!({"reward": 1.0}));
    // A pod of the cluster ran it, from the image pushed to the cluster's registry.
    let phase = |name: &str| {
        record["phases"].as_array().unwrap().iter().find(|p| p["phase"] == name).unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        record["container"].as_str().unwrap().starts_with("reeval-"),
        "{}",
        record["container"]
    );
    let image = phase("image");
    assert!(image.contains(" in 127.0.0.1:") || image.contains("already in"), "{image}");

    let out = reeval(&["clean"], &kubeconfig, &dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("removed "), "{}", text(&out.stdout));
    // `clean` asks the cluster the settings name, not the local engine.
    let out = reeval(&["clean"], "/nonexistent/kubeconfig", &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("Kubernetes configuration"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}
