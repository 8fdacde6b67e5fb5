//! The setup phase: the environment's setup steps in order, each with its own
//! timeout, their output to `setup.log`; a failing step is an infra error.

use std::io::Write;
use std::path::Path;

use crate::environment::SetupStep;
use crate::error::{Error, Result};
use crate::exec::Command;
use crate::sandbox::SandboxHandle;
use crate::secrets::Redactor;

/// A cached setup replaced the steps: `setup.log` says so; the phase's detail.
pub(crate) async fn cache_hit(digest: &str, artifacts_dir: &Path) -> Result<String> {
    std::fs::create_dir_all(artifacts_dir)
        .map_err(|e| Error::infra_from("create the artifact directory", e))?;
    let log_path = artifacts_dir.join("setup.log");
    let text = format!(
        "setup cache hit {digest}: the sandbox started from {}, prepared by an earlier attempt with the same inputs\n",
        crate::setup_cache::reference(digest)
    );
    std::fs::write(&log_path, text)
        .map_err(|e| Error::infra_from(format!("write {}", log_path.display()), e))?;
    Ok(format!("setup cache hit {digest}"))
}

/// Runs the steps, writing `setup.log` under `artifacts_dir` through `redactor`; the phase's detail.
pub(crate) async fn run(
    handle: &SandboxHandle,
    steps: &[SetupStep],
    artifacts_dir: &Path,
    redactor: &Redactor,
) -> Result<String> {
    let log_path = artifacts_dir.join("setup.log");
    std::fs::create_dir_all(artifacts_dir)
        .map_err(|e| Error::infra_from("create the artifact directory", e))?;
    let mut log = std::fs::File::create(&log_path)
        .map_err(|e| Error::infra_from(format!("create {}", log_path.display()), e))?;
    for (i, step) in steps.iter().enumerate() {
        let out = handle.exec(Command::shell(step.command.clone()).timeout(step.timeout)).await?;
        let text = format!(
            "$ {}\n{}{}[exit {}{} in {}ms]\n\n",
            step.command,
            out.stdout,
            out.stderr,
            out.exit_code,
            if out.timed_out { ", timed out" } else { "" },
            out.duration_ms
        );
        let _ = log.write_all(redactor.redact(&text).as_bytes());
        if !out.success() {
            let why = if out.timed_out {
                format!("timed out after {:?}", step.timeout)
            } else {
                format!("exited {}", out.exit_code)
            };
            let tail =
                crate::exec::tail(&format!("{}{}", out.stdout, out.stderr), 2000).to_string();
            return Err(Error::infra(
                format!("run setup step {} `{}`", i + 1, step.command),
                redactor.redact(&format!("{why}; output tail:\n{tail}")),
            ));
        }
    }
    Ok(format!("{} steps ok", steps.len()))
}
