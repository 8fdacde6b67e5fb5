//! The suite's config file, `reeval.toml` beside the package's `Cargo.toml`
//! (cargo runs test binaries there), or the file named by `REEVAL_CONFIG`;
//! [`crate::settings`] finds it and merges it with the flags and environment.
//!
//! ```toml
//! judge = "anthropic:claude-sonnet-4-5"   # the judge model of evals that name none
//! env_file = ".env.reeval"                # secrets and credentials, read in preflight
//! record_dir = "target/reeval/runs"       # where runs are recorded
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The default config file name.
pub const FILE_NAME: &str = "reeval.toml";

/// What `reeval.toml` may set. Unknown keys are an error, so a typo is not ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteConfig {
    /// The judge model of evals that name none.
    pub judge: Option<String>,
    /// A `.env`-style file of secrets and credentials, relative to the config file.
    pub env_file: Option<PathBuf>,
    /// Where runs are recorded, relative to the config file.
    pub record_dir: Option<PathBuf>,
    /// A pool of engines: `["ssh://a", "tcp://b:2376=4"]` (slots after `=`).
    #[serde(default)]
    pub engines: Vec<String>,
}

/// A config file that cannot be used (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed to read the suite config {}: {message}", path.display())]
pub struct ConfigFileError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

impl SuiteConfig {
    /// Reads a config file; relative paths in it are made relative to its directory.
    ///
    /// # Errors
    /// A [`ConfigFileError`] when it cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Self, ConfigFileError> {
        let fail = |message: String| ConfigFileError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let mut config: SuiteConfig =
            toml::from_str(&text).map_err(|e| fail(toml_problem(&text, &e)))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for p in [&mut config.env_file, &mut config.record_dir].into_iter().flatten() {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
        if let Some(spec) = &config.judge {
            crate::judge::key_env(spec).map_err(|e| fail(format!("judge `{spec}`: {e}")))?;
        }
        Ok(config)
    }
}

/// toml's message on one line, led by the line and key it points at (its own
/// rendering spans several lines and a caret drawing).
fn toml_problem(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim().replace('\n', "; ");
    let Some(span) = e.span() else { return message };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    // A `key = value` line names its key; a header or a broken line does not.
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    match key {
        Some(key) => format!("line {line_no}, key `{key}`: {message}"),
        None => format!("line {line_no}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("reeval-config-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FILE_NAME);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn reads_keys_relative_to_the_file() {
        let path = write("ok", "judge = \"openai:gpt-4.1\"\nenv_file = \".env\"\n");
        let c = SuiteConfig::load(&path).unwrap();
        assert_eq!(c.judge.as_deref(), Some("openai:gpt-4.1"));
        assert_eq!(c.env_file, Some(path.parent().unwrap().join(".env")));
    }

    #[test]
    fn unknown_keys_and_bad_judges_are_errors() {
        let e = SuiteConfig::load(&write("typo", "# suite\njduge = \"x\"\n")).unwrap_err();
        assert!(e.to_string().contains("line 2, key `jduge`: unknown field `jduge`"), "{e}");
        let e = SuiteConfig::load(&write("type", "record_dir = 3\n")).unwrap_err();
        assert!(e.to_string().contains("line 1, key `record_dir`: invalid type"), "{e}");
        let e = SuiteConfig::load(&write("syntax", "judge = \"openai:gpt-4.1\"\nenv_file = \n"))
            .unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(!e.to_string().contains('\n'), "one line: {e}");
        let e = SuiteConfig::load(&write("judge", "judge = \"nope\"\n")).unwrap_err();
        assert!(e.to_string().starts_with("failed to read the suite config"), "{e}");
    }
}
