//! The capture phase: a file, a directory (as a tar, redacted entry by
//! entry, never unpacked on the host), a command's output or a served URL's
//! response kept under the attempt's `captures/`, through the redactor.

use std::path::Path;

use crate::capture::{Artifact, Capture, DIR_LIMIT, as_text};
use crate::error::{Error, Result};
use crate::record::sanitize;
use crate::sandbox::SandboxHandle;
use crate::sandbox::archive::Entry;
use crate::secrets::Redactor;

/// Keeps `what` as `captures/<name>.<ext>` under `artifacts_dir`.
pub(crate) async fn keep(
    handle: &SandboxHandle,
    name: &str,
    what: &Artifact,
    artifacts_dir: &Path,
    redactor: &Redactor,
) -> Result<(Capture, usize)> {
    let base = sanitize(name);
    let (file, bytes, text) = match what {
        Artifact::File(path) => {
            let bytes = handle.read_file(path).await?;
            let ext =
                path.rsplit_once('.').map(|(_, e)| format!(".{}", sanitize(e))).unwrap_or_default();
            let text = as_text(&bytes);
            (format!("{base}{ext}"), bytes, text)
        }
        Artifact::Dir(path) | Artifact::DirExcluding { path, .. } => {
            let exclude = match what {
                Artifact::DirExcluding { exclude, .. } => exclude.as_slice(),
                _ => &[],
            };
            let exclude = crate::sandbox::exclude::Exclude::new(exclude)?;
            let abs = handle.resolve(path);
            let tar = handle.sandbox().download(&abs, DIR_LIMIT).await?;
            // Rebuilt from its parsed entries, each redacted: never unpacked, never holding a secret.
            let tree: std::collections::BTreeMap<String, Entry> =
                crate::sandbox::archive::read_tree(&tar, |p| exclude.excludes(p))?
                    .into_iter()
                    .map(|(p, e)| match e {
                        Entry::File { mode, bytes } => (
                            p,
                            Entry::File { mode, bytes: redactor.redact_bytes(&bytes).into_owned() },
                        ),
                        other => (p, other),
                    })
                    .collect();
            if tree.is_empty() {
                return Err(Error::assertion(format!(
                    "failed to capture {name}: the directory {path} holds no file"
                )));
            }
            let listing = tree
                .iter()
                .map(|(p, e)| match e {
                    Entry::File { bytes, .. } => format!("{p} ({} bytes)", bytes.len()),
                    Entry::Symlink(t) => format!("{p} -> {t}"),
                })
                .collect::<Vec<_>>()
                .join("\n");
            let top = abs
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .filter(|t| !t.is_empty())
                .unwrap_or("root")
                .to_string();
            let tar = crate::sandbox::archive::tar_of_tree(&top, &tree)?;
            (
                format!("{base}.tar"),
                tar.to_vec(),
                format!("directory {path}, kept as {base}.tar:\n{listing}"),
            )
        }
        Artifact::Command(cmd) => {
            let out = handle.exec(cmd.clone()).await?;
            let text = format!(
                "$ {}\n[exit {}]\n--- stdout ---\n{}\n--- stderr ---\n{}",
                out.command, out.exit_code, out.stdout, out.stderr
            );
            (format!("{base}.txt"), text.clone().into_bytes(), as_text(text.as_bytes()))
        }
        Artifact::Url(url) => {
            let text = fetch(url).await?;
            (format!("{base}.http.txt"), text.clone().into_bytes(), as_text(text.as_bytes()))
        }
    };
    let text = redactor.redact(&text).into_owned();
    let dir = artifacts_dir.join("captures");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::infra_from(format!("create {}", dir.display()), e))?;
    // Archives were redacted entry by entry above; anything else, text or binary, here.
    let bytes = if matches!(what, Artifact::Dir(_) | Artifact::DirExcluding { .. }) {
        bytes
    } else {
        redactor.redact_bytes(&bytes).into_owned()
    };
    std::fs::write(dir.join(&file), &bytes)
        .map_err(|e| Error::infra_from(format!("write capture {file}"), e))?;
    Ok((Capture { name: name.to_string(), file: format!("captures/{file}"), text }, bytes.len()))
}

async fn fetch(url: &str) -> Result<String> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| Error::infra("build an HTTP client", e))?;
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| Error::assertion(format!("failed to fetch {url}: {e}")))?;
    let mut text = format!("GET {url}\n{:?} {}\n", resp.version(), resp.status());
    for (k, v) in resp.headers() {
        text.push_str(&format!("{k}: {}\n", v.to_str().unwrap_or("<binary>")));
    }
    let body = resp
        .bytes()
        .await
        .map_err(|e| Error::assertion(format!("failed to read the response of {url}: {e}")))?;
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&body));
    Ok(text)
}
