//! Workspaces from git: fetched on the host into a cache keyed by url and rev,
//! handed to the sandbox as a tar of the tree at that rev.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Under the process's cache dir (`REEVAL_CACHE_DIR`, see [`crate::settings::cache_dir`]).
fn cache_dir() -> PathBuf {
    crate::settings::cache_dir().join("git")
}

/// The tree of `url` at `rev` as a tar, from the cache or fetched now.
///
/// # Errors
/// An infra error naming the URL when the fetch fails.
///
/// # Cancel safety
/// A cancelled fetch leaves no cache entry (entries are renamed into place).
pub(crate) async fn fetch_git(url: &str, rev: &str) -> Result<Vec<u8>> {
    let key: String = Sha256::digest(format!("{url}\0{rev}"))
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    let dir = cache_dir();
    let cached = dir.join(format!("{key}.tar"));
    if let Ok(bytes) = tokio::fs::read(&cached).await {
        return Ok(bytes);
    }
    tokio::fs::create_dir_all(&dir)
        .await
        .map_err(|e| Error::infra(format!("create the git cache {}", dir.display()), e))?;
    let work = dir.join(format!("{key}.{}.tmp", std::process::id()));
    let _ = tokio::fs::remove_dir_all(&work).await;
    let fail = |what: &str, detail: String| {
        Error::infra(format!("fetch workspace {url} at {rev}"), format!("{what}: {detail}"))
    };
    let git = |args: Vec<&str>| {
        let mut c = tokio::process::Command::new("git");
        c.args(args).env("GIT_TERMINAL_PROMPT", "0").kill_on_drop(true);
        c
    };
    let work_s = work.to_string_lossy().into_owned();
    let out = git(vec!["init", "-q", "--bare", &work_s])
        .output()
        .await
        .map_err(|e| fail("git init", e.to_string()))?;
    if !out.status.success() {
        return Err(fail("git init", String::from_utf8_lossy(&out.stderr).into_owned()));
    }
    let out = git(vec!["-C", &work_s, "fetch", "-q", "--depth", "1", url, rev])
        .output()
        .await
        .map_err(|e| fail("git fetch", e.to_string()))?;
    if !out.status.success() {
        // Servers that refuse fetching a bare sha by depth: fetch everything.
        let retry = git(vec![
            "-C",
            &work_s,
            "fetch",
            "-q",
            url,
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
        ])
        .output()
        .await
        .map_err(|e| fail("git fetch", e.to_string()))?;
        if !retry.status.success() {
            let _ = tokio::fs::remove_dir_all(&work).await;
            return Err(fail("git fetch", String::from_utf8_lossy(&out.stderr).trim().to_string()));
        }
    }
    let target = if out.status.success() { "FETCH_HEAD" } else { rev };
    let archived = git(vec!["-C", &work_s, "archive", "--format=tar", target])
        .output()
        .await
        .map_err(|e| fail("git archive", e.to_string()))?;
    let _ = tokio::fs::remove_dir_all(&work).await;
    if !archived.status.success() {
        return Err(fail(
            "git archive",
            String::from_utf8_lossy(&archived.stderr).trim().to_string(),
        ));
    }
    let tmp = dir.join(format!("{key}.{}.tar.tmp", std::process::id()));
    tokio::fs::write(&tmp, &archived.stdout)
        .await
        .map_err(|e| Error::infra("write the git cache", e))?;
    tokio::fs::rename(&tmp, &cached).await.map_err(|e| Error::infra("write the git cache", e))?;
    Ok(archived.stdout)
}
