//! Built images and egress on the cluster: preflight stops a run that needs
//! what the cluster was not configured for and says what to do; a run's
//! gateway pod carries the sandbox's egress with a brokered key; built images
//! are pushed to the registry and pulled by the node.

use super::*;

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn built_images_and_egress_stop_the_run_in_preflight_saying_what_to_do() {
    let Some(_cluster) = shared().await else { return };
    let built = Eval::new("kube_built_image", |c| {
        Box::pin(async move { c.exec("true").await.map(|_| ()) })
    })
    .environment(|| {
        Environment::new().image(reeval::Image::install("reeval/base:latest", ["true"]))
    });
    let egress =
        Eval::new("kube_egress", |c| Box::pin(async move { c.exec("true").await.map(|_| ()) }))
            .environment(|| Environment::new().allow_egress("pypi.org"));
    let e = runner("kube-preflight").run(vec![built, egress]).await.unwrap_err();
    assert_eq!(e.missing.len(), 2, "{e}");
    assert!(
        e.missing[0].contains("kube_built_image") && e.missing[0].contains("Image::from"),
        "{e}"
    );
    // Egress needs isolation the host network cannot give: refused unless a test cluster says so.
    assert!(
        e.missing[1].contains("kube_egress") && e.missing[1].contains("unisolated_egress"),
        "{e}"
    );
}

/// A port on 127.0.0.1 of the test cluster's network namespace (where its
/// pods live, on the node's network) forwarded to `to` on this host's
/// loopback: socat in the netns to a unix socket, socat here from it to `to`.
/// So an upstream of the test's is reachable from the gateway pod. Ended on drop.
struct NetnsBridge {
    addr: std::net::SocketAddr,
    children: Vec<std::process::Child>,
    socket: std::path::PathBuf,
}

impl NetnsBridge {
    fn to(to: std::net::SocketAddr) -> Self {
        // A port free here is almost surely free in the netns, which has only lo.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let socket = common::temp_dir("kube-bridge").join("upstream.sock");
        let spawn = |argv: &[String]| {
            std::process::Command::new(&argv[0])
                .args(&argv[1..])
                .spawn()
                .expect("socat (apt-get install socat)")
        };
        let host = spawn(&[
            "socat".into(),
            format!("UNIX-LISTEN:{},fork", socket.display()),
            format!("TCP:{to}"),
        ]);
        let netns = spawn(&[
            "ip".into(),
            "netns".into(),
            "exec".into(),
            "reeval-kube".into(),
            "socat".into(),
            format!("TCP-LISTEN:{port},bind=127.0.0.1,fork,reuseaddr"),
            format!("UNIX-CONNECT:{}", socket.display()),
        ]);
        let bridge = Self {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            children: vec![host, netns],
            socket,
        };
        let listening = || {
            std::process::Command::new("ip")
                .args(["netns", "exec", "reeval-kube", "ss", "-Hltn", &format!("sport = :{port}")])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty())
        };
        let began = std::time::Instant::now();
        while !(listening() && bridge.socket.exists()) {
            assert!(began.elapsed() < Duration::from_secs(10), "the bridge did not come up");
            std::thread::sleep(Duration::from_millis(100));
        }
        bridge
    }
}

impl Drop for NetnsBridge {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

const GATEWAY_KEY: &str = "sk-ant-kube-REAL-0123456789abcdef";
const GATEWAY_PLACEHOLDER: &str = "reeval-placeholder-ANTHROPIC_API_KEY";

/// Egress through the run's gateway pod: an allowed host reached, a brokered
/// placeholder swapped for the real key on the bound host only (TLS
/// intercepted with the run's CA), a host off the allowlist refused, every
/// request in the record, and the gateway's pod, Services and Secret gone
/// after the run. The test cluster's pods share the node's network, so
/// isolation is not enforced there (`unisolated_egress`): the gateway phase says so.
#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn egress_goes_through_the_runs_gateway_pod_with_a_brokered_key() {
    let Some(_cluster) = shared().await else { return };
    let _turn = HOST_NETWORK_EGRESS.lock().await;
    use reeval::egress::{Broker, EgressSettings};
    use upstreams::{Behaviour, TestPki, upstream};
    let pki = TestPki::new();
    let plain = upstream(None, Behaviour::Echo).await;
    let api = upstream(Some(pki.server_config(&["api.anthropic.com"])), Behaviour::Echo).await;
    let (plain_in_netns, api_in_netns) = (NetnsBridge::to(plain.addr), NetnsBridge::to(api.addr));
    let agent = r#"
        curl -s -m 10 http://plain.test/plain -H "x-api-key: $ANTHROPIC_API_KEY" > plain.txt
        curl -s -m 10 https://api.anthropic.com/v1/messages -H "x-api-key: $ANTHROPIC_API_KEY" > api.txt
        curl -s -m 10 http://refused.test/refused > refused.txt
        env > /tmp/agent-env.txt
        true
    "#;
    // `server: 'https://127.0.0.1:PORT'` of the test kubeconfig.
    let kubeconfig = std::fs::read_to_string(cluster().unwrap()).unwrap();
    let api_server = kubeconfig
        .split("https://")
        .nth(1)
        .and_then(|rest| rest.split(['\'', '"', ' ', ',', '}']).next())
        .expect("the API server in the kubeconfig")
        .to_string();
    let eval = Eval::new("kube_egress_gateway", move |c| {
        let api_server = api_server.clone();
        Box::pin(async move {
            c.send(agent).await?;
            expect(c.read_file("plain.txt").await?).to_equal("hello from upstream")?;
            expect(c.read_file("api.txt").await?).to_equal("hello from upstream")?;
            expect(c.read_file("refused.txt").await?)
                .to_contain("not on this sandbox's allowlist")?;
            let env = c.read_file("/tmp/agent-env.txt").await?;
            expect(env.as_str()).to_contain(GATEWAY_PLACEHOLDER)?;
            expect(env.as_str()).not().to_contain(GATEWAY_KEY)?;
            // The relay (the pod's main process) probed the API server, the node's kubelet
            // (its port from the node's status), outside addresses and DNS.
            let relay = c.exec("tr '\\0' ' ' < /proc/1/cmdline").await?.stdout;
            for probe in [api_server.as_str(), ":20250", "1.1.1.1:443", "8.8.8.8:53", "--dns"] {
                expect(relay.as_str()).to_contain(probe)?;
            }
            Ok(())
        })
    })
    .environment(|| {
        Environment::new()
            .secret("ANTHROPIC_API_KEY")
            .broker("ANTHROPIC_API_KEY", Broker::header("api.anthropic.com", "x-api-key"))
            .allow_egress("api.anthropic.com")
            .allow_egress("plain.test")
    });
    let file = common::env_file("kube-egress", &[("ANTHROPIC_API_KEY", GATEWAY_KEY)]);
    let records = common::temp_dir("kube-egress-runs");
    let egress = EgressSettings {
        extra_roots_pem: vec![pki.ca_pem.clone()],
        resolve: vec![
            ("plain.test".to_string(), plain_in_netns.addr),
            ("refused.test".to_string(), plain_in_netns.addr),
            ("api.anthropic.com".to_string(), api_in_netns.addr),
        ],
        ..EgressSettings::default()
    };
    let runner = common::runner_with("kube-egress", |c| {
        c.settings.backend =
            reeval::sandbox::BackendConfig::Kubernetes(Box::new(KubernetesConfig {
                unisolated_egress: true,
                // No kube-proxy here: ClusterIPs do not route, the pod's IP does.
                gateway_address: reeval::sandbox::GatewayAddress::PodIp,
                ..config()
            }));
        c.settings.env_file = Some(file);
        c.settings.record_dir = records.clone();
        c.egress = egress;
    });
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    let r = &report.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}\negress: {:#?}", r.message, r.egress);
    let gateway = r.phases.iter().find(|p| p.phase == "gateway").expect("a gateway phase");
    let detail = &gateway.detail;
    assert!(detail.contains("gateway pod") && detail.contains("NOT enforced"), "{detail}");

    // The real key went to the bound host only; the placeholder elsewhere.
    let header = |seen: &[upstreams::Seen], name: &str| {
        seen.iter().find_map(|s| s.headers.get(name)?.to_str().ok().map(str::to_string))
    };
    assert_eq!(header(&api.seen(), "x-api-key").as_deref(), Some(GATEWAY_KEY));
    assert_eq!(header(&plain.seen(), "x-api-key").as_deref(), Some(GATEWAY_PLACEHOLDER));
    assert!(plain.seen().iter().all(|s| !s.uri.contains("refused")), "a refusal is never dialled");

    // Every request is in the record, the refusal too.
    let route = |host: &str| {
        r.egress.iter().find(|e| e.host == host).map(|e| (e.route.as_str(), e.allowed, e.status))
    };
    assert_eq!(route("plain.test"), Some(("http", true, 200)));
    assert_eq!(route("api.anthropic.com"), Some(("intercept", true, 200)));
    assert_eq!(route("refused.test"), Some(("http", false, 403)));
    let written = common::all_files_text(&records);
    assert!(!written.contains(GATEWAY_KEY), "the key reached a file the run wrote");

    // The gateway pod, its Secret and the attempt's Service went with the run.
    let left = backend().await.leftovers_of_run(&report.run_id).await.expect("list");
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Images reeval builds go to the registry the cluster pulls from: built on
/// the local engine, pushed (the gateway's image too), pulled by the node
/// (which has neither image of its own), and not pushed again when the
/// registry has the tag. `scripts/kube.sh start` runs the registry.
#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn built_images_are_pushed_to_the_registry_and_pulled_by_the_node() {
    let Some(_cluster) = shared().await else { return };
    let _turn = HOST_NETWORK_EGRESS.lock().await;
    let registry = std::env::var("REEVAL_TEST_KUBE_REGISTRY").expect("scripts/kube.sh env sets it");
    // A step whose output is in the image only: the pod can only have it by pulling that image.
    let stamp = format!("built-{}", std::process::id());
    let install =
        reeval::Image::install("reeval/base:latest", [format!("echo {stamp} > /built.txt")]);
    let built = {
        let (stamp, install) = (stamp.clone(), install.clone());
        move || {
            let stamp = stamp.clone();
            Eval::new("kube_built_image_pushed", move |c| {
                let stamp = stamp.clone();
                Box::pin(async move {
                    expect(c.exec("cat /built.txt").await?.stdout)
                        .to_equal(format!("{stamp}\n"))?;
                    Ok(())
                })
            })
            .environment({
                let install = install.clone();
                move || Environment::new().image(install.clone())
            })
        }
    };
    // An eval with egress: its run's gateway pod runs from the pushed gateway image.
    let egress = Eval::new("kube_gateway_image_pushed", |c| {
        Box::pin(async move {
            // The gateway answers (checks have no egress of their own): it is up, from that image.
            let refused = c.exec("curl -s -m 10 http://refused.test/").await?;
            expect(refused.stdout).to_contain("reeval egress gateway: host refused.test")?;
            Ok(())
        })
    })
    .environment(|| Environment::new().allow_egress("allowed.test"));
    let with_registry = |c: &mut reeval::RunConfig| {
        c.settings.backend =
            reeval::sandbox::BackendConfig::Kubernetes(Box::new(KubernetesConfig {
                registry: Some(registry.clone()),
                // The node pulls what it does not have.
                image_pull_policy: None,
                unisolated_egress: true,
                gateway_address: reeval::sandbox::GatewayAddress::PodIp,
                ..config()
            }))
    };
    let report = common::runner_with("kube-registry", with_registry)
        .run(vec![built(), egress])
        .await
        .expect("preflight passes with a registry");
    let image_detail = |r: &Record| {
        r.phases.iter().find(|p| p.phase == "image").map(|p| p.detail.clone()).unwrap_or_default()
    };
    let find = |records: &[Record], name: &str| {
        records.iter().find(|r| r.eval == name).cloned().expect("a record")
    };
    let r = find(&report.records, "kube_built_image_pushed");
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let detail = image_detail(&r);
    assert!(detail.contains(&format!("pushed in {registry} as {registry}/")), "{detail}");
    let g = find(&report.records, "kube_gateway_image_pushed");
    assert_eq!(g.outcome, Outcome::Pass, "{:?}", g.message);
    assert!(backend().await.leftovers_of_run(&report.run_id).await.unwrap().is_empty());

    // The registry has both: the environment's image and the gateway's.
    let catalog = reqwest::get(format!("http://{registry}/v2/_catalog"))
        .await
        .and_then(reqwest::Response::error_for_status)
        .expect("the registry answers")
        .text()
        .await
        .unwrap();
    assert!(catalog.contains("reeval/gateway"), "{catalog}");
    let pushed =
        detail.rsplit(" as ").next().and_then(|s| s.split(' ').next()).unwrap().to_string();
    let repo =
        pushed.trim_start_matches(&format!("{registry}/")).rsplit_once(':').unwrap().0.to_string();
    assert!(catalog.contains(&repo), "{repo} in {catalog}");

    // A second run finds the tag there and pushes nothing.
    let again = common::runner_with("kube-registry-again", with_registry)
        .run(vec![built()])
        .await
        .expect("preflight");
    let r = &again.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    assert!(image_detail(r).contains(&format!("already in {registry}")), "{}", image_detail(r));

    // The local engine keeps its build cache, not the registry's tags of it.
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let filters =
        std::collections::HashMap::from([("reference", vec![format!("{registry}/reeval/*")])]);
    let tagged = docker
        .list_images(Some(
            bollard::query_parameters::ListImagesOptionsBuilder::default()
                .filters(&filters)
                .build(),
        ))
        .await
        .unwrap();
    // Nor this test's own image, built for its stamp (the gateway image is a cache like any other).
    let local = pushed.trim_start_matches(&format!("{registry}/")).to_string();
    for tag in tagged
        .iter()
        .flat_map(|i| i.repo_tags.iter())
        .filter(|t| t.starts_with(&registry))
        .chain([&local])
    {
        let _ = docker
            .remove_image(tag, None::<bollard::query_parameters::RemoveImageOptions>, None)
            .await;
    }
}
