//! The setup cache's key: a digest of everything that goes into a prepared
//! sandbox, from the eval's environment. Kept apart from `setup_cache.rs`
//! (the engine's side: commit, lookup, eviction), which knows images, not
//! environments.

use crate::sandbox::FileToWrite;
use sha2::{Digest, Sha256};

use crate::environment::{Environment, Workspace};

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
    if env.workspace_dir != crate::environment::WorkspaceDir::Default {
        // Only when set: the keys of environments in /workspace stay as they were.
        part("workspace_dir", format!("{:?}", env.workspace_dir).as_bytes());
    }
    for FileToWrite { path, bytes, mode } in &env.files {
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
    if env.any_egress {
        // Setup reaches any host when it has no network of its own.
        part("any_egress", b"1");
    }
    if !env.allow_internal.is_empty() {
        // What setup reaches of a team's own network.
        part("allow_internal", env.allow_internal.join("\n").as_bytes());
    }
    for step in &env.setup {
        part("step", format!("{}\n{}", step.command, step.timeout.as_millis()).as_bytes());
    }
    let hex: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
    Ok(hex)
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
