//! An eval with services (a Harbor task's compose sidecars) on the Kubernetes backend: refused in
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

/// An eval with two services beside its sandbox (as a Harbor task's compose file gives).
fn task_with_a_service() -> crate::eval::Eval {
    use crate::environment::{Environment, Image, Service};
    crate::eval::Eval::new("with-db", |_c| Box::pin(async { Ok(()) })).environment(|| {
        Environment::new()
            .service(Service::new("db", Image::from("postgres:16")))
            .service(Service::new("cache", Image::from("redis:7")))
    })
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
            "eval with-db has services (db, cache) that engine kubernetes cannot start: \
             the kubernetes backend cannot start services beside a sandbox"
        ),
        "{e}"
    );
    assert!(e.contains("run it on a Docker or Podman engine"), "{e}");
}

/// A volume a sidecar shares with the sandbox (a Harbor task's named volume):
/// refused in preflight too, naming the eval, the mount and the engine.
#[tokio::test]
async fn a_task_with_mounts_is_refused_in_preflight_with_the_reason() {
    use crate::environment::{Environment, Mount};
    let config = crate::runner::RunConfig {
        record_dir: std::env::temp_dir().join(format!("reeval-kube-mnt-{}", std::process::id())),
        harnesses: vec!["oracle".into()],
        ..Default::default()
    };
    let runner = crate::runner::Runner::new(config, crate::harness::HarnessRegistry::new())
        .with_backend(Arc::new(backend()));
    let eval =
        crate::eval::Eval::new("with-logs", |_c| Box::pin(async { Ok(()) })).environment(|| {
            Environment::new().mount(Mount::volume("logs", "/var/log/tool").read_only())
        });
    let e = runner.run(vec![eval]).await.unwrap_err().to_string();
    assert!(
        e.contains(
            "eval with-logs has mounts that engine kubernetes cannot give: the kubernetes backend \
             cannot mount volumes or host paths into a sandbox (volume logs at /var/log/tool (read-only))"
        ),
        "{e}"
    );
}
