//! A task with compose services on the Kubernetes backend: refused in
//! preflight, naming the eval, its services, the engine and why, before
//! anything starts (the backend's `create` refuses too: reeval-sandbox's
//! `kubernetes/services_refused.rs`).

use std::sync::Arc;

use crate::sandbox::KubernetesConfig;
use crate::sandbox::kubernetes::{KubeBackend, kube};

/// A backend whose API server is not there: preflight says so, and about the services.
fn backend() -> KubeBackend {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    KubeBackend::with_config(config, KubernetesConfig::default()).unwrap()
}

/// A Harbor task with a compose service, read from a temp dir.
fn task_with_a_service() -> crate::eval::Eval {
    let dir = std::env::temp_dir().join(format!("reeval-kube-services-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("task.toml"), "[task]\nname = \"org/with-db\"\n").unwrap();
    std::fs::write(dir.join("instruction.md"), "x").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "true").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM x\nWORKDIR /app\n").unwrap();
    std::fs::write(
        dir.join("environment/docker-compose.yaml"),
        "services:\n  db:\n    image: postgres:16\n  cache:\n    image: redis:7\n",
    )
    .unwrap();
    let task = crate::harbor::HarborTask::read(&dir, &|_| None).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    task.into_eval()
}

#[tokio::test]
async fn a_task_with_services_is_refused_in_preflight_with_the_reason() {
    let config = crate::runner::RunConfig {
        record_dir: std::env::temp_dir().join(format!("reeval-kube-svc-{}", std::process::id())),
        harnesses: vec!["oracle".into()],
        ..Default::default()
    };
    let runner = crate::runner::Runner::new(config, crate::harness::HarnessRegistry::new())
        .with_backend(Arc::new(backend()));
    let e = runner.run(vec![task_with_a_service()]).await.unwrap_err().to_string();
    assert!(
        e.contains(
            "eval with-db has services (cache, db) that engine kubernetes cannot start: \
             the kubernetes backend cannot start services beside a sandbox"
        ),
        "{e}"
    );
    assert!(e.contains("run it on a Docker or Podman engine"), "{e}");
}
