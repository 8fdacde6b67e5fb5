//! The one redactor: built once in preflight from every secret value of the
//! run, and the only way to any sink (the phase log, records, the summary,
//! reports, messages, panic output, captures, the egress log).

use std::borrow::Cow;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use serde::Serialize;

/// What a secret value is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Values shorter than this are not redacted: they would redact ordinary words.
const MIN_LEN: usize = 4;

/// Replaces every secret value, raw or JSON-escaped, with [`REDACTED`].
/// Leftmost-longest matching: a secret that is a prefix of another cannot
/// leave the longer one's tail visible. Cloning shares it.
#[derive(Clone, Default)]
pub struct Redactor {
    /// The values, kept to build unions; `None` when there is nothing to redact.
    values: Arc<Vec<String>>,
    matcher: Option<Arc<AhoCorasick>>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor").field("values", &self.values.len()).finish()
    }
}

impl Redactor {
    /// A redactor of `values` (and of their JSON-escaped forms).
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut all: Vec<String> =
            values.into_iter().filter(|v| v.len() >= MIN_LEN).map(str::to_string).collect();
        all.sort();
        all.dedup();
        let mut patterns = all.clone();
        // In JSON a secret with quotes, backslashes or control characters appears escaped.
        for v in &all {
            if let Ok(quoted) = serde_json::to_string(v) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != v {
                    patterns.push(escaped.to_string());
                }
            }
        }
        let matcher = (!patterns.is_empty()).then(|| {
            Arc::new(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&patterns)
                    .expect("literal patterns always build"),
            )
        });
        Self { values: Arc::new(all), matcher }
    }

    /// A redactor that redacts nothing (a run without secrets).
    pub fn none() -> Self {
        Self::default()
    }

    /// A redactor of both sets of values.
    pub fn union(&self, other: &Redactor) -> Self {
        Self::new(self.values.iter().chain(other.values.iter()).map(String::as_str))
    }

    /// Whether there is anything to redact.
    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// `text` with every secret value replaced.
    pub fn redact<'t>(&self, text: &'t str) -> Cow<'t, str> {
        match &self.matcher {
            Some(m) if m.is_match(text) => {
                Cow::Owned(m.replace_all(text, &vec![REDACTED; m.patterns_len()]))
            }
            _ => Cow::Borrowed(text),
        }
    }

    /// `bytes` (text or binary) with every secret value replaced.
    pub fn redact_bytes<'b>(&self, bytes: &'b [u8]) -> Cow<'b, [u8]> {
        match &self.matcher {
            Some(m) if m.is_match(bytes) => {
                Cow::Owned(m.replace_all_bytes(bytes, &vec![REDACTED.as_bytes(); m.patterns_len()]))
            }
            _ => Cow::Borrowed(bytes),
        }
    }

    /// `value` as pretty JSON with every secret value replaced.
    ///
    /// # Errors
    /// When `value` does not serialize.
    pub fn json<T: Serialize>(&self, value: &T) -> serde_json::Result<String> {
        let text = serde_json::to_string_pretty(value)?;
        Ok(self.redact(&text).into_owned())
    }

    /// A copy of `value` with every secret value replaced in every string it holds.
    ///
    /// # Errors
    /// When `value` does not round-trip through JSON.
    pub fn scrub<T: Serialize + serde::de::DeserializeOwned + Clone>(
        &self,
        value: &T,
    ) -> serde_json::Result<T> {
        if self.is_empty() {
            return Ok(value.clone());
        }
        serde_json::from_str(&self.redact(&serde_json::to_string(value)?))
    }

    /// Writes `value` as pretty JSON to `path`, with every secret value
    /// replaced, atomically (see [`write_atomically`]): a reader sees the
    /// whole file or none, also after a crash or a full disk.
    ///
    /// # Errors
    /// An I/O error; no temporary file is left then.
    pub fn write_json<T: Serialize>(
        &self,
        path: &std::path::Path,
        value: &T,
    ) -> std::io::Result<()> {
        let text = self.json(value).map_err(std::io::Error::other)?;
        write_atomically(path, text.as_bytes())
    }

    /// Writes `bytes` to `path` with every secret value replaced.
    ///
    /// # Errors
    /// An I/O error.
    pub fn write(&self, path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
        std::fs::write(path, self.redact_bytes(bytes))
    }
}

/// Writes `bytes` to `path` through `<path>.tmp`: written, flushed to the
/// disk (fsync), then renamed over `path`, so `path` never holds a truncated
/// file. A write that fails (a full disk) removes its temporary file.
///
/// # Errors
/// An I/O error.
pub fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_values() {
        let r = Redactor::new(["sk-123456"]);
        assert_eq!(r.redact("key=sk-123456 ok"), "key=[redacted] ok");
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_that_is_a_prefix_of_another_leaves_no_tail() {
        // Replacing one value after the other left "[redacted]789" here.
        let r = Redactor::new(["sk-123456", "sk-123456789"]);
        assert_eq!(r.redact("a=sk-123456789 b=sk-123456"), "a=[redacted] b=[redacted]");
        let r = Redactor::new(["sk-123456789", "sk-123456"]);
        assert_eq!(r.redact("a=sk-123456789 b=sk-123456"), "a=[redacted] b=[redacted]");
    }

    #[test]
    fn redacts_binary() {
        let r = Redactor::new(["sk-123456"]);
        assert_eq!(r.redact_bytes(b"\0\xffkey=sk-123456\0").as_ref(), b"\0\xffkey=[redacted]\0");
    }

    #[test]
    fn redacts_the_json_escaped_form() {
        let secret = r#"pa"ss\word-123"#;
        let r = Redactor::new([secret]);
        let json = r.json(&serde_json::json!({ "message": format!("leaked {secret}") })).unwrap();
        assert!(!json.contains("word-123"), "{json}");
        assert!(json.contains(REDACTED));
    }

    #[test]
    fn short_values_and_empty_redactors_leave_text_alone() {
        assert_eq!(Redactor::new(["ab"]).redact("ab cd"), "ab cd");
        assert!(Redactor::none().is_empty());
        assert_eq!(Redactor::none().redact("sk-123456"), "sk-123456");
    }

    #[test]
    fn unions_redact_both() {
        let r = Redactor::new(["first-secret"]).union(&Redactor::new(["second-secret"]));
        assert_eq!(r.redact("first-secret second-secret"), "[redacted] [redacted]");
    }
}
