//! Commands run in the sandbox and what they return, with bounded capture.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// How much of a stream is kept: the first and the last half of this many bytes.
pub const CAPTURE_LIMIT: usize = 1024 * 1024;
/// How much of a stdout that also went to a stream (a harness's turn) an exec
/// returns: the stream had every byte, so the capture keeps the first and
/// last 64 KiB, and sixteen chatty turns at once do not hold 16 MiB.
pub const STREAMED_CAPTURE_LIMIT: usize = 128 * 1024;

/// A command to run as an argv (no shell involved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub(crate) argv: Vec<String>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) workdir: Option<String>,
    pub(crate) stdin: Option<Bytes>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) user: Option<String>,
    pub(crate) step: Option<String>,
}

impl Command {
    /// A command whose first element is the program.
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            argv: vec![program.into()],
            env: Vec::new(),
            workdir: None,
            stdin: None,
            timeout: None,
            user: None,
            step: None,
        }
    }

    /// `sh -c <script>`.
    pub fn shell(script: impl Into<String>) -> Self {
        Self::new("sh").arg("-c").arg(script)
    }

    /// Appends one argument, passed through as data.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.argv.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for this command only.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Runs in this directory (default: the workspace).
    pub fn workdir(mut self, dir: impl Into<String>) -> Self {
        self.workdir = Some(dir.into());
        self
    }

    /// Feeds these bytes to the command's stdin, then closes it. A `Vec`, a
    /// `String` or a `&'static [u8]` is taken without a copy (reeval's diff
    /// helper, 1.35 MB, goes to every sandbox this way).
    pub fn stdin(mut self, bytes: impl Into<Bytes>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// Kills the command (and its process tree) after this long.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Runs as this user (`uid:gid` or a name); default: the sandbox's own user for
    /// checks, the unprivileged agent user for harnesses.
    pub fn user(mut self, user: impl Into<String>) -> Self {
        self.user = Some(user.into());
        self
    }

    /// Marks the command as a step of the eval's own machinery (a Harbor
    /// task's copies into the sandbox and listings of what it left), named
    /// `name`: it runs as a check does, and the record, `-v` and the report
    /// show it by that name as a step, apart from the checks the eval grades by.
    pub fn step(mut self, name: impl Into<String>) -> Self {
        self.step = Some(name.into());
        self
    }

    /// The name [`step`](Self::step) gave it, if it is a step.
    pub fn step_name(&self) -> Option<&str> {
        self.step.as_deref()
    }

    /// The argv.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The limit set by [`timeout`](Self::timeout), if any.
    pub fn time_limit(&self) -> Option<Duration> {
        self.timeout
    }

    /// A readable one-line form for records and logs.
    pub fn display(&self) -> String {
        if self.argv.len() == 3 && self.argv[0] == "sh" && self.argv[1] == "-c" {
            return self.argv[2].clone();
        }
        self.argv
            .iter()
            .map(|a| {
                if a.is_empty()
                    || a.contains(|c: char| c.is_whitespace() || "'\"$`\\;&|<>()".contains(c))
                {
                    format!("'{}'", a.replace('\'', r"'\''"))
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl From<&str> for Command {
    fn from(script: &str) -> Self {
        Command::shell(script)
    }
}

impl From<String> for Command {
    fn from(script: String) -> Self {
        Command::shell(script)
    }
}

impl From<&String> for Command {
    fn from(script: &String) -> Self {
        Command::shell(script.clone())
    }
}

/// What a command in the sandbox returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutput {
    /// The command as run.
    pub command: String,
    /// Exit code; `-1` when the command was killed by its timeout.
    pub exit_code: i64,
    /// Standard output (head and tail when it exceeded the capture limit:
    /// [`CAPTURE_LIMIT`], or [`STREAMED_CAPTURE_LIMIT`] when it was also streamed).
    pub stdout: String,
    /// Standard error (head and tail when it exceeded the capture limit).
    pub stderr: String,
    /// Bytes the command wrote to stdout, all of them counted.
    pub stdout_bytes: u64,
    /// Bytes the command wrote to stderr, all of them counted.
    pub stderr_bytes: u64,
    /// Wall time.
    pub duration_ms: u64,
    /// Whether the command hit its timeout and was killed.
    pub timed_out: bool,
}

impl ExecOutput {
    /// Whether the command exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0 && !self.timed_out
    }

    /// The last `max` bytes of stdout, cut at a character boundary.
    pub fn stdout_tail(&self, max: usize) -> &str {
        tail(&self.stdout, max)
    }

    /// The last `max` bytes of stderr, cut at a character boundary.
    pub fn stderr_tail(&self, max: usize) -> &str {
        tail(&self.stderr, max)
    }
}

/// The last `max` bytes of `s`, cut at a character boundary.
pub fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Keeps the first and last `limit / 2` bytes of a stream and counts the rest,
/// so a command that prints a gigabyte costs a megabyte.
#[derive(Debug)]
pub struct BoundedBuffer {
    limit: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: u64,
}

impl BoundedBuffer {
    /// A buffer keeping at most `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self { limit, head: Vec::new(), tail: std::collections::VecDeque::new(), total: 0 }
    }

    /// The stdout and stderr buffers of one exec; `streamed` when its stdout
    /// also goes to a stream.
    pub(crate) fn for_exec(streamed: bool) -> (Self, Self) {
        let out = if streamed { STREAMED_CAPTURE_LIMIT } else { CAPTURE_LIMIT };
        (Self::new(out), Self::new(CAPTURE_LIMIT))
    }

    /// Appends a chunk.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        let head_cap = self.limit / 2;
        if self.head.len() < head_cap {
            let take = (head_cap - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        let tail_cap = self.limit - head_cap;
        if chunk.len() >= tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - tail_cap..]);
        } else {
            let overflow = (self.tail.len() + chunk.len()).saturating_sub(tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(chunk);
        }
    }

    /// Total bytes pushed.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The kept text, with a marker where bytes were dropped.
    pub fn into_string(self) -> String {
        let kept = self.head.len() as u64 + self.tail.len() as u64;
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            out.push_str(&format!("\n[… {} bytes omitted …]\n", self.total - kept));
        }
        let (a, b) = self.tail.as_slices();
        let mut t = a.to_vec();
        t.extend_from_slice(b);
        out.push_str(&String::from_utf8_lossy(&t));
        out
    }
}

/// Whether a user spec (`USER`'s value or [`Command::user`]'s: `name`, `uid`,
/// `uid:gid`) is root; empty is the default, root.
pub fn is_root_user(user: &str) -> bool {
    matches!(user.split(':').next(), Some("0" | "root" | ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_buffer_keeps_head_and_tail() {
        let mut b = BoundedBuffer::new(10);
        for _ in 0..1000 {
            b.push(b"0123456789");
        }
        b.push(b"END");
        assert_eq!(b.total(), 10_003);
        let s = b.into_string();
        assert!(s.starts_with("01234"), "{s}");
        assert!(s.ends_with("89END"), "{s}");
        assert!(s.contains("9993 bytes omitted"), "{s}");
    }

    #[test]
    fn small_output_is_kept_whole() {
        let mut b = BoundedBuffer::new(100);
        b.push(b"hello ");
        b.push(b"world");
        assert_eq!(b.into_string(), "hello world");
    }

    #[test]
    fn display_quotes_argv() {
        let c = Command::new("echo").arg("a b").arg("it's");
        assert_eq!(c.display(), r"echo 'a b' 'it'\''s'");
        assert_eq!(Command::shell("ls -la").display(), "ls -la");
    }

    #[test]
    fn root_is_named_by_name_uid_or_uid_and_group() {
        for root in ["0", "root", "0:0", "root:wheel", ""] {
            assert!(is_root_user(root), "{root}");
        }
        for other in ["nobody", "1000", "1000:0", "65534:65534"] {
            assert!(!is_root_user(other), "{other}");
        }
    }
}
