//! Errors of the gateway's setup: patterns, bindings, the CA, listeners and
//! configuration. Failures of single proxied requests are not errors of the
//! caller: they become responses (403, 502) and egress entries.

use std::path::PathBuf;

/// A failure to set up or change the gateway. Messages never hold a secret value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// An allowlist pattern could not be parsed.
    #[error("failed to parse host pattern {pattern:?}: {reason}")]
    Pattern {
        /// The pattern as given.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A credential binding is unusable.
    #[error("failed to bind credential {name}: {reason}")]
    Binding {
        /// The binding's name (never its value).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A policy names a binding the attempt does not have.
    #[error("failed to apply policy: no binding named {name} in this attempt (bindings: {known})")]
    UnknownBinding {
        /// The name in the policy.
        name: String,
        /// The attempt's binding names, comma separated.
        known: String,
    },
    /// The per-run CA or a leaf certificate could not be made or loaded.
    #[error("failed to {op}: {message}")]
    Certificate {
        /// What was being done.
        op: String,
        /// The cause.
        message: String,
    },
    /// An extra upstream root was not usable PEM.
    #[error("failed to add upstream root certificates: {message}")]
    Roots {
        /// The cause.
        message: String,
    },
    /// A listener could not be bound or prepared.
    #[error("failed to listen on {addr}: {source}")]
    Listen {
        /// The address or socket path.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A file could not be read or written.
    #[error("failed to {op} {path}: {source}")]
    File {
        /// What was being done (`read`, `write`).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The binary's configuration is invalid.
    /// The sandbox's relay sent no isolation report in time.
    #[error(
        "failed to verify the sandbox's isolation: its relay sent no report within {within:?} (is the gateway directory mounted, and does the image run the relay?)"
    )]
    NoReport {
        /// How long it was waited for.
        within: std::time::Duration,
    },
    /// The gateway's configuration could not be read or is invalid.
    #[error("failed to load the gateway configuration: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
}

impl GatewayError {
    pub(crate) fn pattern(pattern: &str, reason: impl Into<String>) -> Self {
        GatewayError::Pattern { pattern: pattern.to_owned(), reason: reason.into() }
    }

    pub(crate) fn binding(name: &str, reason: impl Into<String>) -> Self {
        GatewayError::Binding { name: name.to_owned(), reason: reason.into() }
    }

    pub(crate) fn certificate(op: impl Into<String>, err: impl std::fmt::Display) -> Self {
        GatewayError::Certificate { op: op.into(), message: err.to_string() }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        GatewayError::Config { message: message.into() }
    }
}

/// `err` and each of its sources, `: `-separated.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        out.push_str(": ");
        out.push_str(&e.to_string());
        cur = e.source();
    }
    out
}
