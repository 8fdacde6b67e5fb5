//! Images reeval builds (`Image::dockerfile`, `Image::install`, harness
//! images, the gateway image), pushed to the registry the cluster pulls from
//! (`registry` in `[kubernetes]`). They are built on the local Docker engine
//! as on the Docker backend (`reeval/<name>:<content digest>`), tagged
//! `<registry>/reeval/<name>:<content digest>` and pushed from there, unless
//! the registry already has that tag (the digest names the content, so the
//! same tag is the same image). Credentials come from the Docker config
//! (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`, `auths`), as
//! `docker push` finds them; credential helpers are not asked.

use base64::Engine as _;
use bollard::auth::DockerCredentials;
use bollard::query_parameters::{PushImageOptions, TagImageOptions};
use futures_util::StreamExt;

use crate::SandboxError;

/// `<registry>/<local reference>`: where the cluster pulls a local image from.
pub(super) fn pushed_name(registry: &str, local: &str) -> String {
    format!("{}/{local}", registry.trim_end_matches('/'))
}

/// `(repository, tag)` of a reference (`host:port/a/b:tag` → `host:port/a/b`, `tag`).
fn split_tag(reference: &str) -> (&str, &str) {
    match reference.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (reference, "latest"),
    }
}

/// Makes the local image `local` available as `<registry>/<local>`; returns
/// that name and whether it had to be pushed.
///
/// # Errors
/// [`SandboxError::Engine`] when tagging or pushing fails (the registry's answer in it).
///
/// # Cancel safety
/// A cancelled push leaves at worst part of the layers in the registry; the next push completes it.
pub(super) async fn push(
    docker: &bollard::Docker,
    registry: &str,
    local: &str,
) -> Result<(String, bool), SandboxError> {
    let name = pushed_name(registry, local);
    let credentials = credentials(registry);
    // The engine asks the registry (with its own TLS and insecure-registry settings).
    if docker.inspect_registry_image(&name, credentials.clone()).await.is_ok() {
        return Ok((name, false));
    }
    let (repo, tag) = split_tag(&name);
    docker
        .tag_image(
            local,
            Some(TagImageOptions { repo: Some(repo.to_string()), tag: Some(tag.to_string()) }),
        )
        .await
        .map_err(|e| SandboxError::engine(format!("tag {local} as {name}"), e))?;
    let mut pushing = docker.push_image(
        repo,
        Some(PushImageOptions { tag: Some(tag.to_string()), ..Default::default() }),
        credentials,
    );
    while let Some(step) = pushing.next().await {
        step.map_err(|e| SandboxError::engine(format!("push {name} to {registry}"), e))?;
    }
    Ok((name, true))
}

/// The Docker config's credentials for the registry's host, if it has any.
fn credentials(registry: &str) -> Option<DockerCredentials> {
    let host = registry.split('/').next().unwrap_or(registry);
    let path = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => std::path::PathBuf::from(dir).join("config.json"),
        None => std::path::PathBuf::from(std::env::var_os("HOME")?).join(".docker/config.json"),
    };
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    credentials_in(&config, host)
}

/// `auths.<host>` of a Docker config: `auth` (base64 of `user:password`) or an identity token.
pub(super) fn credentials_in(config: &serde_json::Value, host: &str) -> Option<DockerCredentials> {
    let auths = config.get("auths")?.as_object()?;
    let entry = auths.iter().find_map(|(key, entry)| {
        let key = key.trim_start_matches("https://").trim_start_matches("http://");
        (key.split('/').next() == Some(host)).then_some(entry)
    })?;
    let mut found =
        DockerCredentials { serveraddress: Some(host.to_string()), ..Default::default() };
    if let Some(auth) = entry.get("auth").and_then(|a| a.as_str()) {
        let decoded = base64::engine::general_purpose::STANDARD.decode(auth).ok()?;
        let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        found.username = Some(user.to_string());
        found.password = Some(password.to_string());
    }
    found.identitytoken = entry.get("identitytoken").and_then(|t| t.as_str()).map(str::to_string);
    (found.username.is_some() || found.identitytoken.is_some()).then_some(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_credentials() {
        assert_eq!(
            pushed_name("127.0.0.1:5000/", "reeval/img:ab12"),
            "127.0.0.1:5000/reeval/img:ab12"
        );
        assert_eq!(
            split_tag("127.0.0.1:5000/reeval/img:ab12"),
            ("127.0.0.1:5000/reeval/img", "ab12")
        );
        assert_eq!(split_tag("127.0.0.1:5000/reeval/img"), ("127.0.0.1:5000/reeval/img", "latest"));
        let config = serde_json::json!({"auths": {
            "https://registry.example.com": {"auth": "dXNlcjpwYXNz"},
            "other.example.com": {"identitytoken": "tok"},
        }});
        let found = credentials_in(&config, "registry.example.com").unwrap();
        assert_eq!(
            (found.username.as_deref(), found.password.as_deref()),
            (Some("user"), Some("pass"))
        );
        assert_eq!(
            credentials_in(&config, "other.example.com").unwrap().identitytoken.as_deref(),
            Some("tok")
        );
        assert!(credentials_in(&config, "nowhere.example.com").is_none());
    }
}
