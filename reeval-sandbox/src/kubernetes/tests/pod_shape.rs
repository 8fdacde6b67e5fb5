//! The attempt's pod as the backend asks for it: its spec, its requests,
//! its labels, a status read, a pod evicted, and a port served through the
//! port-forward API, against the fake API server.

use super::*;

#[tokio::test]
async fn the_pod_is_bare_unprivileged_limited_labelled_and_placed_as_configured() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let config = KubernetesConfig {
        runtime_class: Some("gvisor".into()),
        node_selector: BTreeMap::from([("pool".into(), "evals".into())]),
        tolerations: vec![BTreeMap::from([
            ("key".into(), "dedicated".into()),
            ("operator".into(), "Equal".into()),
            ("value".into(), "evals".into()),
            ("effect".into(), "NoSchedule".into()),
        ])],
        image_pull_policy: Some("Always".into()),
        ..Default::default()
    };
    let sandbox = api.backend(config).create(&spec()).await.unwrap();
    let seen = api.seen();
    // The policy before the pod: the pod is never up without it.
    assert_eq!(
        api.calls(),
        [
            "POST /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies",
            "POST /api/v1/namespaces/evals/pods"
        ]
    );
    let policy = &seen[0].body;
    assert_eq!(policy["spec"]["podSelector"]["matchLabels"]["dev.reeval.pod"], sandbox.id());
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert!(
        policy["spec"].get("egress").is_none() && policy["spec"].get("ingress").is_none(),
        "{policy}"
    );

    let pod = &seen[1].body;
    let s = &pod["spec"];
    assert_eq!(s["restartPolicy"], "Never");
    assert_eq!(s["automountServiceAccountToken"], false);
    assert_eq!(s["runtimeClassName"], "gvisor");
    assert_eq!(s["nodeSelector"], json!({"pool": "evals"}));
    assert_eq!(
        s["tolerations"][0],
        json!({"key": "dedicated", "operator": "Equal", "value": "evals", "effect": "NoSchedule"})
    );
    assert!(s.get("hostNetwork").is_none());
    let c = &s["containers"][0];
    assert_eq!(c["image"], "registry.example/reeval/base:1");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(c["command"], json!(["sleep", "infinity"]));
    assert_eq!(c["workingDir"], "/workspace");
    assert_eq!(c["resources"]["limits"], json!({"memory": "1073741824", "cpu": "500m"}));
    assert_eq!(c["resources"]["requests"], c["resources"]["limits"]);
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(
        sc["capabilities"]["add"],
        json!(["CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID"])
    );
    // Labels are valid label values; the exact ones (and the owner) are annotations.
    let labels = &pod["metadata"]["labels"];
    assert_eq!(labels[LABEL_RUN], "2026-12-03T13-11-42-77");
    assert_eq!(labels["dev.reeval.attempt"], "a-1");
    assert_eq!(labels["dev.reeval.pod"], sandbox.id());
    assert_eq!(pod["metadata"]["annotations"][LABEL_RUN], "2026-12-03T13:11:42-77");
    assert_eq!(pod["metadata"]["annotations"][LABEL_OWNER], owner_label());
}

#[tokio::test]
async fn requests_can_be_lower_than_limits_and_test_clusters_use_the_host_network() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let config = KubernetesConfig {
        requests: BTreeMap::from([("cpu".into(), "50m".into())]),
        host_network: true,
        ..Default::default()
    };
    api.backend(config).create(&spec()).await.unwrap();
    let pod = &api.seen()[1].body;
    assert_eq!(pod["spec"]["hostNetwork"], true);
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["requests"],
        json!({"memory": "1073741824", "cpu": "50m"})
    );
}

#[tokio::test]
async fn serve_connects_through_the_port_forward_api() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let sandbox = sandbox(&api).await;
    let mut stream =
        sandbox.connect_port(8080).await.unwrap().expect("Kubernetes forwards ports itself");
    stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await.unwrap();
    let mut echoed = [0u8; 18];
    tokio::time::timeout(std::time::Duration::from_secs(5), stream.read_exact(&mut echoed))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&echoed, b"GET / HTTP/1.0\r\n\r\n");
    let forward = api.seen().into_iter().find(|s| s.target.contains("/portforward")).unwrap();
    assert!(
        forward
            .target
            .starts_with(&format!("/api/v1/namespaces/evals/pods/{}/portforward?", sandbox.id())),
        "{}",
        forward.target
    );
    assert!(forward.target.contains("ports=8080"), "{}", forward.target);
}

#[test]
fn label_values_are_valid() {
    assert_eq!(pod::label_value("2026-12-03T13:11:42-77"), "2026-12-03T13-11-42-77");
    assert_eq!(pod::label_value(":x:"), "x");
    assert_eq!(pod::label_value(&"a".repeat(80)).len(), 63);
}

#[test]
fn a_status_without_an_exit_code_is_not_a_success() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
    let s = |v: Value| Some(serde_json::from_value::<Status>(v).unwrap());
    assert_eq!(exec::outcome(s(exited(0).unwrap()), "p").unwrap(), exec::Outcome::Exited(0));
    assert_eq!(exec::outcome(s(exited(137).unwrap()), "p").unwrap(), exec::Outcome::Exited(137));
    let odd = s(
        json!({"status": "Failure", "reason": "InternalError", "message": "container not running"}),
    );
    assert!(exec::outcome(odd, "p").unwrap_err().to_string().contains("container not running"));
    assert!(exec::outcome(None, "p").is_err());
    let missing = s(
        json!({"status": "Failure", "message": "exec: \"nope\": executable file not found in $PATH"}),
    );
    assert!(matches!(exec::outcome(missing, "p").unwrap(), exec::Outcome::NotFound(_)));
}

#[test]
fn a_pod_evicted_or_being_deleted_is_removed() {
    use k8s_openapi::api::core::v1::Pod;
    let state =
        |pod: Value| super::sandbox::pod_state(&serde_json::from_value::<Pod>(pod).unwrap());
    let running = json!({"phase": "Running", "containerStatuses": [{"name": "sandbox", "image": "i",
        "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]});
    assert_eq!(
        state(json!({"metadata": {"name": "p"}, "status": running})),
        crate::SandboxState::Running
    );
    let deleting =
        state(json!({"metadata": {"name": "p", "deletionTimestamp": "2026-12-06T06:00:00Z"},
        "status": running}));
    assert!(deleting.is_lost(), "{deleting}");
    assert_eq!(
        deleting.to_string(),
        "was removed (its pod is being deleted: deleted or evicted from outside)"
    );
    let evicted =
        state(json!({"metadata": {"name": "p"}, "status": {"phase": "Failed", "reason": "Evicted",
        "message": "The node was low on resource: memory."}}));
    assert_eq!(
        evicted.to_string(),
        "was removed (its pod was evicted: The node was low on resource: memory.)"
    );
}
