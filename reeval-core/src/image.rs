//! The image phase: an image by reference, or one built from a Dockerfile or
//! a base plus install steps, tagged by a content digest and built once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use bollard::query_parameters::BuildImageOptionsBuilder;
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use crate::environment::ImageSpec;
pub use crate::sandbox::ReadyImage;
use crate::sandbox::{DockerBackend, SandboxError};

/// Builds in this process, one lock per tag, so concurrent attempts build once.
static BUILDS: LazyLock<tokio::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = LazyLock::new(Default::default);

/// Makes `spec` present on the engine; `extra` goes into the digest (the harness version).
///
/// # Errors
/// [`SandboxError::ImageMissing`] for an absent image that cannot be built here,
/// [`SandboxError::ImageBuild`] when a build fails.
///
/// # Cancel safety
/// A cancelled build leaves at worst an untagged image; the lock file is released.
pub async fn ensure(backend: &DockerBackend, spec: &ImageSpec, extra: &str) -> Result<ReadyImage, SandboxError> {
    let began = Instant::now();
    let (tag, context) = match spec {
        ImageSpec::From(reference) => {
            if let Some(id) = backend.image_id(reference).await? {
                return Ok(ReadyImage {
                    detail: format!("cache hit {reference} ({}) in {}ms", short_id(&id), began.elapsed().as_millis()),
                    reference: reference.clone(),
                    id,
                });
            }
            let pulled = pull(backend, reference).await;
            return match backend.image_id(reference).await? {
                Some(id) => Ok(ReadyImage {
                    detail: format!("pulled {reference} ({}) in {:.1}s", short_id(&id), began.elapsed().as_secs_f64()),
                    reference: reference.clone(),
                    id,
                }),
                None => Err(SandboxError::ImageMissing {
                    image: reference.clone(),
                    hint: if reference.starts_with("reeval/base") {
                        "no registry is reachable here; build it with scripts/build-base-image.sh".into()
                    } else {
                        format!(
                            "it is not present locally and pulling it failed ({}); build or load it first (docker build, docker load, or docker import)",
                            pulled.err().unwrap_or_default()
                        )
                    },
                }),
            };
        }
        ImageSpec::Dockerfile(path) => {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "Dockerfile".into());
            let context = dir_tar(dir).map_err(|e| SandboxError::ImageBuild {
                image: path.display().to_string(),
                message: format!("cannot read build context {}: {e}", dir.display()),
            })?;
            (digest_tag(&[b"dockerfile", name.as_bytes(), &context, extra.as_bytes()]), BuildContext { tar: context, dockerfile: name })
        }
        ImageSpec::Install { base, steps } => {
            let mut dockerfile = format!("FROM {base}\n");
            for step in steps {
                dockerfile.push_str(&format!("RUN {}\n", serde_json::to_string(&["/bin/sh", "-c", step]).expect("strings serialize")));
            }
            let base_id = backend
                .image_id(base)
                .await?
                .ok_or_else(|| SandboxError::ImageMissing { image: base.clone(), hint: "the base of an install image must be present locally".into() })?;
            let tar = crate::sandbox::archive::tar_of(&[("Dockerfile".into(), dockerfile.clone().into_bytes(), 0o644)])?.to_vec();
            (digest_tag(&[b"install", base_id.as_bytes(), dockerfile.as_bytes(), extra.as_bytes()]), BuildContext { tar, dockerfile: "Dockerfile".into() })
        }
    };

    let lock = BUILDS.lock().await.entry(tag.clone()).or_default().clone();
    let _in_process = lock.lock().await;
    // Across processes (nextest runs one per eval): an advisory lock file per tag.
    let lock_path = std::env::temp_dir().join(format!("reeval-build-{}.lock", tag.replace([':', '/'], "_")));
    let file = std::fs::File::create(&lock_path)
        .map_err(|e| SandboxError::ImageBuild { image: tag.clone(), message: format!("cannot create lock {}: {e}", lock_path.display()) })?;
    let file = tokio::task::spawn_blocking(move || file.lock().map(|_| file))
        .await
        .expect("lock task")
        .map_err(|e| SandboxError::ImageBuild { image: tag.clone(), message: e.to_string() })?;

    if let Some(id) = backend.image_id(&tag).await? {
        drop(file);
        return Ok(ReadyImage { detail: format!("cache hit {tag} ({}) in {}ms", short_id(&id), began.elapsed().as_millis()), reference: tag, id });
    }
    let opts = BuildImageOptionsBuilder::default().dockerfile(&context.dockerfile).t(&tag).rm(true).forcerm(true).build();
    let mut stream = backend.client().build_image(opts, None, Some(bollard::body_full(context.tar.into())));
    let mut log = String::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                if let Some(s) = info.stream {
                    log.push_str(&s);
                }
                if let Some(detail) = info.error_detail {
                    let message = format!("{}\n{}", crate::exec::tail(&log, 2000), detail.message.unwrap_or_default());
                    return Err(SandboxError::ImageBuild { image: tag, message });
                }
            }
            Err(e) => return Err(SandboxError::ImageBuild { image: tag, message: format!("{}\n{e}", crate::exec::tail(&log, 2000)) }),
        }
    }
    drop(file);
    let id =
        backend.image_id(&tag).await?.ok_or_else(|| SandboxError::ImageBuild { image: tag.clone(), message: "the build ended without an image".into() })?;
    Ok(ReadyImage { detail: format!("built {tag} ({}) in {:.1}s", short_id(&id), began.elapsed().as_secs_f64()), reference: tag, id })
}

/// Pulls `reference` when a registry is reachable; bounded, since an
/// unreachable registry may hang rather than refuse.
async fn pull(backend: &DockerBackend, reference: &str) -> Result<(), String> {
    let (image, tag) = match reference.rsplit_once(':') {
        Some((i, t)) if !t.contains('/') => (i, t),
        _ => (reference, "latest"),
    };
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::default().from_image(image).tag(tag).build();
    let drain = async {
        let mut stream = backend.client().create_image(Some(opts), None, None);
        while let Some(item) = stream.next().await {
            item.map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), drain).await.map_err(|_| "no answer from the registry in 30s".to_string())?
}

struct BuildContext {
    tar: Vec<u8>,
    dockerfile: String,
}

fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    &id[..(id.len() - hex.len()) + hex.len().min(12)]
}

/// `reeval/img:<first 16 hex of sha256 over the parts>`.
fn digest_tag(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let hex: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("reeval/img:{hex}")
}

/// A deterministic tar of a directory (sorted, mtimes zeroed), for build contexts and fixtures.
pub(crate) fn dir_tar(dir: &Path) -> std::io::Result<Vec<u8>> {
    let files = files_under(dir)?;
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    for rel in files {
        let full = dir.join(&rel);
        let meta = std::fs::symlink_metadata(&full)?;
        let mut header = tar::Header::new_gnu();
        header.set_metadata(&meta);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&full)?;
            header.set_size(0);
            builder.append_link(&mut header, &rel, target)?;
        } else {
            builder.append_data(&mut header, &rel, std::fs::File::open(&full)?)?;
        }
    }
    builder.into_inner()
}

/// Files and symlinks under `dir`, relative to it, sorted.
pub(crate) fn files_under(dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    collect(dir, dir, &mut files)?;
    files.sort();
    Ok(files)
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let ft = entry.file_type()?;
        if ft.is_dir() {
            collect(root, &path, out)?;
        } else if ft.is_file() || ft.is_symlink() {
            out.push(path.strip_prefix(root).expect("under root").to_path_buf());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_depends_on_every_part() {
        assert_eq!(digest_tag(&[b"a", b"b"]), digest_tag(&[b"a", b"b"]));
        assert_ne!(digest_tag(&[b"a", b"b"]), digest_tag(&[b"ab", b""]));
        assert!(digest_tag(&[b"x"]).starts_with("reeval/img:"));
    }
}
