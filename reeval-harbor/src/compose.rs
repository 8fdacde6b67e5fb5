//! A Harbor task's `environment/docker-compose.yaml`, read as Harbor 0.26
//! uses it: merged over Harbor's own file, whose service `main` is the task's
//! container (built from `environment/Dockerfile`, or `docker_image`), so the
//! task's file adds services beside `main` and may override `main`'s keys.
//!
//! reeval's sandbox is `main`; every other service becomes a
//! [`Service`] the backend starts beside it, in its network namespace
//! (reeval-sandbox's `service.rs`). The subset real tasks use is supported; any other
//! key is refused, naming the service and the key, when the task is read.
//! `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?error}`, `$VAR`
//! and `$$` are interpolated as compose does, from the host environment
//! and the variables Harbor exports (`CONTEXT_DIR`, `MAIN_IMAGE_NAME`,
//! `CPUS`, `MEMORY`); an unset variable without a default is empty.
//!
//! YAML is read with `serde-saphyr`: pure Rust and panic-free, with limits
//! on aliases and depth (a task's file is input from elsewhere); serde_yaml
//! and serde_yml are deprecated.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::error::HarborError;
use reeval_core::environment::{Condition, Healthcheck, Image, Mount, Service};

/// Harbor's name of the task's own container.
pub const MAIN: &str = "main";

/// What a task's compose file adds to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compose {
    /// The services beside the sandbox, by name.
    pub services: Vec<Service>,
    /// `main`'s `environment`, under `[environment].env` (which wins, as in Harbor).
    pub main_env: Vec<(String, String)>,
    /// `main`'s `volumes`: the sandbox's mounts (`compose_volumes.rs`).
    pub main_mounts: Vec<Mount>,
}

/// Keys of a service that are accepted and have no effect in reeval.
const IGNORED: &[&str] = &[
    "restart",     // services live as long as the sandbox
    "pull_policy", // images are resolved as the sandbox's
    "init",        // every container runs under an init
    "tty",
    "stdin_open",
    "labels", // reeval labels its containers itself
    "stop_grace_period",
    "stop_signal",
];
/// Keys of `main` that are accepted (see [`read`]).
const MAIN_KEYS: &[&str] = &["environment", "depends_on", "image", "build", "volumes"];

/// Reads the compose file `text` of task `task`, whose `environment/` is `dir`.
///
/// # Errors
/// [`HarborError::Compose`] naming the task, the service and the key, for a
/// file that does not parse or uses what reeval does not support.
pub fn read(
    task: &str,
    dir: &Path,
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Compose, HarborError> {
    let fail = |message: String| HarborError::Compose { task: task.to_string(), message };
    let doc: Value =
        serde_saphyr::from_str(text).map_err(|e| fail(format!("does not parse: {e}")))?;
    let harbor = |name: &str| -> Option<String> {
        match name {
            "CONTEXT_DIR" => Some(dir.display().to_string()),
            "MAIN_IMAGE_NAME" => Some(main_image(task)),
            _ => lookup(name),
        }
    };
    let doc = interpolate(doc, &harbor).map_err(&fail)?;
    let Value::Object(top) = doc else {
        return Err(fail("is not a mapping".into()));
    };
    let mut volumes = Default::default();
    for (key, value) in &top {
        match key.as_str() {
            "services" | "version" | "name" => {}
            k if k.starts_with("x-") => {}
            "networks" => check_networks(value).map_err(&fail)?,
            "volumes" => volumes = super::compose_volumes::declared(value).map_err(&fail)?,
            other => return Err(fail(format!("key `{other}` is not supported"))),
        }
    }
    let Some(Value::Object(services)) = top.get("services") else {
        return Err(fail("has no `services` mapping".into()));
    };
    let mut out = Compose::default();
    for (name, config) in services {
        let at = |message: String| fail(format!("service {name}: {message}"));
        let empty = serde_json::Map::new();
        let config = match config {
            Value::Object(c) => c,
            Value::Null => &empty,
            _ => return Err(at("is not a mapping".into())),
        };
        let mounts = match config.get("volumes") {
            Some(v) => super::compose_volumes::mounts(name, v, dir, &volumes).map_err(at)?,
            None => Vec::new(),
        };
        if name == MAIN {
            out.main_env = read_main(task, dir, config, lookup).map_err(at)?;
            out.main_mounts = mounts;
        } else {
            let mut service = read_service(name, dir, config, lookup).map_err(at)?;
            service.mounts = mounts;
            out.services.push(service);
        }
    }
    // A dependency on `main` says nothing here: services start before the sandbox.
    for s in &mut out.services {
        s.depends_on.retain(|(d, _)| d != MAIN);
    }
    let problems = reeval_core::sandbox::service::problems(&out.services);
    if let Some(problem) = problems.into_iter().next() {
        return Err(fail(problem));
    }
    Ok(out)
}

/// `hb__<task>`: what Harbor exports as `MAIN_IMAGE_NAME`.
fn main_image(task: &str) -> String {
    let name: String = task
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '-' })
        .collect();
    format!("hb__{name}")
}

/// Top-level `networks`: every service is on the sandbox's one private
/// network, so only networks that compose would make for the task are fine.
fn check_networks(value: &Value) -> Result<(), String> {
    for (name, config) in value.as_object().into_iter().flatten() {
        if config.get("external").is_some_and(|e| e != &Value::Bool(false)) {
            return Err(format!("network {name}: an external network is not supported"));
        }
    }
    Ok(())
}

fn read_main(
    task: &str,
    dir: &Path,
    config: &serde_json::Map<String, Value>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    for (key, value) in config {
        match key.as_str() {
            k if k.starts_with("x-") => {}
            "image" if value.as_str() == Some(&main_image(task)) => {}
            "image" => {
                return Err(
                    "key `image` is supported only as ${MAIN_IMAGE_NAME} (set [environment].docker_image instead)"
                        .into(),
                );
            }
            "build" => {
                let (context, dockerfile, _) = build(dir, value)?;
                if context != dir || dockerfile != dir.join("Dockerfile") {
                    return Err(
                        "key `build` is supported only as the task's environment/Dockerfile".into(),
                    );
                }
            }
            k if MAIN_KEYS.contains(&k) => {}
            other => return Err(format!("key `{other}` is not supported")),
        }
    }
    config.get("environment").map_or(Ok(Vec::new()), |e| environment(e, lookup))
}

fn read_service(
    name: &str,
    dir: &Path,
    config: &serde_json::Map<String, Value>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Service, String> {
    let image = match (config.get("build"), config.get("image").and_then(Value::as_str)) {
        (Some(b), _) => {
            let (_, dockerfile, _) = build(dir, b)?;
            Image::dockerfile(dockerfile)
        }
        (None, Some(image)) => Image::from(image),
        (None, None) => return Err("has neither `image` nor `build`".into()),
    };
    let mut s = Service::new(name, image);
    for (key, value) in config {
        match key.as_str() {
            "image" | "build" | "volumes" => {}
            "environment" => s.env.extend(environment(value, lookup)?),
            "env_file" => {
                let files = strings(value, "env_file")?;
                let mut from_files = Vec::new();
                for file in files {
                    let path = dir.join(&file);
                    let iter = dotenvy::from_path_iter(&path)
                        .map_err(|e| format!("env_file {file}: {e}"))?;
                    for item in iter {
                        from_files.push(item.map_err(|e| format!("env_file {file}: {e}"))?);
                    }
                }
                // `environment` wins over `env_file`.
                s.env.splice(0..0, from_files);
            }
            "command" => s.command = Some(argv(value, "command")?),
            "entrypoint" => s.entrypoint = Some(argv(value, "entrypoint")?),
            "working_dir" => s.workdir = Some(string(value, "working_dir")?),
            "user" => s.user = Some(scalar(value).ok_or("key `user` must be a string")?),
            "container_name" | "hostname" => s.aliases.push(string(value, key)?),
            "healthcheck" => s.healthcheck = healthcheck(value)?,
            "depends_on" => s.depends_on = depends_on(value)?,
            "expose" => s.ports.extend(ports(value, false)?),
            "ports" => s.ports.extend(ports(value, true)?),
            "networks" => s.aliases.extend(network_aliases(value)?),
            "mem_limit" => s.limits.memory_bytes = bytes(value)?,
            "cpus" => {
                let cpus = scalar(value)
                    .and_then(|c| c.parse::<f64>().ok())
                    .ok_or("key `cpus` must be a number")?;
                s.limits.nano_cpus = (cpus * 1e9) as i64;
            }
            "pids_limit" => {
                s.limits.pids = value.as_i64().ok_or("key `pids_limit` must be a number")?
            }
            k if k.starts_with("x-") || IGNORED.contains(&k) => {}
            other => return Err(format!("key `{other}` is not supported")),
        }
    }
    let mut seen = Vec::new();
    s.aliases.retain(|a| {
        a != name && !seen.contains(a) && {
            seen.push(a.clone());
            true
        }
    });
    Ok(s)
}

/// `build`: a context path, or `{context, dockerfile}`; (context, Dockerfile, dockerfile as written).
fn build(dir: &Path, value: &Value) -> Result<(PathBuf, PathBuf, String), String> {
    let (context, dockerfile) = match value {
        Value::String(c) => (c.clone(), "Dockerfile".to_string()),
        Value::Object(b) => {
            for key in b.keys() {
                if !matches!(key.as_str(), "context" | "dockerfile") && !key.starts_with("x-") {
                    return Err(format!("key `build.{key}` is not supported"));
                }
            }
            let context = b.get("context").map(|c| string(c, "build.context")).transpose()?;
            let dockerfile =
                b.get("dockerfile").map(|d| string(d, "build.dockerfile")).transpose()?;
            (
                context.unwrap_or_else(|| ".".into()),
                dockerfile.unwrap_or_else(|| "Dockerfile".into()),
            )
        }
        _ => return Err("key `build` must be a path or a mapping".into()),
    };
    let context = normalize(&dir.join(&context));
    let file = normalize(&context.join(&dockerfile));
    // reeval builds a Dockerfile with its own directory as the context.
    if file.parent() != Some(context.as_path()) {
        return Err(format!(
            "build.dockerfile `{dockerfile}` must be at the top of its build context (reeval builds a Dockerfile with its own directory as the context)"
        ));
    }
    if !file.is_file() {
        return Err(format!("build: {} does not exist", file.display()));
    }
    Ok((context, file, dockerfile))
}

/// `a/./b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `environment`: a mapping (a null value: the host's), or `KEY=VALUE` / `KEY` items.
fn environment(
    value: &Value,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::Null => out.extend(lookup(k).map(|v| (k.clone(), v))),
                    v => out.push((
                        k.clone(),
                        scalar(v).ok_or(format!("environment.{k} must be a scalar"))?,
                    )),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                let item = item.as_str().ok_or("environment items must be strings")?;
                match item.split_once('=') {
                    Some((k, v)) => out.push((k.to_string(), v.to_string())),
                    None => out.extend(lookup(item).map(|v| (item.to_string(), v))),
                }
            }
        }
        Value::Null => {}
        _ => return Err("key `environment` must be a mapping or a list".into()),
    }
    Ok(out)
}

/// A string, number or boolean as compose writes it into a string.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn string(value: &Value, key: &str) -> Result<String, String> {
    value.as_str().map(str::to_string).ok_or(format!("key `{key}` must be a string"))
}

/// A string or a list of strings.
fn strings(value: &Value, key: &str) -> Result<Vec<String>, String> {
    match value {
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|i| scalar(i).ok_or(format!("key `{key}` must list strings")))
            .collect(),
        _ => Err(format!("key `{key}` must be a string or a list")),
    }
}

/// `command`/`entrypoint`: a list as is, a string split as a shell splits words.
fn argv(value: &Value, key: &str) -> Result<Vec<String>, String> {
    match value {
        Value::String(s) => shlex::split(s).ok_or(format!("key `{key}` has unbalanced quotes")),
        _ => strings(value, key),
    }
}

/// `healthcheck`: `test` (a list beginning `CMD`, `CMD-SHELL` or `NONE`, or a
/// string run by the shell), `interval`, `timeout`, `start_period`, `retries`, `disable`.
fn healthcheck(value: &Value) -> Result<Option<Healthcheck>, String> {
    let map = value.as_object().ok_or("key `healthcheck` must be a mapping")?;
    let mut check = Healthcheck::shell("");
    check.test.clear();
    for (key, v) in map {
        match key.as_str() {
            "test" => {
                check.test = match v {
                    Value::String(s) => vec!["CMD-SHELL".into(), s.clone()],
                    _ => strings(v, "healthcheck.test")?,
                }
            }
            "interval" => check.interval = Some(duration(v)?),
            "timeout" => check.timeout = Some(duration(v)?),
            "start_period" => check.start_period = Some(duration(v)?),
            "start_interval" => {}
            "retries" => {
                check.retries = Some(
                    v.as_u64()
                        .and_then(|r| u32::try_from(r).ok())
                        .ok_or("healthcheck.retries must be a number")?,
                )
            }
            "disable" if v == &Value::Bool(true) => return Ok(None),
            "disable" => {}
            other => return Err(format!("key `healthcheck.{other}` is not supported")),
        }
    }
    match check.test.first().map(String::as_str) {
        Some("NONE") => Ok(None),
        Some("CMD" | "CMD-SHELL") if check.test.len() > 1 => Ok(Some(check)),
        _ => Err("healthcheck.test must begin with CMD, CMD-SHELL or NONE, or be a string".into()),
    }
}

/// A compose duration: `1m30s`, `500ms`, `10s`, `1h` (a bare number is seconds).
fn duration(value: &Value) -> Result<Duration, String> {
    let text = scalar(value).ok_or("a duration must be a string like 10s")?;
    if let Ok(secs) = text.parse::<f64>() {
        return Ok(Duration::from_secs_f64(secs.max(0.0)));
    }
    let (mut total, mut number) = (0.0, String::new());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() || c == '.' {
            number.push(c);
            continue;
        }
        let mut unit = c.to_string();
        while let Some(&n) = chars.peek().filter(|n| n.is_ascii_alphabetic()) {
            unit.push(n);
            chars.next();
        }
        let n: f64 = number.parse().map_err(|_| format!("`{text}` is not a duration"))?;
        number.clear();
        total += n * match unit.as_str() {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" => 0.000_001,
            _ => return Err(format!("`{text}` is not a duration")),
        };
    }
    if !number.is_empty() {
        return Err(format!("`{text}` is not a duration"));
    }
    Ok(Duration::from_secs_f64(total))
}

/// `depends_on`: a list (started), or a mapping with `condition`s.
fn depends_on(value: &Value) -> Result<Vec<(String, Condition)>, String> {
    match value {
        Value::Array(_) => {
            Ok(strings(value, "depends_on")?.into_iter().map(|d| (d, Condition::Started)).collect())
        }
        Value::Object(map) => map
            .iter()
            .map(|(name, v)| {
                let condition = match v.get("condition").and_then(Value::as_str) {
                    None | Some("service_started") => Condition::Started,
                    Some("service_healthy") => Condition::Healthy,
                    Some("service_completed_successfully") => Condition::CompletedSuccessfully,
                    Some(other) => {
                        return Err(format!(
                            "depends_on.{name}: condition `{other}` is not supported"
                        ));
                    }
                };
                Ok((name.clone(), condition))
            })
            .collect(),
        _ => Err("key `depends_on` must be a list or a mapping".into()),
    }
}

/// The container ports of `expose` or `ports` (`"8080"`, `"5000:5000"`,
/// `"127.0.0.1:80:80/tcp"`, `{ target: 80 }`); ranges are not waited for.
/// Nothing is published on the engine's host: services are reached on the
/// sandbox's network.
fn ports(value: &Value, published: bool) -> Result<Vec<u16>, String> {
    let key = if published { "ports" } else { "expose" };
    let items = value.as_array().ok_or(format!("key `{key}` must be a list"))?;
    let mut out = Vec::new();
    for item in items {
        let spec = match item {
            Value::Object(m) => m
                .get("target")
                .and_then(scalar)
                .ok_or(format!("{key}: a mapping needs `target`"))?,
            v => scalar(v).ok_or(format!("{key}: items must be strings or numbers"))?,
        };
        let container = spec.rsplit(':').next().unwrap_or(&spec);
        let container = container.split('/').next().unwrap_or(container);
        if container.contains('-') {
            continue;
        }
        out.push(container.parse::<u16>().map_err(|_| format!("{key}: `{spec}` is not a port"))?);
    }
    Ok(out)
}

/// A service's `networks`: a list, or a mapping whose entries may give `aliases`.
fn network_aliases(value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::Array(_) => strings(value, "networks").map(|_| Vec::new()),
        Value::Object(map) => {
            let mut aliases = Vec::new();
            for (name, config) in map {
                for (key, v) in config.as_object().into_iter().flatten() {
                    match key.as_str() {
                        "aliases" => aliases.extend(strings(v, "networks.aliases")?),
                        other => {
                            return Err(format!("key `networks.{name}.{other}` is not supported"));
                        }
                    }
                }
            }
            Ok(aliases)
        }
        _ => Err("key `networks` must be a list or a mapping".into()),
    }
}

/// `mem_limit`: bytes, or `512m`, `1g`, `64k`, `1024b`.
fn bytes(value: &Value) -> Result<i64, String> {
    let text = scalar(value).ok_or("key `mem_limit` must be a size")?.to_lowercase();
    let text = text.trim().trim_end_matches('b');
    let (number, factor) = match text.chars().last() {
        Some('k') => (&text[..text.len() - 1], 1 << 10),
        Some('m') => (&text[..text.len() - 1], 1 << 20),
        Some('g') => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    let n: f64 = number.trim().parse().map_err(|_| format!("mem_limit `{text}` is not a size"))?;
    Ok((n * factor as f64) as i64)
}

/// Compose's interpolation in every string of the document.
fn interpolate(value: Value, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
    Ok(match value {
        Value::String(s) => Value::String(substitute(&s, lookup)?),
        Value::Array(items) => Value::Array(
            items.into_iter().map(|v| interpolate(v, lookup)).collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| Ok((k, interpolate(v, lookup)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other,
    })
}

/// `$$`, `$VAR`, `${VAR}`, `${VAR:-d}`, `${VAR-d}`, `${VAR:?e}`, `${VAR?e}`.
fn substitute(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}').ok_or(format!("`{text}`: an unclosed ${{"))?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            let name_end = inner
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(inner.len());
            let (name, op) = inner.split_at(name_end);
            let value = lookup(name);
            let set = value.as_deref().is_some_and(|v| !v.is_empty());
            match op {
                "" => out.push_str(&value.unwrap_or_default()),
                _ if op.starts_with(":-") => {
                    out.push_str(if set { value.as_deref().unwrap_or("") } else { &op[2..] })
                }
                _ if op.starts_with('-') => out.push_str(value.as_deref().unwrap_or(&op[1..])),
                _ if op.starts_with(":?") || op.starts_with('?') => {
                    match (&value, op.starts_with(':')) {
                        (Some(v), false) => out.push_str(v),
                        (Some(v), true) if set => out.push_str(v),
                        _ => {
                            let message = op.trim_start_matches(':').trim_start_matches('?');
                            return Err(format!("the variable {name} is required: {message}"));
                        }
                    }
                }
                _ => {
                    return Err(format!(
                        "`{text}`: `${{{inner}}}` is not a substitution compose knows"
                    ));
                }
            }
        } else {
            let end =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            if end == 0 {
                out.push('$');
                continue;
            }
            out.push_str(&lookup(&rest[..end]).unwrap_or_default());
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[path = "compose_tests.rs"]
mod tests;
