//! A task's script run in the exec that copies its files in. Harbor makes
//! three commands of the oracle's solve and of the verifier (clear, copy as
//! root, run as the phase's user) and reeval adds one (the listing after the
//! verifier, as root); each exec is a round trip to the engine (~55 ms
//! here). When the script runs as root anyway, they are one exec: the same
//! commands in the same order, as root, the script's environment exported
//! for it alone, its stdin empty. When it does not (a `user` of the task's,
//! or an image whose own user is not root, learned once per task and run),
//! the caller makes them apart, as before.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::shell::{USER_HOME, quote};
use reeval_core::Ctx;
use reeval_core::error::{Error, Result};
use reeval_core::exec::{Command, ExecOutput};

/// Whether the task image's own user is root, once an exec has told.
#[derive(Debug, Clone, Default)]
pub(crate) struct ImageUser(Arc<OnceLock<bool>>);

/// One script, with what goes before and after it.
pub(super) struct Script<'a> {
    /// Run as root before the copy (`rm -rf /solution`).
    pub(super) before: &'a str,
    /// Unpacked under `/`, owners and modes as in the tar.
    pub(super) files: &'a [reeval_core::sandbox::FileToWrite],
    /// Run as root after the copy (`chmod +x /solution/solve.sh`).
    pub(super) after: &'a str,
    /// The script's environment.
    pub(super) env: &'a [(String, String)],
    /// The script's command line, its output redirected (`(/tests/test.sh) > … 2>&1`).
    pub(super) run: &'a str,
    /// Run as root after the script, its exit status in `$code`.
    pub(super) then: &'a str,
    /// The user the script runs as (`None`: the image's).
    pub(super) user: Option<&'a str>,
    /// Where it runs.
    pub(super) workdir: String,
    /// Its limit.
    pub(super) timeout: Option<Duration>,
    /// The step's name in the record.
    pub(super) what: &'a str,
}

/// What [`copy_and_run`] did.
#[derive(Debug)]
pub(super) enum Together {
    /// Nothing: the script does not run as root; copy and run it apart.
    Apart,
    /// All of it: the exec, and what `then` printed (absent when the
    /// script ran past its limit and the exec was ended).
    Ran { out: ExecOutput, then: Option<String> },
}

const NOT_ROOT: &str = "reeval: not root";
const COPIED: &str = "reeval: copied";

/// Copies the script's files in and runs it in one exec, when it runs as root.
/// Whatever stops before the copy read its stdin reads it to the end: the
/// engine would otherwise reset the exec's stream while the tar is sent.
///
/// # Errors
/// An infra error when the copy fails (as the copy's own exec would), else
/// what the exec returns.
pub(super) async fn copy_and_run(
    c: &mut Ctx,
    s: Script<'_>,
    image_user: &ImageUser,
) -> Result<Together> {
    let root = match s.user {
        Some(u) => Some(is_root(u)),
        None => image_user.0.get().copied(),
    };
    let exportable = s.env.iter().all(|(k, _)| is_name(k));
    if root == Some(false) || !exportable {
        return Ok(Together::Apart);
    }
    let exports: String = s.env.iter().map(|(k, v)| format!("export {k}={}; ", quote(v))).collect();
    let script = format!(
        "[ \"$(id -u)\" = 0 ] || {{ cat > /dev/null; echo '{NOT_ROOT}'; exit 0; }}\n\
         {} && tar -x -o -C / && {} || {{ cat > /dev/null; exit 1; }}\n\
         echo '{COPIED}'\n\
         ( {exports}{USER_HOME}{} ) < /dev/null\n\
         code=$?\n\
         {}\n\
         exit 0",
        s.before, s.after, s.run, s.then
    );
    let tar = reeval_core::sandbox::archive::tar_of(s.files)?;
    let mut cmd = Command::new("bash").arg("-c").arg(script).stdin(tar).workdir(s.workdir);
    cmd = cmd.step(s.what);
    if let Some(user) = s.user {
        cmd = cmd.user(user);
    }
    if let Some(limit) = s.timeout {
        cmd = cmd.timeout(limit);
    }
    let out = c.exec(cmd).await?;
    if s.user.is_none() {
        let _ = image_user.0.set(!out.stdout.starts_with(NOT_ROOT));
    }
    if out.stdout.starts_with(NOT_ROOT) {
        return Ok(Together::Apart);
    }
    let Some((_, then)) = out.stdout.split_once(&format!("{COPIED}\n")) else {
        return Err(Error::infra(s.what, format!("exit {}: {}", out.exit_code, out.stderr.trim())));
    };
    let then = (!out.timed_out).then(|| then.to_string());
    Ok(Together::Ran { out, then })
}

/// Whether a user spec (`name`, `uid`, `uid:gid`) names root.
fn is_root(user: &str) -> bool {
    matches!(user.split(':').next(), Some("0" | "root"))
}

/// Whether `k` can be exported by a shell (Docker's env takes any name).
fn is_name(k: &str) -> bool {
    let mut chars = k.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_named_by_name_or_uid() {
        for u in ["0", "root", "0:0", "root:root"] {
            assert!(is_root(u), "{u}");
        }
        for u in ["1000", "nobody", "rooted", "10:0"] {
            assert!(!is_root(u), "{u}");
        }
    }

    #[test]
    fn only_shell_names_are_exported() {
        assert!(is_name("EXPECTED_WORD") && is_name("_x1"));
        assert!(!is_name("1X") && !is_name("a.b") && !is_name("a-b") && !is_name(""));
    }
}
