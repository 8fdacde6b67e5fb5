//! An image whose own `USER` is not root (`USER nobody`) on the test
//! cluster, as `tests/image_user.rs` on Docker: the pod's container runs as
//! root (its main process, and root's preparation of the agent user, keep
//! root's capabilities), setup and checks run as the image's user, the
//! agent as reeval's (uid 1000, no capabilities). Once built here and pushed
//! (the image's user known), once pulled by reference (`Image::from`: the
//! user learned when the pod starts, the pod made again as root).

use super::*;

/// What each attempt checks: who ran what, and with which capabilities.
fn eval(image: reeval::ImageSpec) -> Eval {
    Eval::new("kube_image_user", |c| {
        Box::pin(async move {
            c.send("id -u > agent.txt; grep CapEff /proc/self/status >> agent.txt").await?;
            expect(c.exec("cat agent.txt").await?.stdout)
                .to_equal("1000\nCapEff:\t0000000000000000\n")?;
            // The image's user, its group from the image's passwd, no capabilities.
            expect(c.exec("id -un; id -g; grep CapEff /proc/self/status").await?.stdout)
                .to_equal("nobody\n65534\nCapEff:\t0000000000000000\n")?;
            expect(c.exec("cat /tmp/setup-user").await?.stdout).to_equal("nobody\n")?;
            // The container's main process runs as root.
            expect(c.exec("stat -c %u /proc/1").await?.stdout).to_equal("0\n")?;
            expect(c.exec("stat -c %u:%g . /home/agent").await?.stdout)
                .to_equal("1000:1000\n1000:1000\n")?;
            Ok(())
        })
    })
    .environment(move || {
        Environment::new()
            .image(image.clone())
            .file("given.txt", "given\n")
            .setup("id -un > /tmp/setup-user")
    })
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn an_image_whose_user_is_not_root_runs_setup_and_checks_as_it_and_the_agent_as_its_own() {
    let Some(_cluster) = shared().await else { return };
    let registry = std::env::var("REEVAL_TEST_KUBE_REGISTRY").expect("scripts/kube.sh env sets it");
    let dir = common::temp_dir("kube-image-user");
    let dockerfile = dir.join("Dockerfile");
    // A stamp of this run: the image is this test's own, built and pushed now.
    std::fs::write(
        &dockerfile,
        format!(
            "FROM reeval/base:latest\nRUN echo {} > /opt/marker\nWORKDIR /work\nUSER nobody\n",
            std::process::id()
        ),
    )
    .unwrap();
    let with = |pull: Option<&str>| {
        let config = KubernetesConfig {
            registry: Some(registry.clone()),
            image_pull_policy: pull.map(String::from),
            ..config()
        };
        move |c: &mut reeval::RunConfig| {
            c.settings.backend = reeval::sandbox::BackendConfig::Kubernetes(Box::new(config))
        }
    };
    // Built here: the image's user is known, the pod starts as root.
    let built = common::runner_with("kube-image-user", with(None))
        .run(vec![eval(reeval::Image::dockerfile(dockerfile))])
        .await
        .expect("preflight passes with a registry");
    let r = &built.records[0];
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.phases);
    let pushed = r.image.clone().expect("the image was pushed");
    assert!(pushed.starts_with(&registry), "{pushed}");
    no_pod_left(&built.run_id).await;

    // Pulled by reference (the node has it now): its user is learned as the pod starts.
    let pulled = common::runner_with("kube-image-user-from", with(Some("IfNotPresent")))
        .run(vec![eval(reeval::Image::from(pushed.as_str()))])
        .await
        .expect("preflight");
    let p = &pulled.records[0];
    assert_eq!(p.outcome, Outcome::Pass, "{:?} {:?}", p.message, p.phases);
    no_pod_left(&pulled.run_id).await;
    let container = |r: &Record| r.phases.iter().find(|p| p.phase == "container").cloned();
    eprintln!("container phase, built: {:?}; pulled: {:?}", container(r), container(p));

    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let local = pushed.trim_start_matches(&format!("{registry}/")).to_string();
    for tag in [&pushed, &local] {
        let _ = docker
            .remove_image(tag, None::<bollard::query_parameters::RemoveImageOptions>, None)
            .await;
    }
}
