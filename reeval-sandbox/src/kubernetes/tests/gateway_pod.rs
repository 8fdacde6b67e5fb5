//! The run's gateway on the cluster: its pod, secret and service, and the
//! attempt's network policy.

use super::*;

/// The run's gateway: a Secret with the CA and the brokered values under the
/// gateway pod's variable names; a pod that gets them as variables and
/// nothing else of the host; a Service per attempt selecting that pod on the
/// attempt's port; and the attempt pod's policy, which lets it reach only that.
#[test]
fn the_gateway_pod_its_secret_service_and_the_attempts_policy() {
    let request = crate::GatewayRequest {
        labels: BTreeMap::from([
            (LABEL_RUN.to_string(), "run:1".to_string()),
            (crate::LABEL_ATTEMPT.to_string(), "a-1".to_string()),
        ]),
        binary: Arc::new(Vec::new()),
        base_image: "reeval/base:latest".into(),
        files: Vec::new(),
        env: Vec::new(),
        command: Vec::new(),
        port: 3128,
    };
    let labels = gateway::run_labels(&request, "reeval-gw-1");
    assert!(!labels.contains_key(crate::LABEL_ATTEMPT), "the run's, not an attempt's");
    assert_eq!(labels[gateway::LABEL_GATEWAY], "reeval-gw-1");
    let credentials = BTreeMap::from([(
        "REEVAL_GW_SECRET_API_KEY".to_string(),
        secrecy::SecretString::from("real-value"),
    )]);

    let secret = gateway::secret("reeval-gw-1", &labels, "me:1:2", (b"CERT", b"KEY"), &credentials);
    let secret = serde_json::to_value(&secret).unwrap();
    assert_eq!(secret["metadata"]["labels"][LABEL_RUN], "run-1");
    assert_eq!(secret["metadata"]["annotations"][LABEL_OWNER], "me:1:2");
    let data = secret["data"].as_object().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["REEVAL_GW_CA_CERT", "REEVAL_GW_CA_KEY", "REEVAL_GW_SECRET_API_KEY"]
    );
    // base64 of "real-value"
    assert_eq!(data["REEVAL_GW_SECRET_API_KEY"], "cmVhbC12YWx1ZQ==");

    let names: Vec<String> = credentials.keys().cloned().collect();
    let pod = gateway::gateway_pod(
        "reeval-gw-1",
        "reeval/gateway:1",
        &labels,
        "me:1:2",
        &KubernetesConfig::default(),
        &names,
    );
    let pod = serde_json::to_value(&pod).unwrap();
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["image"], "reeval/gateway:1");
    assert_eq!(container["command"], json!(["sleep", "infinity"]));
    assert_eq!(container["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    assert_eq!(pod["metadata"]["labels"][gateway::LABEL_GATEWAY], "reeval-gw-1");
    assert!(pod["spec"]["volumes"].is_null(), "nothing of the host is mounted");
    let env = container["env"].as_array().unwrap();
    let from: Vec<(&str, &str, &str)> = env
        .iter()
        .map(|e| {
            let r = &e["valueFrom"]["secretKeyRef"];
            (e["name"].as_str().unwrap(), r["name"].as_str().unwrap(), r["key"].as_str().unwrap())
        })
        .collect();
    assert_eq!(
        from,
        [
            ("REEVAL_GW_CA_CERT", "reeval-gw-1", "REEVAL_GW_CA_CERT"),
            ("REEVAL_GW_CA_KEY", "reeval-gw-1", "REEVAL_GW_CA_KEY"),
            ("REEVAL_GW_SECRET_API_KEY", "reeval-gw-1", "REEVAL_GW_SECRET_API_KEY"),
        ]
    );
    assert!(env.iter().all(|e| e.get("value").is_none()), "no value in the pod spec");

    let service =
        gateway::service("reeval-gw-1-20000", "reeval-gw-1", &request.labels, "me:1:2", 20000);
    let service = serde_json::to_value(&service).unwrap();
    assert_eq!(service["spec"]["selector"], json!({gateway::LABEL_GATEWAY: "reeval-gw-1"}));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "proxy", "port": 20000, "targetPort": 20000, "protocol": "TCP"}])
    );
    assert_eq!(service["metadata"]["labels"][crate::LABEL_ATTEMPT], "a-1");

    // The attempt's pod: its policy allows egress to the gateway pods on its port, nothing else.
    let mut spec = spec();
    spec.network = crate::NetworkSpec::PodGateway {
        pod_labels: BTreeMap::from([(
            gateway::LABEL_GATEWAY.to_string(),
            "reeval-gw-1".to_string(),
        )]),
        port: 20000,
    };
    spec.main_process = Some(vec!["/run/reeval/reeval-relay".into(), "supervise".into()]);
    let policy = serde_json::to_value(pod::policy("reeval-abc", &spec, "me:1:2")).unwrap();
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
    assert!(policy["spec"]["ingress"].is_null(), "nothing in");
    assert_eq!(
        policy["spec"]["egress"],
        json!([{"to": [{"podSelector": {"matchLabels": {gateway::LABEL_GATEWAY: "reeval-gw-1"}}}],
                "ports": [{"protocol": "TCP", "port": 20000}]}])
    );
    let none = serde_json::to_value(pod::policy("reeval-abc", &self::spec(), "me:1:2")).unwrap();
    assert!(none["spec"]["egress"].is_null(), "without a gateway: nothing out");
    // Its relay is copied in after the pod started: the main process waits until it runs.
    let manifest = serde_json::to_value(pod::manifest(
        "reeval-abc",
        &spec,
        &KubernetesConfig::default(),
        "me:1:2",
    ))
    .unwrap();
    let command: Vec<String> =
        serde_json::from_value(manifest["spec"]["containers"][0]["command"].clone()).unwrap();
    assert_eq!(command[..2], ["/bin/sh", "-c"]);
    assert_eq!(command[3..], ["/run/reeval/reeval-relay", "supervise"]);
}
