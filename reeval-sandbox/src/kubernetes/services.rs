//! A sandbox's services on Kubernetes (see `service.rs`): each one a
//! container of the attempt's pod, so in the sandbox's network namespace as
//! on Docker. Its names are 127.0.0.1 in every container's hosts file (the
//! pod's `hostAliases`); it reaches exactly what the sandbox reaches (the
//! pod's NetworkPolicy: the run's gateway at most, every request through
//! it); it goes with the pod. Its image reaches the cluster as the
//! sandbox's does (pulled by the cluster, or built here and pushed to
//! `registry`); its entrypoint, command, environment (`$` kept literal: a
//! pod would expand `$(VAR)`), directory, numeric user, limits and volumes
//! are its container's, confined as the sandbox's.
//!
//! It starts in dependency order, as a v1.20 kubelet can:
//! - a one-shot job (a service another waits for as
//!   `service_completed_successfully`) is an init container: the jobs run to
//!   completion, in their order, before anything else starts (so a job can
//!   only wait for other jobs);
//! - the other services are containers after the sandbox's, in their start
//!   order: the kubelet starts a pod's containers one by one and runs each
//!   one's `postStart` hook to its end before starting the next. A service
//!   another waits for as `service_healthy` gets a hook that runs its
//!   healthcheck until it passes, within what Docker would allow it, which
//!   holds the later ones until then (that hook needs `/bin/sh` in its image);
//! - the sandbox is first used once each service is healthy or running and
//!   its ports accept a connection from the sandbox (`services_up.rs`).
//!
//! What a pod cannot hold is refused before anything starts ([`problems`]).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, ExecAction, HostAlias, Lifecycle, LifecycleHandler, SecurityContext,
};

use super::names::{container_name, resources};
use super::volumes::PodVolumes;
use crate::service::start_order;
use crate::{Condition, Healthcheck, KubernetesConfig, Service, ServiceStart};

/// `sh -c HOLD hold <limit s> <message file> <test argv…>`: runs the
/// healthcheck every second until it passes; past the limit, says why in
/// the container's termination message (the kubelet then kills the
/// container, and the pod's status says it).
const HOLD: &str = r#"limit=$1 message=$2; shift 2; waited=0
while :; do
  out=$("$@" 2>&1) && exit 0
  if [ "$waited" -ge "$limit" ]; then
    printf 'was not healthy within %ss (its last check said: %s)' "$limit" "$out" >"$message" 2>/dev/null
    exit 1
  fi
  sleep 1; waited=$((waited + 1))
done"#;
/// Where the kubelet reads a container's termination message (its default `terminationMessagePath`).
const TERMINATION_LOG: &str = "/dev/termination-log";

/// What a pod cannot hold of these services, each said in full.
pub(super) fn problems(services: &[Service]) -> Vec<String> {
    let mut out = Vec::new();
    for s in services {
        for name in s.names() {
            if !is_dns_subdomain(&name) {
                out.push(format!(
                    "failed to place service {} in the sandbox's pod: the name `{name}` cannot be in a pod's hosts file (hostAliases take lowercase DNS names: letters a-z, digits, `-` and `.`, a letter or digit at each end); rename it",
                    s.name
                ));
            }
        }
        if let Some(user) = s.user.as_deref().filter(|u| numeric_user(u).is_none()) {
            out.push(format!(
                "failed to place service {} in the sandbox's pod: it runs as user `{user}`, and a pod's container can only be given a numeric user (runAsUser): use `user: \"UID\"` or `\"UID:GID\"`",
                s.name
            ));
        }
    }
    let jobs = jobs(services);
    for s in services.iter().filter(|s| jobs.contains(s.name.as_str())) {
        for (dep, _) in &s.depends_on {
            if !jobs.contains(dep.as_str()) && services.iter().any(|d| &d.name == dep) {
                out.push(format!(
                    "failed to place service {} in the sandbox's pod: another service waits for it to complete (service_completed_successfully), so it runs to completion before the sandbox and the other services start (an init container), and cannot wait for service {dep}, which runs beside the sandbox",
                    s.name
                ));
            }
        }
    }
    out
}

/// The services some other service waits for to complete: one-shot jobs.
pub(super) fn jobs(services: &[Service]) -> BTreeSet<&str> {
    services
        .iter()
        .flat_map(|s| &s.depends_on)
        .filter(|(_, c)| *c == Condition::CompletedSuccessfully)
        .map(|(d, _)| d.as_str())
        .collect()
}

/// `a-z0-9`, `-` and `.`, alphanumeric at each end of each label, at most 253.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// `(uid, gid)` of `UID` or `UID:GID`.
fn numeric_user(user: &str) -> Option<(i64, Option<i64>)> {
    let (uid, gid) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    Some((uid.parse().ok()?, gid.map(str::parse).transpose().ok()?))
}

/// The services of `spec`, as the pod starts them: the jobs (init
/// containers, in their order), then the others (after the sandbox, in theirs);
/// each with its index in the spec.
pub(super) fn in_order(services: &[ServiceStart]) -> (Vec<usize>, Vec<usize>) {
    let all: Vec<Service> = services.iter().map(|s| s.service.clone()).collect();
    let jobs = jobs(&all);
    let (job, beside): (Vec<usize>, Vec<usize>) =
        (0..all.len()).partition(|&i| jobs.contains(all[i].name.as_str()));
    // Dependencies outside each group are met by the time it starts (or are refused).
    let ordered = |group: Vec<usize>| {
        let members: Vec<Service> = group.iter().map(|&i| all[i].clone()).collect();
        match start_order(&members) {
            Some(order) => order.into_iter().map(|j| group[j]).collect(),
            None => group,
        }
    };
    (ordered(job), ordered(beside))
}

/// Every service's names at 127.0.0.1 in the pod's hosts file.
pub(super) fn host_aliases(services: &[ServiceStart]) -> Option<Vec<HostAlias>> {
    let names: Vec<String> = services.iter().flat_map(|s| s.service.names()).collect();
    (!names.is_empty()).then(|| vec![HostAlias { ip: "127.0.0.1".into(), hostnames: Some(names) }])
}

/// The containers of the services: the init containers of the jobs, then
/// the containers that go after the sandbox's. `like` is the sandbox's
/// container (pull policy, confinement).
pub(super) fn containers(
    services: &[ServiceStart],
    config: &KubernetesConfig,
    volumes: &PodVolumes,
    like: &Container,
) -> (Vec<Container>, Vec<Container>) {
    let (jobs, beside) = in_order(services);
    let all: Vec<Service> = services.iter().map(|s| s.service.clone()).collect();
    let make = |i: usize| {
        let start = &services[i];
        // Held until healthy when a service after it waits for that.
        let waited_for = all.iter().any(|o| {
            o.depends_on.iter().any(|(d, c)| d == &start.service.name && *c == Condition::Healthy)
        });
        let hold = start.service.healthcheck.as_ref().filter(|_| waited_for);
        container(i, start, config, volumes, like, hold)
    };
    (jobs.into_iter().map(make).collect(), beside.into_iter().map(make).collect())
}

fn container(
    i: usize,
    start: &ServiceStart,
    config: &KubernetesConfig,
    volumes: &PodVolumes,
    like: &Container,
    hold: Option<&Healthcheck>,
) -> Container {
    let s = &start.service;
    // A pod expands `$(VAR)` in these and reads `$$` as `$`: every `$` doubled stays itself.
    let literal = |v: &String| v.replace('$', "$$");
    let (uid, gid) = s.user.as_deref().and_then(numeric_user).unwrap_or((0, None));
    let security_context = SecurityContext {
        run_as_user: s.user.is_some().then_some(uid),
        run_as_group: gid,
        ..like.security_context.clone().unwrap_or_default()
    };
    Container {
        name: container_name(i, s),
        image: Some(start.image.clone()),
        image_pull_policy: like.image_pull_policy.clone(),
        command: s.entrypoint.as_ref().map(|a| a.iter().map(literal).collect()),
        args: s.command.as_ref().map(|a| a.iter().map(literal).collect()),
        env: (!s.env.is_empty()).then(|| {
            s.env
                .iter()
                .map(|(k, v)| EnvVar { name: k.clone(), value: Some(literal(v)), value_from: None })
                .collect()
        }),
        working_dir: s.workdir.clone(),
        resources: Some(resources(&s.limits, config)),
        security_context: Some(security_context),
        volume_mounts: volumes.mounts_of(&s.mounts),
        lifecycle: hold.map(|check| Lifecycle {
            post_start: Some(LifecycleHandler {
                exec: Some(ExecAction { command: Some(hold_argv(check, TERMINATION_LOG)) }),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The argv of a healthcheck's test, as the engine runs it.
pub(super) fn test_argv(check: &Healthcheck) -> Vec<String> {
    match check.test.first().map(String::as_str) {
        Some("CMD-SHELL") => vec!["/bin/sh".into(), "-c".into(), check.test[1..].join(" ")],
        _ => check.test.iter().skip(1).cloned().collect(),
    }
}

/// The `postStart` hook that holds the later containers until `check`
/// passes; why it gave up goes to `message`.
fn hold_argv(check: &Healthcheck, message: &str) -> Vec<String> {
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".into(),
        HOLD.into(),
        // `$0`, then the limit and the message's file as `$1` and `$2`.
        "hold".into(),
        check.limit().as_secs().max(1).to_string(),
        message.into(),
    ];
    argv.extend(test_argv(check));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ImageSpec;

    fn svc(name: &str) -> Service {
        Service::new(name, ImageSpec::From("x".into()))
    }

    #[test]
    fn what_a_pod_cannot_hold_is_named() {
        let mut named = svc("db");
        named.user = Some("postgres".into());
        let p = problems(&[svc("my_db"), svc("Cache"), named, svc("ok-1.x")]);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].contains("the name `my_db` cannot be in a pod's hosts file"), "{p:?}");
        assert!(p[1].contains("`Cache`"), "{p:?}");
        assert!(p[2].contains("runs as user `postgres`"), "{p:?}");
        let mut numeric = svc("db");
        numeric.user = Some("999:999".into());
        assert!(problems(&[numeric]).is_empty());
        // A job another waits for cannot itself wait for a service beside the sandbox.
        let p = problems(&[
            svc("db").healthcheck(Healthcheck::shell("true")),
            svc("migrate").depends_on("db", Condition::Healthy),
            svc("app").depends_on("migrate", Condition::CompletedSuccessfully),
        ]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("service migrate") && p[0].contains("cannot wait for service db"));
        let fine = [
            svc("seed"),
            svc("migrate").depends_on("seed", Condition::CompletedSuccessfully),
            svc("app").depends_on("migrate", Condition::CompletedSuccessfully),
        ];
        assert!(problems(&fine).is_empty(), "{:?}", problems(&fine));
    }

    /// The hook as `sh` runs it: done once the check passes; past its limit,
    /// failed, with the last check's words in the termination message.
    #[test]
    fn the_hold_hook_waits_for_the_check_and_says_why_it_gave_up() {
        let dir = std::env::temp_dir().join(format!("reeval-hold-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ready, message) = (dir.join("ready"), dir.join("message"));
        let run = |check: &Healthcheck| {
            let argv = hold_argv(check, message.to_str().unwrap());
            std::process::Command::new(&argv[0]).args(&argv[1..]).status().unwrap()
        };
        // Healthy after about a second: the hook waits for it.
        let later = format!("sleep 1; touch {}", ready.display());
        let mut background = std::process::Command::new("sh").args(["-c", &later]).spawn().unwrap();
        let began = std::time::Instant::now();
        let check = Healthcheck::shell(format!("test -e {}", ready.display()));
        assert!(run(&check).success());
        assert!(began.elapsed() >= std::time::Duration::from_millis(900), "{:?}", began.elapsed());
        background.wait().unwrap();
        // Never healthy: it gives up at its limit, saying why.
        let mut never = Healthcheck::shell("echo not yet; false");
        (never.interval, never.timeout, never.retries) =
            (Some(std::time::Duration::ZERO), Some(std::time::Duration::from_secs(1)), Some(0));
        assert!(!run(&never).success());
        assert_eq!(
            std::fs::read_to_string(&message).unwrap(),
            "was not healthy within 1s (its last check said: not yet)"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn names_are_dns_labels() {
        assert_eq!(container_name(3, &svc("My_DB.1")), "svc-3-my-db-1");
        assert_eq!(container_name(0, &svc("_")), "svc-0");
        let long = "a".repeat(80);
        assert_eq!(container_name(12, &svc(&long)).len(), 63);
    }
}
