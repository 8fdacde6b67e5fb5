//! A multi-step task's steps as read with the task (`eval.rs`): each step's
//! instruction, its verifier's env and its own verifier sandbox when that
//! verifier is separate; `steps.rs` runs them.

use std::path::{Path, PathBuf};

use super::compose::Compose;
use super::error::HarborError;
use super::task::{TaskConfig, resolve_env};
use super::verifier_env::{self, SeparateVerifier};
use reeval_core::environment::ImageSpec;

/// What is read of a task's steps when the task is read, in step order.
pub(super) struct Read {
    /// Each step's `instruction.md`.
    pub instructions: Vec<String>,
    /// Each step's verifier env (the task's, the step's over it), resolved.
    pub verifier_envs: Vec<Vec<(String, String)>>,
    /// Each step's own verifier sandbox, when its verifier is separate.
    pub separate_verifiers: Vec<Option<SeparateVerifier>>,
}

impl Read {
    /// Reads the steps of the task `name` in `dir` (none for a single-step task).
    ///
    /// # Errors
    /// [`HarborError`] naming the task: a step name that is not unique and
    /// portable, a step without instruction or verifier, a verifier
    /// environment that cannot be had, an unset `${VAR}`.
    pub(super) fn of(
        name: &str,
        dir: &Path,
        config: &TaskConfig,
        lookup: &dyn Fn(&str) -> Option<String>,
        image: &ImageSpec,
        compose: &Compose,
    ) -> Result<Self, HarborError> {
        let missing = |path: PathBuf, message: &str| HarborError::Read {
            task: name.to_string(),
            path,
            message: message.to_string(),
        };
        let mut read = Read {
            instructions: Vec::new(),
            verifier_envs: Vec::new(),
            separate_verifiers: Vec::new(),
        };
        let steps = config.steps.as_deref().unwrap_or_default();
        for step in steps {
            let portable = !step.name.is_empty()
                && !step.name.starts_with('.')
                && step.name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
            if !portable || steps.iter().filter(|s| s.name == step.name).count() > 1 {
                return Err(HarborError::Parse {
                    task: name.to_string(),
                    message: format!("step name {:?} must be unique and portable", step.name),
                });
            }
            let at = dir.join("steps").join(&step.name);
            let separate =
                verifier_env::read(name, dir, config, Some(step), lookup, image, compose)?;
            // A verifier image of its own holds its /tests.
            let bundled = separate.as_ref().is_some_and(|s| s.bundled_tests);
            if !bundled
                && !at.join("tests/test.sh").is_file()
                && !dir.join("tests/test.sh").is_file()
            {
                return Err(missing(
                    at.join("tests/test.sh"),
                    "neither the step nor the task has a test.sh",
                ));
            }
            read.separate_verifiers.push(separate);
            let instruction = at.join("instruction.md");
            read.instructions.push(
                std::fs::read_to_string(&instruction)
                    .map_err(|e| missing(instruction.clone(), &e.to_string()))?,
            );
            // The task's [verifier].env, then the step's over it (`Verifier`'s merged_env).
            let mut merged = config.verifier.env.clone();
            merged.extend(step.verifier.env.clone());
            let table = format!("steps.{}.verifier", step.name);
            read.verifier_envs.push(resolve_env(name, &table, &merged, lookup)?);
        }
        Ok(read)
    }
}
