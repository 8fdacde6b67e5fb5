//! The check phase: one `exec` in the sandbox, as root, with the checks-only
//! secrets in its environment (only now, only here): their real values, or
//! for a secret the gateway brokers, its placeholder (the gateway swaps it
//! on the wire while the check runs, so the value never enters the sandbox).

use crate::error::Result;
use crate::exec::{Command, ExecOutput};
use crate::record::{CheckRecord, OUTPUT_TAIL};
use crate::sandbox::SandboxHandle;
use crate::secrets::{ExposeSecret, Secret, SecretScope};

/// Runs the check. Its output comes back as it is: the eval's code is trusted.
pub(crate) async fn run(
    handle: &SandboxHandle,
    cmd: Command,
    secrets: &[Secret],
    brokered: impl Fn(&str) -> bool,
) -> Result<ExecOutput> {
    let extra: Vec<(String, String)> = secrets
        .iter()
        .filter(|s| s.scope == SecretScope::Checks)
        .map(|s| {
            let value = if brokered(&s.name) {
                s.placeholder()
            } else {
                s.value.expose_secret().to_string()
            };
            (s.name.clone(), value)
        })
        .collect();
    Ok(handle.exec_with_env(cmd, &extra).await?)
}

/// The check as the record keeps it (redacted when written); `step` names
/// a step of the eval's own machinery (`Command::step`).
pub(crate) fn record(out: &ExecOutput, oom_killed: bool, step: Option<&str>) -> CheckRecord {
    CheckRecord {
        step: step.map(str::to_string),
        oom_killed,
        command: out.command.clone(),
        exit_code: out.exit_code,
        duration_ms: out.duration_ms,
        stdout_tail: out.stdout_tail(OUTPUT_TAIL).to_string(),
        stderr_tail: out.stderr_tail(OUTPUT_TAIL).to_string(),
        changes: None,
        sandbox: None,
        service: None,
    }
}

/// The phase's detail: `pytest -q exited 0 in 43ms`; a step of the eval's
/// own machinery by its name: `step copy tests/ into /tests: exited 0 in 40ms`.
pub(crate) fn detail(out: &ExecOutput, step: Option<&str>) -> String {
    match step {
        Some(name) => format!("step {name}: exited {} in {}ms", out.exit_code, out.duration_ms),
        None => {
            format!("{} exited {} in {}ms", one_line(&out.command), out.exit_code, out.duration_ms)
        }
    }
}

/// A command's first line, at most 80 bytes, for one-line logs.
pub(crate) fn one_line(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.len() > 80 || s.lines().count() > 1 {
        format!("{}…", crate::exec::tail(first, 80))
    } else {
        first.to_string()
    }
}
