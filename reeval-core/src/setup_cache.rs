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

use std::collections::{BTreeMap, HashMap};

use bollard::Docker;
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
    TagImageOptionsBuilder,
};

pub use crate::environment::SetupCache;
use crate::exec::Command;
use crate::sandbox::{SandboxError, SandboxHandle};

/// The repository cached setups are tagged in.
pub const REPOSITORY: &str = "reeval/setup";
/// Label on every cached setup image: its digest.
pub const LABEL_SETUP: &str = "dev.reeval.setup";
/// Label on every cached setup image: the fingerprint of its workspace as committed.
pub const LABEL_SNAPSHOT: &str = "dev.reeval.setup.snapshot";
/// How long a fill waits for processes a setup step left running to end.
pub const SETTLE_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);
/// The cache's size cap by default (the engine's image sizes, shared layers counted per image).
pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;

/// The image reference of a digest.
pub(crate) fn reference(digest: &str) -> String {
    format!("{REPOSITORY}:{digest}")
}

/// The cached image of `digest`, if it exists, with the fingerprint of its
/// workspace (`None` for an image committed before fingerprints); a found
/// image is re-tagged, which marks it as just used for the eviction.
pub(crate) async fn find(
    docker: &Docker,
    digest: &str,
) -> Result<Option<Option<String>>, SandboxError> {
    let reference = reference(digest);
    match docker.inspect_image(&reference).await {
        Ok(image) => {
            let options = TagImageOptionsBuilder::default().repo(REPOSITORY).tag(digest).build();
            let _ = docker.tag_image(&reference, Some(options)).await;
            let labels = image.config.and_then(|c| c.labels).unwrap_or_default();
            Ok(Some(labels.get(LABEL_SNAPSHOT).cloned()))
        }
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(None),
        Err(e) => Err(SandboxError::engine(format!("inspect image {reference}"), e)),
    }
}

/// Commits the running container as the cached image of `digest`, with
/// reeval's labels, then evicts the least recently used cached images while
/// the cache is over `max_bytes`.
pub(crate) async fn commit(
    docker: &Docker,
    container: &str,
    digest: &str,
    labels: &BTreeMap<String, String>,
    max_bytes: u64,
) -> Result<(), SandboxError> {
    let mut labels: HashMap<String, String> = labels.clone().into_iter().collect();
    labels.insert(LABEL_SETUP.into(), digest.into());
    let options = CommitContainerOptionsBuilder::default()
        .container(container)
        .repo(REPOSITORY)
        .tag(digest)
        .comment("reeval setup cache")
        // Paused, so that nothing can change the filesystem while it is read. A
        // container left paused (the client gave up on a long commit) is removed by
        // the fill whatever happened, and a paused container can be removed.
        .pause(true)
        .build();
    let config = bollard::models::ContainerConfig { labels: Some(labels), ..Default::default() };
    docker.commit_container(options, config).await.map_err(|e| {
        SandboxError::engine(format!("commit {container} as {}", reference(digest)), e)
    })?;
    evict(docker, max_bytes).await
}

/// Lists the processes in the sandbox other than its init (PID 1), its main
/// process (`sleep`, or the gateway's relay: PID 1 itself, or the init's
/// first child), the relay's own and this listing's: what a setup step left
/// running. Only shell builtins, so the listing starts no process of its
/// own. Each line: `<pid> <name>`.
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
    let out = handle.exec(Command::new("sh").arg("-c").arg(STRAY_SCRIPT)).await?;
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

/// Removes the cached image of `digest`; one that a container still runs
/// from is untagged at once (no attempt finds it again) and left dangling.
pub(crate) async fn forget(docker: &Docker, digest: &str) -> Result<(), SandboxError> {
    let reference = reference(digest);
    let options = RemoveImageOptionsBuilder::default().force(true).build();
    match docker.remove_image(&reference, Some(options), None).await {
        Ok(_) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => Ok(()),
        Err(e) => Err(SandboxError::engine(format!("remove image {reference}"), e)),
    }
}

/// A cached setup image as `reeval images` shows it.
#[derive(Debug, Clone)]
pub struct CachedSetup {
    /// `reeval/setup:<digest>`.
    pub reference: String,
    /// Its size as the engine reports it.
    pub size: u64,
    /// When it was last used (tagged), as the engine's RFC 3339 time.
    pub last_used: String,
}

/// The cached setup images, least recently used first.
///
/// # Errors
/// [`SandboxError`] when the engine cannot list or inspect images.
///
/// # Cancel safety
/// Safe: it only reads.
pub async fn list(docker: &Docker) -> Result<Vec<CachedSetup>, SandboxError> {
    let filters = HashMap::from([("label", vec![LABEL_SETUP])]);
    let options = ListImagesOptionsBuilder::default().filters(&filters).build();
    let images = docker
        .list_images(Some(options))
        .await
        .map_err(|e| SandboxError::engine("list the setup cache's images", e))?;
    let mut cached = Vec::new();
    for image in images {
        for tag in image.repo_tags.iter().filter(|t| t.starts_with(&format!("{REPOSITORY}:"))) {
            let last_used = match docker.inspect_image(tag).await {
                Ok(i) => i.metadata.and_then(|m| m.last_tag_time).unwrap_or_default(),
                Err(_) => continue,
            };
            cached.push(CachedSetup {
                reference: tag.clone(),
                size: image.size.max(0) as u64,
                last_used,
            });
        }
    }
    // RFC 3339 times in UTC sort as text.
    cached.sort_by(|a, b| a.last_used.cmp(&b.last_used));
    Ok(cached)
}

/// Removes one cached setup image.
///
/// # Errors
/// [`SandboxError`] when the engine refuses (a container still uses it).
///
/// # Cancel safety
/// Safe: the image is removed or not.
pub async fn remove(docker: &Docker, reference: &str) -> Result<(), SandboxError> {
    let options = RemoveImageOptionsBuilder::default().build();
    docker
        .remove_image(reference, Some(options), None)
        .await
        .map(|_| ())
        .map_err(|e| SandboxError::engine(format!("remove image {reference}"), e))
}

/// `reeval images prune`: removes the cached setup images (only those a run
/// made, with `run`); returns the references removed, and those kept
/// because a container still uses them, with why.
///
/// # Errors
/// [`SandboxError`] when the engine cannot list images.
///
/// # Cancel safety
/// Safe: what is not removed stays cached.
pub async fn prune(
    docker: &Docker,
    run: Option<&str>,
) -> Result<(Vec<String>, Vec<(String, String)>), SandboxError> {
    let label = match run {
        Some(run) => format!("{}={run}", crate::sandbox::LABEL_RUN),
        None => LABEL_SETUP.to_string(),
    };
    let filters = HashMap::from([("label", vec![label.as_str(), LABEL_SETUP])]);
    let options = ListImagesOptionsBuilder::default().filters(&filters).build();
    let images = docker
        .list_images(Some(options))
        .await
        .map_err(|e| SandboxError::engine("list the setup cache's images", e))?;
    let (mut removed, mut kept) = (Vec::new(), Vec::new());
    for image in images {
        for tag in image.repo_tags.iter().filter(|t| t.starts_with(&format!("{REPOSITORY}:"))) {
            match remove(docker, tag).await {
                Ok(()) => removed.push(tag.clone()),
                Err(e) => kept.push((tag.clone(), e.to_string())),
            }
        }
    }
    Ok((removed, kept))
}

/// Removes the least recently used cached images while the cache holds more than `max_bytes`.
async fn evict(docker: &Docker, max_bytes: u64) -> Result<(), SandboxError> {
    let cached = list(docker).await?;
    let mut total: u64 = cached.iter().map(|c| c.size).sum();
    for oldest in &cached {
        if total <= max_bytes {
            break;
        }
        // One a sandbox still runs from stays; the next commit tries again.
        if remove(docker, &oldest.reference).await.is_ok() {
            total = total.saturating_sub(oldest.size);
        }
    }
    Ok(())
}
