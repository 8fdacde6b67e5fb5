//! How a sandbox's image is obtained: what an eval's environment names and
//! a backend builds, pulls or finds (`Image::from`, `dockerfile`, `install`,
//! `layered`), and the tags built images go under (`reeval/img:<digest>`).

use std::path::PathBuf;

use sha2::{Digest, Sha256};

/// How the sandbox's image is obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageSpec {
    /// An image by reference, used when present locally.
    From(String),
    /// Built from a Dockerfile; the build context is the file's directory.
    Dockerfile(PathBuf),
    /// A Dockerfile built from `text` in place of the file's own (`[images]`
    /// rewrites a Dockerfile's `FROM` names so): the build context is still
    /// `path`'s directory, and the file on disk is not read or changed.
    DockerfileText {
        /// The Dockerfile `text` stands for; its directory is the build context.
        path: PathBuf,
        /// The Dockerfile's text, built in its place.
        text: String,
    },
    /// A base image plus install commands (run as `sh -c` steps).
    Install {
        /// The base image reference.
        base: String,
        /// Shell commands run in order at build time.
        steps: Vec<String>,
    },
    /// Another spec's image plus build steps (run as root, as `sh -c`), a
    /// layer tagged by the base image's id and the steps, so built once.
    Layered {
        /// The image the steps are built on.
        base: Box<ImageSpec>,
        /// Shell commands run in order at build time.
        steps: Vec<String>,
    },
}

impl ImageSpec {
    /// The tag the Docker backend builds an [`ImageSpec::Install`] image under,
    /// given the id of its base on the engine (`docker image inspect -f '{{.Id}}'`)
    /// and the harness's `image_key` (reeval-core's `Harness::image_key`); `None` for
    /// other specs. A machine whose sandboxes cannot run the install steps (no
    /// npm for a harness's CLI) can build the same image another way and tag it
    /// so: the run then finds it present.
    pub fn install_tag(&self, base_id: &str, harness_key: &str) -> Option<String> {
        match self {
            ImageSpec::Install { base, steps } => {
                Some(install_tag(base_id, &install_dockerfile(base, steps), harness_key))
            }
            _ => None,
        }
    }
}

/// The Dockerfile of an [`ImageSpec::Install`]: each step a `RUN` on `base`.
pub(crate) fn install_dockerfile(base: &str, steps: &[String]) -> String {
    let mut dockerfile = format!("FROM {base}\n");
    for step in steps {
        dockerfile.push_str(&format!(
            "RUN {}\n",
            serde_json::to_string(&["/bin/sh", "-c", step]).expect("strings serialize")
        ));
    }
    dockerfile
}

/// The tag an [`ImageSpec::Install`] image is built under: its base's id, its
/// Dockerfile and `extra` (the harness's image key).
pub(crate) fn install_tag(base_id: &str, dockerfile: &str, extra: &str) -> String {
    digest_tag(&[b"install", base_id.as_bytes(), dockerfile.as_bytes(), extra.as_bytes()])
}

/// `reeval/img:<first 16 hex of sha256 over the parts>`.
pub(crate) fn digest_tag(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let hex: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("reeval/img:{hex}")
}

/// Images.
#[derive(Debug, Clone, Copy)]
pub struct Image;

impl Image {
    /// An image by reference (`name:tag`), used if present locally.
    pub fn from(reference: impl Into<String>) -> ImageSpec {
        ImageSpec::From(reference.into())
    }

    /// An image built from a Dockerfile; its directory is the build context.
    pub fn dockerfile(path: impl Into<PathBuf>) -> ImageSpec {
        ImageSpec::Dockerfile(path.into())
    }

    /// A base image plus install commands.
    pub fn install<I, S>(base: impl Into<String>, steps: I) -> ImageSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ImageSpec::Install { base: base.into(), steps: steps.into_iter().map(Into::into).collect() }
    }

    /// `base` (any spec: a Dockerfile, a reference, an install) plus build
    /// steps run as root, built as a layer on it and cached with it.
    pub fn layered<I, S>(base: ImageSpec, steps: I) -> ImageSpec
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ImageSpec::Layered {
            base: Box::new(base),
            steps: steps.into_iter().map(Into::into).collect(),
        }
    }
}
