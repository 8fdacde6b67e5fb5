//! The Docker engines of a run: as configured (`REEVAL_ENGINES`, `engines`
//! in `reeval.toml`: addresses and slots, parsed here, which settings
//! re-export), and connected (`connect`): the one `DOCKER_HOST` names, or
//! each engine of a pool with its slots.

use std::sync::Arc;

use super::DockerBackend;
use crate::{Backend, Connected, SandboxError};

/// Memory each slot of an engine is sized for (a sandbox's default limit).
const SLOT_MEMORY: i64 = 4 << 30;

/// One engine of a pool, as configured: its address and, optionally, its slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSpec {
    /// A `DOCKER_HOST` value: `unix://…`, `tcp://…`, `https://…`, `ssh://…`.
    pub host: String,
    /// Attempts it runs at once; by default from its CPUs and memory.
    pub slots: Option<usize>,
}

impl EngineSpec {
    /// `ssh://a`, `tcp://b:2376=4` (4 slots), comma-separated.
    ///
    /// # Errors
    /// A message naming the entry that does not parse.
    pub fn parse_list(list: &str) -> Result<Vec<EngineSpec>, String> {
        list.split(',').map(str::trim).filter(|e| !e.is_empty()).map(EngineSpec::parse).collect()
    }

    /// One entry: `URL` or `URL=SLOTS`.
    ///
    /// # Errors
    /// A message naming the entry when its slots are not a positive number.
    pub fn parse(entry: &str) -> Result<EngineSpec, String> {
        match entry.rsplit_once('=') {
            Some((host, slots)) if !host.is_empty() => {
                let slots = slots.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("engine `{entry}`: the slots after `=` must be a positive number")
                })?;
                Ok(EngineSpec { host: host.to_string(), slots: Some(slots) })
            }
            _ => Ok(EngineSpec { host: entry.to_string(), slots: None }),
        }
    }
}

/// Connects to the engine `DOCKER_HOST` names when `engines` is empty (a pool
/// of one, as many slots as the run's threads), else to every engine of the
/// pool; slots not given come from each engine's CPUs and memory.
///
/// # Errors
/// One message per engine that cannot be used or does not answer.
///
/// # Cancel safety
/// Safe.
pub(crate) async fn connect(engines: &[EngineSpec]) -> Result<Vec<Connected>, Vec<String>> {
    if engines.is_empty() {
        return match DockerBackend::connect().await {
            Ok(b) => {
                let name = b.ping().await.map(|i| i.host).unwrap_or_default();
                Ok(vec![Connected { name, backend: Arc::new(b), slots: None }])
            }
            Err(e @ SandboxError::EngineConfig { .. }) => Err(vec![e.to_string()]),
            Err(e) => Err(vec![format!(
                "the Docker engine does not answer ({e}); start it or set DOCKER_HOST"
            )]),
        };
    }
    let mut connected = Vec::new();
    let mut missing = Vec::new();
    for spec in engines {
        match DockerBackend::connect_to(Some(&spec.host)).await {
            Ok(backend) => {
                let slots = match spec.slots {
                    Some(n) => n,
                    None => default_slots(&backend).await,
                };
                connected.push(Connected {
                    name: spec.host.clone(),
                    backend: Arc::new(backend),
                    slots: Some(slots),
                });
            }
            Err(e) => missing.push(format!("engine {} of the pool: {e}", spec.host)),
        }
    }
    if missing.is_empty() { Ok(connected) } else { Err(missing) }
}

/// One slot per CPU, and no more than its memory holds sandboxes of the default limit.
async fn default_slots(backend: &DockerBackend) -> usize {
    match backend.client().info().await {
        Ok(info) => {
            let cpus = info.ncpu.unwrap_or(1).max(1) as usize;
            let by_memory = (info.mem_total.unwrap_or(SLOT_MEMORY) / SLOT_MEMORY).max(1) as usize;
            cpus.min(by_memory)
        }
        Err(_) => 1,
    }
}
