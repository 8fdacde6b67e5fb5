//! `Ctx::capture`: evidence kept as artifacts of the record (and shown to the judge by name).

use std::time::Instant;

use crate::ctx::{Capture, Ctx};
use crate::error::{Error, Result};
use crate::exec::Command;
use crate::record::sanitize;
use crate::sandbox::archive::Entry;

/// The largest directory archive a capture keeps.
pub const DIR_LIMIT: u64 = 256 << 20;
/// How much of a capture's text the judge is shown.
pub const JUDGE_TEXT_LIMIT: usize = 16 * 1024;

/// What to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Artifact {
    /// A file in the sandbox (relative paths are in the workspace).
    File(String),
    /// A directory in the sandbox, kept as a tar (never unpacked on the host).
    Dir(String),
    /// A command's output (stdout, stderr and exit code).
    Command(Command),
    /// A served URL's response (status, headers and body), fetched from the host.
    Url(String),
}

impl Artifact {
    /// A file.
    pub fn file(path: impl Into<String>) -> Self {
        Artifact::File(path.into())
    }

    /// A directory, as a tar.
    pub fn dir(path: impl Into<String>) -> Self {
        Artifact::Dir(path.into())
    }

    /// A command's output: `&str` runs under `sh -c`.
    pub fn command(cmd: impl Into<Command>) -> Self {
        Artifact::Command(cmd.into())
    }

    /// A URL's response, typically one returned by `Ctx::serve`.
    pub fn url(url: impl Into<String>) -> Self {
        Artifact::Url(url.into())
    }
}

fn as_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(t) => crate::exec::tail(t, JUDGE_TEXT_LIMIT).to_string(),
        Err(_) => format!("[binary, {} bytes]", bytes.len()),
    }
}

impl Ctx {
    /// Keeps `what` as an artifact named `name` under the attempt's artifact
    /// directory (`captures/`), listed in the record and visible to the judge.
    ///
    /// # Errors
    /// [`crate::SandboxError::NotFound`] (an `assertion` failure) for a missing
    /// file or directory; an error when a URL cannot be fetched; an infra error
    /// when the artifact cannot be written.
    ///
    /// # Cancel safety
    /// A cancelled capture keeps nothing.
    pub async fn capture(&mut self, name: &str, what: Artifact) -> Result<Capture> {
        let handle = self.sandbox().await?;
        let began = Instant::now();
        let base = sanitize(name);
        let redactor = self.redactor.clone();
        let (file, bytes, text) = match &what {
            Artifact::File(path) => {
                let bytes = self.within_budget(async { Ok(handle.read_file(path).await?) }).await?;
                let ext = path.rsplit_once('.').map(|(_, e)| format!(".{}", sanitize(e))).unwrap_or_default();
                let text = as_text(&bytes);
                (format!("{base}{ext}"), bytes, text)
            }
            Artifact::Dir(path) => {
                let abs = handle.resolve(path);
                let tar = self.within_budget(async { Ok(handle.sandbox().download(&abs, DIR_LIMIT).await?) }).await?;
                // Rebuilt from its parsed entries, each redacted: never unpacked, never holding a secret.
                let tree: std::collections::BTreeMap<String, Entry> = crate::sandbox::archive::read_tree(&tar, |_| false)?
                    .into_iter()
                    .map(|(p, e)| match e {
                        Entry::File { mode, bytes } => (p, Entry::File { mode, bytes: redactor.redact_bytes(&bytes).into_owned() }),
                        other => (p, other),
                    })
                    .collect();
                let listing = tree
                    .iter()
                    .map(|(p, e)| match e {
                        Entry::File { bytes, .. } => format!("{p} ({} bytes)", bytes.len()),
                        Entry::Symlink(t) => format!("{p} -> {t}"),
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let top = abs.trim_end_matches('/').rsplit('/').next().filter(|t| !t.is_empty()).unwrap_or("root").to_string();
                let tar = crate::sandbox::archive::tar_of_tree(&top, &tree)?;
                (format!("{base}.tar"), tar.to_vec(), format!("directory {path}, kept as {base}.tar:\n{listing}"))
            }
            Artifact::Command(cmd) => {
                let out = self.within_budget(async { Ok(handle.exec(cmd.clone()).await?) }).await?;
                let text = format!("$ {}\n[exit {}]\n--- stdout ---\n{}\n--- stderr ---\n{}", out.command, out.exit_code, out.stdout, out.stderr);
                (format!("{base}.txt"), text.clone().into_bytes(), as_text(text.as_bytes()))
            }
            Artifact::Url(url) => {
                let text = self.within_budget(fetch(url)).await?;
                (format!("{base}.http.txt"), text.clone().into_bytes(), as_text(text.as_bytes()))
            }
        };
        let text = redactor.redact(&text).into_owned();
        let dir = self.artifacts_dir.join("captures");
        std::fs::create_dir_all(&dir).map_err(|e| Error::infra(format!("create {}", dir.display()), e))?;
        // Archives were redacted entry by entry above; anything else, text or binary, here.
        let bytes = if matches!(what, Artifact::Dir(_)) { bytes } else { redactor.redact_bytes(&bytes).into_owned() };
        std::fs::write(dir.join(&file), &bytes).map_err(|e| Error::infra(format!("write capture {file}"), e))?;
        let relative = format!("captures/{file}");
        self.record.artifacts.push(relative.clone());
        let capture = Capture { name: name.to_string(), file: relative, text };
        self.captures.retain(|c| c.name != name);
        self.captures.push(capture.clone());
        self.log.phase(crate::phase::Phase::Capture, began, format!("{name} ({} bytes)", bytes.len()));
        Ok(capture)
    }

    /// Artifacts captured so far.
    pub fn captures(&self) -> &[Capture] {
        &self.captures
    }
}

async fn fetch(url: &str) -> Result<String> {
    let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(30)).build().map_err(|e| Error::infra("build an HTTP client", e))?;
    let resp = client.get(url).send().await.map_err(|e| Error::other(format!("failed to fetch {url}: {e}")))?;
    let mut text = format!("GET {url}\n{:?} {}\n", resp.version(), resp.status());
    for (k, v) in resp.headers() {
        text.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("<binary>")));
    }
    let body = resp.bytes().await.map_err(|e| Error::other(format!("failed to read the response of {url}: {e}")))?;
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&body));
    Ok(text)
}
