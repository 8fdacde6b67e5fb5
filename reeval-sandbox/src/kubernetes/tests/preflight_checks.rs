//! Preflight against the fake API server: RBAC's denials listed, a missing
//! namespace named, images that need a registry, a run's needs and its
//! brokered secrets.

use super::*;

#[tokio::test]
async fn preflight_lists_every_permission_rbac_denies() {
    let api = FakeApi::start(|r: &Seen| {
        if r.target.starts_with("/version") {
            return Reply::Json(200, json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}));
        }
        if r.target.starts_with("/api/v1/namespaces/") {
            return Reply::Json(200, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "evals"}}));
        }
        let attrs = &r.body["spec"]["resourceAttributes"];
        let denied = (attrs["resource"] == "pods" && attrs["subresource"] == "exec")
            || (attrs["resource"] == "secrets" && attrs["verb"] == "create");
        let mut review = r.body.clone();
        review["status"] = json!({"allowed": !denied});
        Reply::Json(201, review)
    })
    .await;
    let found = api.backend(KubernetesConfig::default()).preflight().await;
    assert_eq!(found.missing.len(), 1, "{found:?}");
    let m = &found.missing[0];
    assert!(m.contains("namespace evals"), "{m}");
    assert!(m.contains("not allowed to create pods/exec, get pods/exec, create secrets;"), "{m}");
    assert!(!m.contains("portforward"), "{m}");
    assert!(found.warnings[0].contains("NetworkPolicy"));
    // Every needed permission was asked about, in the backend's namespace.
    let asked = api.seen().iter().filter(|s| s.target.contains("selfsubjectaccessreviews")).count();
    assert_eq!(asked, preflight::NEEDED.iter().map(|n| n.3.len()).sum::<usize>());
}

#[tokio::test]
async fn preflight_names_a_missing_namespace() {
    let api = FakeApi::start(|r: &Seen| {
        if r.target.starts_with("/version") {
            return Reply::Json(200, json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}));
        }
        if r.target.starts_with("/api/v1/namespaces/") {
            return Reply::Json(404, json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}));
        }
        let mut review = r.body.clone();
        review["status"] = json!({"allowed": true});
        Reply::Json(201, review)
    })
    .await;
    let found = api.backend(KubernetesConfig::default()).preflight().await;
    assert_eq!(found.missing.len(), 1, "{found:?}");
    assert!(found.missing[0].contains("kubectl create namespace evals"), "{found:?}");
}

#[tokio::test]
async fn images_reeval_builds_need_a_registry_and_say_so() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let backend = api.backend(KubernetesConfig::default());
    let ready = backend.ensure_image(&ImageSpec::From("ghcr.io/x/y:1".into()), "").await.unwrap();
    assert_eq!(ready.reference, "ghcr.io/x/y:1");
    let e = backend
        .ensure_image(
            &ImageSpec::Install { base: "debian:12".into(), steps: vec!["true".into()] },
            "",
        )
        .await
        .unwrap_err();
    assert!(matches!(e, SandboxError::ImageMissing { .. }), "{e}");
    assert!(e.to_string().contains("Image::from") && e.to_string().contains("registry ="), "{e}");
    // With a registry, preflight lets it through (it is built and pushed in the image phase).
    let install = ImageSpec::Install { base: "debian:12".into(), steps: vec!["true".into()] };
    assert!(backend.check_image(&install).is_err());
    let with = api.backend(KubernetesConfig {
        registry: Some("127.0.0.1:5000".into()),
        ..Default::default()
    });
    assert!(with.check_image(&install).is_ok());
}

/// What a run asks of the cluster, checked before anything starts: images it cannot pull,
/// egress on the node's network, and the brokered secrets its gateway pod gets.
#[tokio::test]
async fn a_runs_needs_are_checked_and_its_brokered_secrets_kept_for_the_gateway() {
    use crate::{Backend, CellNeeds, RunNeeds};
    let api = FakeApi::start(|r: &Seen| {
        if r.target.starts_with("/version") {
            return Reply::Json(200, json!({"major": "1", "minor": "20", "gitVersion": "v1.20.2", "gitCommit": "", "gitTreeState": "", "buildDate": "", "goVersion": "", "compiler": "", "platform": ""}));
        }
        if r.target.starts_with("/api/v1/namespaces/") {
            return Reply::Json(200, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "evals"}}));
        }
        let mut review = r.body.clone();
        review["status"] = json!({"allowed": true});
        Reply::Json(201, review)
    })
    .await;
    let install = ImageSpec::Install { base: "debian:12".into(), steps: vec!["true".into()] };
    let cell = |eval: &str, images: Vec<ImageSpec>, egress: bool| CellNeeds {
        eval: eval.into(),
        images,
        egress,
        brokered: BTreeMap::from([(
            "REEVAL_GW_SECRET_KEY".to_string(),
            secrecy::SecretString::from("real".to_string()),
        )]),
    };
    let run = RunNeeds {
        cells: vec![
            cell("builds", vec![install.clone(), install.clone()], false),
            cell("talks", vec![ImageSpec::From("ghcr.io/x/y:1".into())], true),
        ],
    };
    let backend = api.backend(KubernetesConfig { host_network: true, ..Default::default() });
    let found = backend.check_run(&run).await;
    assert_eq!(found.missing.len(), 2, "one line per problem, not per image: {found:?}");
    assert!(found.missing[0].starts_with("environment of eval builds: "), "{found:?}");
    assert!(found.missing[1].starts_with("eval talks needs egress"), "{found:?}");
    let unisolated = api.backend(KubernetesConfig {
        host_network: true,
        unisolated_egress: true,
        registry: Some("127.0.0.1:5000".into()),
        ..Default::default()
    });
    let found = unisolated.check_run(&run).await;
    assert!(found.missing.is_empty(), "{found:?}");
    assert!(found.warnings.iter().any(|w| w.starts_with("unisolated_egress = true")), "{found:?}");
    let kept = unisolated.credentials.read().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(kept, ["REEVAL_GW_SECRET_KEY"]);
}
