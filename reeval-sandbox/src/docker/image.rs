//! The image phase: an image by reference, or one built from a Dockerfile or
//! a base plus install steps, tagged by a content digest and built once.

use crate::FileToWrite;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use bollard::query_parameters::BuildImageOptionsBuilder;
use futures_util::StreamExt;

use crate::ImageSpec;
pub(crate) use crate::ReadyImage;
use crate::image_spec::{digest_tag, install_dockerfile, install_tag};
use crate::{DockerBackend, SandboxError};

/// `text` without terminal escape sequences (colours, cursor moves).
pub(crate) fn plain(text: &str) -> String {
    strip_ansi_escapes::strip_str(text)
}

/// Builds in this process, one lock per tag, so concurrent attempts build once.
static BUILDS: LazyLock<tokio::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Default::default);

/// Makes `spec` present on the engine; `extra` goes into the digest (the harness version).
///
/// # Errors
/// [`SandboxError::ImageMissing`] for an absent image that cannot be built here,
/// [`SandboxError::ImageBuild`] when a build fails.
///
/// # Cancel safety
/// A cancelled build leaves at worst an untagged image; the lock file is released.
pub(crate) async fn ensure(
    backend: &DockerBackend,
    spec: &ImageSpec,
    extra: &str,
) -> Result<ReadyImage, SandboxError> {
    let began = Instant::now();
    let (tag, context) = match spec {
        ImageSpec::Layered { base, steps } => {
            let base = Box::pin(ensure(backend, base, extra)).await?;
            // The base's own USER, back after the steps.
            let user = base.user.clone().unwrap_or_default();
            let dockerfile = layered_dockerfile(&base.reference, steps, &user);
            (
                digest_tag(&[b"layered", base.id.as_bytes(), dockerfile.as_bytes()]),
                dockerfile_only(&dockerfile)?,
            )
        }
        ImageSpec::From(reference) => {
            if let Some(facts) = backend.image_facts(reference).await? {
                let detail = format!(
                    "cache hit {reference} ({}) in {}ms",
                    short_id(&facts.id),
                    began.elapsed().as_millis()
                );
                return Ok(ready(reference.clone(), facts, detail));
            }
            let pulled = pull(backend, reference).await;
            return match backend.image_facts(reference).await? {
                Some(facts) => {
                    let detail = format!(
                        "pulled {reference} ({}) in {:.1}s",
                        short_id(&facts.id),
                        began.elapsed().as_secs_f64()
                    );
                    Ok(ready(reference.clone(), facts, detail))
                }
                None => Err(SandboxError::ImageMissing {
                    image: reference.clone(),
                    hint: if reference.starts_with("reeval/base") {
                        "no registry is reachable here; build it with scripts/build-base-image.sh"
                            .into()
                    } else {
                        format!(
                            "it is not present locally and pulling it failed ({}); build or load it first (docker build, docker load, or docker import)",
                            pulled.err().unwrap_or_default()
                        )
                    },
                }),
            };
        }
        ImageSpec::Dockerfile(path) | ImageSpec::DockerfileText { path, .. } => {
            let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "Dockerfile".into());
            // `[images]`' rewrite of the file goes in its place (and so into the tag).
            let text = match spec {
                ImageSpec::DockerfileText { text, .. } => Some(text.as_bytes()),
                _ => None,
            };
            let context = context_tar(dir, &name, text).map_err(|e| SandboxError::ImageBuild {
                image: path.display().to_string(),
                message: format!("cannot read build context {}: {e}", dir.display()),
            })?;
            (
                digest_tag(&[b"dockerfile", name.as_bytes(), &context, extra.as_bytes()]),
                BuildContext { tar: context, dockerfile: name },
            )
        }
        ImageSpec::Install { base, steps } => {
            let dockerfile = install_dockerfile(base, steps);
            let base_id =
                backend.image_id(base).await?.ok_or_else(|| SandboxError::ImageMissing {
                    image: base.clone(),
                    hint: "the base of an install image must be present locally".into(),
                })?;
            (install_tag(&base_id, &dockerfile, extra), dockerfile_only(&dockerfile)?)
        }
    };

    let lock = BUILDS.lock().await.entry(tag.clone()).or_default().clone();
    let _in_process = lock.lock().await;
    // Across processes (nextest runs one per eval): an advisory lock file per tag.
    let lock_path =
        std::env::temp_dir().join(format!("reeval-build-{}.lock", tag.replace([':', '/'], "_")));
    let file = std::fs::File::create(&lock_path).map_err(|e| SandboxError::ImageBuild {
        image: tag.clone(),
        message: format!("cannot create lock {}: {e}", lock_path.display()),
    })?;
    let file = tokio::task::spawn_blocking(move || file.lock().map(|_| file))
        .await
        .expect("lock task")
        .map_err(|e| SandboxError::ImageBuild { image: tag.clone(), message: e.to_string() })?;

    if let Some(facts) = backend.image_facts(&tag).await? {
        drop(file);
        let detail = format!(
            "cache hit {tag} ({}) in {}ms",
            short_id(&facts.id),
            began.elapsed().as_millis()
        );
        return Ok(ready(tag, facts, detail));
    }
    build_context(backend, &tag, context.tar, &context.dockerfile).await?;
    drop(file);
    let facts = backend.image_facts(&tag).await?.ok_or_else(|| SandboxError::ImageBuild {
        image: tag.clone(),
        message: "the build ended without an image".into(),
    })?;
    let detail =
        format!("built {tag} ({}) in {:.1}s", short_id(&facts.id), began.elapsed().as_secs_f64());
    Ok(ready(tag, facts, detail))
}

/// The image ready as `reference`, with what the engine said of it.
fn ready(reference: String, facts: super::ImageFacts, detail: String) -> ReadyImage {
    ReadyImage { reference, id: facts.id, detail, workdir: facts.workdir, user: facts.user }
}

/// Builds `tag` from a tar build context (classic builder), with the builder's output tail on failure.
///
/// # Errors
/// [`SandboxError::ImageBuild`] when the build fails.
///
/// # Cancel safety
/// A cancelled build leaves at worst an untagged image.
pub(crate) async fn build_context(
    backend: &DockerBackend,
    tag: &str,
    tar: Vec<u8>,
    dockerfile: &str,
) -> Result<(), SandboxError> {
    let tag = tag.to_string();
    let opts = BuildImageOptionsBuilder::default()
        .dockerfile(dockerfile)
        .t(&tag)
        .rm(true)
        .forcerm(true)
        .build();
    let mut stream = backend.client().build_image(opts, None, Some(bollard::body_full(tar.into())));
    let mut log = String::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(info) => {
                // Colour codes of the build's tools would reach the record and the terminal raw.
                if let Some(s) = info.stream {
                    log.push_str(&plain(&s));
                }
                if let Some(detail) = info.error_detail {
                    let message = format!(
                        "{}\n{}",
                        crate::exec::tail(&log, 2000),
                        plain(&detail.message.unwrap_or_default())
                    );
                    return Err(SandboxError::ImageBuild { image: tag, message });
                }
            }
            Err(e) => {
                return Err(SandboxError::ImageBuild {
                    image: tag,
                    message: format!("{}\n{e}", crate::exec::tail(&log, 2000)),
                });
            }
        }
    }
    Ok(())
}

/// Pulls `reference` when a registry is reachable; bounded, since an
/// unreachable registry may hang rather than refuse.
async fn pull(backend: &DockerBackend, reference: &str) -> Result<(), String> {
    let (image, tag) = match reference.rsplit_once(':') {
        Some((i, t)) if !t.contains('/') => (i, t),
        _ => (reference, "latest"),
    };
    let opts = bollard::query_parameters::CreateImageOptionsBuilder::default()
        .from_image(image)
        .tag(tag)
        .build();
    let drain = async {
        let mut stream = backend.client().create_image(Some(opts), None, None);
        while let Some(item) = stream.next().await {
            item.map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), drain)
        .await
        .map_err(|_| "no answer from the registry in 30s".to_string())?
}

struct BuildContext {
    tar: Vec<u8>,
    dockerfile: String,
}

fn short_id(id: &str) -> &str {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    &id[..(id.len() - hex.len()) + hex.len().min(12)]
}

/// The Dockerfile of an [`ImageSpec::Layered`]: its steps run as root on
/// `base`, then the base's own `user` (if it set one) back.
fn layered_dockerfile(base: &str, steps: &[String], user: &str) -> String {
    let mut dockerfile = format!("FROM {base}\nUSER root\n");
    for step in steps {
        dockerfile.push_str(&format!(
            "RUN {}\n",
            serde_json::to_string(&["/bin/sh", "-c", step]).expect("strings serialize")
        ));
    }
    if !user.is_empty() {
        dockerfile.push_str(&format!("USER {user}\n"));
    }
    dockerfile
}

/// A build context of one file, the generated `dockerfile` (an install or a
/// layer: their steps need nothing from the host).
fn dockerfile_only(dockerfile: &str) -> Result<BuildContext, SandboxError> {
    let tar = crate::archive::tar_of(&[FileToWrite::new(
        "Dockerfile",
        dockerfile.as_bytes().to_vec(),
        0o644,
    )])?;
    Ok(BuildContext { tar: tar.to_vec(), dockerfile: "Dockerfile".into() })
}

/// A deterministic tar of a directory (sorted, mtimes zeroed), for workspace
/// fixtures: every file, hidden ones included; symlinks stay links.
#[doc(hidden)]
pub fn dir_tar(dir: &Path) -> std::io::Result<Vec<u8>> {
    tar_files(dir, &files_under(dir)?, None)
}

/// The build context of the Dockerfile `dockerfile` in `dir`: [`dir_tar`] less
/// what the context's `.dockerignore` excludes. The Dockerfile and
/// `.dockerignore` are sent even when excluded, as Docker does (the build
/// needs them; `COPY` does not see them). `text`, when given, is sent as the
/// Dockerfile in place of the file's own bytes.
fn context_tar(dir: &Path, dockerfile: &str, text: Option<&[u8]>) -> std::io::Result<Vec<u8>> {
    let ignore = DockerIgnore::read(dir)?;
    let mut files = walk(dir, ignore.map(|i| i.keeping([dockerfile, DockerIgnore::FILE_NAME])))?;
    let Some(text) = text else { return tar_files(dir, &files, None) };
    if !files.iter().any(|f| f == Path::new(dockerfile)) {
        files.push(dockerfile.into());
        files.sort();
    }
    tar_files(dir, &files, Some((Path::new(dockerfile), text)))
}

/// A tar of `files` under `dir`; `replace`'s file, if given, with its bytes.
fn tar_files(
    dir: &Path,
    files: &[PathBuf],
    replace: Option<(&Path, &[u8])>,
) -> std::io::Result<Vec<u8>> {
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    for rel in files {
        if let Some((name, bytes)) = replace.filter(|(name, _)| name == rel) {
            let mut header = tar::Header::new_gnu();
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mtime(0);
            builder.append_data(&mut header, name, bytes)?;
            continue;
        }
        let full = dir.join(rel);
        let meta = std::fs::symlink_metadata(&full)?;
        let mut header = tar::Header::new_gnu();
        header.set_metadata(&meta);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&full)?;
            header.set_size(0);
            builder.append_link(&mut header, rel, target)?;
        } else {
            builder.append_data(&mut header, rel, std::fs::File::open(&full)?)?;
        }
    }
    builder.into_inner()
}

/// Files and symlinks under `dir`, relative to it, sorted; hidden files
/// included (skills and fixtures are sent whole).
#[doc(hidden)]
pub fn files_under(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    walk(dir, None)
}

/// Walks `dir` with the `ignore` crate's walker, every filter of its own off
/// (hidden files, `.gitignore`, parents' ignore files): only `ignore`, a
/// `.dockerignore`, if given, leaves anything out. Symlinks are listed, never
/// followed. Sorted, so tars and image digests are deterministic.
fn walk(dir: &Path, ignore: Option<DockerIgnore>) -> std::io::Result<Vec<PathBuf>> {
    let mut walker = ignore::WalkBuilder::new(dir);
    walker.standard_filters(false).follow_links(false).sort_by_file_name(|a, b| a.cmp(b));
    if let Some(ignore) = ignore.clone().filter(|i| !i.has_exceptions) {
        // Without `!` exceptions nothing under an excluded directory comes back: skip it whole.
        let root = dir.to_path_buf();
        walker.filter_entry(move |entry| {
            entry.depth() == 0
                || !entry.file_type().is_some_and(|t| t.is_dir())
                || !ignore.excludes(entry.path().strip_prefix(&root).unwrap_or(entry.path()), true)
        });
    }
    let mut files = Vec::new();
    for entry in walker.build() {
        let entry = entry.map_err(|e| {
            e.into_io_error()
                .unwrap_or_else(|| std::io::Error::other("failed to walk the directory"))
        })?;
        let Some(kind) = entry.file_type() else { continue };
        if entry.depth() == 0 && !kind.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        if !(kind.is_file() || kind.is_symlink()) {
            continue;
        }
        let rel = entry.path().strip_prefix(dir).map_err(std::io::Error::other)?.to_path_buf();
        if ignore.as_ref().is_some_and(|i| i.excludes(&rel, false)) {
            continue;
        }
        files.push(rel);
    }
    files.sort();
    Ok(files)
}

/// A build context's `.dockerignore`, matched with the `ignore` crate's
/// gitignore matcher after turning Docker's syntax into gitignore's:
/// patterns are relative to the context root (so each is anchored with a
/// leading `/`), `!` re-includes, `**` spans directories, `#` starts a
/// comment, and a pattern that names a directory covers everything in it.
///
/// Where the two differ, this follows gitignore: a path's own last matching
/// pattern decides before any pattern on its parents (Docker takes the last
/// pattern matching the path or a parent, so `!dir/keep` before `dir` keeps
/// `dir/keep` here but not in Docker), `{a,b}` alternation works, and an
/// unclosed `[` matches literally instead of failing the build.
#[derive(Clone)]
struct DockerIgnore {
    matcher: ignore::gitignore::Gitignore,
    has_exceptions: bool,
    always: Vec<PathBuf>,
}

impl DockerIgnore {
    const FILE_NAME: &str = ".dockerignore";

    /// `dir/.dockerignore`, if there is one.
    fn read(dir: &Path) -> std::io::Result<Option<DockerIgnore>> {
        let path = dir.join(Self::FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Self::parse(dir, &text).map(Some).map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
        })
    }

    fn parse(dir: &Path, text: &str) -> Result<DockerIgnore, String> {
        let mut builder = ignore::gitignore::GitignoreBuilder::new(dir);
        let mut has_exceptions = false;
        for (i, line) in text.trim_start_matches('\u{feff}').lines().enumerate() {
            // As Docker: a comment starts the line; whitespace around a pattern is not part of it.
            if line.starts_with('#') {
                continue;
            }
            let (exception, pattern) = match line.trim().strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, line.trim()),
            };
            let pattern = clean(pattern);
            if pattern.is_empty() {
                continue;
            }
            has_exceptions |= exception;
            let line = format!("{}/{pattern}", if exception { "!" } else { "" });
            builder.add_line(None, &line).map_err(|e| format!("line {}: {e}", i + 1))?;
        }
        let matcher = builder.build().map_err(|e| e.to_string())?;
        Ok(DockerIgnore { matcher, has_exceptions, always: Vec::new() })
    }

    /// The same patterns, but `names` (relative to the root) are never excluded.
    fn keeping<const N: usize>(mut self, names: [&str; N]) -> Self {
        self.always.extend(names.iter().map(PathBuf::from));
        self
    }

    /// Whether `rel` (relative to the context root) stays out of the context.
    fn excludes(&self, rel: &Path, is_dir: bool) -> bool {
        !self.always.iter().any(|a| a == rel)
            && self.matcher.matched_path_or_any_parents(rel, is_dir).is_ignore()
    }
}

impl std::fmt::Debug for DockerIgnore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DockerIgnore")
            .field("patterns", &self.matcher.len())
            .field("has_exceptions", &self.has_exceptions)
            .finish()
    }
}

/// Docker's `filepath.Clean` of a pattern, relative to the root: no leading
/// `/` or `./`, no `//`, no trailing `/`.
fn clean(pattern: &str) -> String {
    pattern.split('/').filter(|part| !part.is_empty() && *part != ".").collect::<Vec<_>>().join("/")
}

#[cfg(test)]
#[path = "image_tests.rs"]
mod tests;
