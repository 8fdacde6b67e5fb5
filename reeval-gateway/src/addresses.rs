//! Which addresses a sandbox may reach: public ones; private and reserved
//! ones only where the attempt's opt-in ([`InternalRule`], the policy's
//! `allow_internal`) names the host or a range holding the address; and never
//! the addresses that would let it out of its box whatever the opt-in says:
//! this host's own (loopback, and every address of its interfaces, the
//! engine's bridges among them), the gateway of this host's network (for a
//! gateway container, the engine's bridge), link-local addresses (where
//! cloud metadata services answer, `169.254.169.254`), the cloud metadata
//! address `fd00:ec2::254`, unspecified, multicast and broadcast addresses.
//!
//! Whether an address is this host's own is asked of the kernel at each
//! dial (can a socket bind to it?), so a bridge made during the run counts.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, UdpSocket};

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::GatewayError;
use crate::hosts::{HostPattern, normalize_host};

/// One entry of the opt-in for addresses the gateway would refuse: a host
/// (`mirror.corp`, `*.internal`) that may resolve to a private or reserved
/// address, or a range (`10.0.0.0/8`, `203.0.113.80`, `fd12::/48`) whose
/// addresses any allowed host may resolve to. It opens no host of its own:
/// the allowlist still decides which hosts are reached.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum InternalRule {
    /// A host pattern, without a port.
    Host(HostPattern),
    /// An address range (one address is a /32 or /128).
    Range(IpNet),
}

impl InternalRule {
    /// Parses `*.corp`, `mirror.corp`, `10.0.0.0/8` or `203.0.113.80`.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Pattern`] when it is neither a host pattern without a
    /// port nor an address or CIDR range.
    pub fn parse(text: &str) -> Result<Self, GatewayError> {
        let t = text.trim();
        if t.contains('/') {
            return t.parse::<IpNet>().map(|n| InternalRule::Range(n.trunc())).map_err(|_| {
                GatewayError::pattern(
                    text,
                    "a range is an address and a prefix length, like 10.0.0.0/8",
                )
            });
        }
        if let Ok(ip) = normalize_host(t).parse::<IpAddr>() {
            return Ok(InternalRule::Range(IpNet::from(ip)));
        }
        let pattern = HostPattern::parse(t)?;
        if pattern.has_port() {
            return Err(GatewayError::pattern(
                text,
                "an internal host takes no port (the allowlist names ports)",
            ));
        }
        Ok(InternalRule::Host(pattern))
    }

    /// Whether this entry lets `host` reach `ip`.
    pub fn opens(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            InternalRule::Host(pattern) => pattern.matches(host, 0),
            InternalRule::Range(net) => net.contains(&canonical(ip)),
        }
    }
}

impl fmt::Display for InternalRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InternalRule::Host(pattern) => pattern.fmt(f),
            InternalRule::Range(net) => net.fmt(f),
        }
    }
}

impl std::str::FromStr for InternalRule {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        InternalRule::parse(s)
    }
}

impl Serialize for InternalRule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InternalRule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        InternalRule::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A request let through to a private or reserved address by the opt-in:
/// the address and the entry that opened it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InternalGrant {
    /// The address the host resolved to.
    pub addr: IpAddr,
    /// The opt-in's entry that opened it.
    pub by: String,
}

/// Where an address stands for a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Reached when the allowlist allows the host.
    Public,
    /// Private or reserved (the words say which): reached only when the opt-in opens it.
    Internal(&'static str),
    /// Never reached (the words say why).
    Closed(&'static str),
}

/// The cloud metadata address of IPv6 (AWS's; IPv4's is link-local).
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);

/// Where `ip` stands: the address alone first, then whether it is this
/// host's own or the gateway of its network (asked of the kernel now).
pub(crate) fn standing(ip: IpAddr) -> Standing {
    let ip = canonical(ip);
    if let Some(closed) = closed_by_kind(ip) {
        return Standing::Closed(closed);
    }
    if is_own(ip) {
        return Standing::Closed("this host's own address");
    }
    if default_gateways().contains(&ip) {
        return Standing::Closed(
            "the gateway of the egress gateway's network (the engine's bridge, for a gateway container)",
        );
    }
    match internal_kind(ip) {
        Some(kind) => Standing::Internal(kind),
        None => Standing::Public,
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Addresses no opt-in opens, by what they are.
fn closed_by_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            if v4.is_loopback() {
                Some("a loopback address (this host's own services)")
            } else if v4.is_unspecified() || v4.octets()[0] == 0 {
                Some("an unspecified address (this host itself)")
            } else if v4.is_link_local() {
                Some("a link-local address (where cloud metadata services answer)")
            } else if v4.is_multicast() || v4.is_broadcast() {
                Some("a multicast or broadcast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                Some("a loopback address (this host's own services)")
            } else if v6.is_unspecified() {
                Some("an unspecified address (this host itself)")
            } else if v6.is_unicast_link_local() {
                Some("a link-local address (where cloud metadata services answer)")
            } else if v6 == METADATA_V6 {
                Some("the cloud metadata address")
            } else if v6.is_multicast() {
                Some("a multicast address")
            } else {
                None
            }
        }
    }
}

/// Private and reserved addresses, by kind; `None` for a public one.
fn internal_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, _] = v4.octets();
            if v4.is_private() {
                Some("a private address")
            } else if a == 100 && (64..128).contains(&b) {
                Some("a shared (carrier-grade NAT) address")
            } else if v4.is_documentation()
                || (a == 198 && (b == 18 || b == 19))
                || (a == 192 && b == 0 && c == 0)
                || a >= 240
            {
                Some("a reserved address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            if v6.is_unique_local() {
                Some("a private (unique local) address")
            } else if first == 0x2001 && v6.segments()[1] == 0xdb8 {
                Some("a reserved address")
            } else {
                None
            }
        }
    }
}

/// Whether `ip` is an address of this host (of the network namespace the
/// gateway runs in): the kernel lets a socket bind only to its own addresses.
fn is_own(ip: IpAddr) -> bool {
    UdpSocket::bind((ip, 0)).is_ok()
}

/// The gateways of this host's default routes (Linux; none elsewhere).
fn default_gateways() -> Vec<IpAddr> {
    let mut found = Vec::new();
    // Destination, gateway and flags are little-endian hex in /proc/net/route.
    let v4 = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
    for line in v4.lines().skip(1) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if let [_, "00000000", gateway, ..] = cols.as_slice()
            && let Ok(raw) = u32::from_str_radix(gateway, 16)
            && raw != 0
        {
            found.push(IpAddr::V4(Ipv4Addr::from(raw.swap_bytes())));
        }
    }
    // Destination, its prefix length, source, its length, next hop, ….
    let v6 = std::fs::read_to_string("/proc/net/ipv6_route").unwrap_or_default();
    for line in v6.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if let [dest, "00", _, _, hop, ..] = cols.as_slice()
            && dest.bytes().all(|b| b == b'0')
            && let Ok(raw) = u128::from_str_radix(hop, 16)
            && raw != 0
        {
            found.push(IpAddr::V6(Ipv6Addr::from(raw)));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn rules_parse_and_open() {
        let range = InternalRule::parse("10.1.2.3/8").unwrap();
        assert_eq!(range.to_string(), "10.0.0.0/8");
        assert!(range.opens("anything", ip("10.200.0.1")));
        assert!(range.opens("anything", ip("::ffff:10.200.0.1")));
        assert!(!range.opens("anything", ip("11.0.0.1")));
        let one = InternalRule::parse("203.0.113.80").unwrap();
        assert_eq!(one.to_string(), "203.0.113.80/32");
        assert!(one.opens("pypi.org", ip("203.0.113.80")) && !one.opens("x", ip("203.0.113.81")));
        let host = InternalRule::parse("*.corp").unwrap();
        assert!(host.opens("mirror.corp", ip("10.0.0.1")) && !host.opens("corp", ip("10.0.0.1")));
        assert!(InternalRule::parse("[fd12::1]").unwrap().opens("h", ip("fd12::1")));
        for bad in ["", "*", "10.0.0.0/33", "mirror.corp:443", "a b"] {
            assert!(InternalRule::parse(bad).is_err(), "{bad:?} should not parse");
        }
        let json = serde_json::to_string(&[range, host]).unwrap();
        assert_eq!(json, r#"["10.0.0.0/8","*.corp"]"#);
        let back: Vec<InternalRule> = serde_json::from_str(&json).unwrap();
        assert_eq!(back.len(), 2);
    }

    #[test]
    fn addresses_stand_where_they_should() {
        for (addr, expected) in [
            ("1.1.1.1", Standing::Public),
            ("2606:4700::1111", Standing::Public),
            ("10.1.2.3", Standing::Internal("a private address")),
            ("172.20.0.5", Standing::Internal("a private address")),
            ("192.168.1.1", Standing::Internal("a private address")),
            ("100.64.0.1", Standing::Internal("a shared (carrier-grade NAT) address")),
            ("203.0.113.80", Standing::Internal("a reserved address")),
            ("198.18.0.1", Standing::Internal("a reserved address")),
            ("240.0.0.1", Standing::Internal("a reserved address")),
            ("fd12::1", Standing::Internal("a private (unique local) address")),
        ] {
            assert_eq!(standing(ip(addr)), expected, "{addr}");
        }
        for addr in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "::ffff:127.0.0.1",
            "0.0.0.0",
            "::",
            "169.254.169.254",
            "::ffff:169.254.169.254",
            "fe80::1",
            "fd00:ec2::254",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(matches!(standing(ip(addr)), Standing::Closed(_)), "{addr} must be closed");
        }
    }

    #[test]
    fn the_hosts_own_addresses_and_its_gateways_are_closed() {
        // Every address of this host's interfaces, whatever its kind.
        let fib = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
        let mut last = None;
        let mut own = Vec::new();
        for line in fib.lines().map(str::trim) {
            if let Some(a) = line.strip_prefix("|-- ").and_then(|a| a.parse::<Ipv4Addr>().ok()) {
                last = Some(a);
            } else if line.contains("/32 host LOCAL")
                && let Some(a) = last
            {
                own.push(a);
            }
        }
        assert!(!own.is_empty(), "no address in /proc/net/fib_trie");
        for a in own {
            assert!(matches!(standing(IpAddr::V4(a)), Standing::Closed(_)), "{a} must be closed");
        }
        let docker0 = Ipv4Addr::new(172, 17, 0, 1);
        if UdpSocket::bind((docker0, 0)).is_ok() {
            assert_eq!(standing(IpAddr::V4(docker0)), Standing::Closed("this host's own address"));
        }
        for gateway in default_gateways() {
            assert!(matches!(standing(gateway), Standing::Closed(_)), "{gateway}");
        }
    }
}
