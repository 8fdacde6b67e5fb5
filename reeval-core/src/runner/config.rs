//! The suite's config file, `reeval.toml` beside the package's `Cargo.toml`
//! (cargo runs test binaries there), or the file named by `REEVAL_CONFIG`.
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
    /// Reads `REEVAL_CONFIG`, else `reeval.toml` in the current directory; none is fine.
    ///
    /// # Errors
    /// A [`ConfigFileError`] for a file that exists but does not parse, or a
    /// `REEVAL_CONFIG` naming a file that does not exist.
    pub fn discover() -> Result<Self, ConfigFileError> {
        match std::env::var_os("REEVAL_CONFIG") {
            Some(path) => Self::load(Path::new(&path)),
            None if Path::new(FILE_NAME).is_file() => Self::load(Path::new(FILE_NAME)),
            None => Ok(Self::default()),
        }
    }

    /// Reads a config file; relative paths in it are made relative to its directory.
    ///
    /// # Errors
    /// A [`ConfigFileError`] when it cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Self, ConfigFileError> {
        let fail = |message: String| ConfigFileError { path: path.to_path_buf(), message };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let mut config: SuiteConfig = toml::from_str(&text).map_err(|e| fail(e.to_string().trim().to_string()))?;
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
        let e = SuiteConfig::load(&write("typo", "jduge = \"x\"\n")).unwrap_err();
        assert!(e.to_string().contains("unknown field `jduge`"), "{e}");
        let e = SuiteConfig::load(&write("judge", "judge = \"nope\"\n")).unwrap_err();
        assert!(e.to_string().starts_with("failed to read the suite config"), "{e}");
    }
}
