//! The capture phase: a file, a directory (as a tar, redacted entry by
//! entry, never unpacked on the host), a command's output or a served URL's
//! response kept under the attempt's `captures/`, through the redactor.

use std::collections::BTreeMap;
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
        Artifact::File(path) => file_kept(&base, path, handle.read_file(path).await?),
        Artifact::Dir(path) | Artifact::DirExcluding { path, .. } => {
            let abs = handle.resolve(path);
            let tar = handle.sandbox().download(&abs, DIR_LIMIT).await?;
            dir_kept(&base, name, path, &abs, &tar, excluded(what), redactor)?
        }
        Artifact::Command(cmd) => command_kept(&base, handle.exec(cmd.clone()).await?),
        Artifact::Url(url) => {
            let text = fetch(url).await?;
            (format!("{base}.http.txt"), text.clone().into_bytes(), as_text(text.as_bytes()))
        }
        Artifact::InService { service, artifact } => {
            in_service(handle, service, artifact, (&base, name), redactor).await?
        }
    };
    write_kept(artifacts_dir, name, &file, bytes, &text, redactor, what.is_archive())
}

/// Writes a capture's file under `captures/`, its text redacted; an
/// archive's bytes were redacted entry by entry, anything else is here.
fn write_kept(
    artifacts_dir: &Path,
    name: &str,
    file: &str,
    bytes: Vec<u8>,
    text: &str,
    redactor: &Redactor,
    archive: bool,
) -> Result<(Capture, usize)> {
    let text = redactor.redact(text).into_owned();
    let dir = artifacts_dir.join("captures");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::infra_from(format!("create {}", dir.display()), e))?;
    let bytes = if archive { bytes } else { redactor.redact_bytes(&bytes).into_owned() };
    std::fs::write(dir.join(file), &bytes)
        .map_err(|e| Error::infra_from(format!("write capture {file}"), e))?;
    Ok((Capture { name: name.to_string(), file: format!("captures/{file}"), text }, bytes.len()))
}

/// What a capture keeps: its file name, its bytes and its text for the judge.
type Kept = (String, Vec<u8>, String);

/// Keeps each of `dirs` (`(name, path)`, distinct directories of one
/// parent `parent`) as [`keep`] keeps `Artifact::dir(path)`, byte for byte,
/// from one archive read of `parent`; what else `parent` holds is read and
/// dropped. `None` when that read or its split fails, or a directory is not
/// one the split can tell whole (a link, a hard link in the archive): then
/// each is to be kept with a read of its own.
pub(crate) async fn keep_dirs_of(
    handle: &SandboxHandle,
    parent: &str,
    dirs: &[(String, String)],
    artifacts_dir: &Path,
    redactor: &Redactor,
) -> Result<Option<Vec<(Capture, usize)>>> {
    let Ok(tar) = handle.sandbox().download(&handle.resolve(parent), DIR_LIMIT).await else {
        return Ok(None);
    };
    let Ok(tree) = crate::sandbox::archive::read_tree(&tar, |_| false) else { return Ok(None) };
    // The parent's entries by the directory they are in; its own entries apart.
    let mut subs: BTreeMap<String, BTreeMap<String, Entry>> = BTreeMap::new();
    let mut own = Vec::new();
    for (path, entry) in tree {
        match path.split_once('/') {
            Some((dir, rest)) => {
                subs.entry(dir.to_string()).or_default().insert(rest.to_string(), entry);
            }
            None => own.push(path),
        }
    }
    let mut each = Vec::new();
    for (name, path) in dirs {
        let abs = handle.resolve(path);
        let child = abs.rsplit('/').next().unwrap_or_default();
        if child.is_empty() || own.iter().any(|o| o == child) {
            return Ok(None);
        }
        let sub = subs.remove(child).unwrap_or_default();
        // A hard link names its target by its path in the archive read: not the same one.
        if sub.values().any(|e| matches!(e, Entry::Symlink(t) if t.starts_with("hardlink:"))) {
            return Ok(None);
        }
        each.push((name, path, abs, sub));
    }
    let mut out = Vec::new();
    for (name, path, abs, sub) in each {
        let (file, bytes, text) = tree_kept(&sanitize(name), name, path, &abs, sub, redactor)?;
        out.push(write_kept(artifacts_dir, name, &file, bytes, &text, redactor, true)?);
    }
    Ok(Some(out))
}

/// The patterns a directory capture leaves out.
fn excluded(what: &Artifact) -> &[String] {
    match what {
        Artifact::DirExcluding { exclude, .. } => exclude.as_slice(),
        _ => &[],
    }
}

fn file_kept(base: &str, path: &str, bytes: Vec<u8>) -> Kept {
    let ext = path.rsplit_once('.').map(|(_, e)| format!(".{}", sanitize(e))).unwrap_or_default();
    let text = as_text(&bytes);
    (format!("{base}{ext}"), bytes, text)
}

fn command_kept(base: &str, out: crate::exec::ExecOutput) -> Kept {
    let text = format!(
        "$ {}\n[exit {}]\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.command, out.exit_code, out.stdout, out.stderr
    );
    (format!("{base}.txt"), text.clone().into_bytes(), as_text(text.as_bytes()))
}

/// A directory's tar (`tar`, of `abs`) rebuilt from its parsed entries, each
/// redacted: never unpacked, never holding a secret.
fn dir_kept(
    base: &str,
    name: &str,
    path: &str,
    abs: &str,
    tar: &[u8],
    exclude: &[String],
    redactor: &Redactor,
) -> Result<Kept> {
    let exclude = crate::sandbox::exclude::Exclude::new(exclude)?;
    let tree = crate::sandbox::archive::read_tree(tar, |p| exclude.excludes(p))?;
    tree_kept(base, name, path, abs, tree, redactor)
}

/// [`dir_kept`] of a tree already read (`abs`'s entries, relative to it).
fn tree_kept(
    base: &str,
    name: &str,
    path: &str,
    abs: &str,
    tree: BTreeMap<String, Entry>,
    redactor: &Redactor,
) -> Result<Kept> {
    let tree: BTreeMap<String, Entry> = tree
        .into_iter()
        .map(|(p, e)| match e {
            Entry::File { mode, bytes } => {
                (p, Entry::File { mode, bytes: redactor.redact_bytes(&bytes).into_owned() })
            }
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
    Ok((
        format!("{base}.tar"),
        tar.to_vec(),
        format!("directory {path}, kept as {base}.tar:\n{listing}"),
    ))
}

/// `artifact` kept from the service `service` beside the sandbox.
async fn in_service(
    handle: &SandboxHandle,
    service: &str,
    artifact: &Artifact,
    (base, name): (&str, &str),
    redactor: &Redactor,
) -> Result<Kept> {
    let absolute = |path: &str| {
        if path.starts_with('/') {
            Ok(())
        } else {
            Err(Error::Config(format!(
                "failed to capture {name}: {path} in service {service} must be an absolute path"
            )))
        }
    };
    let sandbox = handle.sandbox();
    match artifact {
        Artifact::File(path) => {
            absolute(path)?;
            let tar = sandbox.download_from_service(service, path, DIR_LIMIT).await?;
            Ok(file_kept(base, path, crate::sandbox::archive::single_file(&tar, path)?))
        }
        Artifact::Dir(path) | Artifact::DirExcluding { path, .. } => {
            absolute(path)?;
            let tar = sandbox.download_from_service(service, path, DIR_LIMIT).await?;
            dir_kept(base, name, path, path, &tar, excluded(artifact), redactor)
        }
        Artifact::Command(cmd) => {
            Ok(command_kept(base, sandbox.exec_in_service(service, cmd).await?))
        }
        Artifact::Url(url) => Err(Error::Config(format!(
            "failed to capture {name}: a URL ({url}) is fetched from the host, not in service {service}"
        ))),
        Artifact::InService { artifact, .. } => {
            Box::pin(in_service(handle, service, artifact, (base, name), redactor)).await
        }
    }
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
