//! `[images]` in `reeval.toml`: an image an eval names (`Image::from`, the
//! base of `Image::install`, a Harbor task's `docker_image`, the images a
//! Dockerfile's `FROM`s name, a service's image) mapped to another before
//! anything looks for it, for offline machines and private registries:
//!
//! ```toml
//! [images]
//! "ubuntu:24.04" = "registry.internal/ubuntu:24.04"
//! "alpine:3.23@sha256:0123…" = "registry.internal/alpine@sha256:0123…"
//! ```
//!
//! Names are compared as Docker compares them: `ubuntu` is
//! `docker.io/library/ubuntu:latest`. A digest-pinned name (`name@sha256:…`)
//! maps by its whole name; failing that, by its name without the digest, and
//! the digest is kept on the mapped name (a mirror keeps an image's digest).
//!
//! A Dockerfile (`Image::dockerfile`, a Harbor task's `environment/Dockerfile`)
//! is built from its text with the names its `FROM`s, `COPY --from`s and
//! `RUN --mount=…,from=`s give mapped (`dockerfile.rs`), the user's file left
//! as it is: the rewritten text replaces the file in the build context
//! ([`ImageSpec::DockerfileText`]), so the image's tag changes with the map.
//! Stage names and names built from an `ARG` (`FROM ${BASE}`) are not mapped.
//!
//! The runner applies the map to each cell's environment after its variant's
//! change ([`ImageMap::apply_env`]), before preflight; the record's `image`
//! is the mapped name and its `imageMappedFrom` the one the eval named (for
//! a Dockerfile, the names its `FROM`s gave that were mapped, `, `-separated).

mod dockerfile;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::environment::{Environment, ImageSpec, MappedFrom};

/// An eval's environment function.
type EnvFn = Arc<dyn Fn() -> Environment + Send + Sync>;

/// An image reference taken apart: `domain/path`, tag, digest.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Name {
    repository: String,
    /// The tag as written; `None` when it has none.
    tag: Option<String>,
    digest: Option<String>,
}

impl Name {
    /// Parses `reference`, Docker's way: a first component with a `.` or a
    /// `:`, or `localhost`, is a registry, else it is Docker Hub's
    /// (`library/` for a one-component name).
    fn parse(reference: &str) -> Result<Name, String> {
        let bad = |why: &str| format!("`{reference}` is not an image name: {why}");
        if reference.is_empty() || reference.chars().any(char::is_whitespace) {
            return Err(bad("it is empty or has a space"));
        }
        let (name, digest) = match reference.split_once('@') {
            Some((name, digest)) => {
                let valid = digest.split_once(':').is_some_and(|(algo, hex)| {
                    !algo.is_empty()
                        && !hex.is_empty()
                        && hex.chars().all(|c| c.is_ascii_hexdigit())
                });
                if !valid {
                    return Err(bad("its digest is not `algorithm:hex` (`sha256:…`)"));
                }
                (name, Some(digest.to_ascii_lowercase()))
            }
            None => (reference, None),
        };
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match name[last_slash..].rfind(':') {
            Some(i) => (&name[..last_slash + i], Some(name[last_slash + i + 1..].to_string())),
            None => (name, None),
        };
        if path.is_empty() || tag.as_deref() == Some("") || path.ends_with('/') {
            return Err(bad("its repository or tag is empty"));
        }
        let (domain, rest) = match path.split_once('/') {
            Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
                (first.to_string(), rest.to_string())
            }
            _ => ("docker.io".to_string(), path.to_string()),
        };
        let domain = if domain == "index.docker.io" { "docker.io".to_string() } else { domain };
        let rest = if domain == "docker.io" && !rest.contains('/') {
            format!("library/{rest}")
        } else {
            rest
        };
        Ok(Name { repository: format!("{domain}/{rest}"), tag, digest })
    }

    /// The tag, `latest` when neither a tag nor a digest was written.
    fn effective_tag(&self) -> Option<&str> {
        match (&self.tag, &self.digest) {
            (Some(t), _) => Some(t),
            (None, None) => Some("latest"),
            (None, Some(_)) => None,
        }
    }

    /// Whether `self` (a key) names the same image as `other` (a reference), digest aside.
    fn same_without_digest(&self, other: &Name) -> bool {
        self.repository == other.repository
            && (self.effective_tag() == other.effective_tag()
                // `ubuntu` also maps `ubuntu@sha256:…`, which names no tag.
                || (other.tag.is_none() && self.tag.is_none()))
    }
}

/// The `[images]` of `reeval.toml`, checked: each name an eval may name,
/// and what it stands for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageMap {
    entries: Vec<(Name, String)>,
}

impl ImageMap {
    /// The map of `[images]`.
    ///
    /// # Errors
    /// A message naming the first key or value that is not an image name.
    pub fn new(images: &BTreeMap<String, String>) -> Result<ImageMap, String> {
        let mut entries = Vec::new();
        for (from, to) in images {
            let key = Name::parse(from)?;
            Name::parse(to).map_err(|e| format!("the image `{from}` maps to {e}"))?;
            entries.push((key, to.clone()));
        }
        Ok(ImageMap { entries })
    }

    /// Whether it maps nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What `reference` is mapped to; `None` when the map does not name it.
    /// A digest-pinned reference maps by its whole name, else by its name
    /// without the digest, which the mapped name then keeps.
    pub fn map(&self, reference: &str) -> Option<String> {
        let name = Name::parse(reference).ok()?;
        if let Some((_, to)) = self.entries.iter().find(|(key, _)| same(key, &name)) {
            return Some(to.clone());
        }
        let digest = name.digest.as_ref()?;
        let (_, to) = self
            .entries
            .iter()
            .find(|(key, _)| key.digest.is_none() && key.same_without_digest(&name))?;
        Some(if to.contains('@') { to.clone() } else { format!("{to}@{digest}") })
    }

    /// `env` with its images mapped: `Image::from`'s reference, the base of
    /// `Image::install`, a Dockerfile's `FROM`s (through an `Image::layered`'s
    /// base), and its services' images; the names the sandbox's image had are
    /// kept for the record.
    pub fn apply_env(&self, mut env: Environment) -> Environment {
        if self.is_empty() {
            return env;
        }
        if let Some(spec) = &mut env.image {
            env.image_mapped_from = self.apply_spec(spec);
        }
        for service in &mut env.services {
            self.apply_spec(&mut service.image);
        }
        env
    }

    /// Maps `spec`'s references (through an `Image::layered`'s base); the names it had.
    fn apply_spec(&self, spec: &mut ImageSpec) -> Option<MappedFrom> {
        match spec {
            ImageSpec::From(reference) | ImageSpec::Install { base: reference, .. } => {
                let to = self.map(reference)?;
                Some(MappedFrom::Name(std::mem::replace(reference, to)))
            }
            ImageSpec::Layered { base, .. } => self.apply_spec(base),
            // A file that cannot be read is left as it is: its build says why.
            ImageSpec::Dockerfile(path) => {
                let path = path.clone();
                let text = std::fs::read_to_string(&path).ok()?;
                let (text, names) = dockerfile::rewrite(&text, |n| self.map(n))?;
                *spec = ImageSpec::DockerfileText { path, text };
                Some(MappedFrom::Dockerfile(names))
            }
            ImageSpec::DockerfileText { text, .. } => {
                let (rewritten, names) = dockerfile::rewrite(text, |n| self.map(n))?;
                *text = rewritten;
                Some(MappedFrom::Dockerfile(names))
            }
        }
    }

    /// An eval's environment function with this map applied to what `base`
    /// returns ([`crate::Eval::map_images`]); while `base` runs, [`mapped`]
    /// answers from this map.
    pub(crate) fn wrap(&self, base: EnvFn) -> EnvFn {
        let map = Arc::new(self.clone());
        Arc::new(move || {
            let env = scoped(&map, || base());
            map.apply_env(env)
        })
    }

    /// Runs `f` (an eval's environment function) with this map as the one
    /// [`mapped`] answers from.
    pub(crate) fn scope<T>(&self, f: impl FnOnce() -> T) -> T {
        if self.is_empty() {
            return f();
        }
        scoped(&Arc::new(self.clone()), f)
    }
}

/// Two names equal as Docker would resolve them (an omitted tag is `latest`).
fn same(key: &Name, name: &Name) -> bool {
    key.repository == name.repository
        && key.digest == name.digest
        && key.effective_tag() == name.effective_tag()
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<ImageMap>>> = const { RefCell::new(None) };
}

/// Runs `f` with `map` as the one [`mapped`] answers from.
fn scoped<T>(map: &Arc<ImageMap>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Arc<ImageMap>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| *c.borrow_mut() = self.0.take());
        }
    }
    let _reset = Reset(CURRENT.with(|c| c.borrow_mut().replace(map.clone())));
    f()
}

/// The name `reference` is mapped to by the run's `[images]`, for code that
/// runs inside an eval's environment function and must look at the image
/// itself (a Harbor task asks the engine for its image's WORKDIR); the name
/// itself outside one, or when the map does not name it.
pub fn mapped(reference: &str) -> String {
    CURRENT
        .with(|c| c.borrow().as_ref().and_then(|m| m.map(reference)))
        .unwrap_or_else(|| reference.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> ImageMap {
        ImageMap::new(&pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()).unwrap()
    }

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn names_compare_as_docker_resolves_them() {
        let m = map(&[("ubuntu:24.04", "registry.internal/ubuntu:24.04"), ("python", "mirror/py")]);
        for name in ["ubuntu:24.04", "docker.io/library/ubuntu:24.04", "library/ubuntu:24.04"] {
            assert_eq!(m.map(name).as_deref(), Some("registry.internal/ubuntu:24.04"), "{name}");
        }
        assert_eq!(m.map("ubuntu:22.04"), None);
        assert_eq!(m.map("ubuntu"), None, "ubuntu is ubuntu:latest");
        assert_eq!(m.map("python:latest").as_deref(), Some("mirror/py"));
        assert_eq!(m.map("other.registry/ubuntu:24.04"), None);
        assert_eq!(m.map("localhost:5000/ubuntu:24.04"), None);
    }

    #[test]
    fn digest_pinned_names_map_whole_or_keep_their_digest() {
        let pinned = format!("alpine:3.23.4@{DIGEST}");
        let m = map(&[
            (pinned.as_str(), "mirror/alpine:pinned"),
            ("ubuntu:24.04", "mirror/ubuntu:24.04"),
        ]);
        assert_eq!(m.map(&pinned).as_deref(), Some("mirror/alpine:pinned"));
        assert_eq!(m.map("alpine:3.23.4"), None, "the key names one digest only");
        // Pinned, unmapped as a whole: mapped by name, the digest kept.
        let ubuntu = format!("ubuntu:24.04@{DIGEST}");
        assert_eq!(m.map(&ubuntu), Some(format!("mirror/ubuntu:24.04@{DIGEST}")));
        assert_eq!(m.map(&format!("ubuntu@{DIGEST}")), None, "no tag is not the tag 24.04");
        let m = map(&[("ubuntu", "mirror/ubuntu")]);
        assert_eq!(m.map(&format!("ubuntu@{DIGEST}")), Some(format!("mirror/ubuntu@{DIGEST}")));
    }

    #[test]
    fn bad_names_are_refused_by_name() {
        let bad =
            |k: &str, v: &str| ImageMap::new(&[(k.to_string(), v.to_string())].into()).unwrap_err();
        assert!(bad("ubuntu:", "x").contains("`ubuntu:` is not an image name"));
        assert!(bad("ubuntu@md5", "x").contains("digest"));
        assert!(bad("ubuntu", "").contains("the image `ubuntu` maps to"));
        assert!(bad("a b", "x").contains("space"));
    }

    #[test]
    fn environments_get_the_mapped_name_and_keep_the_one_they_named() {
        let m = map(&[("ubuntu:24.04", "mirror/ubuntu:24.04")]);
        let env = m.apply_env(Environment::new().image(crate::Image::from("ubuntu:24.04")));
        assert_eq!(env.image, Some(ImageSpec::From("mirror/ubuntu:24.04".into())));
        assert_eq!(env.image_mapped_from, Some(MappedFrom::Name("ubuntu:24.04".into())));
        let env =
            m.apply_env(Environment::new().image(crate::Image::install("ubuntu:24.04", ["true"])));
        assert!(
            matches!(env.image, Some(ImageSpec::Install { ref base, .. }) if base == "mirror/ubuntu:24.04")
        );
        let env = m.apply_env(Environment::new().image(crate::Image::from("debian")));
        assert_eq!(env.image_mapped_from, None);

        // Inside an environment function the map answers `mapped`; outside, nothing is mapped.
        let eval = crate::Eval::new("e", |_| Box::pin(async { Ok(()) })).environment(|| {
            let seen = mapped("ubuntu:24.04");
            Environment::new().image(crate::Image::from(seen))
        });
        let env = crate::runner::plan::build_environment(&eval.map_images(&m)).unwrap();
        assert_eq!(env.image, Some(ImageSpec::From("mirror/ubuntu:24.04".into())));
        assert_eq!(mapped("ubuntu:24.04"), "ubuntu:24.04");
    }

    #[test]
    fn a_dockerfile_is_built_from_its_mapped_text_and_its_file_is_left() {
        let dir = std::env::temp_dir().join(format!("reeval-image-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("Dockerfile");
        let text = format!(
            "FROM ubuntu:24.04@{DIGEST} AS base\nFROM base\nCOPY --from=golang:1.22 /x /x\n"
        );
        std::fs::write(&path, &text).unwrap();
        let m = map(&[("ubuntu:24.04", "mirror/ubuntu:24.04"), ("postgres:16", "mirror/pg:16")]);
        let env = m.apply_env(
            Environment::new()
                .image(crate::Image::layered(crate::Image::dockerfile(&path), ["true"]))
                .service(crate::environment::Service::new("db", crate::Image::from("postgres:16"))),
        );
        let Some(ImageSpec::Layered { base, .. }) = &env.image else { panic!("{:?}", env.image) };
        assert_eq!(
            **base,
            ImageSpec::DockerfileText {
                path: path.clone(),
                text: format!(
                    "FROM mirror/ubuntu:24.04@{DIGEST} AS base\nFROM base\nCOPY --from=golang:1.22 /x /x\n"
                ),
            },
            "the digest kept on the mapped name; a stage and an unmapped image left"
        );
        assert_eq!(
            env.image_mapped_from,
            Some(MappedFrom::Dockerfile(vec![format!("ubuntu:24.04@{DIGEST}")]))
        );
        assert_eq!(env.services[0].image, ImageSpec::From("mirror/pg:16".into()), "services too");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text, "the user's file is unchanged");
        // A Dockerfile naming nothing the map names stays the file.
        let env = map(&[("debian", "x")])
            .apply_env(Environment::new().image(crate::Image::dockerfile(&path)));
        assert_eq!(env.image, Some(ImageSpec::Dockerfile(path)));
        assert_eq!(env.image_mapped_from, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
