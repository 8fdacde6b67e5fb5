//! Splits a CLI's stdout stream into lines as chunks arrive, whatever the
//! chunk boundaries, and reads each line as a JSON event when it is one.

use serde_json::Value;

/// A line longer than this is dropped (skipped like any line that is not an event).
pub const MAX_LINE: usize = 64 << 20;

/// Turns stdout chunks into complete lines.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    overflow: bool,
}

impl LineSplitter {
    /// A splitter with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a chunk; returns the lines it completed, without their line endings.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<String> {
        let mut lines = Vec::new();
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            let complete = piece.last() == Some(&b'\n');
            let body = if complete { &piece[..piece.len() - 1] } else { piece };
            if !self.overflow {
                if self.buf.len() + body.len() > MAX_LINE {
                    self.overflow = true;
                    self.buf = Vec::new();
                } else {
                    self.buf.extend_from_slice(body);
                }
            }
            if complete {
                if !self.overflow {
                    lines.push(decode(&self.buf));
                }
                self.buf.clear();
                self.overflow = false;
            }
        }
        lines
    }

    /// The last line when the stream ended without a line ending.
    pub fn finish(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.buf);
        let overflow = std::mem::replace(&mut self.overflow, false);
        (!overflow && !rest.is_empty()).then(|| decode(&rest))
    }
}

fn decode(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON object on `line`, or `None` for blank lines, log lines and anything else.
pub fn parse_event(line: &str) -> Option<Value> {
    let line = line.trim();
    if !line.starts_with('{') {
        return None;
    }
    match serde_json::from_str::<Value>(line) {
        Ok(v @ Value::Object(_)) => Some(v),
        _ => None,
    }
}

/// The lines of a turn's stdout that were not events: how many, and the first
/// (to say what a CLI printed instead of its stream, e.g. after an upgrade
/// changed its output).
#[derive(Debug, Default)]
pub struct Unread {
    lines: u64,
    first: Option<String>,
}

impl Unread {
    /// Notes `line`, which was not an event (blank lines do not count).
    pub fn note(&mut self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        self.lines += 1;
        if self.first.is_none() {
            let short: String = line.trim().chars().take(120).collect();
            self.first = Some(short.escape_debug().to_string());
        }
    }

    /// What `program`, which exited 0 without one event, printed instead.
    pub fn describe(&self, program: &str) -> String {
        match &self.first {
            None => format!("{program} exited 0 without an event on stdout (it printed nothing)"),
            Some(first) => {
                let lines = match self.lines {
                    1 => "1 line was not a JSON event".to_string(),
                    n => format!("{n} lines were not JSON events"),
                };
                format!(
                    "{program} exited 0 without an event on stdout: {lines} (the first: `{first}`)"
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn says_what_was_printed_instead_of_events() {
        let mut u = Unread::default();
        assert_eq!(
            u.describe("claude"),
            "claude exited 0 without an event on stdout (it printed nothing)"
        );
        u.note("   ");
        u.note("only");
        assert_eq!(
            u.describe("claude"),
            "claude exited 0 without an event on stdout: 1 line was not a JSON event (the first: `only`)"
        );
        let mut u = Unread::default();
        u.note("Welcome \u{1b}[31m\u{0}!");
        u.note("[1,2]");
        assert_eq!(
            u.describe("claude"),
            "claude exited 0 without an event on stdout: 2 lines were not JSON events (the first: `Welcome \\u{1b}[31m\\0!`)"
        );
    }

    #[test]
    fn joins_lines_split_across_chunks() {
        let mut s = LineSplitter::new();
        assert!(s.push(b"{\"a\":").is_empty());
        assert_eq!(s.push(b"1}\n{\"b\"").as_slice(), ["{\"a\":1}"]);
        assert_eq!(s.push(b":2}\r\n\n").as_slice(), ["{\"b\":2}", ""]);
        assert_eq!(s.push(b"tail"), Vec::<String>::new());
        assert_eq!(s.finish().as_deref(), Some("tail"));
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn keeps_multibyte_characters_split_across_chunks() {
        let text = "{\"t\":\"héllo\"}\n".as_bytes();
        let mut s = LineSplitter::new();
        let (a, b) = text.split_at(8);
        assert!(s.push(a).is_empty());
        assert_eq!(s.push(b).as_slice(), ["{\"t\":\"héllo\"}"]);
    }

    #[test]
    fn skips_lines_that_are_not_events() {
        assert!(parse_event("Warning: update available").is_none());
        assert!(parse_event("{not json").is_none());
        assert!(parse_event("[1,2]").is_none());
        assert!(parse_event("").is_none());
        assert_eq!(parse_event("  {\"type\":\"x\"} ").unwrap()["type"], "x");
    }
}
