//! The workspace phase: a git repository fetched on the host before the run,
//! or a directory, unpacked into the workspace; with `init`, a `.git` of one commit.

use crate::environment::Workspace;
use crate::error::{Error, Result};
use crate::exec::Command;
use crate::sandbox::SandboxHandle;

/// Unpacks the workspace; the phase's detail.
pub(crate) async fn unpack(handle: &SandboxHandle, ws: &Workspace) -> Result<String> {
    let (tar, what, init) = match ws {
        Workspace::Dir { path, init } => {
            let tar = crate::image::dir_tar(path).map_err(|e| {
                Error::infra_from(format!("read workspace directory {}", path.display()), e)
            })?;
            (tar, path.display().to_string(), *init)
        }
        Workspace::Git { url, rev, init } => {
            (crate::workspace::fetch_git(url, rev).await?, format!("{url}@{rev}"), *init)
        }
    };
    let bytes = tar.len();
    handle.sandbox().upload(handle.workspace(), tar.into()).await?;
    if init {
        let out = handle
            .exec(Command::shell(
                "git init -q && git add -A && git -c user.name=reeval -c user.email=reeval@localhost commit -qm 'workspace as given' --allow-empty",
            ))
            .await?;
        if !out.success() {
            return Err(Error::infra(
                "initialise the workspace's git repository",
                out.stderr.trim(),
            ));
        }
    }
    Ok(format!("{what} ({bytes} bytes){}", if init { ", .git of one commit" } else { "" }))
}
