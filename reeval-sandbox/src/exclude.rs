//! Paths left out of a directory copied out of a sandbox, by shell patterns
//! as GNU tar's `--exclude` matches them (what a Harbor task's artifact
//! `exclude` passes to tar): `*`, `?` and `[...]`, with `*` matching `/`
//! too; a pattern matches a path when it matches any run of its components
//! (`node_modules` and `*.pyc` at any depth, `build/tmp` anywhere), and a
//! directory matched drops everything under it.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use crate::SandboxError;

/// A set of exclusion patterns.
#[derive(Debug, Clone)]
pub struct Exclude {
    set: GlobSet,
    empty: bool,
}

impl Exclude {
    /// The patterns, each as tar takes it (a leading `./` and a trailing `/` are dropped).
    ///
    /// # Errors
    /// [`SandboxError::Archive`] naming a pattern that is not one.
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Result<Self, SandboxError> {
        let mut builder = GlobSetBuilder::new();
        for pattern in patterns {
            let raw = pattern.as_ref();
            let cleaned = raw.trim_start_matches("./").trim_end_matches('/');
            let glob = GlobBuilder::new(cleaned).literal_separator(false).build().map_err(|e| {
                SandboxError::Archive { message: format!("the exclude pattern `{raw}`: {e}") }
            })?;
            builder.add(glob);
        }
        let set = builder
            .build()
            .map_err(|e| SandboxError::Archive { message: format!("the exclude patterns: {e}") })?;
        Ok(Self { set, empty: patterns.is_empty() })
    }

    /// Whether `path` (relative, `/`-separated) is left out.
    pub fn excludes(&self, path: &str) -> bool {
        if self.empty {
            return false;
        }
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
        (0..parts.len())
            .any(|i| (i..parts.len()).any(|j| self.set.is_match(parts[i..=j].join("/"))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_as_tars_exclude() {
        let e = Exclude::new(&["*.pyc", "node_modules", "build/tmp", "./cache/"]).unwrap();
        for path in
            ["a.pyc", "src/x/a.pyc", "node_modules/left-pad/index.js", "app/build/tmp/x", "cache/1"]
        {
            assert!(e.excludes(path), "{path}");
        }
        for path in ["a.py", "src/node_modules_list.txt", "build/tmp2", "app/build/x"] {
            assert!(!e.excludes(path), "{path}");
        }
        assert!(!Exclude::new::<&str>(&[]).unwrap().excludes("anything"));
        assert!(Exclude::new(&["[z-a]"]).is_err());
    }
}
