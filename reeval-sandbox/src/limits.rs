//! A sandbox's resource limits: what an environment asks and a backend
//! enforces (memory, CPUs, processes). A leaf.

/// Resource limits of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Memory in bytes (swap is disabled).
    pub memory_bytes: i64,
    /// CPUs, in billionths.
    pub nano_cpus: i64,
    /// Maximum processes.
    pub pids: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self { memory_bytes: 4 << 30, nano_cpus: 2_000_000_000, pids: 1024 }
    }
}
