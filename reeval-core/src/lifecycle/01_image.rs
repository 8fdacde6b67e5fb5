//! The image phase: the eval's image, else the harness's own, else
//! `reeval/base`, made present on the engine (built once per content digest).

use crate::environment::{DEFAULT_IMAGE, ImageSpec};
use crate::error::Result;
use crate::harness::Harness;
use crate::sandbox::{Backend, ReadyImage};

/// The image spec of an attempt.
pub(crate) fn spec(env_image: Option<&ImageSpec>, harness: Option<&dyn Harness>) -> ImageSpec {
    env_image
        .cloned()
        .or_else(|| harness.and_then(|h| h.image()))
        .unwrap_or_else(|| ImageSpec::From(DEFAULT_IMAGE.into()))
}

/// Makes the image present; the harness's name goes into the digest of built images.
pub(crate) async fn ensure(
    backend: &dyn Backend,
    spec: &ImageSpec,
    harness: Option<&dyn Harness>,
) -> Result<ReadyImage> {
    let harness_id = harness.map(|h| h.image_key().to_string()).unwrap_or_default();
    Ok(backend.ensure_image(spec, &harness_id).await?)
}
