//! Secrets and credentials are not settings: preflight looks each name up in
//! a [`SecretLookup`]: the host environment, then the env files (`env_file`
//! of `reeval.toml`, then `REEVAL_ENV_FILE`), read with `dotenvy` without
//! touching the process environment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::vars::process_env;

/// An env file that cannot be read (exit code 2, through preflight).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to read the env file {} ({source_name}): {problem}", path.display())]
pub struct EnvFileError {
    /// The file.
    pub path: PathBuf,
    /// What named it: `env_file` (of `reeval.toml` or the run's config), or `--env-file` or `REEVAL_ENV_FILE`.
    pub source_name: String,
    /// What is wrong; never a value from the file, which may be a secret.
    pub problem: String,
}

/// Where preflight finds secrets and credentials: the host environment first,
/// then the env files in order (`reeval.toml`'s `env_file`, then
/// `REEVAL_ENV_FILE`). An empty value counts as unset. Values stay in this
/// map: the process environment is never changed.
#[derive(Clone)]
pub struct SecretLookup {
    host: fn(&str) -> Option<String>,
    files: BTreeMap<String, String>,
}

impl std::fmt::Debug for SecretLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the values are secrets.
        f.debug_struct("SecretLookup")
            .field("from_files", &self.files.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Default for SecretLookup {
    fn default() -> Self {
        Self { host: process_env, files: BTreeMap::new() }
    }
}

impl SecretLookup {
    /// Reads `env_file`, then `fallback` for names it does not set.
    ///
    /// # Errors
    /// An [`EnvFileError`] naming the file for one that does not exist or
    /// cannot be read, and also the line for one that does not parse.
    pub fn load(env_file: Option<&Path>, fallback: Option<&Path>) -> Result<Self, EnvFileError> {
        let mut files = match fallback {
            Some(path) => read_env_file(path, "--env-file or REEVAL_ENV_FILE")?,
            None => BTreeMap::new(),
        };
        if let Some(path) = env_file {
            files.extend(read_env_file(path, "env_file")?);
        }
        Ok(Self { files, ..Self::default() })
    }

    /// The same files, with `host` standing in for the host environment (tests).
    pub fn with_host(self, host: fn(&str) -> Option<String>) -> Self {
        Self { host, ..self }
    }

    /// The value of `name`: the host's, else the first file's that sets it.
    pub fn get(&self, name: &str) -> Option<String> {
        (self.host)(name)
            .filter(|v| !v.is_empty())
            .or_else(|| self.files.get(name).filter(|v| !v.is_empty()).cloned())
    }

    /// Every name → value the env files set (the host environment not included).
    pub fn from_files(&self) -> &BTreeMap<String, String> {
        &self.files
    }
}

/// One `.env` file through dotenvy's parser (quotes, `export`, comments,
/// `${VAR}` expansion); a name set twice takes its last value.
fn read_env_file(path: &Path, source_name: &str) -> Result<BTreeMap<String, String>, EnvFileError> {
    let fail = |problem: String| EnvFileError {
        path: path.to_path_buf(),
        source_name: source_name.to_string(),
        problem,
    };
    let io_problem = |e: &std::io::Error| match e.kind() {
        std::io::ErrorKind::NotFound => "it does not exist".to_string(),
        _ => e.to_string(),
    };
    let iter = dotenvy::from_path_iter(path).map_err(|e| match e {
        dotenvy::Error::Io(e) => fail(io_problem(&e)),
        other => fail(other.to_string()),
    })?;
    let mut vars = BTreeMap::new();
    for item in iter {
        match item {
            Ok((name, value)) => {
                vars.insert(name, value);
            }
            Err(dotenvy::Error::LineParse(..)) => return Err(fail(line_problem(path))),
            Err(dotenvy::Error::Io(e)) => return Err(fail(io_problem(&e))),
            Err(other) => return Err(fail(other.to_string())),
        }
    }
    Ok(vars)
}

/// Where the line dotenvy rejected is, and its name: never the line itself,
/// whose value may be a secret.
fn line_problem(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let line_no = failing_line(&text);
    let name = line_no
        .and_then(|n| text.lines().nth(n - 1))
        .and_then(|l| l.trim_start().trim_start_matches("export ").split_once('='))
        .map(|(name, _)| name.trim())
        .filter(|name| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
        .map(|name| format!(" (`{name}`)"))
        .unwrap_or_default();
    let at = line_no.map(|n| format!("line {n}")).unwrap_or_else(|| "a line".into());
    format!(
        "{at}{name} does not parse; quote a value that holds spaces, quotes or `#` (in single quotes `$` stays literal)"
    )
}

/// The 1-based line of `text` where dotenvy's parse fails. dotenvy reports
/// the failing text but not its line, so this parses ever longer prefixes:
/// the first that fails on a complete line is the answer; a quote left open
/// to the end of the file fails every prefix from the line that opened it.
pub(super) fn failing_line(text: &str) -> Option<usize> {
    // Some(true): a complete line fails; Some(false): only the end came too early.
    let fails = |prefix: &str| {
        dotenvy::from_read_iter(prefix.as_bytes()).find_map(|item| match item {
            Err(dotenvy::Error::LineParse(line, at)) => {
                Some(at < line.len().saturating_sub(1) || !prefix.ends_with(line.as_str()))
            }
            _ => None,
        })
    };
    let mut ends = Vec::new();
    let mut end = 0;
    for line in text.split_inclusive('\n') {
        end += line.len();
        ends.push(end);
    }
    let outcomes: Vec<Option<bool>> = ends.iter().map(|&end| fails(&text[..end])).collect();
    if let Some(i) = outcomes.iter().position(|o| *o == Some(true)) {
        return Some(i + 1);
    }
    // Open to the end: the first line from which every prefix fails.
    let open_from = outcomes.iter().rposition(Option::is_none).map_or(0, |i| i + 1);
    (open_from < outcomes.len()).then_some(open_from + 1)
}
