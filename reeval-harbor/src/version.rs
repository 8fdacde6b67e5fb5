//! Which version of a registry dataset `-d NAME` means, as Harbor's
//! `resolve_version` decides (`registry/client/base.py`): `head` if listed,
//! else the highest PEP 440 version, else the lexically last.

use std::cmp::Ordering;
use std::sync::LazyLock;

use regex::Regex;

/// The version `-d NAME` (no `@VERSION`) runs, of `versions`; none when there is none.
pub fn resolve(versions: &[&str]) -> Option<String> {
    if versions.contains(&"head") {
        return Some("head".into());
    }
    let highest = versions
        .iter()
        .filter_map(|v| Pep440::parse(v).map(|p| (p, *v)))
        .max_by(|(a, _), (b, _)| a.cmp(b));
    match highest {
        Some((_, v)) => Some(v.to_string()),
        None => versions.iter().max().map(|v| v.to_string()),
    }
}

/// A PEP 440 version, ordered as the `packaging` library orders them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pep440 {
    epoch: u64,
    /// The release numbers, trailing zeros dropped (1.0 == 1).
    release: Vec<u64>,
    /// `a`, `b` or `rc` (0, 1, 2) and its number.
    pre: Option<(u8, u64)>,
    post: Option<u64>,
    dev: Option<u64>,
    /// The local label's parts: a number, else a word.
    local: Option<Vec<LocalPart>>,
}

/// A part of a local label: numbers sort above words.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum LocalPart {
    Word(String),
    Number(u64),
}

static PATTERN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?xi)^\s*v?
        (?:(?P<epoch>[0-9]+)!)?
        (?P<release>[0-9]+(?:\.[0-9]+)*)
        (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>[0-9]+)?)?
        (?:-(?P<post_n1>[0-9]+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>[0-9]+)?)?
        (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>[0-9]+)?)?
        (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
        \s*$",
    )
    .expect("a valid pattern")
});

impl Pep440 {
    /// `v` read as PEP 440 does; none when it is not a version (`latest`, `2024-q1`).
    pub fn parse(v: &str) -> Option<Pep440> {
        let c = PATTERN.captures(v)?;
        let num = |name: &str| c.name(name).map(|m| m.as_str().parse::<u64>()).transpose();
        let mut release: Vec<u64> =
            c["release"].split('.').map(str::parse).collect::<Result<_, _>>().ok()?;
        while release.len() > 1 && release.last() == Some(&0) {
            release.pop();
        }
        let pre = match c.name("pre_l") {
            Some(l) => {
                let rank = match l.as_str().to_ascii_lowercase().as_str() {
                    "a" | "alpha" => 0,
                    "b" | "beta" => 1,
                    _ => 2,
                };
                Some((rank, num("pre_n").ok()?.unwrap_or(0)))
            }
            None => None,
        };
        let post = match (num("post_n1").ok()?, c.name("post_l")) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => Some(num("post_n2").ok()?.unwrap_or(0)),
            (None, None) => None,
        };
        let dev = match c.name("dev_l") {
            Some(_) => Some(num("dev_n").ok()?.unwrap_or(0)),
            None => None,
        };
        let local = c.name("local").map(|l| {
            l.as_str()
                .split(['-', '_', '.'])
                .map(|p| match p.parse() {
                    Ok(n) => LocalPart::Number(n),
                    Err(_) => LocalPart::Word(p.to_ascii_lowercase()),
                })
                .collect()
        });
        Some(Pep440 { epoch: num("epoch").ok()?.unwrap_or(0), release, pre, post, dev, local })
    }

    /// The key `packaging` sorts by: a dev release before its pre-releases,
    /// pre-releases before the release, post-releases after it.
    fn key(&self) -> impl Ord + '_ {
        // None sorts below Some: (has, value) pairs say where "none" goes.
        let pre = match (self.pre, self.post, self.dev) {
            (None, None, Some(_)) => (0, (0, 0)),
            (None, _, _) => (2, (0, 0)),
            (Some(p), _, _) => (1, p),
        };
        let post = self.post.map_or((0, 0), |p| (1, p));
        let dev = self.dev.map_or((1, 0), |d| (0, d));
        (self.epoch, &self.release, pre, post, dev, &self.local)
    }
}

impl Ord for Pep440 {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl PartialOrd for Pep440 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_as_pep_440_orders_them() {
        let ordered = [
            "0.9",
            "1.0.dev1",
            "1.0a1",
            "1.0a2.dev3",
            "1.0b1",
            "1.0rc1",
            "1.0",
            "1.0.post1",
            "1.0.post2.dev1",
            "1.0.1",
            "1.1",
            "1.10",
            "2.0",
            "1!0.1",
        ];
        for pair in ordered.windows(2) {
            let (a, b) = (Pep440::parse(pair[0]).unwrap(), Pep440::parse(pair[1]).unwrap());
            assert!(a < b, "{} < {}", pair[0], pair[1]);
        }
        assert_eq!(Pep440::parse("1.0"), Pep440::parse("v1.0.0"));
        assert_eq!(Pep440::parse("1.0RC1"), Pep440::parse("1.0-rc.1"));
        assert!(Pep440::parse("1.0+local.2") > Pep440::parse("1.0+local.abc"));
        assert!(Pep440::parse("1.0+x") > Pep440::parse("1.0"));
        for not_a_version in ["latest", "2024-q1x", "", "1..2"] {
            assert_eq!(Pep440::parse(not_a_version), None, "{not_a_version}");
        }
    }

    #[test]
    fn resolution_is_head_then_the_highest_version_then_the_last_word() {
        assert_eq!(resolve(&["1.0", "head", "2.0"]).as_deref(), Some("head"));
        assert_eq!(resolve(&["1.10", "1.9", "latest"]).as_deref(), Some("1.10"));
        assert_eq!(resolve(&["2.0rc1", "1.9"]).as_deref(), Some("2.0rc1"));
        assert_eq!(resolve(&["alpha", "beta"]).as_deref(), Some("beta"));
        assert_eq!(resolve(&[]), None);
    }
}
