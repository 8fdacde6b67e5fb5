//! `[environment.healthcheck]` and a step's `healthcheck`, as Harbor 0.26's
//! `run_healthcheck` (`environments/base.py`): the command run in `main`
//! until it exits 0; failures during `start_period_sec` do not count (a try
//! every `start_interval_sec`), after it `retries` failures in a row fail it
//! (a try every `interval_sec`), each try limited to `timeout_sec`. The
//! task's runs as the last setup step, before the agent (a failure is an
//! infra error, retried, as Harbor's `HealthcheckError` is); a step's after
//! that step's setup, before its agent.

use std::time::Duration;

use super::shell::quote;
use super::task::HealthcheckConfig;
use reeval_core::Ctx;
use reeval_core::error::{Error, Result};
use reeval_core::exec::Command;

/// The bash script that runs `h` (in the workspace, which is the task's
/// workdir, where every command starts); exit 0 once healthy.
pub(super) fn script(h: &HealthcheckConfig) -> String {
    let secs = |s: f64| format!("{}", s.max(0.0));
    format!(
        "if command -v timeout >/dev/null 2>&1; then limit=\"timeout -k 1 {timeout}\"; else limit=; fi; \
         now() {{ if [ -n \"$EPOCHREALTIME\" ]; then t=${{EPOCHREALTIME/[.,]/}}; echo $((t / 1000)); else echo $((SECONDS * 1000)); fi; }}; \
         end=$(($(now) + {start_ms})); fails=0; \
         while :; do \
           if $limit bash -c {command}; then exit 0; fi; \
           if [ \"$(now)\" -lt $end ]; then sleep {start_interval}; continue; fi; \
           fails=$((fails + 1)); \
           if [ $fails -ge {retries} ]; then echo \"healthcheck failed after {retries} consecutive retries: \"{command} >&2; exit 1; fi; \
           sleep {interval}; \
         done",
        timeout = secs(h.timeout_sec),
        start_ms = (h.start_period_sec.max(0.0) * 1000.0) as u64,
        command = quote(&h.command),
        start_interval = secs(h.start_interval_sec),
        retries = h.retries.max(1),
        interval = secs(h.interval_sec),
    )
}

/// How long the script may take at most, with a margin.
pub(super) fn limit(h: &HealthcheckConfig) -> Duration {
    let tries = f64::from(h.retries.max(1)) + 1.0;
    let secs = h.start_period_sec.max(0.0)
        + h.timeout_sec.max(0.0)
        + tries * (h.interval_sec.max(0.0) + h.timeout_sec.max(0.0))
        + 60.0;
    Duration::from_secs_f64(secs)
}

/// A step's healthcheck, before its agent: an infra error when it fails.
pub(super) async fn step(c: &mut Ctx, h: &HealthcheckConfig, name: &str) -> Result<()> {
    let run = Command::new("bash").arg("-c").arg(script(h)).timeout(limit(h));
    let out = c.exec(run).await?;
    if out.success() {
        return Ok(());
    }
    Err(Error::infra(
        format!("pass step {name}'s healthcheck `{}`", h.command),
        reeval_core::exec::tail(out.stderr.trim(), 500),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(command: &str, start_period_sec: f64, retries: u32) -> HealthcheckConfig {
        HealthcheckConfig {
            command: command.into(),
            interval_sec: 0.1,
            timeout_sec: 5.0,
            start_period_sec,
            start_interval_sec: 0.1,
            retries,
        }
    }

    fn bash(script: &str, dir: &str) -> std::process::Output {
        std::process::Command::new("bash").arg("-c").arg(script).current_dir(dir).output().unwrap()
    }

    #[test]
    fn the_script_waits_as_harbors_healthcheck_does() {
        let dir = std::env::temp_dir().join(format!("reeval-hc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let w = dir.display().to_string();
        // Healthy on the third try: two failures are within three retries.
        let counting = "n=$(cat tries 2>/dev/null || echo 0); echo $((n+1)) > tries; [ $n -ge 2 ]";
        assert!(bash(&script(&check(counting, 0.0, 3)), &w).status.success());
        assert_eq!(std::fs::read_to_string(dir.join("tries")).unwrap().trim(), "3");
        // Never healthy: fails after its retries, saying so.
        let out = bash(&script(&check("false", 0.0, 2)), &w);
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("failed after 2 consecutive retries: false")
        );
        // Failures in the start period do not count.
        std::fs::remove_file(dir.join("tries")).unwrap();
        let slow = "n=$(cat tries 2>/dev/null || echo 0); echo $((n+1)) > tries; [ $n -ge 4 ]";
        assert!(bash(&script(&check(slow, 1.0, 1)), &w).status.success());
        let _ = std::fs::remove_dir_all(&dir);
        assert!(limit(&check("x", 10.0, 3)) >= Duration::from_secs(10 + 5 + 4 * 5));
    }
}
