//! An HTTP proxy the gateway reaches its upstreams through, as a host whose
//! only way out is `HTTPS_PROXY=http://proxy.corp:3128` needs: TLS upstreams
//! and the sandbox's tunnels through `CONNECT host:port` to the HTTPS proxy,
//! plain HTTP as absolute-form requests to the HTTP proxy, hosts `NO_PROXY`
//! names dialled directly. What goes through is unchanged: the allowlist,
//! the address rules (on the addresses this host resolves a name to; a name
//! only the proxy resolves is the proxy's to refuse), brokering over TLS
//! verified end to end (an intercepting proxy's CA must be among the
//! gateway's roots), and the egress log.

use std::fmt;
use std::io;
use std::net::IpAddr;

use base64::Engine;
use ipnet::IpNet;
use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::GatewayError;
use crate::hosts::{normalize_host, split_host_port};

/// The most a proxy's answer to CONNECT may take before its blank line.
const MAX_ANSWER: usize = 16 * 1024;

/// One proxy: where it listens and the credentials it takes (never shown).
#[derive(Clone)]
pub struct ProxyUrl {
    host: String,
    port: u16,
    /// `Basic <base64 user:password>`.
    authorization: Option<SecretString>,
}

impl ProxyUrl {
    /// Parses `http://[user[:password]@]host[:port][/]` (the scheme may be
    /// left out; the port defaults to 80). User and password are percent-decoded.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] for another scheme (`https://`, `socks5://`)
    /// or a URL without a host; the message never holds the password.
    pub fn parse(url: &str) -> Result<Self, GatewayError> {
        let fail =
            |why: &str| GatewayError::config(format!("upstream proxy {}: {why}", redacted(url)));
        let rest = match url.trim().split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) => {
                return Err(fail(&format!("only http:// proxies are supported, not {scheme}://")));
            }
            None => url.trim(),
        };
        let authority = rest.split('/').next().unwrap_or_default();
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((user, hostport)) => (Some(user), hostport),
            None => (None, authority),
        };
        let (host, port) =
            split_host_port(hostport).ok_or_else(|| fail("the port is not a number"))?;
        if host.is_empty() {
            return Err(fail("it names no host"));
        }
        let authorization = userinfo.map(|user| {
            let (name, password) = user.split_once(':').unwrap_or((user, ""));
            let pair = format!("{}:{}", percent_decode(name), percent_decode(password));
            let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
            SecretString::from(format!("Basic {encoded}"))
        });
        Ok(ProxyUrl { host: normalize_host(host), port: port.unwrap_or(80), authorization })
    }

    /// The `Proxy-Authorization` value, if the URL held credentials.
    pub(crate) fn authorization(&self) -> Option<&SecretString> {
        self.authorization.as_ref()
    }

    /// TCP to the proxy.
    pub(crate) async fn connect(&self) -> io::Result<TcpStream> {
        let stream = TcpStream::connect((self.host.as_str(), self.port)).await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// A tunnel to `host:port` through the proxy: TCP to it, `CONNECT`, a 2xx.
    ///
    /// # Cancel safety
    ///
    /// Dropping it closes the connection to the proxy.
    pub(crate) async fn tunnel(&self, host: &str, port: u16) -> Result<TcpStream, TunnelError> {
        let mut stream = self.connect().await.map_err(TunnelError::Connect)?;
        let target =
            if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") };
        let mut ask = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(auth) = &self.authorization {
            ask.push_str(&format!("Proxy-Authorization: {}\r\n", auth.expose_secret()));
        }
        ask.push_str("\r\n");
        stream.write_all(ask.as_bytes()).await.map_err(TunnelError::Connect)?;
        // Byte by byte up to the blank line: what follows is the upstream's.
        let mut answer = Vec::with_capacity(128);
        while !answer.ends_with(b"\r\n\r\n") {
            if answer.len() >= MAX_ANSWER {
                return Err(TunnelError::Answer("its answer to CONNECT has no end".into()));
            }
            let byte = stream.read_u8().await.map_err(|e| {
                TunnelError::Answer(format!("it closed before answering CONNECT ({e})"))
            })?;
            answer.push(byte);
        }
        let text = String::from_utf8_lossy(&answer);
        let status_line = text.lines().next().unwrap_or_default().trim().to_owned();
        let status = status_line.split_whitespace().nth(1).and_then(|s| s.parse::<u16>().ok());
        match status {
            Some(200..=299) => Ok(stream),
            _ => Err(TunnelError::Refused(status_line)),
        }
    }
}

impl fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ProxyUrl({self})")
    }
}

impl fmt::Display for ProxyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = if self.authorization.is_some() { "***@" } else { "" };
        if self.host.contains(':') {
            write!(f, "http://{auth}[{}]:{}", self.host, self.port)
        } else {
            write!(f, "http://{auth}{}:{}", self.host, self.port)
        }
    }
}

/// Why a tunnel through the proxy did not open.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TunnelError {
    #[error("failed to connect to it: {0}")]
    Connect(io::Error),
    #[error("{0}")]
    Answer(String),
    #[error("it refused CONNECT: {0}")]
    Refused(String),
}

/// The proxies of the gateway's upstreams and the hosts that bypass them.
#[derive(Debug, Clone, Default)]
pub struct UpstreamProxy {
    https: Option<ProxyUrl>,
    http: Option<ProxyUrl>,
    no_proxy: Vec<NoProxy>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxy {
    /// `*`: every host directly.
    All,
    /// `example.com` or `.example.com`: the domain and its subdomains.
    Domain(String),
    /// An address or a range of them.
    Range(IpNet),
}

impl UpstreamProxy {
    /// Every upstream through the proxy at `url`.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] when `url` is not an `http://` proxy URL.
    pub fn new(url: &str) -> Result<Self, GatewayError> {
        let proxy = ProxyUrl::parse(url)?;
        Ok(UpstreamProxy { https: Some(proxy.clone()), http: Some(proxy), no_proxy: Vec::new() })
    }

    /// TLS upstreams and tunnels through `https`, plain HTTP through `http`.
    pub fn per_scheme(https: Option<ProxyUrl>, http: Option<ProxyUrl>) -> Self {
        UpstreamProxy { https, http, no_proxy: Vec::new() }
    }

    /// The proxies of an environment as curl reads them: `https_proxy` (or
    /// `HTTPS_PROXY`) for TLS and tunnels, `http_proxy` (or `HTTP_PROXY`) for
    /// plain HTTP, `no_proxy` (or `NO_PROXY`) for the hosts dialled directly.
    /// `None` when neither proxy is set.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] naming the variable whose URL is not an `http://` proxy.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, GatewayError> {
        let var = |names: [&'static str; 2]| {
            names.into_iter().find_map(|n| get(n).filter(|v| !v.trim().is_empty()).map(|v| (n, v)))
        };
        let read = |names: [&'static str; 2]| -> Result<Option<ProxyUrl>, GatewayError> {
            var(names)
                .map(|(name, value)| {
                    ProxyUrl::parse(&value)
                        .map_err(|e| GatewayError::config(format!("{name}: {e}")))
                })
                .transpose()
        };
        let https = read(["https_proxy", "HTTPS_PROXY"])?;
        let http = read(["http_proxy", "HTTP_PROXY"])?;
        if https.is_none() && http.is_none() {
            return Ok(None);
        }
        let no_proxy = var(["no_proxy", "NO_PROXY"]).map(|(_, v)| v).unwrap_or_default();
        Ok(Some(UpstreamProxy::per_scheme(https, http).no_proxy(&no_proxy)))
    }

    /// Hosts dialled directly, as `NO_PROXY` lists them: `*`, domains
    /// (`example.com` and `.example.com` both take subdomains too),
    /// addresses and ranges (`10.0.0.0/8`), comma separated; a `:port` is ignored.
    #[must_use]
    pub fn no_proxy(mut self, list: &str) -> Self {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                self.no_proxy.push(NoProxy::All);
            } else if let Ok(net) = entry.parse::<IpNet>() {
                self.no_proxy.push(NoProxy::Range(net));
            } else {
                let host = split_host_port(entry).map_or(entry, |(h, _)| h);
                let host = normalize_host(host);
                match host.parse::<IpAddr>() {
                    Ok(ip) => self.no_proxy.push(NoProxy::Range(IpNet::from(ip))),
                    Err(_) => self.no_proxy.push(NoProxy::Domain(
                        host.trim_start_matches("*.").trim_start_matches('.').to_owned(),
                    )),
                }
            }
        }
        self
    }

    fn bypassed(&self, host: &str) -> bool {
        let host = normalize_host(host);
        let ip = host.parse::<IpAddr>().ok();
        self.no_proxy.iter().any(|entry| match entry {
            NoProxy::All => true,
            NoProxy::Domain(domain) => {
                host == *domain
                    || host.strip_suffix(domain.as_str()).is_some_and(|l| l.ends_with('.'))
            }
            NoProxy::Range(net) => ip.is_some_and(|ip| net.contains(&ip)),
        })
    }

    /// The proxy for a TLS upstream or a tunnel to `host`, unless it is dialled directly.
    pub(crate) fn for_tunnel(&self, host: &str) -> Option<&ProxyUrl> {
        self.https.as_ref().filter(|_| !self.bypassed(host))
    }

    /// The proxy for a plain HTTP request to `host`, unless it is dialled directly.
    pub(crate) fn for_http(&self, host: &str) -> Option<&ProxyUrl> {
        self.http.as_ref().filter(|_| !self.bypassed(host))
    }
}

impl fmt::Display for UpstreamProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.https, &self.http) {
            (Some(s), Some(p)) if s.to_string() == p.to_string() => write!(f, "{s}"),
            (Some(s), Some(p)) => write!(f, "{s} (https), {p} (http)"),
            (Some(s), None) => write!(f, "{s} (https)"),
            (None, Some(p)) => write!(f, "{p} (http)"),
            (None, None) => f.write_str("none"),
        }
    }
}

/// `%41` → `A`; anything malformed stays as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A proxy URL with its credentials hidden, for messages.
fn redacted(url: &str) -> String {
    match url.split_once('@') {
        Some((before, after)) => match before.split_once("://") {
            Some((scheme, _)) => format!("{scheme}://***@{after}"),
            None => format!("***@{after}"),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_urls_parse_and_never_show_their_password() {
        let p = ProxyUrl::parse("http://us%65r:s3cr%40t@Proxy.Corp:3128/").unwrap();
        assert_eq!((p.host.as_str(), p.port), ("proxy.corp", 3128));
        let auth = p.authorization().unwrap().expose_secret().to_owned();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(decoded, b"user:s3cr@t");
        assert_eq!(p.to_string(), "http://***@proxy.corp:3128");
        assert!(!format!("{p:?}").contains("s3cr"));
        let bare = ProxyUrl::parse("proxy.corp").unwrap();
        assert_eq!((bare.port, bare.authorization.is_none()), (80, true));
        let e = ProxyUrl::parse("socks5://u:pw@p:1080").unwrap_err().to_string();
        assert!(e.contains("only http://") && !e.contains("pw"), "{e}");
        assert!(ProxyUrl::parse("http://:3128").is_err());
    }

    #[test]
    fn the_environment_names_the_proxies_and_the_hosts_that_bypass_them() {
        let env = |name: &str| {
            match name {
                "HTTPS_PROXY" => Some("http://secure.corp:3128"),
                "http_proxy" => Some("http://plain.corp:8080"),
                "NO_PROXY" => Some("localhost, .internal,10.0.0.0/8 ,mirror.corp:443,[fd00::1]"),
                _ => None,
            }
            .map(str::to_owned)
        };
        let p = UpstreamProxy::from_env(env).unwrap().unwrap();
        assert_eq!(p.for_tunnel("pypi.org").unwrap().to_string(), "http://secure.corp:3128");
        assert_eq!(p.for_http("pypi.org").unwrap().to_string(), "http://plain.corp:8080");
        for direct in ["localhost", "a.internal", "internal", "10.2.3.4", "mirror.corp", "fd00::1"]
        {
            assert!(p.for_tunnel(direct).is_none(), "{direct} bypasses the proxy");
        }
        assert!(p.for_tunnel("notinternal").is_some() && p.for_tunnel("11.0.0.1").is_some());
        assert!(UpstreamProxy::from_env(|_| None).unwrap().is_none());
        let bad = UpstreamProxy::from_env(|n| (n == "HTTPS_PROXY").then(|| "https://p:1".into()));
        assert!(bad.unwrap_err().to_string().contains("HTTPS_PROXY"));
        let all = UpstreamProxy::new("http://p:1").unwrap().no_proxy("*");
        assert!(all.for_tunnel("anything").is_none());
    }
}
