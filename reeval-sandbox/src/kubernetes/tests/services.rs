//! A sandbox's services and volumes on the Kubernetes backend, against the
//! fake API server: the pod they make (services as its containers in their
//! start order, one-shot jobs and the volumes' copies as init containers,
//! the services' names in its hostAliases, volumes as emptyDirs mounted with
//! their modes), what a pod cannot hold refused before anything is created,
//! and, once the pod runs, each service waited for, a failed one named with
//! its log, and commands run in a service's own container.

use std::time::Duration;

use super::*;
use crate::kubernetes::room::Resources;
use crate::{Condition, Healthcheck, Mount, Service, ServiceStart};

/// A sandbox with a job (`setup`), a service others wait for to be healthy
/// (`tool`), one that waits for it (`reporter`), and a volume `logs` that
/// the sandbox mounts read-only and `tool` writes.
fn with_services() -> SandboxSpec {
    let image = ImageSpec::From("registry.example/tool:1".into());
    let mut tool = Service::new("tool", image.clone())
        .command(["sh", "-c", "echo $HOME > /out/log; exec sleep infinity"])
        .env("GREETING", "$(not expanded)")
        .healthcheck(Healthcheck::shell("grep -q . /out/log").every(Duration::from_secs(1)))
        .depends_on("setup", Condition::CompletedSuccessfully)
        .mount(Mount::volume("logs", "/out"));
    tool.aliases.push("tool.internal".into());
    tool.user = Some("999:998".into());
    let reporter = Service::new("reporter", image.clone())
        .depends_on("tool", Condition::Healthy)
        .mount(Mount::volume("logs", "/in").read_only());
    let setup = Service::new("setup", image).command(["true"]);
    let start =
        |service: Service| ServiceStart { service, image: "registry.example/tool:1".into() };
    SandboxSpec {
        services: vec![start(reporter), start(tool), start(setup)],
        mounts: vec![Mount::volume("logs", "/var/log/tool").read_only()],
        ..spec()
    }
}

fn ok_cluster() -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
    cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) })
}

#[tokio::test]
async fn services_are_containers_of_the_pod_in_their_order_and_volumes_its_empty_dirs() {
    let api = FakeApi::start(ok_cluster()).await;
    let config = KubernetesConfig {
        requests: BTreeMap::from([("cpu".into(), "10m".into())]),
        ..Default::default()
    };
    api.backend(config).create(&with_services()).await.unwrap();
    let pod = &api.seen()[1].body;
    let s = &pod["spec"];
    let names = |key: &str| -> Vec<String> {
        s[key].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().into()).collect()
    };
    // The volume's copy, then the job; the sandbox, then `tool` before `reporter`, which waits for it.
    assert_eq!(names("initContainers"), ["fill-vol-0-logs", "svc-2-setup"]);
    assert_eq!(names("containers"), ["sandbox", "svc-1-tool", "svc-0-reporter"]);
    assert_eq!(
        s["hostAliases"],
        json!([{"ip": "127.0.0.1", "hostnames": ["reporter", "tool", "tool.internal", "setup"]}])
    );
    assert_eq!(s["volumes"], json!([{"name": "vol-0-logs", "emptyDir": {}}]));

    let sandbox = &s["containers"][0];
    assert_eq!(
        sandbox["volumeMounts"],
        json!([{"name": "vol-0-logs", "mountPath": "/var/log/tool", "readOnly": true}])
    );
    // The volume starts with what the first container mounting it (the sandbox) has there.
    let fill = &s["initContainers"][0];
    assert_eq!(fill["image"], "registry.example/reeval/base:1");
    assert_eq!(fill["command"][3], "/var/log/tool");
    assert_eq!(fill["volumeMounts"], json!([{"name": "vol-0-logs", "mountPath": "/.reeval-fill"}]));
    assert_eq!(fill["securityContext"]["runAsUser"], 0);

    let tool = &s["containers"][1];
    assert_eq!(tool["image"], "registry.example/tool:1");
    assert_eq!(tool["imagePullPolicy"], "IfNotPresent");
    // Its command as Docker runs it: the image's entrypoint, `$` never expanded by the pod.
    assert!(tool.get("command").is_none(), "{tool}");
    assert_eq!(tool["args"], json!(["sh", "-c", "echo $$HOME > /out/log; exec sleep infinity"]));
    assert_eq!(tool["env"], json!([{"name": "GREETING", "value": "$$(not expanded)"}]));
    assert_eq!(tool["volumeMounts"], json!([{"name": "vol-0-logs", "mountPath": "/out"}]));
    assert_eq!(tool["securityContext"]["runAsUser"], 999);
    assert_eq!(tool["securityContext"]["runAsGroup"], 998);
    assert_eq!(tool["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(tool["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(
        tool["resources"],
        json!({"limits": {"memory": "4294967296", "cpu": "2000m"},
               "requests": {"memory": "4294967296", "cpu": "10m"}})
    );
    // `reporter` waits for it healthy: its hook runs the check and holds the containers after it.
    let hook = &tool["lifecycle"]["postStart"]["exec"]["command"];
    assert_eq!(hook[0], "/bin/sh");
    assert_eq!(hook[4], "124", "Docker's allowance: (1s + 30s) x 4");
    assert_eq!(hook[5], "/dev/termination-log");
    assert_eq!(
        hook.as_array().unwrap()[6..],
        [json!("/bin/sh"), json!("-c"), json!("grep -q . /out/log")]
    );
    let reporter = &s["containers"][2];
    assert!(reporter.get("lifecycle").is_none(), "nothing waits for it");
    assert_eq!(
        reporter["volumeMounts"],
        json!([{"name": "vol-0-logs", "mountPath": "/in", "readOnly": true}])
    );
    assert_eq!(s["initContainers"][1]["args"], json!(["true"]));

    // The scheduler's count: the containers' sum, or the most one init container asks.
    let manifest: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod.clone()).unwrap();
    let asked = Resources::requested_by(&manifest);
    assert!((asked.cpus - 0.03).abs() < 1e-9, "three containers at 10m each: {asked:?}");
}

#[tokio::test]
async fn what_a_pod_cannot_hold_is_refused_before_anything_is_created() {
    let api = FakeApi::start(ok_cluster()).await;
    let backend = api.backend(KubernetesConfig::default());
    let mut bad = with_services();
    bad.services[0].service.name = "Reporter_1".into();
    let e = backend.create(&bad).await.unwrap_err().to_string();
    assert!(
        e.contains("failed to place service Reporter_1 in the sandbox's pod: the name `Reporter_1` cannot be in a pod's hosts file"),
        "{e}"
    );
    let spec = SandboxSpec { mounts: vec![Mount::host("/etc", "/host-etc")], ..spec() };
    let e = backend.create(&spec).await.unwrap_err().to_string();
    assert!(e.contains("cannot mount a path of this host into a pod (host path /etc"), "{e}");
    assert!(api.calls().is_empty(), "nothing was created: {:?}", api.calls());
    // Preflight asks the same of an eval's services.
    let why = backend.runs_services(&[Service::new("db", ImageSpec::From("x".into()))]);
    assert_eq!(why, Ok(()));
}

/// A pod whose service container `svc-0-db` is in `state`, the sandbox's running.
fn pod_with(state: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                      "containerStatuses": [
                          {"name": "sandbox", "ready": true, "restartCount": 0, "image": "", "imageID": "",
                           "state": {"running": {}}},
                          {"name": "svc-0-db", "ready": false, "restartCount": 0, "image": "", "imageID": "",
                           "state": state}]}})
}

fn db(check: Option<Healthcheck>) -> SandboxSpec {
    let mut service = Service::new("db", ImageSpec::From("postgres:16".into()));
    service.healthcheck = check;
    SandboxSpec { services: vec![ServiceStart { service, image: "postgres:16".into() }], ..spec() }
}

#[tokio::test]
async fn a_service_that_exits_fails_the_start_naming_it_with_the_end_of_its_log() {
    let api = FakeApi::start(|r: &Seen| {
        if r.target.contains("/log?") {
            return Reply::Text("FATAL: bad config\n".into());
        }
        match r.method.as_str() {
            "POST" => Reply::Json(201, r.body.clone()),
            "GET" => Reply::Json(200, pod_with(json!({"terminated": {"exitCode": 3}}))),
            _ => Reply::Json(200, json!({"kind": "Status", "status": "Success"})),
        }
    })
    .await;
    let sandbox = api.backend(KubernetesConfig::default()).create(&db(None)).await.unwrap();
    let e = sandbox.start().await.unwrap_err().to_string();
    assert_eq!(
        e,
        SandboxError::engine_says(
            "start service db",
            "it exited with 3; its log ends: FATAL: bad config"
        )
        .to_string()
    );
    let logs = api.seen().into_iter().find(|s| s.target.contains("/log?")).expect("its log read");
    assert!(logs.target.contains("container=svc-0-db") && logs.target.contains("tailLines=15"));
}

#[tokio::test]
async fn a_service_is_healthy_before_first_use_and_commands_run_in_its_container() {
    let checks = Arc::new(Mutex::new(0));
    let counted = checks.clone();
    let api = FakeApi::start(cluster(move |r| {
        if !r.target.contains("container=svc-0-db") {
            return Session { stdout: vec![], stderr: vec![], status: exited(0) };
        }
        if r.argv == ["/bin/sh", "-c", "pg_isready"] {
            // Not yet, then healthy.
            let mut n = counted.lock().unwrap();
            *n += 1;
            return Session { stdout: vec![], stderr: vec![], status: exited(i64::from(*n < 2)) };
        }
        Session { stdout: b"in db\n".to_vec(), stderr: vec![], status: exited(0) }
    }))
    .await;
    let check = Healthcheck::shell("pg_isready").every(Duration::from_secs(1));
    let sandbox = api.backend(KubernetesConfig::default()).create(&db(Some(check))).await.unwrap();
    sandbox.start().await.expect("the service became healthy");
    assert_eq!(*checks.lock().unwrap(), 2, "checked until it passed");
    // As it is (no shell prologue: a service's image may have none), in its container.
    let out = sandbox.exec_in_service("db", &Command::new("psql").arg("-l")).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (0, "in db\n"));
    let seen = api.seen();
    let ran = seen.iter().rfind(|s| s.target.contains("/exec?")).unwrap();
    assert_eq!(ran.argv, ["psql", "-l"]);
    assert!(ran.target.contains("container=svc-0-db"), "{}", ran.target);
    // With a variable, through the prologue (still in its container, the value on stdin).
    let with_env = Command::new("env").env("PGUSER", "admin");
    sandbox.exec_in_service("db", &with_env).await.unwrap();
    let ran = api.seen().into_iter().rfind(|s| s.target.contains("/exec?")).unwrap();
    assert_eq!(ran.argv[..2], ["/bin/sh", "-c"]);
    assert!(String::from_utf8_lossy(&ran.env_block).contains("PGUSER=admin"));
    let e = sandbox.exec_in_service("nope", &Command::new("true")).await.unwrap_err();
    assert!(e.to_string().contains("there is no such service"), "{e}");
}

#[tokio::test]
async fn a_service_never_healthy_fails_the_start_with_its_last_check() {
    let api = FakeApi::start(|r: &Seen| {
        if r.target.contains("/exec?") {
            let code = if r.target.contains("container=svc-0-db") { 1 } else { 0 };
            return Reply::Exec(Session {
                stdout: b"no response\n".to_vec(),
                stderr: vec![],
                status: exited(code),
            });
        }
        if r.target.contains("/log?") {
            return Reply::Text(String::new());
        }
        cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) })(r)
    })
    .await;
    let mut check = Healthcheck::shell("pg_isready").every(Duration::from_millis(100));
    check.retries = Some(1);
    let sandbox = api.backend(KubernetesConfig::default()).create(&db(Some(check))).await.unwrap();
    let e = sandbox.start().await.unwrap_err().to_string();
    assert!(
        e.contains(
            "start service db: it is unhealthy (its last check said: no response); no output"
        ),
        "{e}"
    );
}
