//! `[variants.NAME]` in `reeval.toml`: a variant declared in the suite's
//! config instead of as a `#[reeval::variant]`, so that a run with no Rust of
//! its own (`reeval harbor run TASKS --compare control,with_notes`) can
//! compare arms too:
//!
//! ```toml
//! [variants.with_notes]
//! files = { "NOTES.md" = "variants/notes.md" }  # workspace path = a file here
//! skills = ["skills/greet"]                      # skill directories
//! rules = "Run the tests before you finish."     # added to the eval's rules
//! env = { FEATURE = "1" }                        # the sandbox's environment
//! ```
//!
//! Paths are relative to the config file. Each file is read, and each skill
//! checked, when the file is loaded, so a missing one stops the run before
//! anything starts. [`crate::compare::known_variants`] turns them into
//! variants beside the suite's own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One `[variants.NAME]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredVariant {
    /// Files written into the workspace: the path in the workspace = the
    /// file on this machine (relative to the config file).
    #[serde(default)]
    pub files: BTreeMap<String, PathBuf>,
    /// Skill directories (each with a `SKILL.md`), relative to the config file.
    #[serde(default)]
    pub skills: Vec<PathBuf>,
    /// Rules for the agent, after the eval's own.
    pub rules: Option<String>,
    /// Variables of the sandbox's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl DeclaredVariant {
    /// Makes its paths relative to `dir` (the config file's) and checks that
    /// `name` can name a variant and that every file and skill is there.
    ///
    /// # Errors
    /// A message naming the variant and what is wrong.
    pub(crate) fn resolve(&mut self, name: &str, dir: &Path) -> Result<(), String> {
        let valid = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "[variants.{name}]: a variant's name is letters, digits, `_` and `-`"
            ));
        }
        // `compare::CONTROL`, spelled here: settings sit below compare.
        if name == "control" {
            return Err(format!(
                "[variants.{name}]: `{name}` is the arm without a change; name the variant otherwise"
            ));
        }
        for (target, source) in &mut self.files {
            if source.is_relative() {
                *source = dir.join(&*source);
            }
            if !source.is_file() {
                return Err(format!(
                    "[variants.{name}]: failed to find {}, the file of `{target}`",
                    source.display()
                ));
            }
        }
        for skill in &mut self.skills {
            if skill.is_relative() {
                *skill = dir.join(&*skill);
            }
            if !skill.join("SKILL.md").is_file() {
                return Err(format!(
                    "[variants.{name}]: failed to find the skill {}: it needs a SKILL.md",
                    skill.display()
                ));
            }
        }
        Ok(())
    }
}
