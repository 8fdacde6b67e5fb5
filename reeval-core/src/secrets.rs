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

/// Replaces every secret value in `bytes` (text or binary) with `[redacted]`.
pub fn redact_bytes(bytes: &[u8], secrets: &[String]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for s in secrets.iter().filter(|s| s.len() >= 4) {
        let needle = s.as_bytes();
        let mut i = 0;
        let mut next = Vec::with_capacity(out.len());
        while i < out.len() {
            if out[i..].starts_with(needle) {
                next.extend_from_slice(b"[redacted]");
                i += needle.len();
            } else {
                next.push(out[i]);
                i += 1;
            }
        }
        out = next;
    }
    out
}

static REMEMBERED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Remembers secret values of this process, for output that is not tied to an attempt (panic messages).
pub fn remember(values: impl IntoIterator<Item = String>) {
    let mut all = REMEMBERED.lock().unwrap_or_else(|e| e.into_inner());
    all.extend(values);
    all.sort();
    all.dedup();
}

/// Replaces panic output with a redacted copy: an eval's `assert!` may show a secret it read.
pub fn install_redacting_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let secrets = REMEMBERED.lock().map(|s| s.clone()).unwrap_or_default();
        let thread = std::thread::current();
        eprintln!("thread '{}' {}", thread.name().unwrap_or("<unnamed>"), redact(&info.to_string(), &secrets));
    }));
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_binary() {
        assert_eq!(super::redact_bytes(b"\0\xffkey=sk-123456\0", &["sk-123456".into()]), b"\0\xffkey=[redacted]\0".to_vec());
    }

    #[test]
    fn redacts_values() {
        assert_eq!(super::redact("key=sk-123456 ok", &["sk-123456".into()]), "key=[redacted] ok");
    }
}
