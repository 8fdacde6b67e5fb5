//! How a task's scripts run: their arguments quoted for `sh`, their user's
//! `HOME` set as Docker sets it, in the task's workdir (the sandbox's
//! workspace). A leaf of the crate: every phase's module uses it.

use reeval_core::Ctx;
use reeval_core::error::Result;

/// `'…'` for sh.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Harbor runs every command through `docker compose exec -u USER`, so its
/// `HOME` is USER's home in the image's `/etc/passwd` (`/` without an
/// entry), where reeval gives every command the agent's (`/home/agent`): a
/// `solve.sh` or `test.sh` run as root would miss root's `~/.gitconfig`.
/// This prefix of a `bash -c` script sets it as Docker does, in bash alone
/// (not every image has `getent`).
pub(crate) const USER_HOME: &str = "HOME=/; while IFS=: read -r _ _ u _ _ d _; do \
    if [ \"$u\" = \"$EUID\" ]; then HOME=$d; break; fi; done < /etc/passwd; export HOME; ";

/// Where the task's commands run: the sandbox's workspace, which is the
/// task's workdir (`HarborTask::workspace_dir`).
pub(crate) async fn workdir(c: &mut Ctx) -> Result<String> {
    Ok(c.sandbox_handle().await?.workspace().to_string())
}
