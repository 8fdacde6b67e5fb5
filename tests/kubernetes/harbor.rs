//! A Harbor task with a Dockerfile and compose sidecars sharing a named
//! volume, on the test cluster with the oracle, through reeval-harbor's
//! public API as a user runs it: the task's image is built here and pushed
//! to the cluster's registry; the sidecars are containers of the attempt's
//! pod, started in their dependency order (a one-shot job as an init
//! container, a service held until healthy before the one that waits for
//! it), reached by name; the volume is the pod's, mounted read-only in
//! `main`. The verifier checks all of it from `main` and gives the reward
//! Harbor gives.

use std::path::{Path, PathBuf};

use super::*;

/// The log the sidecars write, in the order they must have run.
const LOG: &str = "setup: done\ntool: started\ntool: 2 requests served\nreporter: tool was healthy";

const COMPOSE: &str = r#"# The tool's log lives in a named volume: the sidecars write it, `main`
# (the agent's container) mounts it read-only, so the agent cannot forge it.
services:
  main:
    volumes:
      - toollog:/var/log/tool:ro
    depends_on:
      tool:
        condition: service_healthy
  setup:
    image: reeval/base:latest
    command: ["sh", "-c", "echo 'setup: done' > /out/tool.log"]
    volumes:
      - toollog:/out
  tool:
    image: reeval/base:latest
    # World-writable: only the read-only mount keeps `main` from writing it.
    command: ["sh", "-c", "sleep 1; echo 'tool: started' >> /out/tool.log; echo 'tool: 2 requests served' >> /out/tool.log; chmod 666 /out/tool.log; exec sleep infinity"]
    volumes:
      - toollog:/out
    depends_on:
      setup:
        condition: service_completed_successfully
    healthcheck:
      test: ["CMD-SHELL", "grep -q served /out/tool.log"]
      interval: 1s
      retries: 30
  reporter:
    image: reeval/base:latest
    # Started only once `tool` is healthy: it finds its lines already there.
    command: ["sh", "-c", "grep -q served /out/tool.log && echo 'reporter: tool was healthy' >> /out/tool.log; exec sleep infinity"]
    volumes:
      - toollog:/out
    depends_on:
      tool:
        condition: service_healthy
volumes:
  toollog: {}
"#;

/// The verifier, in `main`: the sidecars' log whole and in order, `main`'s
/// write into the volume refused (EROFS), `tool` at 127.0.0.1 by name, and
/// the task's own image (the Dockerfile's file, its WORKDIR).
const TEST_SH: &str = r#"#!/bin/bash
expected=$'__LOG__'
log=$(cat /var/log/tool/tool.log)
if { echo forged >> /var/log/tool/tool.log; } 2>/tmp/forge.err; then forge=written; else forge=refused; fi
tool=$(getent hosts tool | awk '{print $1}')
if [ "$log" = "$expected" ] && [ "$forge" = refused ] && grep -q "Read-only file system" /tmp/forge.err \
   && [ "$tool" = 127.0.0.1 ] && [ "$(cat /task-image.txt)" = "built from the task's Dockerfile" ] \
   && [ "$(pwd)" = /app ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo "log: $log | forge: $forge $(cat /tmp/forge.err) | tool at: $tool | pwd: $(pwd)"
  echo 0 > /logs/verifier/reward.txt
fi
"#;

/// The task in a fresh directory.
fn task() -> PathBuf {
    let dir = common::temp_dir("kube-harbor").join("sidecar-volume");
    let write = |path: &str, text: &str| {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write(
        "task.toml",
        "version = \"1.0\"\n\n[task]\nname = \"reeval-tests/kube-sidecar-volume\"\n\n[agent]\ntimeout_sec = 120.0\n\n[verifier]\ntimeout_sec = 60.0\n\n[environment]\nnetwork_mode = \"no-network\"\n",
    );
    write("instruction.md", "Read the tool's log in /var/log/tool/tool.log.\n");
    write(
        "environment/Dockerfile",
        "FROM reeval/base:latest\nRUN echo \"built from the task's Dockerfile\" > /task-image.txt\nWORKDIR /app\n",
    );
    write("environment/docker-compose.yaml", COMPOSE);
    write("solution/solve.sh", "#!/bin/bash\ncat /var/log/tool/tool.log\n");
    write("tests/test.sh", &TEST_SH.replace("__LOG__", &LOG.replace('\n', "\\n")));
    dir
}

fn image_detail(r: &Record) -> String {
    r.phases.iter().find(|p| p.phase == "image").map(|p| p.detail.clone()).unwrap_or_default()
}

#[cfg_attr(
    reeval_no_kube,
    ignore = "no test cluster (eval \"$(scripts/kube.sh start)\"; REEVAL_REQUIRE_KUBE=1 fails instead)"
)]
#[tokio::test]
async fn a_harbor_task_with_a_dockerfile_and_sidecars_sharing_a_read_only_volume_gets_its_reward() {
    let Some(_cluster) = shared().await else { return };
    // The registry test removes every local tag of the registry as it ends: one at a time.
    let _turn = HOST_NETWORK_EGRESS.lock().await;
    let registry = std::env::var("REEVAL_TEST_KUBE_REGISTRY").expect("scripts/kube.sh env sets it");
    let dir = task();
    let runner = common::runner_with("kube-harbor", |c| {
        c.settings.harnesses = vec!["oracle".into()];
        c.settings.backend =
            reeval::sandbox::BackendConfig::Kubernetes(Box::new(KubernetesConfig {
                registry: Some(registry.clone()),
                // The node pulls the task's image from the registry, and has the sidecars' own.
                image_pull_policy: None,
                ..config()
            }));
    });
    let evals = reeval::harbor::tasks(&dir).expect("the task loads");
    let began = std::time::Instant::now();
    let report = runner.run(evals).await.expect("preflight passes");
    let r = &report.records[0];
    eprintln!(
        "the task on the cluster: {:.1}s; phases: {:?}",
        began.elapsed().as_secs_f64(),
        r.phases.iter().map(|p| (p.phase.as_str(), p.duration_ms)).collect::<Vec<_>>()
    );
    assert_eq!(r.outcome, Outcome::Pass, "{:?} {:?}", r.message, r.checks);
    assert_eq!(r.reward.as_ref().and_then(|r| r.get("reward")).copied(), Some(1.0));
    let detail = image_detail(r);
    assert!(detail.contains(&format!(" in {registry} as {registry}/")), "{detail}");
    // The pod and its policy went with the attempt; the volume was the pod's.
    let left = backend().await.leftovers_of_run(&report.run_id).await.expect("list");
    assert!(left.is_empty(), "left behind: {left:?}");
    remove_pushed_tag(&detail, &registry).await;
    let _ = std::fs::remove_dir_all(dir.parent().unwrap_or(Path::new("/nonexistent")));
}

/// The local engine keeps the task's image as its build cache, not the registry's tag of it.
async fn remove_pushed_tag(detail: &str, registry: &str) {
    // `…; pushed in REGISTRY as REGISTRY/reeval/…:DIGEST (…ms); service setup: …`
    let at = format!(" in {registry} as ");
    let Some(pushed) = detail.split(&at).nth(1).and_then(|s| s.split(' ').next()) else {
        return;
    };
    let docker = bollard::Docker::connect_with_local_defaults().unwrap();
    let _ = docker
        .remove_image(pushed, None::<bollard::query_parameters::RemoveImageOptions>, None)
        .await;
}
