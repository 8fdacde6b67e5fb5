//! A CLI's session start in the sandbox: its config home and the files in
//! it written as one upload owned by the agent user (no exec), and the skills
//! a directory in the sandbox holds copied where the CLI reads them.

use bytes::Bytes;
use reeval_core::Command;
use reeval_core::harness::HarnessError;
use reeval_core::sandbox::FileToWrite;
use reeval_core::sandbox::{AgentUser, SandboxError, SandboxHandle};
use reeval_core::turn::ErrorClass;

use super::{AGENT_HOME_ROOT, CliAgent, CliHarness};

/// Copies each directory's contents into `$1` (made first); a missing one gives nothing.
const COPY_SKILLS: &str = r#"dest=$1; shift; mkdir -p "$dest" || exit 1
for dir in "$@"; do
  [ -d "$dir" ] || continue
  cp -R "$dir"/. "$dest"/ || exit 1
done"#;

impl<A: CliAgent> CliHarness<A> {
    /// Writes the config home and `files` in it: one upload as the handle's
    /// user's, else (no parent directory to upload into, a file elsewhere)
    /// `mkdir -p` and a write per file.
    ///
    /// # Errors
    /// The sandbox's error, or an infra [`HarnessError`] when the home cannot be made.
    ///
    /// # Cancel safety
    /// A dropped call may leave the home half written; teardown removes the sandbox.
    pub(super) async fn write_home(
        &self,
        sandbox: &SandboxHandle,
        files: Vec<FileToWrite>,
    ) -> Result<(), HarnessError> {
        let owner = if sandbox.is_agent() { AgentUser::ID } else { 0 };
        if let Some((dir, tar)) = home_tree(&self.home, &files, owner) {
            match sandbox.sandbox().upload(&dir, tar).await {
                Ok(()) => return Ok(()),
                // No such directory in this sandbox: made below, with `mkdir -p`.
                Err(SandboxError::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let out = sandbox.exec(Command::new("mkdir").arg("-p").arg(&self.home)).await?;
        if !out.success() {
            return Err(self.failed(
                format!("failed to create {}: {}", self.home, out.stderr.trim()),
                ErrorClass::Infra,
            ));
        }
        for FileToWrite { path, bytes, mode } in files {
            sandbox.write_file(&path, &bytes, mode).await?;
        }
        Ok(())
    }

    /// Copies the skill folders of `dirs` (paths in the sandbox, as Harbor's
    /// `skills_dir`) where the CLI reads skills, in one exec as the handle's
    /// user; nothing when there are none or the CLI takes no skills.
    ///
    /// # Errors
    /// The sandbox's error, or a config [`HarnessError`] naming what `cp` said
    /// when a directory cannot be copied (the agent would run without skills
    /// the eval counts on).
    ///
    /// # Cancel safety
    /// A dropped call may leave some skills copied; teardown removes the sandbox.
    pub(super) async fn copy_skills_in_sandbox(
        &self,
        sandbox: &SandboxHandle,
        dirs: &[String],
    ) -> Result<(), HarnessError> {
        let Some(dest) = self.agent.skills_dir(&self.home).filter(|_| !dirs.is_empty()) else {
            return Ok(());
        };
        let copy = Command::new("sh").arg("-c").arg(COPY_SKILLS).arg("sh").arg(&dest).args(dirs);
        let out = sandbox.exec(copy).await?;
        if out.success() {
            return Ok(());
        }
        Err(self.failed(
            format!(
                "failed to copy the skills in {} to {dest}: {}",
                dirs.join(", "),
                out.stderr.trim()
            ),
            ErrorClass::Config,
        ))
    }
}

/// The config `home` under [`AGENT_HOME_ROOT`] and `files` in it, as one
/// archive owned by `owner` to upload to the root's parent: every directory
/// from the root down (mode 755, as `mkdir -p` makes them) before the files.
/// `None` when a file is not in the home, or a path is not plain.
fn home_tree(home: &str, files: &[FileToWrite], owner: u64) -> Option<(String, Bytes)> {
    let (top, _) = AGENT_HOME_ROOT.rsplit_once('/')?;
    let relative = |path: &str| {
        let rel = path.strip_prefix(top)?.strip_prefix('/')?;
        rel.split('/').all(|c| !c.is_empty() && c != "." && c != "..").then(|| rel.to_string())
    };
    let root = relative(AGENT_HOME_ROOT)?;
    let home = relative(home).filter(|h| h.starts_with(&format!("{root}/")))?;
    // Each path's directories, from the root down (the root included).
    let mut dirs = std::collections::BTreeSet::new();
    let mut with_parents = |path: &str| {
        let mut at = path;
        while at.len() > root.len()
            && let Some((parent, _)) = at.rsplit_once('/')
        {
            dirs.insert(parent.to_string());
            at = parent;
        }
    };
    with_parents(&format!("{home}/."));
    let mut entries = Vec::new();
    for FileToWrite { path, bytes, mode } in files {
        let rel = relative(path).filter(|r| r.starts_with(&format!("{home}/")))?;
        with_parents(&rel);
        entries.push((rel, bytes, *mode));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut builder = tar::Builder::new(Vec::new());
    // A parent sorts before its children.
    for dir in &dirs {
        let mut header = tar::Header::new_gnu();
        header.set_uid(owner);
        header.set_gid(owner);
        header.set_mode(0o755);
        header.set_mtime(now);
        header.set_size(0);
        header.set_entry_type(tar::EntryType::Directory);
        builder.append_data(&mut header, format!("{dir}/"), std::io::empty()).ok()?;
    }
    for (rel, bytes, mode) in entries {
        let mut header = tar::Header::new_gnu();
        header.set_uid(owner);
        header.set_gid(owner);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_size(bytes.len() as u64);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, rel, bytes.as_slice()).ok()?;
    }
    Some((top.to_string(), Bytes::from(builder.into_inner().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_is_one_archive_of_its_directories_then_its_files() {
        let home = format!("{AGENT_HOME_ROOT}/codex");
        let files = vec![
            FileToWrite::new(format!("{home}/config.toml"), b"x = 1".to_vec(), 0o600),
            FileToWrite::new(format!("{home}/skills/review/SKILL.md"), b"s".to_vec(), 0o644),
        ];
        let (dir, tar) = home_tree(&home, &files, 1000).expect("an archive");
        assert_eq!(dir, "/tmp");
        let mut archive = tar::Archive::new(tar.as_ref());
        let entries: Vec<(String, bool, u32, u64)> = archive
            .entries()
            .expect("entries")
            .map(|e| {
                let e = e.expect("an entry");
                let h = e.header();
                let path = e.path().expect("a path").to_string_lossy().into_owned();
                (path, h.entry_type().is_dir(), h.mode().expect("a mode"), h.uid().expect("a uid"))
            })
            .collect();
        let want = [
            ("reeval-agent", true, 0o755),
            ("reeval-agent/codex", true, 0o755),
            ("reeval-agent/codex/skills", true, 0o755),
            ("reeval-agent/codex/skills/review", true, 0o755),
            ("reeval-agent/codex/config.toml", false, 0o600),
            ("reeval-agent/codex/skills/review/SKILL.md", false, 0o644),
        ];
        assert_eq!(entries.len(), want.len(), "{entries:?}");
        for ((path, dir, mode, uid), (p, d, m)) in entries.iter().zip(want) {
            assert_eq!((path.trim_end_matches('/'), *dir, *mode, *uid), (p, d, m, 1000));
        }
        // A file outside the home, or a path that is not plain: written the long way.
        assert!(home_tree(&home, &[FileToWrite::new("/etc/x", vec![], 0o644)], 1000).is_none());
        let odd = FileToWrite::new(format!("{home}/../x"), vec![], 0o644);
        assert!(home_tree(&home, &[odd], 1000).is_none());
        assert!(home_tree("/elsewhere/codex", &[], 1000).is_none());
    }
}
