//! Credential brokering: the sandbox holds a placeholder, the gateway swaps
//! the real value in on the wire, and only where the binding says.

use std::collections::BTreeSet;

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method};
use secrecy::{ExposeSecret, SecretString};

use crate::error::GatewayError;
use crate::hosts::{is_valid_host, normalize_host};

/// One secret tied to a host and a header, optionally to a method and a path
/// prefix.
///
/// The gateway replaces a header value with the secret only when all of
/// these hold:
///
/// - the binding is active in the attempt's current [`Policy`](crate::Policy);
/// - the request goes to the bound host (any port), on the intercept or
///   base-url route (never over plain HTTP, never through a tunnel);
/// - the header is the bound header and its value is exactly the
///   placeholder, or exactly `Bearer <placeholder>` (then the value becomes
///   `Bearer <secret>`);
/// - the method, if set, is the request's, and the path prefix, if set, is a
///   prefix of the request's path, which holds no `.`/`..` segment.
///
/// Anything else (another host, another header, a value that merely contains
/// the placeholder) goes through unswapped. Debug never shows the secret.
#[derive(Debug, Clone)]
pub struct Binding {
    name: String,
    host: String,
    header: HeaderName,
    placeholder: String,
    secret: SecretString,
    method: Option<Method>,
    path_prefix: Option<String>,
}

impl Binding {
    /// A binding named `name` (for example the variable name,
    /// `ANTHROPIC_API_KEY`) that puts `secret` into `header` of requests to
    /// `host` carrying `placeholder`.
    ///
    /// # Errors
    ///
    /// [`GatewayError::Binding`] when the host, header name, placeholder or
    /// secret is unusable (the message never holds the secret).
    pub fn new(
        name: impl Into<String>,
        host: &str,
        header: &str,
        placeholder: impl Into<String>,
        secret: SecretString,
    ) -> Result<Self, GatewayError> {
        let name = name.into();
        let placeholder = placeholder.into();
        if name.is_empty() {
            return Err(GatewayError::binding("(unnamed)", "the name is empty"));
        }
        let host_n = normalize_host(host);
        if !is_valid_host(&host_n) {
            return Err(GatewayError::binding(
                &name,
                format!("{host:?} is not a host name (no port, no wildcard)"),
            ));
        }
        let header = HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
            GatewayError::binding(&name, format!("{header:?} is not a header name"))
        })?;
        if placeholder.len() < 8 || !placeholder.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(GatewayError::binding(
                &name,
                "the placeholder must be at least 8 visible ASCII characters",
            ));
        }
        let value = secret.expose_secret();
        if value.is_empty() || HeaderValue::from_str(value).is_err() || value.contains(['\r', '\n'])
        {
            return Err(GatewayError::binding(
                &name,
                "the secret is empty or not a valid HTTP header value",
            ));
        }
        if value == placeholder || value.contains(placeholder.as_str()) {
            return Err(GatewayError::binding(&name, "the secret contains its own placeholder"));
        }
        Ok(Binding {
            name,
            host: host_n,
            header,
            placeholder,
            secret,
            method: None,
            path_prefix: None,
        })
    }

    /// Swap only on requests with this method.
    #[must_use]
    pub fn method(mut self, method: Method) -> Self {
        self.method = Some(method);
        self
    }

    /// Swap only on requests whose path starts with `prefix` (for example `/v1/`).
    #[must_use]
    pub fn path_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.path_prefix = Some(prefix.into());
        self
    }

    /// The binding's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bound host (lowercase).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The bound header.
    pub fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The placeholder the sandbox sees.
    pub fn placeholder(&self) -> &str {
        &self.placeholder
    }

    fn applies(&self, host: &str, method: &Method, path: &str) -> bool {
        self.host == host
            && self.method.as_ref().is_none_or(|m| m == method)
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|prefix| path.starts_with(prefix) && !has_dot_segment(path))
    }

    /// The replacement for `value`, if it is exactly the placeholder or `Bearer <placeholder>`.
    fn replacement(&self, value: &HeaderValue) -> Option<HeaderValue> {
        let value = value.as_bytes();
        let secret = self.secret.expose_secret();
        let swapped = if value == self.placeholder.as_bytes() {
            secret.to_owned()
        } else if value
            .strip_prefix(b"Bearer ")
            .is_some_and(|rest| rest == self.placeholder.as_bytes())
        {
            format!("Bearer {secret}")
        } else {
            return None;
        };
        // Validity was checked in `new`; sensitive keeps it out of hpack tables and Debug.
        let mut header = HeaderValue::from_str(&swapped).ok()?;
        header.set_sensitive(true);
        Some(header)
    }
}

/// `.` and `..` segments, plain or percent-encoded, could step outside a path prefix.
fn has_dot_segment(path: &str) -> bool {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    path.split('/').any(|seg| {
        let lower = seg.to_ascii_lowercase().replace("%2e", ".");
        lower == "." || lower == ".."
    })
}

/// An attempt's bindings.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bindings(Vec<Binding>);

impl Bindings {
    pub(crate) fn new(bindings: Vec<Binding>) -> Result<Self, GatewayError> {
        let mut names = BTreeSet::new();
        for b in &bindings {
            if !names.insert(b.name.as_str()) {
                return Err(GatewayError::binding(&b.name, "two bindings have this name"));
            }
        }
        Ok(Bindings(bindings))
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|b| b.name.as_str())
    }

    /// Whether CONNECTs to `host` are intercepted: some binding (active now
    /// or not) targets it, so the sandbox sees the same certificate in every phase.
    pub(crate) fn intercepts(&self, host: &str) -> bool {
        self.0.iter().any(|b| b.host == host)
    }

    /// Swaps active bindings' secrets into `headers`; returns the names swapped.
    pub(crate) fn swap(
        &self,
        active: &BTreeSet<String>,
        host: &str,
        method: &Method,
        path: &str,
        headers: &mut HeaderMap,
    ) -> Vec<String> {
        let mut swapped = Vec::new();
        for binding in
            self.0.iter().filter(|b| active.contains(&b.name) && b.applies(host, method, path))
        {
            let values: Vec<HeaderValue> =
                headers.get_all(&binding.header).iter().cloned().collect();
            if !values.iter().any(|v| binding.replacement(v).is_some()) {
                continue;
            }
            headers.remove(&binding.header);
            for value in values {
                let value = binding.replacement(&value).unwrap_or(value);
                headers.append(binding.header.clone(), value);
            }
            swapped.push(binding.name.clone());
        }
        swapped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PH: &str = "reeval-placeholder-ANTHROPIC";

    fn bindings() -> Bindings {
        Bindings::new(vec![
            Binding::new(
                "A",
                "API.anthropic.com",
                "x-api-key",
                PH,
                SecretString::from("sk-real-1"),
            )
            .unwrap(),
            Binding::new(
                "O",
                "api.openai.com",
                "authorization",
                "reeval-placeholder-OPENAI",
                SecretString::from("sk-real-2"),
            )
            .unwrap()
            .method(Method::POST)
            .path_prefix("/v1/"),
        ])
        .unwrap()
    }

    fn active() -> BTreeSet<String> {
        ["A".to_owned(), "O".to_owned()].into()
    }

    #[test]
    fn swaps_exact_values_on_the_bound_host_and_header() {
        let b = bindings();
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static(PH));
        h.insert("x-other", HeaderValue::from_static(PH));
        assert_eq!(
            b.swap(&active(), "api.anthropic.com", &Method::POST, "/v1/messages", &mut h),
            vec!["A"]
        );
        assert_eq!(h["x-api-key"], "sk-real-1");
        assert_eq!(h["x-other"], PH);
    }

    #[test]
    fn never_swaps_elsewhere_or_partially() {
        let b = bindings();
        for (host, value) in [
            ("api.openai.com", PH.to_owned()),
            ("api.anthropic.com", format!("{PH}x")),
            ("api.anthropic.com", format!("Token {PH}")),
        ] {
            let mut h = HeaderMap::new();
            h.insert("x-api-key", HeaderValue::from_str(&value).unwrap());
            assert!(b.swap(&active(), host, &Method::GET, "/", &mut h).is_empty());
            assert_eq!(h["x-api-key"], value.as_str());
        }
        let mut h = HeaderMap::new();
        h.insert("x-api-key", HeaderValue::from_static(PH));
        assert!(
            b.swap(&BTreeSet::new(), "api.anthropic.com", &Method::GET, "/", &mut h).is_empty(),
            "inactive binding swapped"
        );
    }

    #[test]
    fn bearer_method_and_path_prefix() {
        let b = bindings();
        let bearer = || {
            let mut h = HeaderMap::new();
            h.insert("authorization", HeaderValue::from_static("Bearer reeval-placeholder-OPENAI"));
            h
        };
        let mut h = bearer();
        assert_eq!(
            b.swap(&active(), "api.openai.com", &Method::POST, "/v1/chat", &mut h),
            vec!["O"]
        );
        assert_eq!(h["authorization"], "Bearer sk-real-2");
        for (method, path) in [
            (Method::GET, "/v1/chat"),
            (Method::POST, "/v2/chat"),
            (Method::POST, "/v1/../admin"),
            (Method::POST, "/v1/%2E%2e/admin"),
        ] {
            let mut h = bearer();
            assert!(
                b.swap(&active(), "api.openai.com", &method, path, &mut h).is_empty(),
                "{method} {path}"
            );
        }
    }

    #[test]
    fn debug_hides_the_secret() {
        let b = bindings();
        assert!(!format!("{b:?}").contains("sk-real"));
        let err = Binding::new(
            "K",
            "h.example",
            "x-k",
            "placeholder-1",
            SecretString::from("bad\nvalue"),
        )
        .unwrap_err();
        assert!(!err.to_string().contains("bad"));
    }
}
