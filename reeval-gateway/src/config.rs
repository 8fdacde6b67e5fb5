//! The `reeval-gateway` binary's configuration file (JSON, camelCase keys).
//! The README shows a full example.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use http::Method;
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};

use crate::broker::Binding;
use crate::ca::CertificateAuthority;
use crate::error::GatewayError;
use crate::gateway::GatewayOptions;
use crate::rules::Policy;
use crate::upstream_proxy::{ProxyUrl, UpstreamProxy};

/// Where the binary listens: `tcp:IP:PORT` or `unix:/path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// A TCP address (port 0 picks one; the binary prints the one it got).
    Tcp(SocketAddr),
    /// A unix socket path.
    Unix(PathBuf),
}

impl FromStr for ListenAddr {
    type Err = GatewayError;

    fn from_str(s: &str) -> Result<Self, GatewayError> {
        if let Some(addr) = s.strip_prefix("tcp:") {
            addr.parse()
                .map(ListenAddr::Tcp)
                .map_err(|_| GatewayError::config(format!("{s:?}: expected tcp:IP:PORT")))
        } else if let Some(path) = s.strip_prefix("unix:") {
            if path.is_empty() {
                return Err(GatewayError::config(format!("{s:?}: expected unix:/path")));
            }
            Ok(ListenAddr::Unix(PathBuf::from(path)))
        } else {
            Err(GatewayError::config(format!("{s:?}: expected tcp:IP:PORT or unix:/path")))
        }
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::Tcp(addr) => write!(f, "tcp:{addr}"),
            ListenAddr::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

impl<'de> Deserialize<'de> for ListenAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// The configuration file.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The proxy listener.
    pub listen: ListenAddr,
    /// A control listener that takes `PUT /policy` (a [`Policy`] as JSON)
    /// and answers `GET /policy` and `GET /counters`.
    #[serde(default)]
    pub control: Option<ListenAddr>,
    /// The CA; generated when absent.
    #[serde(default)]
    pub ca: CaConfig,
    /// The starting policy (default: no egress).
    #[serde(default)]
    pub policy: Policy,
    /// Credential bindings.
    #[serde(default)]
    pub bindings: Vec<BindingConfig>,
    /// PEM files of extra upstream roots.
    #[serde(default)]
    pub extra_root_files: Vec<PathBuf>,
    /// Whether webpki-roots are trusted upstream (default true).
    #[serde(default = "yes")]
    pub webpki_roots: bool,
    /// **Test-only** host → address overrides.
    #[serde(default)]
    pub resolve: Vec<ResolveConfig>,
    /// Upstream connect timeout in milliseconds (default 10000).
    #[serde(default)]
    pub connect_timeout_ms: Option<u64>,
    /// **Test-only**: let the sandbox reach every address (default false).
    #[serde(default)]
    pub allow_private_upstreams: bool,
    /// Reach upstreams through an HTTP proxy (default: directly). A proxy
    /// URL may hold credentials: keep the file readable by the gateway only.
    #[serde(default)]
    pub upstream_proxy: Option<UpstreamProxyConfig>,
    /// Read policies from stdin, one JSON object a line, each acknowledged on
    /// stdout as `{"policyApplied":N}` (the runner attached to a gateway container).
    #[serde(default)]
    pub policy_from_stdin: bool,
}

fn yes() -> bool {
    true
}

/// The CA: both files to load one made by `reeval-gateway gen-ca`, or
/// neither to generate one (its certificate written to `writeCertTo`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CaConfig {
    /// The CA certificate PEM.
    #[serde(default)]
    pub cert_file: Option<PathBuf>,
    /// The CA key PEM.
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// Where to write the certificate PEM of a generated CA.
    #[serde(default)]
    pub write_cert_to: Option<PathBuf>,
}

/// One credential binding. Give the secret as `secretEnv` (the name of an
/// environment variable of the gateway process; preferred, so the value is
/// never on disk) or `secret`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingConfig {
    /// The binding's name.
    pub name: String,
    /// The bound host.
    pub host: String,
    /// The bound header.
    pub header: String,
    /// The placeholder the sandbox holds.
    pub placeholder: String,
    /// The environment variable holding the secret.
    #[serde(default)]
    pub secret_env: Option<String>,
    /// The secret itself.
    #[serde(default)]
    pub secret: Option<SecretString>,
    /// Swap only for this method.
    #[serde(default)]
    pub method: Option<String>,
    /// Swap only under this path prefix.
    #[serde(default)]
    pub path_prefix: Option<String>,
}

/// The upstream proxy: `{"https": "http://proxy:3128", "http": "…", "noProxy": "a.corp,10.0.0.0/8"}`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamProxyConfig {
    /// The proxy of TLS upstreams and tunnels (`CONNECT`).
    #[serde(default)]
    pub https: Option<SecretString>,
    /// The proxy of plain HTTP upstreams (absolute-form requests).
    #[serde(default)]
    pub http: Option<SecretString>,
    /// Hosts dialled directly, as `NO_PROXY` lists them.
    #[serde(default)]
    pub no_proxy: String,
}

impl UpstreamProxyConfig {
    fn proxy(&self) -> Result<UpstreamProxy, GatewayError> {
        let url = |u: &Option<SecretString>| {
            u.as_ref().map(|u| ProxyUrl::parse(u.expose_secret())).transpose()
        };
        Ok(UpstreamProxy::per_scheme(url(&self.https)?, url(&self.http)?).no_proxy(&self.no_proxy))
    }
}

/// A test-only resolve override.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveConfig {
    /// The host name.
    pub host: String,
    /// Where connections to it go.
    pub addr: SocketAddr,
}

impl Config {
    /// Reads and parses a configuration file.
    ///
    /// # Errors
    ///
    /// [`GatewayError::File`] if it cannot be read, [`GatewayError::Config`]
    /// if it is not a valid configuration.
    pub fn load(path: &Path) -> Result<Self, GatewayError> {
        let text = std::fs::read_to_string(path).map_err(|source| GatewayError::File {
            op: "read",
            path: path.to_owned(),
            source,
        })?;
        Config::from_json(&text)
    }

    /// Parses a configuration.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] when it is not valid JSON for a configuration.
    pub fn from_json(text: &str) -> Result<Self, GatewayError> {
        serde_json::from_str(text).map_err(|e| GatewayError::config(e.to_string()))
    }

    /// The gateway options: loads or generates the CA (writing its
    /// certificate if asked) and reads the extra roots.
    ///
    /// # Errors
    ///
    /// [`GatewayError::File`], [`GatewayError::Certificate`] or
    /// [`GatewayError::Config`] for an unreadable file, a bad CA or a
    /// half-given CA.
    pub fn gateway_options(&self) -> Result<GatewayOptions, GatewayError> {
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|source| GatewayError::File {
                op: "read",
                path: path.clone(),
                source,
            })
        };
        let ca = match (&self.ca.cert_file, &self.ca.key_file) {
            (Some(cert), Some(key)) => CertificateAuthority::from_pem(&read(cert)?, &read(key)?)?,
            (None, None) => CertificateAuthority::generate()?,
            _ => {
                return Err(GatewayError::config(
                    "ca: give both certFile and keyFile, or neither to generate a CA",
                ));
            }
        };
        if let Some(path) = &self.ca.write_cert_to {
            std::fs::write(path, ca.cert_pem()).map_err(|source| GatewayError::File {
                op: "write",
                path: path.clone(),
                source,
            })?;
        }
        let proxy = self.upstream_proxy.as_ref().map(UpstreamProxyConfig::proxy).transpose()?;
        let mut options = GatewayOptions::default()
            .ca(ca)
            .webpki_roots(self.webpki_roots)
            .allow_private_upstreams(self.allow_private_upstreams)
            .upstream_proxy(proxy);
        for path in &self.extra_root_files {
            options = options.extra_root_pem(read(path)?);
        }
        for r in &self.resolve {
            options = options.resolve(r.host.clone(), r.addr);
        }
        if let Some(ms) = self.connect_timeout_ms {
            options = options.connect_timeout(Duration::from_millis(ms));
        }
        Ok(options)
    }

    /// The bindings, secrets read from the environment where named.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Config`] when a binding gives neither or both of
    /// `secret` and `secretEnv`, the variable is unset, or the method is
    /// invalid; [`GatewayError::Binding`] when the binding is unusable.
    pub fn bindings(&self) -> Result<Vec<Binding>, GatewayError> {
        self.bindings
            .iter()
            .map(|b| {
                let secret = match (&b.secret_env, &b.secret) {
                    (Some(var), None) => match std::env::var(var) {
                        Ok(v) => SecretString::from(v),
                        Err(_) => {
                            return Err(GatewayError::config(format!(
                                "binding {}: environment variable {var} is not set",
                                b.name
                            )));
                        }
                    },
                    (None, Some(secret)) => SecretString::from(secret.expose_secret()),
                    _ => {
                        return Err(GatewayError::config(format!(
                            "binding {}: give exactly one of secretEnv and secret",
                            b.name
                        )));
                    }
                };
                let mut binding = Binding::new(
                    b.name.clone(),
                    &b.host,
                    &b.header,
                    b.placeholder.clone(),
                    secret,
                )?;
                if let Some(m) = &b.method {
                    let method = Method::from_bytes(m.as_bytes()).map_err(|_| {
                        GatewayError::config(format!("binding {}: {m:?} is not a method", b.name))
                    })?;
                    binding = binding.method(method);
                }
                if let Some(prefix) = &b.path_prefix {
                    binding = binding.path_prefix(prefix.clone());
                }
                Ok(binding)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_never_shows_secrets() {
        let config = Config::from_json(
            r#"{
              "listen": "tcp:127.0.0.1:0",
              "control": "unix:/tmp/ctl.sock",
              "policy": {"egress": ["api.example.com"], "activeBindings": ["K"]},
              "bindings": [{"name": "K", "host": "api.example.com", "header": "x-api-key",
                            "placeholder": "reeval-placeholder-K", "secret": "sk-config-secret"}]
            }"#,
        )
        .unwrap();
        assert_eq!(config.listen, ListenAddr::Tcp("127.0.0.1:0".parse().unwrap()));
        assert!(!format!("{config:?}").contains("sk-config-secret"));
        let bindings = config.bindings().unwrap();
        assert!(!format!("{bindings:?}").contains("sk-config-secret"));
        assert!(Config::from_json(r#"{"listen": "127.0.0.1:1"}"#).is_err());
        let missing = Config::from_json(
            r#"{"listen": "tcp:127.0.0.1:0", "bindings": [{"name": "K", "host": "h.example", "header": "x", "placeholder": "placeholder", "secretEnv": "REEVAL_GATEWAY_TEST_UNSET_VAR"}]}"#,
        )
        .unwrap();
        assert!(
            missing.bindings().unwrap_err().to_string().contains("REEVAL_GATEWAY_TEST_UNSET_VAR")
        );
        let proxied = Config::from_json(
            r#"{"listen": "tcp:127.0.0.1:0", "upstreamProxy": {"https": "http://u:pw-secret@p.corp:3128", "noProxy": "a.corp"}}"#,
        )
        .unwrap();
        assert!(!format!("{proxied:?}").contains("pw-secret"));
        assert!(proxied.gateway_options().is_ok());
        let bad = Config::from_json(
            r#"{"listen": "tcp:127.0.0.1:0", "upstreamProxy": {"http": "socks5://p:1"}}"#,
        )
        .unwrap();
        assert!(bad.gateway_options().unwrap_err().to_string().contains("only http://"));
    }
}
