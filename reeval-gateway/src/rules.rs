//! What an attempt may reach: the allowlist (of [`HostPattern`]s, `hosts.rs`)
//! and the policy the runner switches as phases change.

use std::collections::BTreeSet;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::addresses::InternalRule;
use crate::error::GatewayError;
use crate::hosts::HostPattern;

/// Which hosts an attempt may reach in its current phase.
///
/// Serialized as `"none"`, `"any"` or a list of patterns (`["api.example.com", "*.github.com"]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Egress {
    /// Nothing: every request is refused.
    #[default]
    None,
    /// Every host (addresses that are not public stay refused unless
    /// [`Policy::allow_internal`] opens them; see the crate's docs).
    Any,
    /// Hosts that match one of these patterns.
    List(Vec<HostPattern>),
}

impl Egress {
    /// An allowlist from pattern strings.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Pattern`] for the first pattern that does not parse.
    pub fn list<I, S>(patterns: I) -> Result<Self, GatewayError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        patterns
            .into_iter()
            .map(|p| HostPattern::parse(p.as_ref()))
            .collect::<Result<Vec<_>, _>>()
            .map(Egress::List)
    }

    /// Whether `host:port` may be reached.
    pub fn allows(&self, host: &str, port: u16) -> bool {
        match self {
            Egress::None => false,
            Egress::Any => true,
            Egress::List(patterns) => patterns.iter().any(|p| p.matches(host, port)),
        }
    }
}

impl Serialize for Egress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Egress::None => serializer.serialize_str("none"),
            Egress::Any => serializer.serialize_str("any"),
            Egress::List(patterns) => patterns.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Egress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Word(String),
            List(Vec<HostPattern>),
        }
        match Repr::deserialize(deserializer)? {
            Repr::Word(w) if w == "none" => Ok(Egress::None),
            Repr::Word(w) if w == "any" => Ok(Egress::Any),
            Repr::Word(w) => Err(serde::de::Error::custom(format!(
                "expected \"none\", \"any\" or a list of host patterns, found {w:?}"
            ))),
            Repr::List(patterns) => Ok(Egress::List(patterns)),
        }
    }
}

/// What an attempt may do right now: which hosts it reaches and which
/// credential bindings are swapped in. The runner replaces it as phases
/// change ([`AttemptGateway::set_policy`](crate::AttemptGateway::set_policy)).
///
/// JSON: `{"egress": ["api.anthropic.com"], "activeBindings": ["ANTHROPIC_API_KEY"]}`,
/// with `"allowInternal": ["10.0.0.0/8", "*.corp"]` when the attempt opens
/// private or reserved addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    /// Reachable hosts.
    pub egress: Egress,
    /// Names of the bindings swapped in; any other binding's placeholder goes through as is.
    #[serde(default)]
    pub active_bindings: BTreeSet<String>,
    /// Private or reserved addresses the allowed hosts may resolve to (see
    /// [`InternalRule`]); the addresses that stay closed whatever it says are
    /// listed in the crate's docs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_internal: Vec<InternalRule>,
}

impl Policy {
    /// A policy with this egress and no active binding.
    pub fn new(egress: Egress) -> Self {
        Policy { egress, active_bindings: BTreeSet::new(), allow_internal: Vec::new() }
    }

    /// No egress, no binding: what checks get unless they ask for more.
    pub fn deny_all() -> Self {
        Policy::new(Egress::None)
    }

    /// This policy with these bindings active (added to those already active).
    #[must_use]
    pub fn activate<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.active_bindings.extend(names.into_iter().map(Into::into));
        self
    }

    /// This policy with these private or reserved addresses opened (added to those already open).
    #[must_use]
    pub fn allow_internal(mut self, rules: impl IntoIterator<Item = InternalRule>) -> Self {
        self.allow_internal.extend(rules);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_serde() {
        let e: Egress = serde_json::from_str(r#"["api.example.com","*.github.com:443"]"#).unwrap();
        assert!(e.allows("api.github.com", 443));
        assert!(!e.allows("api.github.com", 80));
        assert_eq!(serde_json::to_string(&e).unwrap(), r#"["api.example.com","*.github.com:443"]"#);
        assert_eq!(serde_json::from_str::<Egress>(r#""any""#).unwrap(), Egress::Any);
        assert_eq!(serde_json::from_str::<Egress>(r#""none""#).unwrap(), Egress::None);
        assert!(serde_json::from_str::<Egress>(r#""all""#).is_err());
        let p: Policy = serde_json::from_str(r#"{"egress":"any","activeBindings":["K"]}"#).unwrap();
        assert_eq!(p, Policy::new(Egress::Any).activate(["K"]));
        assert!(!serde_json::to_string(&p).unwrap().contains("allowInternal"));
        let p: Policy =
            serde_json::from_str(r#"{"egress":"any","allowInternal":["10.0.0.0/8","*.corp"]}"#)
                .unwrap();
        assert_eq!(p.allow_internal.len(), 2);
        assert!(
            serde_json::from_str::<Policy>(r#"{"egress":"any","allowInternal":["x:1"]}"#).is_err()
        );
    }
}
