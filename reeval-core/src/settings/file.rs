//! The suite's config file, `reeval.toml` beside the package's `Cargo.toml`
//! (cargo runs test binaries there), or the file named by `REEVAL_CONFIG`;
//! [`crate::settings`] finds it and merges it with the flags and environment.
//!
//! Its top-level keys are those of the option table ([`super::table`]): a key
//! the table lacks is an error naming the nearest one. Each key's value is
//! read here into [`SuiteConfig`]; a test holds its fields to the table's
//! keys. docs/options.md shows a whole file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::KubernetesConfig;
use super::table::{self, Kind, OPTIONS};

/// The default config file name.
pub const FILE_NAME: &str = "reeval.toml";

/// What `reeval.toml` may set: the keys of [`OPTIONS`] (a test holds the two
/// together). Unknown keys are an error, so a typo is not ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
    /// Harnesses every eval runs with, replacing the evals' own.
    pub harness: Option<OneOrMore>,
    /// Trials per eval × harness, replacing the evals' own.
    pub trials: Option<u32>,
    /// The budget per attempt (`10m`, `90s`), replacing the evals' own.
    pub timeout: Option<String>,
    /// Attempts at once.
    pub concurrency: Option<usize>,
    /// Retries of an infra error, each with a fresh sandbox.
    pub retries: Option<u32>,
    /// Containers created ahead of their slot.
    pub prestart: Option<usize>,
    /// The pass rate at which a cell passes, for evals that set none.
    pub min_pass_rate: Option<f64>,
    /// Prices per model, over the built-in ones.
    #[serde(default)]
    pub prices: std::collections::BTreeMap<String, crate::prices::Price>,
    /// Which engine runs sandboxes: `docker` (the default) or `kubernetes`.
    pub backend: Option<String>,
    /// The Kubernetes namespace of the attempts' pods (default: the kubeconfig's).
    pub namespace: Option<String>,
    /// The Kubernetes backend's other settings.
    #[serde(default)]
    pub kubernetes: KubernetesConfig,
    /// Image names mapped to others (`[images]`, see `crate::image_map`).
    #[serde(default)]
    pub images: std::collections::BTreeMap<String, String>,
    /// Variants declared here (`[variants.NAME]`, see [`super::DeclaredVariant`]).
    #[serde(default)]
    pub variants: std::collections::BTreeMap<String, super::DeclaredVariant>,
    /// Private or reserved addresses allowed hosts may resolve to (hosts or ranges).
    #[serde(default)]
    pub allow_internal: Vec<String>,
    /// The proxy the egress gateway reaches upstreams through (`none`: directly).
    pub upstream_proxy: Option<String>,
}

/// A string or a list of strings (`harness = "shell"` or `harness = ["a", "b"]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMore {
    /// One.
    One(String),
    /// A list.
    More(Vec<String>),
}

impl OneOrMore {
    /// The values, in order.
    pub fn values(&self) -> Vec<String> {
        match self {
            OneOrMore::One(s) => vec![s.clone()],
            OneOrMore::More(v) => v.clone(),
        }
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
        let mut config: SuiteConfig =
            toml::from_str(&text).map_err(|e| fail(toml_problem(&text, &e)))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for p in [&mut config.env_file, &mut config.record_dir].into_iter().flatten() {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        }
        if let Some(spec) = &config.judge {
            crate::llm::chat::key_env(spec).map_err(|e| fail(format!("judge `{spec}`: {e}")))?;
        }
        if let Some(t) = &config.timeout {
            humantime::parse_duration(t).map_err(|e| {
                let key = table::TIMEOUT.file_key();
                fail(format!("key `{key}`: `{t}` is not a duration like 10m or 90s ({e})"))
            })?;
        }
        if config.trials == Some(0) || config.concurrency == Some(0) {
            let (trials, concurrency) = (table::TRIALS.file_key(), table::TEST_THREADS.file_key());
            return Err(fail(format!("keys `{trials}` and `{concurrency}` must be at least 1")));
        }
        if let Some(rate) = config.min_pass_rate
            && !(0.0..=1.0).contains(&rate)
        {
            let key = table::MIN_PASS_RATE.file_key();
            return Err(fail(format!("key `{key}`: {rate} is not between 0 and 1")));
        }
        crate::image_map::ImageMap::new(&config.images)
            .map_err(|e| fail(format!("[{}]: {e}", table::IMAGES.file_key())))?;
        for (name, variant) in &mut config.variants {
            variant.resolve(name, dir).map_err(fail)?;
        }
        for entry in &config.allow_internal {
            crate::egress::check_internal(entry)
                .map_err(|e| fail(format!("key `{}`: {e}", table::ALLOW_INTERNAL.file_key())))?;
        }
        if let Some(url) = &config.upstream_proxy {
            check_proxy(url)
                .map_err(|e| fail(format!("key `{}`: {e}", table::UPSTREAM_PROXY.file_key())))?;
        }
        Ok(config)
    }
}

/// Checks an upstream proxy setting: `none`, or an `http://` proxy URL.
pub(crate) fn check_proxy(value: &str) -> Result<(), String> {
    crate::egress::UpstreamProxySetting::parse(value).resolve(|_| None).map(drop)
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
            let got = if value.starts_with(['"', '\'']) {
                format!("the string {value}")
            } else {
                format!("\"{}\"", value.split('#').next().unwrap_or("").trim())
            };
            format!(
                "line {line_no}: `{key}` must be {}, got {got}",
                expected(key).expect("checked")
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
        assert_eq!(c.judge.as_deref(), Some("openai:gpt-4.1"));
        assert_eq!(c.env_file, Some(path.parent().unwrap().join(".env")));
    }

    #[test]
    fn reads_the_suite_wide_defaults() {
        let path = write(
            "defaults",
            "harness = [\"shell\", \"x\"]\ntrials = 3\ntimeout = \"90s\"\nconcurrency = 2\nretries = 0\nmin_pass_rate = 0.66\n[prices.\"m\"]\ninput = 1.0\noutput = 2.0\n",
        );
        let c = SuiteConfig::load(&path).unwrap();
        assert_eq!(c.harness.unwrap().values(), vec!["shell", "x"]);
        assert_eq!((c.trials, c.concurrency, c.retries), (Some(3), Some(2), Some(0)));
        assert_eq!((c.timeout.as_deref(), c.min_pass_rate), (Some("90s"), Some(0.66)));
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
        assert_eq!(c.unwrap().kubernetes.runtime_class.as_deref(), Some("gvisor"));
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

    /// The field names serde's derive gives `deserialize_struct`, and nothing more.
    struct FieldNames(Vec<&'static str>);

    impl<'de> serde::Deserializer<'de> for &mut FieldNames {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("only a struct's field names are read"))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            visitor: V,
        ) -> Result<V::Value, Self::Error> {
            self.0 = fields.to_vec();
            self.deserialize_any(visitor)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    #[test]
    fn the_files_keys_are_the_tables_keys() {
        let mut names = FieldNames(Vec::new());
        let _ = SuiteConfig::deserialize(&mut names);
        let mut fields = names.0;
        let mut keys: Vec<&str> = OPTIONS.iter().filter_map(|o| o.key).collect();
        fields.sort_unstable();
        keys.sort_unstable();
        assert_eq!(fields, keys, "SuiteConfig's fields and the table's keys");
        for key in keys {
            let kind = table::by_key(key).unwrap().kind;
            assert!(expected(key).is_some() || matches!(kind, Kind::Table(_)), "{key}");
        }
    }
}
