//! The snapshot phase: the workspace as the agent finds it; every diff starts
//! here. Before it, the workspace is handed to the unprivileged agent user,
//! so that change of owner is not a change of the agent's.

use crate::diff::Snapshot;
use crate::error::{Error, Result};
use crate::exec::Command;
use crate::sandbox::SandboxHandle;

/// Prepares the unprivileged agent user (see `AgentUser`), as root.
/// The agent's user owns its home and the workspace. Only what it does not
/// own yet is changed: on an overlay file system a change of owner copies the
/// file up, so a workspace already owned (an image layer's, a cached setup's)
/// costs a walk, not a copy. Where `find` cannot, `chown -R` does it all.
const AGENT_USER_SETUP: &str = "mkdir -p /home/agent \
    && { find /home/agent . \\( ! -user 1000 -o ! -group 1000 \\) -exec chown -h 1000:1000 {} + 2>/dev/null \
         || chown -R 1000:1000 /home/agent . ; } \
    && mkdir -p -m 1777 /tmp/.reeval-pids && chmod 1777 /tmp/.reeval-pids \
    && { command -v git >/dev/null 2>&1 && git config --system --add safe.directory '*' || true; }";

/// The agent's user: its home, the workspace and what the environment put in
/// it are its own; root's git may read its repository, whose refs are noted
/// (`crate::git_archive`). Once per attempt, before the agent's first action.
/// Whether the workspace is a git repository.
/// `image_user`: the image's own user (`None`: root), as the container phase
/// was told it.
pub(crate) async fn prepare_agent_user(
    handle: &SandboxHandle,
    image_user: Option<&str>,
) -> Result<bool> {
    let out = handle.exec(Command::shell(agent_user_script(image_user)).user("0")).await?;
    if !out.success() {
        return Err(Error::infra("prepare the agent user", out.stderr.trim()));
    }
    Ok(out.stdout.lines().any(|l| l == "git-repository"))
}

/// [`prepare_agent_user`], then the workspace read, in one exec (the
/// helper's install runs the preparation first). Whether the workspace is a
/// git repository, and the snapshot. With `session` (a turn follows), the
/// diff helper's session is started for the turn's diff: where the helper is
/// mounted, that session's exec is the one that prepares and lists; elsewhere
/// it starts beside the exec. Either way none starts beside the turn.
pub(crate) async fn prepare_agent_user_and_take(
    handle: &SandboxHandle,
    session: bool,
    image_user: Option<&str>,
) -> Result<(bool, Snapshot)> {
    let script = agent_user_script(image_user);
    let (snapshot, said) = match session {
        true => Snapshot::take_after_with_session(handle, &script).await?,
        false => Snapshot::take_after(handle, &script).await?,
    };
    let Some(snapshot) = snapshot else {
        return Err(Error::infra("prepare the agent user", said.trim()));
    };
    Ok((said.lines().any(|l| l == "git-repository"), snapshot))
}

/// On a FUSE root file system (the engine's `fuse-overlayfs` storage driver),
/// the kernel asks the daemon for the POSIX ACL of `/` at every absolute path
/// looked up by a user that does not own `/`, and never keeps the answer for
/// the mount's root: one round trip per lookup (Claude Code makes about 1,700
/// at its start, 60 to 120 ms as uid 1000 that root does not pay). A `/`
/// without group bits needs no ACL, so the agent's lookups cost what root's
/// do. Changed only where no one loses by it: `/` owned by root:root with no
/// ACL of its own, the image's user root (see [`agent_user_script`]), and no
/// account but root in group 0 (for such an account the group bits are the
/// ones that count; every other user reads `/` by its other bits).
const ROOT_DIR_ON_FUSE: &str = "{ case $(stat -f -c %T / 2>/dev/null) in fuse*) \
      [ \"$(stat -c %u:%g /)\" = 0:0 ] && ! ls -ld / | grep -q '^..........[+]' \
      && ( while IFS=: read -r n p u g r; do [ \"$g\" != 0 ] || [ \"$u\" = 0 ] || exit 1; done < /etc/passwd ) \
      && ( while IFS=: read -r n p g m; do [ \"$g\" != 0 ] || [ -z \"$m\" ] || [ \"$m\" = root ] || exit 1; done < /etc/group ) \
      && chmod g-rwx / ;; esac; true; }";

/// The preparation, then the base of the workspace's history noted. `/`'s
/// mode is left alone where the image's own user is not root: checks run
/// as it, and a numeric `USER` with no account (`USER 1001`) runs in group 0.
fn agent_user_script(image_user: Option<&str>) -> String {
    let image_user_is_root = image_user.is_none_or(crate::exec::is_root_user);
    let root_dir = if image_user_is_root { ROOT_DIR_ON_FUSE } else { "true" };
    format!(
        "{AGENT_USER_SETUP} && {root_dir} && {} && {{ [ ! -d .git ] || echo git-repository; }}",
        crate::git_archive::note_base()
    )
}

/// Whether the start reads the workspace for its snapshot: the eval's
/// environment puts something in it (a workspace, files, rules, setup), or
/// its image is the eval's or the harness's own, which may hold files.
pub(crate) fn workspace_may_hold_files(
    env: &crate::environment::Environment,
    harness: Option<&dyn crate::harness::Harness>,
) -> bool {
    env.prepares_workspace() || env.image.is_some() || harness.is_some_and(|h| h.image().is_some())
}

/// Whether a container made ahead of its slot may take the snapshot too:
/// only when nothing of the start writes the sandbox between the container
/// and the snapshot (no workspace, files, rules or setup), so the workspace
/// read ahead is the one the start would read, and only when it is read.
pub(crate) fn may_take_ahead(
    env: &crate::environment::Environment,
    harness: Option<&dyn crate::harness::Harness>,
) -> bool {
    !env.prepares_workspace() && workspace_may_hold_files(env, harness)
}

/// Reads the workspace. An untouched workspace has nothing to read.
pub(crate) async fn take(handle: &SandboxHandle, anything_written: bool) -> Result<Snapshot> {
    if anything_written { Ok(Snapshot::take(handle).await?) } else { Ok(Snapshot::default()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_directory_is_left_alone_where_the_images_user_is_not_root() {
        for root in [None, Some("root"), Some("0"), Some("0:0"), Some("root:1001")] {
            assert!(agent_user_script(root).contains("chmod g-rwx /"), "{root:?}");
        }
        for other in [Some("nobody"), Some("1001"), Some("1001:0"), Some("app:app")] {
            assert!(!agent_user_script(other).contains("chmod g-rwx /"), "{other:?}");
        }
    }
}
