//! Killable process groups in a sandbox that runs commands through `sh`: a
//! pid file per killable command, and a script that stops and signals a
//! whole process tree, children first. Shared by backends that act through exec.

/// Where killable commands write their pid, inside the sandbox.
pub(crate) const PID_DIR: &str = "/tmp/.reeval-pids";

/// Records the pid of a killable command's parent shell, runs the command
/// (argv is untouched data), then removes the pid file.
pub(crate) const PID_WRAPPER: &str =
    r#"mkdir -p -m 1777 "${0%/*}" 2>/dev/null; echo $$ > "$0"; "$@"; rc=$?; rm -f "$0"; exit $rc"#;

/// Stops, then signals every process tree whose pid file matches the pattern
/// `$0` (one file, or the directory's `*.pid`), children first.
pub(crate) const KILL_SCRIPT: &str = r#"kt() { kill -s STOP "$1" 2>/dev/null; for c in $(pgrep -P "$1" 2>/dev/null); do kt "$c" "$2"; done; kill -s "$2" "$1" 2>/dev/null; kill -s CONT "$1" 2>/dev/null; }
for f in $0; do [ -f "$f" ] || continue; p=$(cat "$f"); [ -n "$p" ] && kt "$p" "$1"; done; true"#;
