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

use std::collections::{BTreeMap, HashMap};

use bollard::Docker;
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
    TagImageOptionsBuilder,
};
use sha2::{Digest, Sha256};

use crate::environment::{Environment, Workspace};
use crate::sandbox::SandboxError;

/// The repository cached setups are tagged in.
pub const REPOSITORY: &str = "reeval/setup";
/// Label on every cached setup image: its digest.
pub const LABEL_SETUP: &str = "dev.reeval.setup";
/// The cache's size cap by default (the engine's image sizes, shared layers counted per image).
pub const DEFAULT_MAX_BYTES: u64 = 20 << 30;

/// Whether an environment's prepared sandbox may be cached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SetupCache {
    /// Cached, unless a setup step could receive a secret value (the default).
    #[default]
    On,
    /// Never cached (`setup_cache(false)`).
    Off,
    /// Cached even when a setup step could receive a secret value: the image
    /// may then hold what the secret fetched (never the secret itself, which
    /// only the gateway swaps into requests).
    IncludingSecrets,
}

impl From<bool> for SetupCache {
    fn from(on: bool) -> Self {
        if on { SetupCache::On } else { SetupCache::Off }
    }
}

/// Everything that goes into a prepared sandbox, as the key's digest (32 hex digits).
pub(crate) fn key(
    env: &Environment,
    base_image_id: &str,
    harness: &str,
    rules_file: &str,
) -> std::io::Result<String> {
    let mut h = Sha256::new();
    let mut part = |name: &str, bytes: &[u8]| {
        h.update((name.len() as u64).to_le_bytes());
        h.update(name.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part("reeval", env!("CARGO_PKG_VERSION").as_bytes());
    part("image", base_image_id.as_bytes());
    part("harness", harness.as_bytes());
    match &env.workspace {
        None => part("workspace", b""),
        Some(Workspace::Git { url, rev, init }) => {
            part("git", format!("{url}\n{rev}\n{init}").as_bytes());
        }
        Some(Workspace::Dir { path, init }) => {
            part("dir", &crate::image::dir_tar(path)?);
            part("init", &[*init as u8]);
        }
    }
    for (path, bytes, mode) in &env.files {
        part("file", format!("{path}\n{mode:o}").as_bytes());
        part("bytes", bytes);
    }
    part("rules", env.rules.as_deref().unwrap_or("").as_bytes());
    part("rules_file", rules_file.as_bytes());
    for (k, v) in &env.env {
        part("env", format!("{k}={v}").as_bytes());
    }
    for s in &env.secrets {
        // Only the name: the sandbox sees a placeholder made from it.
        part("secret", format!("{s:?}").as_bytes());
    }
    part("setup_network", format!("{:?}", env.setup_network).as_bytes());
    part("allow_egress", env.allow_egress.join("\n").as_bytes());
    for step in &env.setup {
        part("step", format!("{}\n{}", step.command, step.timeout.as_millis()).as_bytes());
    }
    let hex: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    Ok(hex)
}

/// The image reference of a digest.
pub(crate) fn reference(digest: &str) -> String {
    format!("{REPOSITORY}:{digest}")
}

/// Whether the cached image of `digest` exists; if so it is re-tagged, which
/// marks it as just used for the least-recently-used eviction.
pub(crate) async fn find(docker: &Docker, digest: &str) -> Result<bool, SandboxError> {
    let reference = reference(digest);
    match docker.inspect_image(&reference).await {
        Ok(_) => {
            let options = TagImageOptionsBuilder::default().repo(REPOSITORY).tag(digest).build();
            let _ = docker.tag_image(&reference, Some(options)).await;
            Ok(true)
        }
        Err(bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
            Ok(false)
        }
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
        // Nothing runs in the sandbox yet; a paused container would stay paused if the
        // client gave up waiting on a long commit.
        .pause(false)
        .build();
    let config = bollard::models::ContainerConfig { labels: Some(labels), ..Default::default() };
    docker.commit_container(options, config).await.map_err(|e| {
        SandboxError::engine(format!("commit {container} as {}", reference(digest)), e)
    })?;
    evict(docker, max_bytes).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_changes_the_key() {
        let base = || Environment::new().file("a.txt", "a").setup("make");
        let k = |env: &Environment| key(env, "sha256:1", "shell", "AGENTS.md").unwrap();
        let same = k(&base());
        assert_eq!(same, k(&base()), "the key is deterministic");
        assert_ne!(same, k(&base().setup("make test")), "one more setup step");
        assert_ne!(same, k(&Environment::new().file("a.txt", "b").setup("make")), "a file's bytes");
        assert_ne!(same, k(&base().env("X", "1")), "a variable");
        assert_ne!(same, k(&base().rules("be nice")), "the rules");
        assert_ne!(same, key(&base(), "sha256:2", "shell", "AGENTS.md").unwrap(), "the image");
        assert_ne!(same, key(&base(), "sha256:1", "codex", "AGENTS.md").unwrap(), "the harness");
        assert_ne!(
            same,
            k(&base().workspace(Workspace::git("https://example.com/r.git", "v2"))),
            "the workspace"
        );
    }
}
