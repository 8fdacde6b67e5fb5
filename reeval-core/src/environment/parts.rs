//! The parts an environment is built from: where the workspace lives and
//! comes from, setup steps, MCP servers, skills and secrets.

use std::path::PathBuf;
use std::time::Duration;

use super::WORKSPACE;
use crate::sandbox::FileToWrite;

/// Where the sandbox's workspace lives: where the agent starts, what every
/// diff and snapshot reads, what relative paths of `read_file`,
/// `write_file`, `exec` and the environment's files are relative to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum WorkspaceDir {
    /// [`WORKSPACE`] (`/workspace`).
    #[default]
    Default,
    /// This absolute path (made if the image lacks it).
    At(String),
    /// The image's own `WORKDIR`, as the backend that runs the attempt reports
    /// it (a Harbor task's `/app`); [`WORKSPACE`] when the image sets none,
    /// sets `/`, or the backend cannot say before the sandbox runs.
    ImageWorkdir,
}

impl WorkspaceDir {
    /// The path for an image whose `WORKDIR` is `image_workdir`.
    pub fn resolve(&self, image_workdir: Option<&str>) -> String {
        let usable = |w: &&str| w.starts_with('/') && !w.trim_end_matches('/').is_empty();
        match self {
            WorkspaceDir::Default => WORKSPACE.to_string(),
            WorkspaceDir::At(path) => path.clone(),
            WorkspaceDir::ImageWorkdir => image_workdir
                .filter(usable)
                .map(|w| w.trim_end_matches('/').to_string())
                .unwrap_or_else(|| WORKSPACE.to_string()),
        }
    }
}

impl From<&str> for WorkspaceDir {
    fn from(path: &str) -> Self {
        WorkspaceDir::At(path.to_string())
    }
}

impl From<String> for WorkspaceDir {
    fn from(path: String) -> Self {
        WorkspaceDir::At(path)
    }
}

/// Whether an environment's prepared sandbox may be cached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SetupCache {
    /// Cached, unless a setup step could receive a secret value (the default).
    #[default]
    On,
    /// Never cached (`setup_cache(false)`).
    Off,
    /// Cached even when a setup step could receive a secret value: the image
    /// may then hold what the secret fetched (never the secret itself, which
    /// only the gateway swaps into requests).
    IncludingSecrets,
}

impl From<bool> for SetupCache {
    fn from(on: bool) -> Self {
        if on { SetupCache::On } else { SetupCache::Off }
    }
}

/// Where the workspace comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workspace {
    /// A git repository fetched on the host before the run.
    Git {
        /// The repository URL (or a local path).
        url: String,
        /// The revision to check out.
        rev: String,
        /// Whether to give the workspace a `.git` of one commit.
        init: bool,
    },
    /// A local directory copied in.
    Dir {
        /// The fixture directory on the host.
        path: PathBuf,
        /// Whether to give the workspace a `.git` of one commit.
        init: bool,
    },
}

impl Workspace {
    /// A git repository at `rev`.
    pub fn git(url: impl Into<String>, rev: impl Into<String>) -> Self {
        Workspace::Git { url: url.into(), rev: rev.into(), init: false }
    }

    /// A local directory.
    pub fn dir(path: impl Into<PathBuf>) -> Self {
        Workspace::Dir { path: path.into(), init: false }
    }

    /// Gives the workspace a `.git` of one commit.
    pub fn init(mut self, yes: bool) -> Self {
        match &mut self {
            Workspace::Git { init, .. } | Workspace::Dir { init, .. } => *init = yes,
        }
        self
    }
}

/// One setup step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupStep {
    /// The shell command.
    pub command: String,
    /// Its own timeout.
    pub timeout: Duration,
}

/// An MCP server the agent gets, placed in each harness's config format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServer {
    /// A server the agent starts as a process in the sandbox.
    Stdio {
        /// The server's name.
        name: String,
        /// Program and arguments.
        argv: Vec<String>,
        /// Extra environment for the server.
        env: Vec<(String, String)>,
    },
    /// A server reached over streamable HTTP.
    Http {
        /// The server's name.
        name: String,
        /// Its URL.
        url: String,
    },
}

impl McpServer {
    /// A stdio server: `argv[0]` is the program.
    pub fn stdio<I, S>(name: impl Into<String>, argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        McpServer::Stdio {
            name: name.into(),
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
        }
    }

    /// An HTTP server.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServer::Http { name: name.into(), url: url.into() }
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        match self {
            McpServer::Stdio { name, .. } | McpServer::Http { name, .. } => name,
        }
    }
}

/// A skill: a directory with a `SKILL.md`, read from the host when the attempt starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The skill's name (its directory's name).
    pub name: String,
    /// Files relative to the skill's directory, with their bytes and modes.
    pub files: Vec<FileToWrite>,
}

/// A secret: its value is read on the host and never enters a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSpec {
    /// The variable name, on the host and in the sandbox.
    pub name: String,
    /// Whether only `exec` checks see it (never the agent, setup or harness).
    pub checks_only: bool,
}
