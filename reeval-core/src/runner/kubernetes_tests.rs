//! An eval with services and volumes (a Harbor task's compose sidecars) on
//! the Kubernetes backend, in preflight: what a pod holds passes (services
//! become containers of the sandbox's pod, volumes its `emptyDir`s), what it
//! cannot hold is refused before anything starts, naming the eval, the
//! service or mount, the engine and why (the backend's `create` refuses the
//! same: reeval-sandbox's `kubernetes/tests/services.rs`).

use crate::settings::Settings;
use std::sync::Arc;

use crate::sandbox::KubernetesConfig;
use crate::sandbox::kubernetes::{KubeBackend, kube};

/// A backend whose API server is not there: preflight says so, and what else it finds.
fn backend() -> KubeBackend {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    KubeBackend::with_config(config, KubernetesConfig::default()).unwrap()
}

/// What preflight refuses of `eval` on the cluster (its API server among it: it is not there).
async fn refused(tag: &str, eval: crate::eval::Eval) -> String {
    let config = crate::runner::RunConfig::from(Settings {
        record_dir: std::env::temp_dir().join(format!("reeval-kube-{tag}-{}", std::process::id())),
        harnesses: vec!["oracle".into()],
        ..Settings::default()
    });
    let runner = crate::runner::Runner::new(config, crate::harness::HarnessRegistry::new())
        .with_backend(Arc::new(backend()));
    runner.run(vec![eval]).await.unwrap_err().to_string()
}

/// An eval with two services beside its sandbox sharing a volume (as a Harbor task's compose file gives).
fn task_with(db: &str) -> crate::eval::Eval {
    use crate::environment::{Environment, Image, Mount, Service};
    let db = db.to_string();
    crate::eval::Eval::new("with-db", |_c| Box::pin(async { Ok(()) })).environment(move || {
        Environment::new()
            .service(Service::new(&db, Image::from("postgres:16")))
            .service(
                Service::new("cache", Image::from("redis:7"))
                    .mount(Mount::volume("logs", "/var/log/cache")),
            )
            .mount(Mount::volume("logs", "/var/log/tool").read_only())
    })
}

#[tokio::test]
async fn services_and_volumes_a_pod_holds_pass_preflight() {
    let e = refused("svc-ok", task_with("db")).await;
    // Only the missing API server stops it.
    assert!(e.contains("failed to reach the Kubernetes API server"), "{e}");
    assert!(!e.contains("with-db has"), "{e}");
}

#[tokio::test]
async fn a_service_name_a_pods_hosts_file_cannot_hold_is_refused_in_preflight() {
    let e = refused("svc-name", task_with("my_db")).await;
    assert!(
        e.contains(
            "eval with-db has services (my_db, cache) that engine kubernetes cannot start: \
             failed to place service my_db in the sandbox's pod: the name `my_db` cannot be in a \
             pod's hosts file"
        ),
        "{e}"
    );
}

/// A path of this host (a Harbor task's bind mount): refused in preflight,
/// naming the eval, the mount and the engine.
#[tokio::test]
async fn a_host_path_is_refused_in_preflight_with_the_reason() {
    use crate::environment::{Environment, Mount};
    let eval = crate::eval::Eval::new("with-fixtures", |_c| Box::pin(async { Ok(()) }))
        .environment(|| {
            Environment::new().mount(Mount::host(std::env::temp_dir(), "/opt/fixtures").read_only())
        });
    let e = refused("mnt", eval).await;
    assert!(
        e.contains(&format!(
            "eval with-fixtures has mounts that engine kubernetes cannot give: the kubernetes \
             backend cannot mount a path of this host into a pod (host path {} at /opt/fixtures (read-only))",
            std::env::temp_dir().display()
        )),
        "{e}"
    );
}
