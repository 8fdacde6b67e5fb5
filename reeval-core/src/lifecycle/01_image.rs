//! The image phase: the eval's image, else the harness's own, else
//! `reeval/base`, made present on the engine (built once per content digest).
//!
//! The run makes images present ahead of the attempts (`runner/scheduler.rs`),
//! and an attempt that needs an image being built there waits for that build
//! and then finds it present. So that a record still says the image was
//! built, and how long that took, the first attempt that gets an image made
//! ahead claims the build in its image phase's detail.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::environment::{DEFAULT_IMAGE, ImageSpec};
use crate::error::Result;
use crate::harness::Harness;
use crate::sandbox::{Backend, ReadyImage};

/// An image being made ready ahead: by engine (its address) and spec.
type AheadKey = (usize, String);
/// What ensuring it ahead reported, once it returned: `Some(detail)` when it
/// built or pulled the image (unclaimed), `None` when the image was there.
type AheadDone = watch::Receiver<Option<Option<String>>>;

static AHEAD: LazyLock<Mutex<HashMap<AheadKey, AheadDone>>> = LazyLock::new(Default::default);

/// How long an attempt that found its image waits to learn whether it was made ahead.
const AHEAD_REPORT_WITHIN: Duration = Duration::from_secs(5);

/// The image spec of an attempt.
pub(crate) fn spec(env_image: Option<&ImageSpec>, harness: Option<&dyn Harness>) -> ImageSpec {
    env_image
        .cloned()
        .or_else(|| harness.and_then(|h| h.image()))
        .unwrap_or_else(|| ImageSpec::From(DEFAULT_IMAGE.into()))
}

fn ahead_key(backend: &dyn Backend, spec: &ImageSpec, harness_id: &str) -> AheadKey {
    (backend as *const dyn Backend as *const () as usize, format!("{spec:?}\n{harness_id}"))
}

/// The key images built for `harness` are told apart by (its [`Harness::image_key`]; empty without one).
pub(crate) fn harness_id(harness: Option<&dyn Harness>) -> String {
    harness.map(|h| h.image_key().to_string()).unwrap_or_default()
}

/// Makes the image present for an attempt; the harness's image key
/// ([`harness_id`]) goes into the digest of built images. An image built ahead of the attempts and not yet
/// in any record is said to be built here, with its build time.
///
/// # Errors
/// The engine's, when the image cannot be found, pulled or built.
///
/// # Cancel safety
/// A cancelled build leaves at worst an untagged image.
pub(crate) async fn ensure(
    backend: &dyn Backend,
    spec: &ImageSpec,
    harness_id: &str,
) -> Result<ReadyImage> {
    let began = Instant::now();
    let mut ready = backend.ensure_image(spec, harness_id).await?;
    let key = ahead_key(backend, spec, harness_id);
    let ahead = AHEAD.lock().unwrap_or_else(|e| e.into_inner()).get(&key).cloned();
    if let Some(mut done) = ahead
        && ready.detail.starts_with("cache hit")
    {
        // The build ahead ended (we found its image); its report follows at once.
        let _ = tokio::time::timeout(AHEAD_REPORT_WITHIN, done.wait_for(Option::is_some)).await;
        let claimed = {
            let mut ahead = AHEAD.lock().unwrap_or_else(|e| e.into_inner());
            let built = ahead.get(&key).and_then(|d| d.borrow().clone().flatten());
            if built.is_some() {
                ahead.remove(&key);
            }
            built
        };
        if let Some(built) = claimed {
            ready.detail = format!(
                "{built} ahead of the attempts; this attempt waited {:.1}s for it",
                began.elapsed().as_secs_f64()
            );
        }
    }
    Ok(ready)
}

/// A build of the eval's own image (its Dockerfile, install or layer steps)
/// that fails fails the same way on every try: the eval's config fault, said
/// once with the build's last lines, not the platform's to retry. A build of
/// a harness's image stays the platform's.
pub(crate) fn own_build_failed(
    err: crate::Error,
    eval: &str,
    env: &crate::environment::Environment,
) -> crate::Error {
    match err {
        crate::Error::Sandbox(crate::sandbox::SandboxError::ImageBuild { image, message })
            if env.image.is_some() && !failed_at_from(&message) =>
        {
            crate::Error::Config(format!(
                "failed to build the image of eval {eval} ({image}); fix its Dockerfile or build steps. The build's last lines:\n{message}"
            ))
        }
        other => other,
    }
}

/// Whether a build failed at a `FROM` (the classic builder's last `Step N/M :`
/// line before the error is one): its base image could not be had (no
/// registry answers, a name that is nowhere), which is where the platform
/// stands, not what the eval's build steps do; it stays the platform's.
fn failed_at_from(build_log: &str) -> bool {
    build_log
        .lines()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix("Step ")?.split_once(" : ").map(|(_, i)| i))
        .is_some_and(|instruction| {
            instruction.trim_start().to_ascii_uppercase().starts_with("FROM")
        })
}

/// Makes the image present ahead of the attempts, for the first attempt
/// that gets it to claim (see [`ensure`]). Failures are left to the attempts.
///
/// # Cancel safety
/// Cancelled, it reports nothing: attempts say what they find.
pub(crate) async fn ensure_ahead(backend: &dyn Backend, spec: &ImageSpec, harness_id: &str) {
    let (tx, rx) = watch::channel(None);
    let key = ahead_key(backend, spec, harness_id);
    AHEAD.lock().unwrap_or_else(|e| e.into_inner()).insert(key, rx);
    let made = backend.ensure_image(spec, harness_id).await;
    let built = made.ok().map(|r| r.detail).filter(|d| !d.starts_with("cache hit"));
    let _ = tx.send(Some(built));
}

/// Makes every service's image present (as the sandbox's is, without a
/// harness); the services with their references, and the phase's detail.
///
/// # Errors
/// The engine's, naming the service, when an image cannot be found, pulled or built.
///
/// # Cancel safety
/// A cancelled build leaves at worst an untagged image.
pub(crate) async fn ensure_services(
    backend: &dyn Backend,
    services: &[crate::sandbox::Service],
) -> Result<(Vec<crate::sandbox::ServiceStart>, String)> {
    let mut started = Vec::with_capacity(services.len());
    let mut details = Vec::new();
    for service in services {
        use crate::sandbox::SandboxError;
        let of = |image: String| format!("{image} (of service {})", service.name);
        let ready = backend.ensure_image(&service.image, "").await.map_err(|e| match e {
            SandboxError::ImageMissing { image, hint } => {
                SandboxError::ImageMissing { image: of(image), hint }
            }
            SandboxError::ImageBuild { image, message } => {
                SandboxError::ImageBuild { image: of(image), message }
            }
            other => other,
        })?;
        details.push(format!("service {}: {}", service.name, ready.detail));
        started.push(crate::sandbox::ServiceStart {
            service: service.clone(),
            image: ready.reference,
        });
    }
    Ok((started, details.join("; ")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_build_that_failed_at_a_from_is_the_platforms() {
        let at_from = "Step 1/4 : FROM nowhere/base:1 AS stage\n\nDocker stream error: Get \"https://registry-1.docker.io/v2/\": no such host";
        assert!(super::failed_at_from(at_from));
        let at_run = "Step 1/2 : FROM reeval/base:latest\n ---> 43f7\nStep 2/2 : RUN exit 7\n ---> Running in 0a\nreturned a non-zero code: 7";
        assert!(!super::failed_at_from(at_run));
        assert!(!super::failed_at_from("no steps at all"));
    }
}
