//! What the benchmarks share: the image they run in, a median, and the raw
//! bollard cycle (create, start, exec `true`, remove) they measure reeval
//! against. Each bench includes it with `mod common;`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::RemoveContainerOptionsBuilder;
use futures_util::StreamExt;

pub const IMAGE: &str = "reeval/base:latest";

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One raw cycle with the container settings an attempt gets, timed whole.
pub async fn raw_cycle(docker: &Docker) -> Duration {
    raw_cycle_steps(docker).await.iter().map(|(_, d)| *d).sum()
}

/// One raw cycle, each step timed: create, start, exec, remove.
pub async fn raw_cycle_steps(docker: &Docker) -> [(&'static str, Duration); 4] {
    let mut at = Instant::now();
    let mut lap = || {
        let now = Instant::now();
        let took = now - at;
        at = now;
        took
    };
    let body = ContainerCreateBody {
        image: Some(IMAGE.into()),
        cmd: Some(vec!["sleep".into(), "infinity".into()]),
        labels: Some(HashMap::from([("dev.reeval.bench".to_string(), "raw".to_string())])),
        host_config: Some(HostConfig {
            network_mode: Some("none".into()),
            init: Some(true),
            memory: Some(4 << 30),
            nano_cpus: Some(2_000_000_000),
            pids_limit: Some(1024),
            ..Default::default()
        }),
        ..Default::default()
    };
    let id = docker.create_container(None, body).await.expect("create").id;
    let create = lap();
    docker.start_container(&id, None).await.expect("start");
    let start = lap();
    let exec = docker
        .create_exec(
            &id,
            CreateExecOptions::<String> {
                cmd: Some(vec!["true".into()]),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                ..Default::default()
            },
        )
        .await
        .expect("create exec");
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&exec.id, None).await.expect("start exec")
    {
        while output.next().await.is_some() {}
    }
    assert_eq!(docker.inspect_exec(&exec.id).await.expect("inspect").exit_code, Some(0));
    let exec = lap();
    docker
        .remove_container(&id, Some(RemoveContainerOptionsBuilder::default().force(true).build()))
        .await
        .expect("remove");
    [("create", create), ("start", start), ("exec", exec), ("remove", lap())]
}
