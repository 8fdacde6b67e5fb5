//! Secret values: read on the host, shown to the sandbox only as placeholders,
//! and scrubbed from anything written.

/// The placeholder the sandbox sees for a secret.
pub fn placeholder(name: &str) -> String {
    format!("reeval-placeholder-{name}")
}

/// Replaces every secret value in `text` with `[redacted]`.
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        // Very short values would redact ordinary words; secrets are longer than this.
        if s.len() >= 4 && out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "[redacted]");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_values() {
        assert_eq!(super::redact("key=sk-123456 ok", &["sk-123456".into()]), "key=[redacted] ok");
    }
}
