//! A sandbox with services on the Kubernetes backend: refused by `create`
//! (preflight refuses a task with services before anything starts: the
//! runner's `kubernetes_tests.rs` in reeval-core).

use super::KubeBackend;
use crate::Image;
use crate::{Backend, KubernetesConfig, NetworkSpec, SandboxSpec, Service, ServiceStart};

/// A backend whose API server is not there.
fn backend() -> KubeBackend {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    KubeBackend::with_config(config, KubernetesConfig::default()).unwrap()
}

#[tokio::test]
async fn create_refuses_services_too() {
    let service = Service::new("db", Image::from("postgres:16"));
    let spec = SandboxSpec {
        image: "x".into(),
        labels: Default::default(),
        workdir: "/workspace".into(),
        limits: Default::default(),
        network: NetworkSpec::None,
        main_process: None,
        services: vec![ServiceStart { service, image: "postgres:16".into() }],
        mounts: Vec::new(),
    };
    let e = backend().create(&spec).await.unwrap_err().to_string();
    assert!(e.contains("cannot start services beside a sandbox"), "{e}");
}
