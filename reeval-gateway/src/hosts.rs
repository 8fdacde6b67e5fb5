//! Host names as an allowlist names them: patterns (`*.example.com:443`),
//! and the parsing every part of the gateway shares (a host normalised, a
//! `host:port` split, a host name checked). A leaf: the rules, the internal
//! addresses, the proxy and the dialler all use it.

use std::fmt;
use std::net::Ipv6Addr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::GatewayError;

/// One allowlist entry: `api.example.com`, `*.example.com` or either with a
/// port (`example.com:8443`).
///
/// Matching is case-insensitive and ignores a trailing dot. A wildcard
/// matches subdomains only, never the apex: `*.example.com` matches
/// `a.example.com` and `a.b.example.com` but not `example.com` or
/// `badexample.com`. Without a port the pattern allows every port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPattern {
    host: HostMatch,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum HostMatch {
    Exact(String),
    /// The suffix after `*.`.
    Subdomains(String),
}

impl HostPattern {
    /// Parses a pattern.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Pattern`] when it is empty, a bare `*`, has a wildcard
    /// anywhere but the first label, or holds characters a host name cannot.
    pub fn parse(pattern: &str) -> Result<Self, GatewayError> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err(GatewayError::pattern(pattern, "it is empty"));
        }
        let (host, port) = split_host_port(trimmed).ok_or_else(|| {
            GatewayError::pattern(pattern, "the port is not a number from 1 to 65535")
        })?;
        let host = normalize_host(host);
        if host == "*" {
            return Err(GatewayError::pattern(
                pattern,
                "a bare `*` is not a pattern; use Egress::Any to allow every host",
            ));
        }
        let matcher = match host.strip_prefix("*.") {
            Some(suffix) => {
                check_host_chars(pattern, suffix)?;
                HostMatch::Subdomains(suffix.to_owned())
            }
            None => {
                check_host_chars(pattern, &host)?;
                HostMatch::Exact(host)
            }
        };
        Ok(HostPattern { host: matcher, port })
    }

    /// Whether the pattern names a port.
    pub fn has_port(&self) -> bool {
        self.port.is_some()
    }

    /// Whether `host:port` is allowed by this pattern. `host` may be in any
    /// case, with a trailing dot, or a bracketed IPv6 literal.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let host = normalize_host(host);
        match &self.host {
            HostMatch::Exact(exact) => host == *exact,
            HostMatch::Subdomains(suffix) => host
                .strip_suffix(suffix.as_str())
                .is_some_and(|label| label.len() > 1 && label.ends_with('.')),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostMatch::Exact(h) if h.contains(':') => write!(f, "[{h}]")?,
            HostMatch::Exact(h) => f.write_str(h)?,
            HostMatch::Subdomains(s) => write!(f, "*.{s}")?,
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for HostPattern {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HostPattern::parse(s)
    }
}

impl Serialize for HostPattern {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for HostPattern {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        HostPattern::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Lowercases, strips IPv6 brackets and one trailing dot.
pub(crate) fn normalize_host(host: &str) -> String {
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase()
}

/// Splits `host`, `host:port`, `[v6]` or `[v6]:port`; a bare IPv6 literal has
/// no port. `None` when a port is present but invalid.
pub(crate) fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            None if after.is_empty() => Some((inner, None)),
            None => None,
            Some(port) => Some((inner, Some(parse_port(port)?))),
        };
    }
    if s.parse::<Ipv6Addr>().is_ok() {
        return Some((s, None));
    }
    match s.rsplit_once(':') {
        Some((host, port)) => Some((host, Some(parse_port(port)?))),
        None => Some((s, None)),
    }
}

fn parse_port(s: &str) -> Option<u16> {
    s.parse::<u16>().ok().filter(|p| *p != 0)
}

fn check_host_chars(pattern: &str, host: &str) -> Result<(), GatewayError> {
    if host.is_empty() {
        return Err(GatewayError::pattern(pattern, "the host is empty"));
    }
    if host.parse::<Ipv6Addr>().is_ok() {
        return Ok(());
    }
    if host.contains('*') {
        return Err(GatewayError::pattern(
            pattern,
            "a wildcard is only allowed as the first label (`*.example.com`)",
        ));
    }
    if let Some(c) =
        host.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
    {
        return Err(GatewayError::pattern(pattern, format!("{c:?} cannot appear in a host name")));
    }
    if host.starts_with('.') || host.contains("..") {
        return Err(GatewayError::pattern(pattern, "a host name has no empty labels"));
    }
    Ok(())
}

/// Whether `host` is a syntactically valid host name or IP literal (what the
/// base-url route accepts in its path).
pub(crate) fn is_valid_host(host: &str) -> bool {
    !host.is_empty() && check_host_chars(host, host).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_matches_subdomains_only() {
        let p = HostPattern::parse("*.example.com").unwrap();
        assert!(p.matches("a.example.com", 443));
        assert!(p.matches("A.B.Example.COM.", 80));
        assert!(!p.matches("example.com", 443));
        assert!(!p.matches("badexample.com", 443));
        assert!(!p.matches(".example.com", 443));
    }

    #[test]
    fn exact_and_ports() {
        let p = HostPattern::parse("Example.com:8443").unwrap();
        assert!(p.matches("example.com", 8443));
        assert!(!p.matches("example.com", 443));
        assert!(!p.matches("a.example.com", 8443));
        let any_port = HostPattern::parse("example.com").unwrap();
        assert!(any_port.matches("EXAMPLE.com", 1));
        let v6 = HostPattern::parse("[::1]:80").unwrap();
        assert!(v6.matches("[::1]", 80));
        assert!(v6.matches("::1", 80));
        assert_eq!(v6.to_string(), "[::1]:80");
    }

    #[test]
    fn rejects_bad_patterns() {
        for bad in
            ["", "*", "a.*.com", "exa mple.com", "example.com:0", "example.com:x", "..com", "*."]
        {
            assert!(HostPattern::parse(bad).is_err(), "{bad:?} should not parse");
        }
    }
}
