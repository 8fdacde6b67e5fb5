//! Teardown and the run's end sweep: the pod deleted now and waited for, and
//! only this runner's objects of the run swept.

use super::*;

#[tokio::test]
async fn teardown_deletes_the_pod_now_and_its_policy_and_waits_until_it_is_gone() {
    let gets = Arc::new(Mutex::new(0));
    let counter = gets.clone();
    let api = FakeApi::start(move |r: &Seen| match r.method.as_str() {
        "POST" => Reply::Json(201, r.body.clone()),
        "DELETE" => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
        // Still there twice (terminating), then gone.
        _ => {
            let mut n = counter.lock().unwrap();
            *n += 1;
            if *n <= 2 {
                Reply::Json(200, json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}))
            } else {
                Reply::Json(404, json!({"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404, "message": "gone"}))
            }
        }
    })
    .await;
    let sandbox = sandbox(&api).await;
    let name = sandbox.id().to_string();
    sandbox.destroy().await.unwrap();
    let calls = api.calls();
    assert_eq!(
        calls[2..],
        [
            format!("DELETE /api/v1/namespaces/evals/pods/{name}"),
            format!("DELETE /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies/{name}"),
            format!("GET /api/v1/namespaces/evals/pods/{name}"),
            format!("GET /api/v1/namespaces/evals/pods/{name}"),
            format!("GET /api/v1/namespaces/evals/pods/{name}"),
        ]
    );
    assert_eq!(api.seen()[2].body["gracePeriodSeconds"], 0);
}

#[tokio::test]
async fn a_policy_whose_create_failed_is_deleted_by_name_and_no_pod_is_made() {
    let api = FakeApi::start(move |r: &Seen| match r.method.as_str() {
        "POST" => Reply::Json(500, json!({"kind": "Status", "status": "Failure", "reason": "InternalError", "code": 500, "message": "etcd timed out"})),
        _ => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
    })
    .await;
    let Err(e) = api.backend(KubernetesConfig::default()).create(&spec()).await else {
        panic!("the create fails")
    };
    assert!(e.to_string().contains("create the NetworkPolicy of pod reeval-"), "{e}");
    let calls = api.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0], "POST /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies");
    assert!(
        calls[1].starts_with(
            "DELETE /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies/reeval-"
        ),
        "{calls:?}"
    );
}

#[tokio::test]
async fn the_sweep_deletes_only_this_runners_pods_policies_services_and_secrets_of_the_run() {
    let api = FakeApi::start(move |r: &Seen| {
        let item = |name: &str, owner: &str| {
            json!({"metadata": {"name": name, "annotations": {LABEL_OWNER: owner}}})
        };
        let list = |kind: &str, items: Vec<Value>| {
            Reply::Json(200, json!({"apiVersion": "v1", "kind": kind, "metadata": {}, "items": items}))
        };
        match r.method.as_str() {
            "GET" if r.target.contains("/pods") => list(
                "PodList",
                vec![item("mine", &owner_label()), item("theirs", "other-host:1:1")],
            ),
            "GET" if r.target.contains("/services") => list(
                "ServiceList",
                vec![item("reeval-gw-1-20000", &owner_label()), item("their-svc", "other-host:1:1")],
            ),
            "GET" if r.target.contains("/secrets") => list(
                "SecretList",
                vec![item("reeval-gw-1", &owner_label()), item("their-secret", "other-host:1:1")],
            ),
            "GET" => list("NetworkPolicyList", vec![item("mine", &owner_label())]),
            _ => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
        }
    })
    .await;
    let removed =
        api.backend(KubernetesConfig::default()).sweep(Sweep::OwnRun("run:1")).await.unwrap();
    assert_eq!(removed, 1);
    let calls = api.calls();
    assert_eq!(
        calls,
        [
            "GET /api/v1/namespaces/evals/pods",
            "DELETE /api/v1/namespaces/evals/pods/mine",
            "GET /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies",
            "DELETE /apis/networking.k8s.io/v1/namespaces/evals/networkpolicies/mine",
            // The run's gateway: its attempts' Services, and the Secret with its credentials.
            "GET /api/v1/namespaces/evals/services",
            "DELETE /api/v1/namespaces/evals/services/reeval-gw-1-20000",
            "GET /api/v1/namespaces/evals/secrets",
            "DELETE /api/v1/namespaces/evals/secrets/reeval-gw-1",
        ]
    );
    for seen in api.seen().iter().filter(|s| s.method == "GET") {
        assert!(seen.target.contains("labelSelector=dev.reeval.run=run-1"), "{}", seen.target);
    }
}
