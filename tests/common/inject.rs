//! Faults applied to a running attempt's container from outside, as a
//! careless operator or a dying engine would: the container is found by the
//! run's labels, and acted on once it holds a marker (a file, or a process).

use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};

/// The engine.
pub async fn docker() -> Docker {
    Docker::connect_with_defaults().unwrap().negotiate_version().await.unwrap()
}

/// The id of the running container of this attempt, if there is one.
pub async fn container_of(docker: &Docker, run_id: &str, attempt: &str) -> Option<String> {
    let filters = std::collections::HashMap::from([(
        "label",
        vec![format!("dev.reeval.run={run_id}"), format!("dev.reeval.attempt={attempt}")],
    )]);
    let opts = bollard::query_parameters::ListContainersOptionsBuilder::default()
        .filters(&filters)
        .build();
    docker.list_containers(Some(opts)).await.ok()?.into_iter().find_map(|c| c.id)
}

/// Whether `marker` is in the container: a path, or with `proc:` a running
/// process whose command line holds the rest.
pub async fn exists_in(docker: &Docker, id: &str, marker: &str) -> bool {
    let cmd = match marker.strip_prefix("proc:") {
        None => vec!["test".to_string(), "-e".into(), marker.into()],
        Some(text) => vec![
            "sh".to_string(),
            "-c".into(),
            r#"for f in /proc/[0-9]*/cmdline; do
                 [ "$f" = /proc/$$/cmdline ] && continue
                 case "$(tr '\0' ' ' < "$f" 2>/dev/null)" in *"$1"*) exit 0 ;; esac
               done; exit 1"#
                .into(),
            "sh".into(),
            text.into(),
        ],
    };
    let Ok(exec) = docker
        .create_exec(
            id,
            CreateExecOptions { cmd: Some(cmd), attach_stdout: Some(true), ..Default::default() },
        )
        .await
    else {
        return false;
    };
    match docker.start_exec(&exec.id, None).await {
        Ok(StartExecResults::Attached { mut output, .. }) => {
            use futures_util::StreamExt;
            while output.next().await.is_some() {}
        }
        _ => return false,
    }
    matches!(docker.inspect_exec(&exec.id).await, Ok(i) if i.exit_code == Some(0))
}

/// What the fault does to the container.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// `docker kill`.
    Kill,
    /// `docker pause`.
    Pause,
    /// `docker network disconnect` from every network the container is on.
    Disconnect,
}

impl Fault {
    /// Applies the fault to the container `id`.
    pub async fn apply(self, docker: &Docker, id: &str) {
        match self {
            Fault::Kill => docker.kill_container(id, None).await.expect("docker kill"),
            Fault::Pause => docker.pause_container(id).await.expect("docker pause"),
            Fault::Disconnect => {
                let inspected = docker
                    .inspect_container(
                        id,
                        None::<bollard::query_parameters::InspectContainerOptions>,
                    )
                    .await
                    .expect("docker inspect");
                let networks = inspected.network_settings.and_then(|n| n.networks);
                let names: Vec<String> = networks.unwrap_or_default().into_keys().collect();
                assert!(!names.is_empty(), "the container {id} is on no network");
                for name in names {
                    let request = bollard::models::NetworkDisconnectRequest {
                        container: id.to_string(),
                        force: Some(true),
                    };
                    docker
                        .disconnect_network(&name, request)
                        .await
                        .unwrap_or_else(|e| panic!("docker network disconnect {name}: {e}"));
                }
            }
        }
    }
}

/// Waits for `attempt`'s container to hold `marker`, then `after`, then
/// applies `fault` to it. Returns the container's id.
pub fn inject(
    run_id: String,
    attempt: String,
    marker: &'static str,
    after: Duration,
    fault: Fault,
) -> tokio::task::JoinHandle<String> {
    tokio::spawn(async move {
        let docker = docker().await;
        let began = Instant::now();
        loop {
            assert!(began.elapsed() < Duration::from_secs(120), "{attempt} never reached {marker}");
            if let Some(id) = container_of(&docker, &run_id, &attempt).await
                && exists_in(&docker, &id, marker).await
            {
                tokio::time::sleep(after).await;
                fault.apply(&docker, &id).await;
                return id;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

/// Runs `eval` alone (its one attempt, under the shell harness) with
/// `fault` applied to its container once the container holds `marker`.
pub async fn run_faulted(
    runner: &reeval::Runner,
    run_id: String,
    eval: reeval::Eval,
    marker: &'static str,
    fault: Fault,
) -> reeval::RunReport {
    let at = format!("{}.shell.t1.try1", eval.name());
    let injected = inject(run_id, at, marker, Duration::ZERO, fault);
    let report = runner.run(vec![eval]).await.expect("preflight passes");
    injected.await.unwrap();
    report
}
