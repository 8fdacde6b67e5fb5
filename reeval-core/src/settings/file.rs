//! The suite's config file, `reeval.toml` beside the package's `Cargo.toml`
//! (cargo runs test binaries there), or the file named by `REEVAL_CONFIG`;
//! [`crate::settings`] finds it and merges it with the flags and environment.
//!
//! Its top-level keys are those of the option table ([`super::table`]): a key
//! the table lacks is an error naming the nearest one. Each key's value is
//! read here into [`SuiteConfig`]; a test holds its fields to the table's
//! keys. docs/options.md shows a whole file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::opt::{Kind, Opt};
use super::table::{self, Layer, OPTIONS};
use super::value::{FileProblem, Source, Value};

/// The default config file name.
pub const FILE_NAME: &str = "reeval.toml";

/// What `reeval.toml` sets: the keys of [`OPTIONS`]. Unknown keys are an
/// error, so a typo is not ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SuiteConfig {
    /// The settings it sets, each read by its option's type (paths relative to the file).
    pub set: Layer,
    /// Prices per model, over the built-in ones (`[prices.<model>]`).
    pub prices: BTreeMap<String, crate::prices::Price>,
    /// Image names mapped to others (`[images]`, see `crate::image_map`).
    pub images: BTreeMap<String, String>,
    /// Variants declared here (`[variants.NAME]`, see [`super::DeclaredVariant`]).
    pub variants: BTreeMap<String, super::DeclaredVariant>,
}

/// The file's tables of prices, images and variants, read by serde so that a
/// problem inside one names its line; serde passes over the other keys, which
/// [`FileKeys`] reads (a backend's table too, as a [`Table`](super::value::Table)).
#[derive(Default, Deserialize)]
struct Tables {
    #[serde(default)]
    prices: BTreeMap<String, crate::prices::Price>,
    #[serde(default)]
    images: BTreeMap<String, String>,
    #[serde(default)]
    variants: BTreeMap<String, super::DeclaredVariant>,
}

/// The file's other keys, each read by its option's type.
struct FileKeys<'a> {
    text: &'a str,
    keys: &'a toml::Table,
    dir: &'a Path,
}

impl Source for FileKeys<'_> {
    type Error = String;

    fn read<T: Value>(&self, opt: &'static Opt) -> Result<Option<T>, String> {
        let Some((key, value)) = opt.key.and_then(|k| self.keys.get(k).map(|v| (k, v))) else {
            return Ok(None);
        };
        T::from_toml(value, opt, self.dir).map_err(|problem| match problem {
            FileProblem::Value(message) => format!("key `{key}`: {message}"),
            FileProblem::Kind => {
                let line = key_line(self.text, key);
                let value = line
                    .and_then(|n| self.text.lines().nth(n - 1))
                    .and_then(|l| l.split_once('=').map(|(_, v)| v.trim()))
                    .unwrap_or("");
                let expected = expected(key).unwrap_or_else(|| "a table".into());
                let must = format!("`{key}` must be {expected}, got {}", got(value));
                match line {
                    Some(n) => format!("line {n}: {must}"),
                    None => must,
                }
            }
        })
    }
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
        if let Some(message) = unknown_key(&text) {
            return Err(fail(message));
        }
        let tables: Tables = toml::from_str(&text).map_err(|e| fail(toml_problem(&text, &e)))?;
        let keys: toml::Table = toml::from_str(&text).map_err(|e| fail(toml_problem(&text, &e)))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let set = Layer::read(&FileKeys { text: &text, keys: &keys, dir }).map_err(fail)?;
        let Tables { prices, images, mut variants } = tables;
        crate::image_map::ImageMap::new(&images)
            .map_err(|e| fail(format!("[{}]: {e}", table::IMAGES.file_key())))?;
        for (name, variant) in &mut variants {
            variant.resolve(name, dir).map_err(fail)?;
        }
        Ok(SuiteConfig { set, prices, images, variants })
    }
}

/// A value as a message quotes it: `the string "4"`, or `"three"` for a bare word.
fn got(value: &str) -> String {
    if value.starts_with(['"', '\'']) {
        format!("the string {value}")
    } else {
        format!("\"{}\"", value.split('#').next().unwrap_or("").trim())
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
    // A value of the wrong kind is said in the key's terms: toml's own words for
    // `trials = three` are "invalid boolean" (it read the `t` of `true`).
    let value = line.split_once('=').map(|(_, v)| v.trim()).unwrap_or("");
    let unknown = message.contains("unknown field") || message.contains("duplicate key");
    match key {
        Some(key) if !unknown && expected(key).is_some() => {
            format!(
                "line {line_no}: `{key}` must be {}, got {}",
                expected(key).expect("checked"),
                got(value)
            )
        }
        Some(key) => format!("line {line_no}, key `{key}`: {message}"),
        None => format!("line {line_no}: {message}"),
    }
}

/// What a top-level key of `reeval.toml` takes, in words (from its option's
/// kind; a table has no such words).
fn expected(key: &str) -> Option<String> {
    Some(match table::by_key(key)?.kind {
        Kind::Count | Kind::Whole => "a whole number".into(),
        Kind::Rate => "a number between 0 and 1 (like 0.66)".into(),
        Kind::Duration => "a quoted duration (like \"10m\" or \"90s\")".into(),
        Kind::Path | Kind::Text | Kind::Word(_) | Kind::Bytes => "a quoted string".into(),
        Kind::List(things) => format!("a list of quoted {things}"),
        Kind::OneOrList(thing, example) => {
            format!("a quoted {thing} or a list of them (like [\"{example}\"])")
        }
        Kind::YesNo => "true or false".into(),
        Kind::Table(_) | Kind::Presence => return None,
    })
}

/// The first top-level key (by line) that is no option's: `line N, key `k`:
/// unknown field `k` (did you mean `j`?), expected one of …`. A file that does
/// not parse is left to the typed read, which says where.
fn unknown_key(text: &str) -> Option<String> {
    let keys = toml::from_str::<toml::Table>(text).ok()?;
    let (line, key) =
        keys.keys().filter(|k| table::by_key(k).is_none()).map(|k| (key_line(text, k), k)).min()?;
    let known: Vec<&str> = OPTIONS.iter().filter_map(|o| o.key).collect();
    let near = crate::suggest::nearest(key, known.iter().copied())
        .map(|k| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default();
    let expected = known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    let message = format!("unknown field `{key}`{near}, expected one of {expected}");
    Some(match line {
        Some(n) => format!("line {n}, key `{key}`: {message}"),
        None => message,
    })
}

/// The 1-based line where the top-level `key` is set: `key = …`, a dotted
/// `key.x = …` before the first table, or a `[key…]` header.
fn key_line(text: &str, key: &str) -> Option<usize> {
    let unquote = |s: &str| s.trim().trim_matches(['"', '\'']).to_string();
    let mut in_table = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let name = if let Some(header) = line.strip_prefix('[') {
            in_table = true;
            header.trim_start_matches('[').split(['.', ']']).next().map(unquote)
        } else if in_table {
            None
        } else {
            line.split(['=', '.']).next().map(unquote)
        };
        if name.as_deref() == Some(key) {
            return Some(i + 1);
        }
    }
    None
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
        assert_eq!(c.set.judge.as_deref(), Some("openai:gpt-4.1"));
        assert_eq!(c.set.env_file, Some(path.parent().unwrap().join(".env")));
    }

    #[test]
    fn reads_the_suite_wide_defaults() {
        let path = write(
            "defaults",
            "harness = [\"shell\", \"x\"]\ntrials = 3\ntimeout = \"90s\"\nconcurrency = 2\nretries = 0\nmin_pass_rate = 0.66\n[prices.\"m\"]\ninput = 1.0\noutput = 2.0\n",
        );
        let c = SuiteConfig::load(&path).unwrap();
        assert_eq!(c.set.harnesses.unwrap(), vec!["shell", "x"]);
        assert_eq!(
            (c.set.trials, c.set.test_threads, c.set.infra_retries),
            (Some(3), Some(2), Some(0))
        );
        let ninety = Some(std::time::Duration::from_secs(90));
        assert_eq!((c.set.timeout, c.set.min_pass_rate), (ninety, Some(0.66)));
        assert_eq!(c.prices["m"].output, 2.0);
        let e = SuiteConfig::load(&write("badtimeout", "timeout = \"soon\"\n")).unwrap_err();
        assert!(e.to_string().contains("key `timeout`"), "{e}");
        let e = SuiteConfig::load(&write("badprice", "[prices.m]\ninput = 1.0\nouptut = 2.0\n"))
            .unwrap_err();
        assert!(e.to_string().contains("line 3, key `ouptut`"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_judges_are_errors() {
        let e = SuiteConfig::load(&write("typo", "# suite\njduge = \"x\"\n")).unwrap_err();
        assert!(e.to_string().contains("line 2, key `jduge`: unknown field `jduge`"), "{e}");
        let e = SuiteConfig::load(&write("type", "record_dir = 3\n")).unwrap_err();
        assert!(
            e.to_string().contains("line 1: `record_dir` must be a quoted string, got \"3\""),
            "{e}"
        );
        // toml's own words were "invalid boolean".
        let e = SuiteConfig::load(&write(
            "word",
            "judge = \"openai:gpt-4.1\"\ntrials = three # per cell\n",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.ends_with("reeval.toml: line 2: `trials` must be a whole number, got \"three\""),
            "{e}"
        );
        let e =
            SuiteConfig::load(&write("quoted", "concurrency = \"4\"\n")).unwrap_err().to_string();
        assert!(e.contains("`concurrency` must be a whole number, got the string \"4\""), "{e}");
        let e = SuiteConfig::load(&write("syntax", "judge = \"openai:gpt-4.1\"\nenv_file = \n"))
            .unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        assert!(!e.to_string().contains('\n'), "one line: {e}");
        let e = SuiteConfig::load(&write("judge", "judge = \"nope\"\n")).unwrap_err();
        assert!(e.to_string().starts_with("failed to read the suite config"), "{e}");
    }

    #[test]
    fn unknown_keys_name_the_nearest_key_of_the_table() {
        let e = SuiteConfig::load(&write("near", "trials = 2\n\nretires = 1\n")).unwrap_err();
        assert!(
            e.message.starts_with("line 3, key `retires`: unknown field `retires` (did you mean `retries`?), expected one of `concurrency`"),
            "{e}"
        );
        let e = SuiteConfig::load(&write("far", "[zzz]\nx = 1\n")).unwrap_err();
        assert!(e.message.starts_with("line 1, key `zzz`: unknown field `zzz`, expected"), "{e}");
        // A table's own keys are the table's business, and dotted keys count as their first part.
        let c = SuiteConfig::load(&write("dotted", "kubernetes.runtime_class = \"gvisor\"\n"));
        let k = c.unwrap().set.kubernetes.expect("the table").0;
        assert_eq!(k.runtime_class.as_deref(), Some("gvisor"));
    }

    #[test]
    fn images_map_names_and_a_bad_name_is_refused() {
        let c = SuiteConfig::load(&write(
            "images",
            "[images]\n\"ubuntu:24.04\" = \"registry.internal/ubuntu:24.04\"\n",
        ))
        .unwrap();
        assert_eq!(c.images["ubuntu:24.04"], "registry.internal/ubuntu:24.04");
        let map = crate::image_map::ImageMap::new(&c.images).unwrap();
        assert_eq!(
            map.map("docker.io/library/ubuntu:24.04").unwrap(),
            "registry.internal/ubuntu:24.04"
        );
        let e =
            SuiteConfig::load(&write("badimages", "[images]\n\"ubuntu:\" = \"x\"\n")).unwrap_err();
        assert!(e.message.starts_with("[images]: `ubuntu:` is not an image name"), "{e}");
    }

    #[test]
    fn every_key_of_the_table_is_read() {
        // A value of no key's kind: each key's own reader must meet it and say so.
        for o in OPTIONS.iter().filter(|o| o.key.is_some()) {
            let key = o.file_key();
            let e = SuiteConfig::load(&write(&format!("kind-{key}"), &format!("{key} = [1]\n")))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`{key}`")), "{key}: {e}");
            assert!(expected(key).is_some() || matches!(o.kind, Kind::Table(_)), "{key}");
        }
    }
}
