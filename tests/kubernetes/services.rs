//! A sandbox's services on the test cluster, through the backend itself:
//! reached from the sandbox by name, a command run in a service's own
//! container (as it is, and through the prologue with a variable), a volume
//! the service writes and the sandbox reads; and a service that exits
//! failing the start, named, with the end of its log as the kubelet kept it.

use super::*;
use reeval::environment::{Image, Mount, Service};
use reeval::sandbox::ServiceStart;

fn with(services: Vec<Service>, mounts: Vec<Mount>) -> SandboxSpec {
    let services = services
        .into_iter()
        .map(|service| ServiceStart { service, image: "reeval/base:latest".into() })
        .collect();
    SandboxSpec {
        image: "reeval/base:latest".into(),
        labels: BTreeMap::from([("dev.reeval.run".to_string(), "kube-services".to_string())]),
        workdir: "/workspace".into(),
        limits: Limits { memory_bytes: 256 << 20, nano_cpus: 500_000_000, pids: 256 },
        network: NetworkSpec::None,
        services,
        mounts,
        ..Default::default()
    }
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_service_is_reached_by_name_runs_commands_and_shares_a_volume() {
    let Some(_cluster) = shared().await else { return };
    let backend = backend().await;
    let db = Service::new("db", Image::from("reeval/base:latest"))
        .command(["sh", "-c", "echo from-db > /shared/note; exec sleep infinity"])
        .mount(Mount::volume("shared", "/shared"));
    let spec = with(vec![db], vec![Mount::volume("shared", "/from-db").read_only()]);
    let sandbox = backend.create(&spec).await.expect("create");
    let result = async {
        sandbox.start().await.expect("the pod and its service are up");
        let run = |script: &str| Command::new("sh").arg("-c").arg(script);
        let out = sandbox.exec(ExecRequest::plain(&run("getent hosts db"), &[])).await.unwrap();
        assert!(out.stdout.starts_with("127.0.0.1"), "{out:?}");
        let out = sandbox.exec(ExecRequest::plain(&run("cat /from-db/note"), &[])).await.unwrap();
        assert_eq!(out.stdout, "from-db\n", "{out:?}");
        // In the service's container: its own files (the volume at its own path).
        let out = sandbox.exec_in_service("db", &Command::new("cat").arg("/shared/note")).await;
        assert_eq!(out.unwrap().stdout, "from-db\n");
        let greet = run("echo \"$GREETING\"").env("GREETING", "it's $(here)");
        let out = sandbox.exec_in_service("db", &greet).await.unwrap();
        assert_eq!((out.exit_code, out.stdout.as_str()), (0, "it's $(here)\n"));
        // A file read out of the service's container (a Harbor artifact of a sidecar).
        let tar = sandbox.download_from_service("db", "/shared/note", 1 << 20).await.unwrap();
        let note = archive::single_file(&tar, "/shared/note").unwrap();
        assert_eq!(note, b"from-db\n");
        let missing = sandbox.download_from_service("db", "/nowhere", 1 << 20).await;
        assert!(matches!(missing, Err(reeval::SandboxError::NotFound { .. })), "{missing:?}");
        let none = sandbox.download_from_service("nodb", "/shared/note", 1 << 20).await;
        assert!(none.unwrap_err().to_string().contains("no such service"));
    }
    .await;
    sandbox.destroy().await.expect("destroy");
    result
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_service_that_exits_fails_the_start_with_its_log() {
    let Some(_cluster) = shared().await else { return };
    let backend = backend().await;
    let bad = Service::new("bad", Image::from("reeval/base:latest")).command([
        "sh",
        "-c",
        "echo 'bad: no config' >&2; exit 3",
    ]);
    let sandbox = backend.create(&with(vec![bad], Vec::new())).await.expect("create");
    let e = sandbox.start().await.expect_err("the service exited").to_string();
    sandbox.destroy().await.expect("destroy");
    assert!(e.contains("start service bad"), "{e}");
    assert!(e.contains("it exited with 3; its log ends: bad: no config"), "{e}");
}
