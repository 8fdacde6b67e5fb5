//! Services: containers a backend starts beside a sandbox (a database, a web
//! server), reachable from it by name. A Harbor task's
//! `environment/docker-compose.yaml` declares them (`harbor/compose.rs`); an
//! eval's `Environment::service` does too.
//!
//! A service gets no network of its own: on Docker and Podman it joins the
//! sandbox's network namespace (`docker/services.rs`), so it reaches what the
//! sandbox reaches and nothing else, with the sandbox's capabilities and
//! limits. Its image is resolved as the sandbox's is (the image phase). The
//! backend starts the services after the sandbox, each after what it depends
//! on, waits for them (healthy when they have a healthcheck, their ports
//! open when they declare ports), and removes them with the sandbox; they
//! carry the run's labels, so the run's end sweep finds what a killed
//! attempt left.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::{ImageSpec, Limits, Mount};

/// Label on a service's container: the service's name.
pub const LABEL_SERVICE: &str = "dev.reeval.service";

/// A container started beside the sandbox, reachable from it by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Its name: the host name the sandbox reaches it by.
    pub name: String,
    /// Its image, resolved as the sandbox's (found, pulled or built).
    pub image: ImageSpec,
    /// More names it is reachable by.
    pub aliases: Vec<String>,
    /// Its environment, on top of the image's.
    pub env: Vec<(String, String)>,
    /// Its entrypoint, when not the image's.
    pub entrypoint: Option<Vec<String>>,
    /// Its command, when not the image's.
    pub command: Option<Vec<String>>,
    /// Its working directory, when not the image's.
    pub workdir: Option<String>,
    /// Its user, when not the image's.
    pub user: Option<String>,
    /// Its healthcheck: the sandbox starts once it is healthy.
    pub healthcheck: Option<Healthcheck>,
    /// Ports it listens on: the sandbox starts once each accepts a connection from it.
    pub ports: Vec<u16>,
    /// Services started before it, and what each must have reached.
    pub depends_on: Vec<(String, Condition)>,
    /// Its resource limits (the sandbox's defaults unless set).
    pub limits: Limits,
    /// Its mounts: the sandbox's volumes it shares by name, host paths (see [`Mount`]).
    pub mounts: Vec<Mount>,
}

impl Service {
    /// A service named `name` (the host name the sandbox reaches it by) from `image`.
    pub fn new(name: impl Into<String>, image: ImageSpec) -> Self {
        Self {
            name: name.into(),
            image,
            aliases: Vec::new(),
            env: Vec::new(),
            entrypoint: None,
            command: None,
            workdir: None,
            user: None,
            healthcheck: None,
            ports: Vec::new(),
            depends_on: Vec::new(),
            limits: Limits::default(),
            mounts: Vec::new(),
        }
    }

    /// A mount (see [`Mount`]).
    pub fn mount(mut self, mount: Mount) -> Self {
        self.mounts.push(mount);
        self
    }

    /// An environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Its command (argv), in place of the image's.
    pub fn command<I, S>(mut self, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.command = Some(argv.into_iter().map(Into::into).collect());
        self
    }

    /// A port it listens on, waited for before the sandbox's first use.
    pub fn port(mut self, port: u16) -> Self {
        self.ports.push(port);
        self
    }

    /// Its healthcheck, waited for before the sandbox's first use.
    pub fn healthcheck(mut self, check: Healthcheck) -> Self {
        self.healthcheck = Some(check);
        self
    }

    /// Starts it after `service` has reached `condition`.
    pub fn depends_on(mut self, service: impl Into<String>, condition: Condition) -> Self {
        self.depends_on.push((service.into(), condition));
        self
    }

    /// Every name it is reachable by: its own, then its aliases.
    pub fn names(&self) -> Vec<String> {
        let mut names = vec![self.name.clone()];
        names.extend(self.aliases.iter().filter(|a| **a != self.name).cloned());
        names
    }
}

/// A healthcheck as the engine runs it (compose's `healthcheck`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Healthcheck {
    /// `["CMD", program, args…]` or `["CMD-SHELL", script]`.
    pub test: Vec<String>,
    /// Between checks (the engine's default, 30 s, when unset).
    pub interval: Option<Duration>,
    /// One check's limit (30 s when unset).
    pub timeout: Option<Duration>,
    /// Failures in a row that make it unhealthy (3 when unset).
    pub retries: Option<u32>,
    /// Failures during this first period do not count.
    pub start_period: Option<Duration>,
}

impl Healthcheck {
    /// A shell script run with `sh -c`, healthy on exit 0.
    pub fn shell(script: impl Into<String>) -> Self {
        Self {
            test: vec!["CMD-SHELL".into(), script.into()],
            interval: None,
            timeout: None,
            retries: None,
            start_period: None,
        }
    }

    /// Every `interval`.
    pub fn every(mut self, interval: Duration) -> Self {
        self.interval = Some(interval);
        self
    }

    /// How long the engine may take to make it healthy at most, as the
    /// engine counts: start period, then `retries` checks of `interval`
    /// plus `timeout` each.
    pub fn limit(&self) -> Duration {
        let interval = self.interval.unwrap_or(Duration::from_secs(30));
        let timeout = self.timeout.unwrap_or(Duration::from_secs(30));
        let retries = self.retries.unwrap_or(3) + 1;
        self.start_period.unwrap_or_default() + (interval + timeout) * retries
    }
}

/// What a service a later one depends on must reach first (compose's `depends_on` conditions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Started (`service_started`).
    Started,
    /// Healthy (`service_healthy`): it needs a healthcheck.
    Healthy,
    /// Exited with status 0 (`service_completed_successfully`): a one-shot job.
    CompletedSuccessfully,
}

/// A service with its image present on the engine: what a backend is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceStart {
    /// The service.
    pub service: Service,
    /// The image reference its container is created from.
    pub image: String,
}

/// Whether `name` can be a host name on the sandbox's network.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// What is wrong with these services, found without starting anything.
pub fn problems(services: &[Service]) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = BTreeSet::new();
    for s in services {
        for name in s.names() {
            if !valid_name(&name) {
                out.push(format!(
                    "service {}: `{name}` is not a host name (letters, digits, `-`, `_`, `.`; at most 63)",
                    s.name
                ));
            } else if name == "localhost" || !names.insert(name.clone()) {
                out.push(format!("service {}: the name `{name}` is taken", s.name));
            }
        }
        if let ImageSpec::Dockerfile(path) | ImageSpec::DockerfileText { path, .. } = &s.image
            && !path.is_file()
        {
            out.push(format!("service {}: Dockerfile {} does not exist", s.name, path.display()));
        }
    }
    for s in services {
        out.extend(crate::mount::problems(&format!("service {}", s.name), &s.mounts));
    }
    out.extend(port_collisions(services));
    for s in services {
        for (dep, condition) in &s.depends_on {
            match services.iter().find(|d| &d.name == dep) {
                None => {
                    out.push(format!("service {} depends on `{dep}`, which is no service", s.name))
                }
                Some(d) if *condition == Condition::Healthy && d.healthcheck.is_none() => {
                    out.push(format!(
                        "service {} waits for `{dep}` to be healthy, which has no healthcheck",
                        s.name
                    ))
                }
                Some(_) => {}
            }
        }
    }
    if out.is_empty() && start_order(services).is_none() {
        out.push("services depend on each other in a cycle".into());
    }
    out
}

/// Two services declaring one port (compose `ports`/`expose`): they share the
/// sandbox's network namespace, where a port has one listener, so the second
/// would fail to bind it (or, bound on another address, be shadowed by the
/// first), and the readiness probe would be answered by the wrong one.
fn port_collisions(services: &[Service]) -> Vec<String> {
    let mut owner: BTreeMap<u16, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for s in services {
        let ports: BTreeSet<u16> = s.ports.iter().copied().collect();
        for port in ports {
            match owner.get(&port) {
                Some(first) => out.push(format!(
                    "failed to place services {first} and {} beside the sandbox: both declare port {port} (compose `ports`/`expose`), and services share the sandbox's network namespace, where a port has one listener",
                    s.name
                )),
                None => {
                    owner.insert(port, &s.name);
                }
            }
        }
    }
    out
}

/// A service declaring the port the gateway's relay listens on in the
/// sandbox's network namespace (`127.0.0.1:3128`), which a sandbox with a
/// way out has: the relay or the service would fail to bind it.
pub fn relay_port_taken(services: &[Service]) -> Option<String> {
    let port: u16 = reeval_gateway::relay::SANDBOX_PROXY_ADDR
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .expect("the relay's address has a port");
    let s = services.iter().find(|s| s.ports.contains(&port))?;
    Some(format!(
        "failed to place service {} beside the sandbox: it declares port {port}, where the gateway's relay listens in the sandbox's network namespace (the sandbox has a way out); services share that namespace",
        s.name
    ))
}

/// The order to start them in: each after those it depends on; `None` for a cycle.
pub(crate) fn start_order(services: &[Service]) -> Option<Vec<usize>> {
    let index: BTreeMap<&str, usize> =
        services.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
    let mut order = Vec::with_capacity(services.len());
    let mut placed = vec![false; services.len()];
    while order.len() < services.len() {
        let next = (0..services.len()).find(|&i| {
            !placed[i]
                && services[i]
                    .depends_on
                    .iter()
                    .all(|(d, _)| index.get(d.as_str()).is_none_or(|&j| placed[j]))
        })?;
        placed[next] = true;
        order.push(next);
    }
    Some(order)
}

/// `sh -c PORT_PROBE probe HOST PORT`, run in the sandbox: exit 0 once
/// HOST:PORT accepts a connection, 1 when it does not yet, 3 when the image
/// has no tool to try.
pub(crate) const PORT_PROBE: &str = r#"h=$1 p=$2
if command -v bash >/dev/null 2>&1; then
  exec bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$h" "$p" 2>/dev/null
elif command -v python3 >/dev/null 2>&1; then
  exec python3 -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), 2)' "$h" "$p" 2>/dev/null
elif command -v nc >/dev/null 2>&1; then
  exec nc -z -w 2 "$h" "$p"
fi
exit 3"#;

/// How long a service without a healthcheck may take to open its ports.
pub(crate) const PORTS_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Waits until `port` of service `name` accepts a connection from the
/// sandbox (its image's bash, python3 or nc, through [`PORT_PROBE`]),
/// probing every `poll`. `Ok(Some(why))` when it did not within
/// [`PORTS_LIMIT`], or when `stopped`, asked between probes, says why the
/// service will not (it stopped). An image with none of those tools cannot
/// probe: the service running must do.
///
/// # Errors
/// The engine failing a probe's exec.
///
/// # Cancel safety
/// Dropping it stops waiting; a probe under way ends by its own timeout.
pub(crate) async fn wait_for_port<F>(
    sandbox: &dyn crate::Sandbox,
    name: &str,
    port: u16,
    poll: std::time::Duration,
    stopped: impl Fn() -> F,
) -> Result<Option<String>, crate::SandboxError>
where
    F: std::future::Future<Output = Option<String>>,
{
    let probe = crate::exec::Command::shell(PORT_PROBE)
        .args(["probe", name, &port.to_string()])
        .timeout(std::time::Duration::from_secs(5));
    let began = std::time::Instant::now();
    loop {
        let out = sandbox.exec(crate::ExecRequest::plain(&probe, &[])).await?;
        match out.exit_code {
            // 3: neither bash, python3 nor nc in the sandbox's image.
            0 | 3 => return Ok(None),
            _ if began.elapsed() > PORTS_LIMIT => {
                return Ok(Some(format!(
                    "did not accept a connection on port {port} within {}s",
                    PORTS_LIMIT.as_secs()
                )));
            }
            _ => {
                if let Some(why) = stopped().await {
                    return Ok(Some(why));
                }
                tokio::time::sleep(poll).await
            }
        }
    }
}

/// Adds every service's names to `NO_PROXY`/`no_proxy` where the sandbox has
/// them (a sandbox with a way out sends HTTP through its relay, which must
/// not take a request for a service out to the gateway).
pub fn bypass_proxy(variables: &mut [(String, String)], services: &[Service]) {
    let names: Vec<String> = services.iter().flat_map(Service::names).collect();
    if names.is_empty() {
        return;
    }
    for (key, value) in variables.iter_mut() {
        if key == "NO_PROXY" || key == "no_proxy" {
            for name in &names {
                value.push(',');
                value.push_str(name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(name: &str) -> Service {
        Service::new(name, ImageSpec::From("x".into()))
    }

    #[test]
    fn services_start_after_what_they_depend_on_and_a_cycle_is_refused() {
        let services = vec![
            svc("web").depends_on("db", Condition::Started),
            svc("db"),
            svc("job").depends_on("web", Condition::CompletedSuccessfully),
        ];
        assert_eq!(start_order(&services), Some(vec![1, 0, 2]));
        assert!(problems(&services).is_empty(), "{:?}", problems(&services));
        let cycle = vec![
            svc("a").depends_on("b", Condition::Started),
            svc("b").depends_on("a", Condition::Started),
        ];
        assert_eq!(problems(&cycle), ["services depend on each other in a cycle"]);
    }

    #[test]
    fn names_must_be_host_names_once_and_dependencies_must_exist() {
        let mut dup = svc("db");
        dup.aliases.push("web".into());
        let p = problems(&[
            dup,
            svc("web"),
            svc("bad name"),
            svc("x").depends_on("nope", Condition::Started),
        ]);
        assert!(p.iter().any(|p| p.contains("`web` is taken")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("`bad name` is not a host name")), "{p:?}");
        assert!(p.iter().any(|p| p.contains("depends on `nope`")), "{p:?}");
        let p = problems(&[svc("a").depends_on("b", Condition::Healthy), svc("b")]);
        assert!(p[0].contains("has no healthcheck"), "{p:?}");
    }

    #[test]
    fn service_names_bypass_the_relay() {
        let mut vars = vec![
            ("NO_PROXY".to_string(), "localhost,127.0.0.1".to_string()),
            ("A".to_string(), "b".to_string()),
        ];
        let mut db = svc("db");
        db.aliases.push("database".into());
        bypass_proxy(&mut vars, &[db]);
        assert_eq!(vars[0].1, "localhost,127.0.0.1,db,database");
        assert_eq!(vars[1].1, "b");
    }

    #[test]
    fn a_healthchecks_limit_is_what_the_engine_may_take() {
        let h = Healthcheck::shell("true").every(Duration::from_secs(1));
        assert_eq!(h.limit(), Duration::from_secs((1 + 30) * 4));
    }

    #[test]
    fn two_services_declaring_one_port_are_refused_naming_both() {
        let mut web = svc("web");
        web.ports = vec![80, 8080, 80];
        let mut api = svc("api");
        api.ports = vec![8080];
        let mut db = svc("db");
        db.ports = vec![5432];
        assert!(problems(&[web.clone(), db.clone()]).is_empty(), "one service, one port twice");
        assert_eq!(
            problems(&[web, api, db]),
            [
                "failed to place services web and api beside the sandbox: both declare port 8080 (compose `ports`/`expose`), and services share the sandbox's network namespace, where a port has one listener"
            ]
        );
    }

    #[test]
    fn a_service_on_the_relays_port_is_named() {
        let mut proxy = svc("squid");
        proxy.ports = vec![3128];
        let said = relay_port_taken(&[svc("db"), proxy]).expect("refused");
        assert!(
            said.starts_with(
                "failed to place service squid beside the sandbox: it declares port 3128"
            ),
            "{said}"
        );
        assert_eq!(relay_port_taken(&[svc("db")]), None);
    }
}
