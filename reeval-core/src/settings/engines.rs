//! A pool's engines as configured (`REEVAL_ENGINES`, `engines` in
//! `reeval.toml`): addresses and slots, parsed here; the runner's pool
//! connects to them.

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
