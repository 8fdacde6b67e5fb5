//! What a sandbox may reach, and which secrets the egress gateway swaps in.
//!
//! A sandbox has no network of its own. When an attempt needs a way out (its
//! harness calls a model API, or the environment allows hosts), the egress
//! gateway is that way: hosts outside the allowlist are refused, and a
//! brokered secret's real value is swapped in only on a request to its bound
//! host whose bound header holds exactly its placeholder. The allowlist
//! changes with the phase:
//!
//! | phase | may reach | secrets swapped |
//! |---|---|---|
//! | setup | [`crate::Environment::setup_network`], else the agent's allowlist | the agent's |
//! | turns (and the time between them) | the harness's API hosts + [`crate::Environment::allow_egress`] | the agent's |
//! | checks | [`crate::Environment::check_network`], else nothing | checks-only secrets |
//!
//! In every phase, [`crate::Environment::allow_internal`] (and the run's
//! `--allow-internal`, [`EgressSettings::allow_internal`]) lets the allowed
//! hosts resolve to the private or reserved addresses it names; the host's
//! own, its bridges' and metadata addresses stay refused. The gateway reaches
//! upstreams through [`EgressSettings::upstream_proxy`]. A failed attempt's
//! message ends with what the gateway refused (`refused.rs`).
//!
//! This module holds the policy's public types (what an eval and a harness
//! declare, the run's gateway settings) and names nothing else of the crate:
//! the environment and the harness trait use it. The gateway that enforces
//! the policy, the run's service and each attempt's way out through it, is
//! `crate::gateway`'s.

/// Where the sandbox may go through the gateway in one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Egress {
    /// Nowhere.
    None,
    /// Any public host (private and reserved addresses only where
    /// `allow_internal` opens them; never the host's own).
    Any,
    /// These hosts: exact names, `*.example.com` (subdomains only), optional `:port`.
    Allow(Vec<String>),
}

impl Egress {
    /// These hosts: exact names, `*.example.com` wildcards, optional `:port`.
    pub fn allow<I, S>(hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Egress::Allow(hosts.into_iter().map(Into::into).collect())
    }

    /// The gateway's form, with `also` added to an allowlist.
    pub(crate) fn to_gateway(&self, also: &[String]) -> Result<reeval_gateway::Egress, String> {
        match self {
            Egress::None if also.is_empty() => Ok(reeval_gateway::Egress::None),
            Egress::Any => Ok(reeval_gateway::Egress::Any),
            Egress::None => reeval_gateway::Egress::list(also.iter().map(String::as_str))
                .map_err(|e| e.to_string()),
            Egress::Allow(hosts) => {
                reeval_gateway::Egress::list(hosts.iter().chain(also).map(String::as_str))
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// How the gateway puts a secret's real value into a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerRoute {
    /// The tool speaks HTTPS to the host itself; the gateway intercepts TLS
    /// for that host only, with a per-run CA the sandbox trusts.
    Intercept,
    /// The tool takes a base URL from this environment variable; it is
    /// pointed at the gateway over plain HTTP inside the sandbox, and the
    /// gateway forwards over TLS.
    BaseUrl {
        /// The variable (`ANTHROPIC_BASE_URL`).
        env: String,
    },
}

/// A secret bound to a host and a header: the only place its real value goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broker {
    pub(crate) host: String,
    pub(crate) header: String,
    pub(crate) method: Option<String>,
    pub(crate) path_prefix: Option<String>,
    pub(crate) route: BrokerRoute,
}

impl Broker {
    /// The secret goes to `host` in `header` (`x-api-key`; for `authorization`
    /// the value may be `Bearer <placeholder>`), by TLS interception.
    pub fn header(host: impl Into<String>, header: impl Into<String>) -> Self {
        Self {
            host: host.into(),
            header: header.into(),
            method: None,
            path_prefix: None,
            route: BrokerRoute::Intercept,
        }
    }

    /// Only on requests with this method.
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into());
        self
    }

    /// Only on requests whose path starts with this.
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path_prefix = Some(prefix.into());
        self
    }

    /// By the base-url route: `env` in the sandbox points at the gateway.
    pub fn base_url_env(mut self, env: impl Into<String>) -> Self {
        self.route = BrokerRoute::BaseUrl { env: env.into() };
        self
    }

    /// The host.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The binding of secret `name` as the `reeval-gateway` binary's
    /// configuration takes it; its value comes from the variable `secretEnv`.
    pub(crate) fn config(&self, name: &str, placeholder: &str) -> serde_json::Value {
        let mut v = serde_json::json!({
            "name": name,
            "host": self.host,
            "header": self.header,
            "placeholder": placeholder,
            "secretEnv": secret_env(name),
        });
        if let Some(m) = &self.method {
            v["method"] = m.to_ascii_uppercase().into();
        }
        if let Some(p) = &self.path_prefix {
            v["pathPrefix"] = p.clone().into();
        }
        v
    }

    /// The gateway's binding of secret `name` (placeholder and value given).
    pub(crate) fn binding(
        &self,
        name: &str,
        placeholder: &str,
        value: reeval_gateway::SecretString,
    ) -> Result<reeval_gateway::Binding, String> {
        let mut b =
            reeval_gateway::Binding::new(name, &self.host, &self.header, placeholder, value)
                .map_err(|e| e.to_string())?;
        if let Some(m) = &self.method {
            let method = http_method(m)?;
            b = b.method(method);
        }
        if let Some(p) = &self.path_prefix {
            b = b.path_prefix(p.clone());
        }
        Ok(b)
    }
}

/// The variable of a gateway container that holds secret `name`'s value.
pub(crate) fn secret_env(name: &str) -> String {
    format!("REEVAL_GW_SECRET_{name}")
}

fn http_method(m: &str) -> Result<reeval_gateway::Method, String> {
    reeval_gateway::Method::from_bytes(m.to_ascii_uppercase().as_bytes())
        .map_err(|_| format!("`{m}` is not an HTTP method"))
}

/// What a harness's agent needs to reach: its API hosts, and how each of its
/// credentials is brokered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HarnessEgress {
    /// Hosts the agent reaches (the model API, the CLI's own services).
    pub hosts: Vec<String>,
    /// Per credential (a variable of `Harness::credentials`), where it goes.
    pub brokers: Vec<(String, Broker)>,
}

impl HarnessEgress {
    /// Whether the agent needs no way out.
    pub fn is_empty(&self) -> bool {
        self.hosts.is_empty() && self.brokers.is_empty()
    }
}

/// Gateway settings of a run. `resolve`, `extra_roots_pem` and
/// `allow_private_upstreams` are for tests: they let a test stand up a fake
/// `api.anthropic.com` on 127.0.0.1.
#[derive(Debug, Clone, Default)]
pub struct EgressSettings {
    /// Extra PEM roots the gateway trusts for upstreams (a test CA).
    pub extra_roots_pem: Vec<String>,
    /// Host names mapped to addresses, like `curl --resolve` (tests only).
    pub resolve: Vec<(String, std::net::SocketAddr)>,
    /// Let upstreams resolve to any address, loopback included (tests only).
    pub allow_private_upstreams: bool,
    /// Private or reserved addresses every attempt of the run may reach
    /// (`--allow-internal`, `REEVAL_ALLOW_INTERNAL`, `allow_internal` in
    /// `reeval.toml`): host patterns (`*.corp`) or ranges (`10.0.0.0/8`),
    /// added to each eval's own [`crate::Environment::allow_internal`].
    pub allow_internal: Vec<String>,
    /// How the gateway reaches its upstreams: through the runner's
    /// `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY` by default (`--upstream-proxy`,
    /// `REEVAL_UPSTREAM_PROXY`, `upstream_proxy` in `reeval.toml`).
    pub upstream_proxy: UpstreamProxySetting,
    /// The `reeval-gateway` executable gateway containers run (remote engines);
    /// by default `REEVAL_GATEWAY_BIN`, one beside this program, or one on `PATH`.
    pub gateway_binary: Option<std::path::PathBuf>,
}

/// How the run's gateway reaches its upstreams.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum UpstreamProxySetting {
    /// Through the proxies of the runner's environment (`HTTPS_PROXY`,
    /// `HTTP_PROXY`, `NO_PROXY`, also lowercase); directly when none is set.
    #[default]
    Environment,
    /// Directly, whatever the environment says (`none`).
    Direct,
    /// Through this `http://` proxy, for TLS and plain HTTP alike (the
    /// environment's `NO_PROXY` still names the hosts dialled directly).
    Url(String),
}

impl UpstreamProxySetting {
    /// `none` (or `direct`), else a proxy URL.
    pub fn parse(text: &str) -> Self {
        match text.trim() {
            "none" | "direct" => UpstreamProxySetting::Direct,
            url => UpstreamProxySetting::Url(url.to_string()),
        }
    }

    /// The gateway's proxy, `env` giving the runner's variables.
    ///
    /// # Errors
    ///
    /// A message naming the variable or setting whose URL is not an `http://` proxy.
    pub fn resolve(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Option<reeval_gateway::UpstreamProxy>, String> {
        let no_proxy = || ["no_proxy", "NO_PROXY"].into_iter().find_map(&env).unwrap_or_default();
        match self {
            UpstreamProxySetting::Environment => {
                reeval_gateway::UpstreamProxy::from_env(&env).map_err(|e| e.to_string())
            }
            UpstreamProxySetting::Direct => Ok(None),
            UpstreamProxySetting::Url(url) => reeval_gateway::UpstreamProxy::new(url)
                .map(|p| Some(p.no_proxy(&no_proxy())))
                .map_err(|e| e.to_string()),
        }
    }
}

/// Checks an `allow_internal` entry: a host pattern without a port, an
/// address, or a range.
///
/// # Errors
///
/// What is wrong with it.
pub fn check_internal(entry: &str) -> std::result::Result<(), String> {
    reeval_gateway::InternalRule::parse(entry).map(drop).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_lists_merge_and_patterns_are_checked() {
        assert!(matches!(Egress::None.to_gateway(&[]), Ok(reeval_gateway::Egress::None)));
        let g = Egress::allow(["pypi.org"]).to_gateway(&["api.anthropic.com".into()]).unwrap();
        assert!(
            g.allows("pypi.org", 443)
                && g.allows("api.anthropic.com", 443)
                && !g.allows("example.com", 443)
        );
        let g = Egress::None.to_gateway(&["*.example.com".into()]).unwrap();
        assert!(g.allows("a.example.com", 443) && !g.allows("example.com", 443));
        assert!(Egress::allow(["bad host!"]).to_gateway(&[]).is_err());
        assert!(matches!(
            Egress::Any.to_gateway(&["x.com".into()]),
            Ok(reeval_gateway::Egress::Any)
        ));
    }

    #[test]
    fn brokers_make_bindings() {
        let b = Broker::header("api.example.com", "x-api-key").method("post").path_prefix("/v1/");
        assert!(b.binding("K", "reeval-placeholder-K", "secret-value".to_string().into()).is_ok());
        assert!(
            Broker::header("api.example.com", "x-api-key")
                .method("no way")
                .binding("K", "p", "v".to_string().into())
                .is_err()
        );
    }
}
