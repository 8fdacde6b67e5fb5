//! Preflight of the Kubernetes backend: the API answers, the namespace
//! exists, and RBAC allows every verb on every resource the backend uses,
//! asked with one `SelfSubjectAccessReview` each (they create nothing). Every
//! miss is listed at once. Whether the cluster enforces NetworkPolicy cannot
//! be read from the API; that is a warning.

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};

use crate::Preflight;

/// `(resource, subresource, verbs)` the backend needs in its namespace.
pub(super) const NEEDED: &[(&str, &str, &str, &[&str])] = &[
    ("", "pods", "", &["create", "get", "list", "delete"]),
    ("", "pods", "exec", &["create", "get"]),
    ("", "pods", "portforward", &["create", "get"]),
    // The log of a service that failed to start, for its error.
    ("", "pods", "log", &["get"]),
    ("networking.k8s.io", "networkpolicies", "", &["create", "list", "delete"]),
    ("", "secrets", "", &["create", "list", "delete"]),
    ("", "services", "", &["create", "list", "delete"]),
];

pub(super) async fn check(client: &kube::Client, namespace: &str) -> Preflight {
    let mut found = Preflight::default();
    if let Err(e) = client.apiserver_version().await {
        found.missing.push(format!("failed to reach the Kubernetes API server: {e}"));
        return found;
    }
    match Api::<Namespace>::all(client.clone()).get_opt(namespace).await {
        Ok(Some(_)) => {}
        Ok(None) => found.missing.push(format!(
            "failed to find namespace {namespace}: create it (kubectl create namespace {namespace}) or set `namespace` in reeval.toml"
        )),
        // Reading namespaces is not among what the backend needs: a 403 says nothing.
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        Err(e) => found.missing.push(format!("failed to read namespace {namespace}: {e}")),
    }
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let mut denied = Vec::new();
    for (group, resource, subresource, verbs) in NEEDED {
        for verb in *verbs {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        namespace: Some(namespace.into()),
                        group: Some(group.to_string()),
                        resource: Some(resource.to_string()),
                        subresource: (!subresource.is_empty()).then(|| subresource.to_string()),
                        verb: Some(verb.to_string()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let what = if subresource.is_empty() {
                format!("{verb} {resource}")
            } else {
                format!("{verb} {resource}/{subresource}")
            };
            match reviews.create(&PostParams::default(), &review).await {
                Ok(answer) if answer.status.as_ref().is_some_and(|s| s.allowed) => {}
                Ok(_) => denied.push(what),
                Err(e) => {
                    found.missing.push(format!(
                        "failed to ask the API server whether it allows {what}: {e}"
                    ));
                    return found;
                }
            }
        }
    }
    if !denied.is_empty() {
        found.missing.push(format!(
            "failed RBAC check in namespace {namespace}: not allowed to {}; apply the Role in docs/kubernetes.md (RBAC)",
            denied.join(", ")
        ));
    }
    found.warnings.push(
        "cannot tell whether this cluster enforces NetworkPolicy (that depends on its network plugin): without enforcement, the attempts' deny-all policies do nothing".into(),
    );
    found
}
