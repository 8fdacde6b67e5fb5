//! The run of a suite under signals: SIGINT, SIGTERM, SIGHUP and SIGQUIT
//! interrupt every attempt (each still tears down and records), and the
//! exit code says what the run came to.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::eval::Eval;
use crate::replay::RegradePlan;
use crate::report::{EXIT_INTERRUPTED, Reporter, say};
use crate::runner::Runner;

use super::{EXIT_OUTPUT_LOST, Step};

/// Runs `evals` with `reporters` on a runtime of its own until the run ends
/// or a signal interrupts it; the exit code (with `regraded`, the regrade's
/// delta said first). Output lost to a closed stdout (`| head`) never
/// reads as success.
pub(super) fn run(
    runner: Runner,
    evals: Vec<Eval>,
    reporters: Vec<Box<dyn Reporter>>,
    regraded: Option<&RegradePlan>,
) -> Step<i32> {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            say(&format!("error: failed to start the async runtime: {e}\n"));
            return Err(2);
        }
    };
    crate::secrets::install_redacting_panic_hook();
    let code = runtime.block_on(async {
        let shutdown = runner.shutdown_token();
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        tokio::spawn(async move {
            let name = termination().await;
            say(&format!("reeval: {name}; tearing down sandboxes and writing records\n"));
            flag.store(true, Ordering::SeqCst);
            shutdown.cancel();
        });
        match runner.run_with(evals, reporters).await {
            Ok(report) if interrupted.load(Ordering::SeqCst) => {
                say(&format!(
                    "reeval: run {} was interrupted; complete it with --resume {}\n",
                    report.run_id, report.run_id
                ));
                EXIT_INTERRUPTED
            }
            Ok(report) => {
                if let Some(plan) = regraded {
                    say(&crate::replay::regrade_delta(plan, &report.records));
                }
                report.exit_code()
            }
            Err(e) => {
                say(&format!("error: {e}\n"));
                2
            }
        }
    });
    Ok(if crate::report::stdout_closed() && code == 0 { EXIT_OUTPUT_LOST } else { code })
}

/// Waits for a signal that ends the run and names it: SIGINT, SIGTERM, SIGHUP (the
/// terminal closed: a dropped SSH session, `tmux kill-session`) or SIGQUIT. Each is
/// handled alike: attempts are interrupted, sandboxes torn down, records written.
/// A signal the process was started ignoring (`nohup` ignores SIGHUP) stays ignored.
async fn termination() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let ignored = ignored_signals();
    let wait = |kind: SignalKind, name: &'static str| async move {
        if ignored & (1 << (kind.as_raw_value() - 1)) != 0 {
            return std::future::pending().await;
        }
        match signal(kind) {
            Ok(mut s) => {
                s.recv().await;
                name
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        name = wait(SignalKind::interrupt(), "interrupted (SIGINT)") => name,
        name = wait(SignalKind::terminate(), "terminated (SIGTERM)") => name,
        name = wait(SignalKind::hangup(), "hung up (SIGHUP)") => name,
        name = wait(SignalKind::quit(), "quit (SIGQUIT)") => name,
    }
}

/// The signals this process was started ignoring, as the kernel's mask (bit
/// `n - 1` for signal `n`), from `/proc/self/status`; none where it cannot say.
fn ignored_signals() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0)
}
