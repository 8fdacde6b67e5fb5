//! What the gateway refused during an attempt, in the words a failure
//! message needs: each host, why, and what would open it. A failed attempt's
//! message ends with it (`attempt/run.rs`), so the console, the JSON events,
//! JUnit and the HTML report all say that the gateway refused what the agent,
//! a setup step or a check tried to reach.

use reeval_gateway::{EgressEntry, Refusal};

/// How many refused hosts the note names; the rest are counted.
const NAMED: usize = 5;

/// Where the opt-in for private and reserved addresses is set.
const OPT_IN: &str = "allow_internal is Environment::allow_internal, --allow-internal, \
                      REEVAL_ALLOW_INTERNAL or `allow_internal` in reeval.toml";

/// `the egress gateway refused 2 requests: pypi.org:443 (resolves to
/// 203.0.113.80, a reserved address: open it with allow_internal …)`, or
/// `None` when nothing was refused.
pub(crate) fn note(entries: &[EgressEntry]) -> Option<String> {
    let refused: Vec<&EgressEntry> = entries.iter().filter(|e| !e.allowed).collect();
    if refused.is_empty() {
        return None;
    }
    // One line per host and reason, in the order they were first refused.
    let mut groups: Vec<(String, String, usize)> = Vec::new();
    for e in &refused {
        let target = format!("{}:{}", e.host, e.port);
        let why = reason(e);
        match groups.iter_mut().find(|(t, w, _)| *t == target && *w == why) {
            Some((_, _, n)) => *n += 1,
            None => groups.push((target, why, 1)),
        }
    }
    let mut named: Vec<String> = groups
        .iter()
        .take(NAMED)
        .map(|(target, why, n)| match n {
            1 => format!("{target} ({why})"),
            n => format!("{target} ×{n} ({why})"),
        })
        .collect();
    if groups.len() > NAMED {
        named.push(format!(
            "and {} more hosts (the record's egress lists them)",
            groups.len() - NAMED
        ));
    }
    let count = refused.len();
    let plural = if count == 1 { "request" } else { "requests" };
    let mut out = format!("the egress gateway refused {count} {plural}: {}", named.join(", "));
    if refused.iter().any(|e| matches!(e.refusal, Some(Refusal::Internal { .. }))) {
        out.push_str(&format!(" ({OPT_IN})"));
    }
    Some(out)
}

fn reason(e: &EgressEntry) -> String {
    match &e.refusal {
        Some(Refusal::NoEgress) => "the sandbox had no egress then: checks reach nothing \
                                    unless Environment::check_network opens hosts for them"
            .into(),
        Some(Refusal::NotAllowed) => "not on the allowlist: Environment::allow_egress \
                                      (a Harbor task's allowed_hosts) opens a host"
            .into(),
        Some(Refusal::Internal { addr, what }) => {
            let host =
                if e.host == addr.to_string() { String::new() } else { format!("{} or ", e.host) };
            format!("resolves to {addr}, {what}: open it with allow_internal ({host}{addr})")
        }
        Some(Refusal::Closed { addr, what }) => {
            format!("resolves to {addr}, {what}, which no opt-in opens")
        }
        None => e.error.clone().unwrap_or_else(|| "refused".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(host: &str, refusal: Option<Refusal>) -> EgressEntry {
        serde_json::from_value(serde_json::json!({
            "atUnixMs": 0, "host": host, "port": 443, "method": "CONNECT", "path": "",
            "status": if refusal.is_some() { 403 } else { 200 }, "bytesUp": 0, "bytesDown": 0,
            "durationMs": 0, "allowed": refusal.is_none(), "route": "tunnel",
            "refusal": refusal, "error": "the gateway's words",
        }))
        .unwrap()
    }

    #[test]
    fn refusals_are_named_with_what_would_open_them() {
        assert_eq!(note(&[entry("ok.test", None)]), None);
        let reserved = Refusal::Internal {
            addr: "203.0.113.80".parse().unwrap(),
            what: "a reserved address".into(),
        };
        let n = note(&[
            entry("pypi.org", Some(reserved.clone())),
            entry("pypi.org", Some(reserved)),
            entry("evil.test", Some(Refusal::NotAllowed)),
            entry("ok.test", None),
            entry(
                "meta.test",
                Some(Refusal::Closed {
                    addr: "169.254.169.254".parse().unwrap(),
                    what: "a link-local address".into(),
                }),
            ),
        ])
        .unwrap();
        assert!(n.starts_with("the egress gateway refused 4 requests: pypi.org:443 ×2 (resolves to 203.0.113.80, a reserved address: open it with allow_internal (pypi.org or 203.0.113.80)), evil.test:443 (not on the allowlist"), "{n}");
        assert!(n.contains("meta.test:443 (resolves to 169.254.169.254, a link-local address, which no opt-in opens)"), "{n}");
        assert!(n.ends_with("(allow_internal is Environment::allow_internal, --allow-internal, REEVAL_ALLOW_INTERNAL or `allow_internal` in reeval.toml)"), "{n}");
        let many: Vec<_> =
            (0..7).map(|i| entry(&format!("h{i}.test"), Some(Refusal::NotAllowed))).collect();
        let n = note(&many).unwrap();
        assert!(n.contains("and 2 more hosts") && !n.contains("allow_internal is"), "{n}");
    }
}
