//! A compose file's `volumes`: the named volumes it declares at the top
//! level, and each service's (and `main`'s) mounts of them and of the task's
//! files, as reeval [`Mount`]s.
//!
//! - A named volume (`logs:/var/log/app:ro`) is a volume made for the
//!   attempt's sandbox and shared by name with the services that mount it,
//!   as compose makes `<project>_logs` for the trial; removed with the
//!   sandbox, as `compose down --volumes` removes it.
//! - A bind mount (`./data:/data:ro`) is of the task's own files, relative to
//!   `environment/` (Harbor's compose project directory); read-only it is the
//!   task's path itself, writable a copy made for the attempt (so no agent
//!   changes the task's files, and two attempts never share writes, where
//!   Harbor's would write into the task's directory). A path outside the
//!   task's directory is refused: a task must not mount the host.
//! - An anonymous volume (`/cache`) is a volume of its own.
//!
//! Short syntax `SOURCE:TARGET[:MODE]` (`ro`, `rw`; `z`, `Z`, `cached`,
//! `delegated`, `consistent` have no effect), or the long syntax
//! `{type, source, target, read_only}` with `type` `volume` or `bind`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use reeval_core::environment::Mount;

/// The top level's `volumes`: the names declared (their options none, or `name`, `labels`).
pub(super) fn declared(value: &Value) -> Result<BTreeSet<String>, String> {
    let mut names = BTreeSet::new();
    match value {
        Value::Null => {}
        Value::Object(map) => {
            for (name, config) in map {
                for (key, v) in config.as_object().into_iter().flatten() {
                    match key.as_str() {
                        "labels" | "name" => {}
                        "external" if v == &Value::Bool(false) => {}
                        k if k.starts_with("x-") => {}
                        other => {
                            return Err(format!("volume {name}: key `{other}` is not supported"));
                        }
                    }
                }
                names.insert(name.clone());
            }
        }
        _ => return Err("key `volumes` must be a mapping".into()),
    }
    Ok(names)
}

/// A service's `volumes` as mounts; `owner` names it, `dir` is `environment/`.
pub(super) fn mounts(
    owner: &str,
    value: &Value,
    dir: &Path,
    declared: &BTreeSet<String>,
) -> Result<Vec<Mount>, String> {
    let items = value.as_array().ok_or("key `volumes` must be a list")?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let (kind, source, target, read_only) = match item {
            Value::String(spec) => short(spec)?,
            Value::Object(map) => long(map)?,
            _ => return Err("volumes: items must be strings or mappings".into()),
        };
        if !target.starts_with('/') {
            return Err(format!("volumes: the target `{target}` must be an absolute path"));
        }
        let mount = match (kind, source) {
            (Kind::Volume, None) => Mount::volume(format!("{owner}-anonymous-{i}"), target),
            (Kind::Volume, Some(name)) if declared.contains(&name) => Mount::volume(name, target),
            (Kind::Volume, Some(name)) => {
                return Err(format!(
                    "volumes: `{name}` is no volume declared in the top-level `volumes`"
                ));
            }
            (Kind::Bind, None) => return Err("volumes: a bind mount needs a source".into()),
            (Kind::Bind, Some(path)) => Mount::host(task_path(dir, &path)?, target),
        };
        out.push(if read_only { mount.read_only() } else { mount });
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Volume,
    Bind,
}

type Parsed = (Kind, Option<String>, String, bool);

/// `[SOURCE:]TARGET[:MODE]`: a source with `/`, `.` or `~` first is a path.
fn short(spec: &str) -> Result<Parsed, String> {
    let parts: Vec<&str> = spec.split(':').collect();
    let (source, target, mode) = match parts.as_slice() {
        [target] => (None, *target, None),
        [source, target] => (Some(*source), *target, None),
        [source, target, mode] => (Some(*source), *target, Some(*mode)),
        _ => return Err(format!("volumes: `{spec}` is not SOURCE:TARGET[:MODE]")),
    };
    let mut read_only = false;
    for flag in mode.into_iter().flat_map(|m| m.split(',')) {
        match flag {
            "ro" => read_only = true,
            "rw" | "z" | "Z" | "cached" | "delegated" | "consistent" => {}
            other => return Err(format!("volumes: mode `{other}` of `{spec}` is not supported")),
        }
    }
    let kind = match source {
        Some(s) if s.starts_with(['/', '.', '~']) => Kind::Bind,
        _ => Kind::Volume,
    };
    Ok((kind, source.map(str::to_string), target.to_string(), read_only))
}

/// `{type, source, target, read_only}`.
fn long(map: &serde_json::Map<String, Value>) -> Result<Parsed, String> {
    let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
    for key in map.keys() {
        match key.as_str() {
            "type" | "source" | "target" | "read_only" => {}
            "volume" | "bind" => {}
            k if k.starts_with("x-") => {}
            other => return Err(format!("volumes: key `{other}` is not supported")),
        }
    }
    let kind = match text("type").as_deref() {
        Some("volume") | None => Kind::Volume,
        Some("bind") => Kind::Bind,
        Some(other) => return Err(format!("volumes: type `{other}` is not supported")),
    };
    let target = text("target").ok_or("volumes: a mapping needs `target`")?;
    let read_only = map.get("read_only").and_then(Value::as_bool).unwrap_or(false);
    Ok((kind, text("source"), target, read_only))
}

/// A bind mount's source: relative to `environment/`, inside the task's directory.
fn task_path(dir: &Path, source: &str) -> Result<PathBuf, String> {
    if source.starts_with('~') {
        return Err(format!("volumes: `{source}` is in a home directory, outside the task"));
    }
    let path = dir.join(source);
    let task = dir.parent().unwrap_or(dir);
    let refused = || {
        format!(
            "volumes: `{source}` is outside the task's directory, and a task must not mount the host's files"
        )
    };
    let real = path.canonicalize().map_err(|e| {
        format!("volumes: the bind mount's source `{source}` cannot be found ({e})")
    })?;
    let task = task.canonicalize().map_err(|e| format!("volumes: the task's directory: {e}"))?;
    if !real.starts_with(&task) {
        return Err(refused());
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reeval_core::environment::MountSource;

    #[test]
    fn volumes_and_binds_map_onto_mounts() {
        let task = std::env::temp_dir().join(format!("reeval-compose-vol-{}", std::process::id()));
        std::fs::create_dir_all(task.join("environment/data")).unwrap();
        std::fs::create_dir_all(task.join("tests")).unwrap();
        let dir = task.join("environment");
        let declared = BTreeSet::from(["logs".to_string()]);
        let value = serde_json::json!([
            "logs:/var/log/app:ro",
            "./data:/data:rw",
            "../tests:/t:ro,z",
            "/cache",
            {"type": "volume", "source": "logs", "target": "/l2", "read_only": true},
        ]);
        let m = mounts("main", &value, &dir, &declared).unwrap();
        assert_eq!(m[0], Mount::volume("logs", "/var/log/app").read_only());
        let real = |p: &str| task.join(p).canonicalize().unwrap();
        assert_eq!(m[1], Mount::host(real("environment/data"), "/data"));
        assert_eq!(m[2], Mount::host(real("tests"), "/t").read_only());
        assert_eq!(m[3].source, MountSource::Volume("main-anonymous-3".into()));
        assert_eq!(m[4], Mount::volume("logs", "/l2").read_only());
        for (bad, says) in [
            ("nope:/x", "no volume declared"),
            ("/etc:/x", "outside the task"),
            ("../..:/x:ro", "outside the task"),
            ("logs:/x:exec", "mode `exec`"),
            ("logs:rel", "absolute"),
        ] {
            let e = mounts("db", &serde_json::json!([bad]), &dir, &declared).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(declared_ok(&serde_json::json!({"logs": null, "data": {"labels": {}}})));
        assert!(!declared_ok(&serde_json::json!({"logs": {"external": true}})));
        assert!(!declared_ok(&serde_json::json!({"logs": {"driver": "nfs"}})));
        let _ = std::fs::remove_dir_all(&task);
    }

    fn declared_ok(v: &Value) -> bool {
        declared(v).is_ok()
    }
}
