//! The setup cache. A prepared sandbox (after the setup steps) is committed
//! as an image `reeval/setup:<digest>`, keyed by a
//! digest of everything that went into it: the base image's id, the
//! workspace's source and revision, the files, rules and setup steps, the
//! variables, the setup's network, the harness and reeval's version. A later
//! attempt with the same key (in this run or a later one) starts from that
//! image and skips the workspace, files and setup phases; its record's setup
//! phase says `setup cache hit <digest>`. The snapshot is still read from
//! the sandbox, so the agent and every diff see the same workspace. An
//! attempt that misses is not committed: a fill in the background prepares
//! and commits a sandbox of its own (`runner/setup_fill.rs`).
//!
//! A setup that could receive a secret value (the egress gateway brokers a
//! secret while it runs) is not cached unless the environment says
//! [`SetupCache::IncludingSecrets`]; placeholders are not secrets. Images
//! carry reeval's labels; the cache is held under a size cap, least recently
//! used first out (a hit re-tags its image, which stamps its `LastTagTime`).
//!
//! Only a quiescent sandbox is committed, and paused while it is: a setup
//! step that left a process running (`cmd &`, git's detached `gc --auto`)
//! could otherwise change the filesystem during the commit and tear the
//! image. A fill waits up to [`SETTLE_WITHIN`] for such processes to end,
//! and refuses to cache the setup if they do not (see `runner/setup_fill.rs`:
//! it says so on stderr and in the record of every later attempt of the run
//! that misses it). Each image carries its workspace's fingerprint
//! ([`LABEL_SNAPSHOT`]); an attempt that hits compares its own snapshot with
//! it, and on a mismatch removes the image and runs the setup itself.

use crate::exec::Command;
use crate::sandbox::{SandboxError, SandboxHandle};

pub use crate::environment::SetupCache;
// The cache's images on a Docker engine: the Docker backend's (reeval-sandbox/src/docker/setup_cache.rs).
pub(crate) use crate::sandbox::docker::setup_cache::reference;
pub use crate::sandbox::docker::setup_cache::{
    CachedSetup, LABEL_SETUP, LABEL_SNAPSHOT, REPOSITORY, list, prune, remove,
};

/// How long a fill waits for processes a setup step left running to end.
pub const SETTLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);
/// The cache's size cap by default (the engine's image sizes, shared layers counted per image).
pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;

/// Lists the processes in the sandbox other than its init (PID 1), its main
/// process (`sleep`, or the gateway's relay: PID 1 itself, or the init's
/// first child) and that main process's children (the relay's servers, and
/// the diff helper's session it starts waiting on the sandbox's stdin: a
/// setup step's orphans are the init's, never the main process's), the
/// relay's own and this listing's: what a setup step left running. Only
/// shell builtins, so the listing starts no process of its own. Each line:
/// `<pid> <name>`.
const STRAY_SCRIPT: &str = r#"
status() {
  name= state= ppid=
  while IFS= read -r line; do
    case $line in
      Name:*) name=${line#Name:} ;;
      State:*) state=${line#State:} ;;
      PPid:*) ppid=${line#PPid:} ;;
    esac
  done 2>/dev/null < "/proc/$1/status"
  set -- $name; name=$1; set -- $state; state=$1; set -- $ppid; ppid=$1
}
status 1
main=
case $name in
  docker-init|tini|catatonit|dumb-init)
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      status "$p"
      if [ "$ppid" = 1 ] && { [ -z "$main" ] || [ "$p" -lt "$main" ]; }; then main=$p; fi
    done ;;
esac
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  if [ "$p" = 1 ] || [ "$p" = "$$" ] || [ "$p" = "$main" ]; then continue; fi
  status "$p"
  if [ "$state" = Z ] || [ -z "$name" ]; then continue; fi
  if [ -n "$main" ] && [ "$ppid" = "$main" ]; then continue; fi
  case $name in reeval-relay|reeval-diff) continue ;; esac
  # The relay starts its servers through /proc/self/exe: the kernel names
  # them `exe`, so they are known by their argv[0] (`read` joins cmdline's
  # NUL-separated words; the exe link is not readable by the agent's user).
  if [ "$name" = exe ]; then
    cmd=; IFS= read -r cmd 2>/dev/null < "/proc/$p/cmdline"
    case $cmd in reeval-relay*) continue ;; esac
  fi
  echo "$p $name"
done
"#;

/// What a setup step left running in the sandbox (see [`STRAY_SCRIPT`]).
///
/// # Errors
/// [`SandboxError`] when the listing cannot run.
pub(crate) async fn stray_processes(handle: &SandboxHandle) -> Result<Vec<String>, SandboxError> {
    // As root, whatever the image's user: every process's executable is read.
    let out = handle.exec(Command::new("sh").arg("-c").arg(STRAY_SCRIPT).user("0")).await?;
    Ok(out.stdout.lines().map(str::to_string).filter(|l| !l.is_empty()).collect())
}

/// Waits up to `within` for the processes a setup step left running to end.
///
/// # Errors
/// Why the sandbox may not be committed: processes still running after
/// `within` (named), or a listing that could not run.
pub(crate) async fn settle(
    handle: &SandboxHandle,
    within: std::time::Duration,
) -> Result<(), String> {
    let began = std::time::Instant::now();
    loop {
        let strays = stray_processes(handle)
            .await
            .map_err(|e| format!("failed to list the processes its setup left running: {e}"))?;
        if strays.is_empty() {
            return Ok(());
        }
        if began.elapsed() >= within {
            return Err(format!(
                "its setup left processes running {}s after its last step ({}): \
                 a commit could store a torn image, so this setup is not cached",
                within.as_secs(),
                strays.join(", ")
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
