//! The image names a Dockerfile refers to, rewritten through `[images]`:
//! each stage's `FROM` image (`FROM name`, `FROM --platform=… name AS stage`),
//! `COPY --from=image` and `RUN --mount=…,from=image`. Everything else in the
//! text is kept byte for byte.
//!
//! Only literal names are mapped. A stage's name (`FROM builder`,
//! `COPY --from=builder`, `--from=0`) is not an image; a name built from an
//! `ARG` (`FROM ${BASE}`, `FROM ubuntu:${VERSION}`) is left as written, since
//! its value is known only to the build. `scratch` is no image either.
//!
//! The parse follows Docker's: instructions are case-insensitive, a line
//! ending in the escape character (`\`, or the one a `# escape=` directive
//! sets) continues on the next, comment and empty lines inside a continued
//! instruction are skipped, and a heredoc's body (`RUN <<EOF` … `EOF`) is no
//! instruction.

/// A Dockerfile's text with `map` applied to the images it names, and the
/// names that were mapped (each once, in the order the file names them);
/// `None` when `map` maps none of them.
pub(super) fn rewrite(
    text: &str,
    map: impl Fn(&str) -> Option<String>,
) -> Option<(String, Vec<String>)> {
    let mut stages: Vec<String> = Vec::new();
    let mut edits: Vec<(Vec<(usize, usize)>, String)> = Vec::new();
    let mut mapped: Vec<String> = Vec::new();
    let mut consider = |name: &Token, stages: &[String]| {
        let literal = !name.text.contains('$') && !name.text.is_empty();
        let stage = stages.contains(&name.text.to_ascii_lowercase())
            || name.text.chars().all(|c| c.is_ascii_digit())
            || name.text.eq_ignore_ascii_case("scratch");
        if literal
            && !stage
            && let Some(to) = map(&name.text)
        {
            if !mapped.contains(&name.text) {
                mapped.push(name.text.clone());
            }
            edits.push((name.runs(), to));
        }
    };
    for instruction in instructions(text) {
        let Some((keyword, args)) = instruction.split_first() else { continue };
        let (flags, rest): (Vec<&Token>, Vec<&Token>) =
            args.iter().partition(|t| t.text.starts_with("--"));
        match keyword.text.to_ascii_uppercase().as_str() {
            "FROM" => {
                let Some(image) = rest.first() else { continue };
                consider(image, &stages);
                if let [_, as_, stage] = rest.as_slice()
                    && as_.text.eq_ignore_ascii_case("as")
                {
                    stages.push(stage.text.to_ascii_lowercase());
                }
            }
            "COPY" => {
                for flag in flags {
                    if let Some(from) = flag.strip_prefix("--from=") {
                        consider(&from, &stages);
                    }
                }
            }
            "RUN" => {
                for flag in flags {
                    let Some(mount) = flag.strip_prefix("--mount=") else { continue };
                    for part in mount.split(',') {
                        if let Some(from) = part.strip_prefix("from=") {
                            consider(&from, &stages);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    if edits.is_empty() {
        return None;
    }
    // Each edit replaces its name's first run of bytes and removes the rest
    // (a name split over a continued line), from the end so offsets hold.
    let mut spans: Vec<(usize, usize, String)> = Vec::new();
    for (runs, to) in edits {
        for (i, (start, end)) in runs.into_iter().enumerate() {
            spans.push((start, end, if i == 0 { to.clone() } else { String::new() }));
        }
    }
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (start, end, to) in spans {
        out.replace_range(start..end, &to);
    }
    Some((out, mapped))
}

/// A word of an instruction: its text and, per character, where its bytes
/// are in the Dockerfile.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    /// The byte range in the file of each character of `text`.
    at: Vec<(usize, usize)>,
}

impl Token {
    /// The part after `prefix` (`--from=`), when the token starts with it.
    fn strip_prefix(&self, prefix: &str) -> Option<Token> {
        let rest = self.text.strip_prefix(prefix)?;
        let skip = self.text[..prefix.len()].chars().count();
        Some(Token { text: rest.to_string(), at: self.at[skip..].to_vec() })
    }

    /// `self` cut at each `c`.
    fn split(&self, c: char) -> Vec<Token> {
        let mut parts = vec![Token { text: String::new(), at: Vec::new() }];
        for (ch, at) in self.text.chars().zip(&self.at) {
            if ch == c {
                parts.push(Token { text: String::new(), at: Vec::new() });
            } else {
                let last = parts.last_mut().expect("one part at least");
                last.text.push(ch);
                last.at.push(*at);
            }
        }
        parts
    }

    /// The token's bytes in the file as contiguous runs.
    fn runs(&self) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for &(start, end) in &self.at {
            match runs.last_mut() {
                Some(run) if run.1 == start => run.1 = end,
                _ => runs.push((start, end)),
            }
        }
        runs
    }
}

/// The Dockerfile's instructions, each as its words (the keyword first),
/// continuation lines joined.
fn instructions(text: &str) -> Vec<Vec<Token>> {
    let escape = escape_char(text);
    let mut out = Vec::new();
    // The instruction being read: its characters with their byte ranges.
    let mut current: Vec<(char, (usize, usize))> = Vec::new();
    let mut continued = false;
    let mut heredocs: Vec<String> = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let start = offset;
        offset += raw.len();
        let line = raw.trim_end_matches(['\n', '\r']);
        // A heredoc's body ends at its terminator; nothing in it is an instruction.
        if let Some(end) = heredocs.first() {
            if line.trim_start_matches('\t') == end {
                heredocs.remove(0);
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.starts_with('#') || (trimmed.is_empty() && continued) {
            continue;
        }
        let body = line.trim_end();
        let (body, continues) = match body.strip_suffix(escape) {
            Some(head) => (head, true),
            None => (body, false),
        };
        // The first line of an instruction starts at its keyword.
        let lead = if continued { 0 } else { body.len() - body.trim_start().len() };
        for (i, c) in body[lead..].char_indices() {
            let at = start + lead + i;
            current.push((c, (at, at + c.len_utf8())));
        }
        continued = continues;
        if !continues {
            let words = words(&std::mem::take(&mut current));
            heredocs = heredoc_ends(&words);
            if !words.is_empty() {
                out.push(words);
            }
        }
    }
    let words = words(&current);
    if !words.is_empty() {
        out.push(words);
    }
    out
}

/// The escape character: `\`, or what a `# escape=` parser directive at the top sets.
fn escape_char(text: &str) -> char {
    for line in text.lines() {
        let Some(directive) = line.trim().strip_prefix('#') else { break };
        let Some((key, value)) = directive.split_once('=') else { break };
        let key = key.trim();
        if key.is_empty() || key.contains(char::is_whitespace) {
            break;
        }
        if key.eq_ignore_ascii_case("escape") && value.trim() == "`" {
            return '`';
        }
    }
    '\\'
}

/// An instruction's characters split at whitespace.
fn words(chars: &[(char, (usize, usize))]) -> Vec<Token> {
    let mut words = Vec::new();
    let mut word = Token { text: String::new(), at: Vec::new() };
    for &(c, at) in chars {
        if c.is_whitespace() {
            if !word.text.is_empty() {
                words.push(std::mem::replace(&mut word, Token { text: String::new(), at: vec![] }));
            }
        } else {
            word.text.push(c);
            word.at.push(at);
        }
    }
    if !word.text.is_empty() {
        words.push(word);
    }
    words
}

/// The terminators of the heredocs an instruction opens (`<<EOF`, `<<-"EOF"`), in order.
fn heredoc_ends(words: &[Token]) -> Vec<String> {
    let mut ends = Vec::new();
    let opens = words
        .first()
        .is_some_and(|k| ["RUN", "COPY", "ADD"].iter().any(|i| k.text.eq_ignore_ascii_case(i)));
    for word in words.iter().skip(1).filter(|_| opens) {
        let mut rest = word.text.as_str();
        while let Some(i) = rest.find("<<") {
            rest = &rest[i + 2..];
            let marker = rest.strip_prefix('-').unwrap_or(rest);
            let marker = marker.trim_start_matches(['"', '\'']);
            let end: String =
                marker.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !end.is_empty() {
                ends.push(end);
            }
        }
    }
    ends
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        move |name| pairs.iter().find(|(a, _)| a == name).map(|(_, b)| b.clone())
    }

    fn rewritten(text: &str, pairs: &[(&str, &str)]) -> Option<(String, Vec<String>)> {
        rewrite(text, with(pairs))
    }

    #[test]
    fn a_single_from_is_mapped_and_the_rest_kept() {
        let text = "# a comment naming ubuntu:24.04\nFROM ubuntu:24.04\nRUN echo ubuntu:24.04\n";
        let (out, mapped) = rewritten(text, &[("ubuntu:24.04", "mirror/ubuntu:24.04")]).unwrap();
        assert_eq!(
            out,
            "# a comment naming ubuntu:24.04\nFROM mirror/ubuntu:24.04\nRUN echo ubuntu:24.04\n"
        );
        assert_eq!(mapped, vec!["ubuntu:24.04"]);
        assert_eq!(rewritten(text, &[("debian", "x")]), None, "nothing to map: no rewrite");
    }

    #[test]
    fn stages_are_not_images_and_images_after_them_are() {
        let text = "from --platform=linux/amd64 golang:1.22 AS Build\nRUN go build\n\
                    FROM build AS test\nFROM ubuntu:24.04\nCOPY --from=build /out /out\n\
                    COPY --from=0 /a /a\nCOPY --chown=1:1 --from=busybox:1 /bin/sh /sh\n\
                    COPY --from=TEST /b /b\n";
        let map = [
            ("golang:1.22", "m/golang:1.22"),
            ("build", "m/build"),
            ("test", "m/test"),
            ("ubuntu:24.04", "m/ubuntu:24.04"),
            ("busybox:1", "m/busybox:1"),
            ("0", "m/zero"),
        ];
        let (out, mapped) = rewritten(text, &map).unwrap();
        assert_eq!(
            out,
            "from --platform=linux/amd64 m/golang:1.22 AS Build\nRUN go build\n\
             FROM build AS test\nFROM m/ubuntu:24.04\nCOPY --from=build /out /out\n\
             COPY --from=0 /a /a\nCOPY --chown=1:1 --from=m/busybox:1 /bin/sh /sh\n\
             COPY --from=TEST /b /b\n"
        );
        assert_eq!(mapped, vec!["golang:1.22", "ubuntu:24.04", "busybox:1"]);
    }

    #[test]
    fn a_stage_named_like_a_later_image_is_only_a_stage_after_it_is_declared() {
        // `COPY --from=base` before any stage `base` names the image `base`.
        let text = "FROM alpine AS first\nCOPY --from=base /x /x\nFROM alpine AS base\nCOPY --from=base /y /y\n";
        let (out, _) = rewritten(text, &[("base", "m/base"), ("alpine", "m/alpine")]).unwrap();
        assert_eq!(
            out,
            "FROM m/alpine AS first\nCOPY --from=m/base /x /x\nFROM m/alpine AS base\nCOPY --from=base /y /y\n"
        );
    }

    #[test]
    fn arg_built_names_and_scratch_are_left_alone() {
        let text =
            "ARG BASE=ubuntu:24.04\nARG V=24.04\nFROM ${BASE}\nFROM ubuntu:$V\nFROM scratch\n";
        let map = [("ubuntu:24.04", "m/u"), ("${BASE}", "m/b"), ("scratch", "m/s")];
        assert_eq!(rewritten(text, &map), None);
    }

    #[test]
    fn continued_lines_comments_and_case_are_followed() {
        let text = "FROM \\\n  # the base\n\n  --platform=$BUILDPLATFORM \\\n  ubuntu:24.04 \\\n  as base\nRUN apt-get update \\\n FROM not-an-image\nFROM base\n";
        let (out, mapped) =
            rewritten(text, &[("ubuntu:24.04", "m/u:1"), ("not-an-image", "m/x")]).unwrap();
        assert_eq!(
            out,
            "FROM \\\n  # the base\n\n  --platform=$BUILDPLATFORM \\\n  m/u:1 \\\n  as base\nRUN apt-get update \\\n FROM not-an-image\nFROM base\n"
        );
        assert_eq!(mapped, vec!["ubuntu:24.04"]);
        // A name split over a continued line is replaced whole, at its first part.
        let (out, _) = rewritten("FROM ubun\\\ntu:24.04\n", &[("ubuntu:24.04", "m/u")]).unwrap();
        assert_eq!(out, "FROM m/u\\\n\n");
        // CRLF lines, and a lowercase instruction.
        let (out, _) =
            rewritten("from ubuntu:24.04\r\nRUN x\r\n", &[("ubuntu:24.04", "m/u")]).unwrap();
        assert_eq!(out, "from m/u\r\nRUN x\r\n");
    }

    #[test]
    fn the_escape_directive_and_heredocs_are_followed() {
        let text = "# escape=`\nFROM `\n  ubuntu:24.04\nRUN <<EOF\nFROM inside-a-heredoc\nEOF\nCOPY <<-'END' /f\n\tFROM also-inside\n\tEND\nFROM alpine\n";
        let map = [
            ("ubuntu:24.04", "m/u"),
            ("inside-a-heredoc", "x"),
            ("also-inside", "x"),
            ("alpine", "m/a"),
        ];
        let (out, mapped) = rewritten(text, &map).unwrap();
        assert_eq!(
            out,
            "# escape=`\nFROM `\n  m/u\nRUN <<EOF\nFROM inside-a-heredoc\nEOF\nCOPY <<-'END' /f\n\tFROM also-inside\n\tEND\nFROM m/a\n"
        );
        assert_eq!(mapped, vec!["ubuntu:24.04", "alpine"]);
    }

    #[test]
    fn mounts_from_images_are_mapped_and_digests_kept_by_the_map() {
        let digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let pinned = format!("alpine:3.23@{digest}");
        let to = format!("m/alpine:3.23@{digest}");
        let text = format!(
            "FROM {pinned} AS a\nRUN --mount=type=bind,from={pinned},target=/x true\nRUN --mount=type=cache,from=a,target=/c true\n"
        );
        let (out, mapped) = rewritten(&text, &[(pinned.as_str(), to.as_str())]).unwrap();
        assert_eq!(
            out,
            format!(
                "FROM {to} AS a\nRUN --mount=type=bind,from={to},target=/x true\nRUN --mount=type=cache,from=a,target=/c true\n"
            )
        );
        assert_eq!(mapped, vec![pinned]);
    }
}
