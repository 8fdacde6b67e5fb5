//! The setup cache on a Docker engine (see `crate::setup_cache` for what it
//! is): a prepared container committed, paused, as `reeval/setup:<digest>`
//! with reeval's labels; lookup (a hit re-tags its image, which stamps its
//! `LastTagTime`), removal, least-recently-used eviction under the size cap,
//! and `reeval images`/`clean`'s listing and prune.

use std::collections::{BTreeMap, HashMap};

use bollard::Docker;
use bollard::query_parameters::{
    CommitContainerOptionsBuilder, ListImagesOptionsBuilder, RemoveImageOptionsBuilder,
    TagImageOptionsBuilder,
};

use super::{DockerBackend, LABEL_IMAGE_USER};
use crate::SandboxError;

/// Label on every cached setup image: the fingerprint of its workspace as committed.
pub const LABEL_SNAPSHOT: &str = "dev.reeval.setup.snapshot";

/// The repository cached setups are tagged in.
pub const REPOSITORY: &str = "reeval/setup";
/// Label on every cached setup image: its digest.
pub const LABEL_SETUP: &str = "dev.reeval.setup";

/// The image reference of a digest.
#[doc(hidden)]
pub fn reference(digest: &str) -> String {
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
    // A container started as root in place of its image's own user (see
    // `LABEL_IMAGE_USER`) is committed with that user, as its image had it.
    let named = match docker.inspect_container(container, None).await {
        Ok(c) => c.config.and_then(|c| c.labels).and_then(|l| l.get(LABEL_IMAGE_USER).cloned()),
        Err(e) => {
            return Err(SandboxError::engine(format!("inspect {container} before its commit"), e));
        }
    };
    if named.is_some() {
        // Emptied: the engine would otherwise copy the container's label into the image's.
        labels.insert(LABEL_IMAGE_USER.into(), String::new());
    }
    let user = named.filter(|u| !u.is_empty());
    let config =
        bollard::models::ContainerConfig { labels: Some(labels), user, ..Default::default() };
    docker.commit_container(options, config).await.map_err(|e| {
        SandboxError::engine(format!("commit {container} as {}", reference(digest)), e)
    })?;
    evict(docker, max_bytes).await
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
pub async fn list(engine: &DockerBackend) -> Result<Vec<CachedSetup>, SandboxError> {
    list_on(engine.client()).await
}

async fn list_on(docker: &Docker) -> Result<Vec<CachedSetup>, SandboxError> {
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
pub async fn remove(engine: &DockerBackend, reference: &str) -> Result<(), SandboxError> {
    remove_on(engine.client(), reference).await
}

async fn remove_on(docker: &Docker, reference: &str) -> Result<(), SandboxError> {
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
    engine: &DockerBackend,
    run: Option<&str>,
) -> Result<(Vec<String>, Vec<(String, String)>), SandboxError> {
    let docker = engine.client();
    let label = match run {
        Some(run) => format!("{}={run}", crate::LABEL_RUN),
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
            match remove_on(docker, tag).await {
                Ok(()) => removed.push(tag.clone()),
                Err(e) => kept.push((tag.clone(), e.to_string())),
            }
        }
    }
    Ok((removed, kept))
}

/// Removes the least recently used cached images while the cache holds more than `max_bytes`.
async fn evict(docker: &Docker, max_bytes: u64) -> Result<(), SandboxError> {
    let cached = list_on(docker).await?;
    let mut total: u64 = cached.iter().map(|c| c.size).sum();
    for oldest in &cached {
        if total <= max_bytes {
            break;
        }
        // One a sandbox still runs from stays; the next commit tries again.
        if remove_on(docker, &oldest.reference).await.is_ok() {
            total = total.saturating_sub(oldest.size);
        }
    }
    Ok(())
}
