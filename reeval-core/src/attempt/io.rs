//! The eval's own access to the sandbox outside turns and checks: files read
//! and written, the workspace's diff, a port served to the host
//! (`lifecycle/13_serve.rs`) and an artifact captured (`14_capture.rs`).

use std::time::Duration;

use super::Attempt;
use crate::capture::{Artifact, Capture};
use crate::diff::Diff;
use crate::error::Result;
use crate::lifecycle;
use crate::phase::Phase;

impl Attempt {
    /// A file's bytes (relative paths are in the workspace).
    pub(crate) async fn read_bytes(&mut self, path: &str) -> Result<Vec<u8>> {
        let handle = self.sandbox().await?;
        self.phases.within_budget(async { Ok(handle.read_file(path).await?) }).await
    }

    /// Writes a file, owned by the agent user once it is set up.
    pub(crate) async fn write_file(&mut self, path: &str, content: &[u8]) -> Result<()> {
        let handle = self.sandbox().await?;
        // What the last check wrote is the check's, not the eval's.
        self.list_after_check(&handle).await;
        // Until the agent user is set up, its setup hands the workspace over.
        let writer = if self.ready().agent_user { handle.as_agent() } else { handle };
        self.ready().eval_wrote = true;
        self.phases
            .within_budget(async { Ok(writer.write_file(path, content, 0o644).await?) })
            .await
    }

    /// The workspace diff since the snapshot.
    pub(crate) async fn diff(&mut self) -> Result<Diff> {
        let handle = self.sandbox().await?;
        // The listing after the last check, when it waited, is the workspace now.
        if self.list_after_check(&handle).await {
            let ready = self.ready();
            return Ok(ready.baseline.diff(&ready.latest()));
        }
        let (before, baseline) = {
            let ready = self.ready();
            (ready.latest(), ready.baseline.clone())
        };
        let now = self.phases.diff(async { Ok(before.refresh(&handle).await?) }).await?;
        let diff = baseline.diff(&now);
        self.ready().last = Some(now);
        self.ready().eval_wrote = false;
        Ok(diff)
    }

    /// The sandbox's handle, for the eval to act in it directly: from now
    /// on anything may change the workspace, so each check is listed after
    /// it at once (`checks.rs`).
    pub(crate) async fn give_handle(&mut self) -> Result<crate::sandbox::SandboxHandle> {
        let handle = self.sandbox().await?;
        self.list_after_check(&handle).await;
        self.ready().handle_given = true;
        Ok(handle)
    }

    /// A port of the sandbox reachable from the host.
    pub(crate) async fn serve(&mut self, port: u16, ready_within: Duration) -> Result<String> {
        if let Some(f) = self.forwards.iter().find(|f| f.port == port) {
            return Ok(f.url.clone());
        }
        let handle = self.sandbox().await?;
        // A served port lets the eval make the agent's server write: the last check's writes first.
        self.list_after_check(&handle).await;
        let forward = self
            .phases
            .run(Phase::Serve, lifecycle::serve::forward(&handle, port, ready_within), |f| {
                format!("port {port} at {}", f.url)
            })
            .await?;
        let url = forward.url.clone();
        self.forwards.push(forward);
        Ok(url)
    }

    /// Keeps an artifact.
    pub(crate) async fn capture(&mut self, name: &str, what: Artifact) -> Result<Capture> {
        let handle = self.sandbox().await?;
        // A command's output captured runs a command: the last check's writes first.
        self.list_after_check(&handle).await;
        let keep = lifecycle::capture::keep(
            &handle,
            name,
            &what,
            &self.given.artifacts_dir,
            &self.given.redactor,
        );
        let (capture, _) = self
            .phases
            .run(Phase::Capture, keep, |(_, bytes)| format!("{name} ({bytes} bytes)"))
            .await?;
        self.kept(&capture);
        Ok(capture)
    }

    /// Keeps directories (`(name, path)`) as [`Attempt::capture`] keeps
    /// each; two or more of one parent with one read of it, one phase.
    pub(crate) async fn capture_dirs(
        &mut self,
        dirs: Vec<(String, String)>,
    ) -> Result<Vec<Capture>> {
        let handle = self.sandbox().await?;
        if let Some(parent) = one_parent(&handle, &dirs) {
            self.list_after_check(&handle).await;
            let keep = lifecycle::capture::keep_dirs_of(
                &handle,
                &parent,
                &dirs,
                &self.given.artifacts_dir,
                &self.given.redactor,
            );
            let kept = self
                .phases
                .run(Phase::Capture, keep, |kept| match kept {
                    Some(kept) => {
                        let each: Vec<String> =
                            kept.iter().map(|(c, n)| format!("{} ({n} bytes)", c.name)).collect();
                        format!("{}, one read of {parent}", each.join(", "))
                    }
                    None => format!("one read of {parent} did not give them: each read apart"),
                })
                .await?;
            if let Some(kept) = kept {
                let captures: Vec<Capture> = kept.into_iter().map(|(c, _)| c).collect();
                captures.iter().for_each(|c| self.kept(c));
                return Ok(captures);
            }
        }
        let mut captures = Vec::new();
        for (name, path) in dirs {
            captures.push(self.capture(&name, Artifact::dir(path)).await?);
        }
        Ok(captures)
    }

    /// A capture kept: in the record, and for the judge (a later one of the same name replaces it).
    fn kept(&mut self, capture: &Capture) {
        self.record.artifacts.push(capture.file.clone());
        self.captures.retain(|c| c.name != capture.name);
        self.captures.push(capture.clone());
    }
}

/// The parent directory of every one of `dirs`, when there are two or more,
/// distinct, all in one parent that is not `/`.
fn one_parent(handle: &crate::sandbox::SandboxHandle, dirs: &[(String, String)]) -> Option<String> {
    let mut resolved: Vec<String> = dirs.iter().map(|(_, p)| handle.resolve(p)).collect();
    let parent = resolved.first()?.rsplit_once('/')?.0.to_string();
    let all_in = resolved.iter().all(|p| p.rsplit_once('/').is_some_and(|(d, _)| d == parent));
    resolved.sort();
    resolved.dedup();
    (dirs.len() > 1 && resolved.len() == dirs.len() && !parent.is_empty() && all_in)
        .then_some(parent)
}
