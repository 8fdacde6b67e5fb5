//! How a sandbox's image is obtained: what an eval's environment names and
//! a backend builds, pulls or finds (`Image::from`, `dockerfile`, `install`,
//! `layered`).

use std::path::PathBuf;

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
