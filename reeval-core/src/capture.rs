//! What `Ctx::capture` keeps: evidence as artifacts of the record, shown to
//! the judge by name. The capture phase itself is `lifecycle/14_capture.rs`.

use crate::exec::Command;

/// The largest directory archive a capture keeps.
pub const DIR_LIMIT: u64 = 256 << 20;
/// How much of a capture's text the judge is shown.
pub const JUDGE_TEXT_LIMIT: usize = 16 * 1024;

/// What to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Artifact {
    /// A file in the sandbox (relative paths are in the workspace).
    File(String),
    /// A directory in the sandbox, kept as a tar (never unpacked on the host).
    Dir(String),
    /// A directory without the paths `exclude` matches ([`Artifact::excluding`]).
    DirExcluding {
        /// The directory.
        path: String,
        /// Shell patterns, as GNU tar's `--exclude` takes them.
        exclude: Vec<String>,
    },
    /// A command's output (stdout, stderr and exit code).
    Command(Command),
    /// A served URL's response (status, headers and body), fetched from the host.
    Url(String),
    /// A file, directory or command of a service started beside the sandbox
    /// ([`Artifact::in_service`]).
    InService {
        /// The service's name.
        service: String,
        /// What to capture there.
        artifact: Box<Artifact>,
    },
}

impl Artifact {
    /// A file.
    pub fn file(path: impl Into<String>) -> Self {
        Artifact::File(path.into())
    }

    /// A directory, as a tar.
    pub fn dir(path: impl Into<String>) -> Self {
        Artifact::Dir(path.into())
    }

    /// This directory without the paths `patterns` match, as GNU tar's
    /// `--exclude` matches them (a Harbor artifact's `exclude`): `*`, `?`,
    /// `[...]`, `*` matching `/` too, a pattern matching any run of a path's
    /// components (`*.pyc` and `node_modules` at any depth), a directory
    /// matched leaving out all it holds. Nothing changes for a file, a
    /// command or a URL.
    pub fn excluding<I, S>(self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        match self {
            Artifact::Dir(path) | Artifact::DirExcluding { path, .. } => Artifact::DirExcluding {
                path,
                exclude: patterns.into_iter().map(Into::into).collect(),
            },
            Artifact::InService { service, artifact } => {
                Artifact::InService { service, artifact: Box::new(artifact.excluding(patterns)) }
            }
            other => other,
        }
    }

    /// This file, directory or command in the service `service` started
    /// beside the sandbox (an `Environment`'s service), not in the sandbox: a
    /// path must be absolute there, and a command runs as
    /// `Ctx::exec_in_service` runs it. A URL is refused when captured.
    pub fn in_service(self, service: impl Into<String>) -> Self {
        match self {
            Artifact::InService { artifact, .. } => {
                Artifact::InService { service: service.into(), artifact }
            }
            other => Artifact::InService { service: service.into(), artifact: Box::new(other) },
        }
    }

    /// Whether it is kept as a tar (a directory's, wherever it is).
    pub(crate) fn is_archive(&self) -> bool {
        match self {
            Artifact::Dir(_) | Artifact::DirExcluding { .. } => true,
            Artifact::InService { artifact, .. } => artifact.is_archive(),
            _ => false,
        }
    }

    /// A command's output: `&str` runs under `sh -c`.
    pub fn command(cmd: impl Into<Command>) -> Self {
        Artifact::Command(cmd.into())
    }

    /// A URL's response, typically one returned by `Ctx::serve`.
    pub fn url(url: impl Into<String>) -> Self {
        Artifact::Url(url.into())
    }
}

/// An artifact kept with `Ctx::capture`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The name it was captured under.
    pub name: String,
    /// The artifact's file, relative to the attempt's artifact directory.
    pub file: String,
    /// Its text (or a note saying it is binary or an archive), for the judge.
    pub text: String,
}

pub(crate) fn as_text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(t) => crate::exec::tail(t, JUDGE_TEXT_LIMIT).to_string(),
        Err(_) => format!("[binary, {} bytes]", bytes.len()),
    }
}
