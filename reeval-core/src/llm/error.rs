//! Why a model request gave no usable answer ([`LlmError`]), and whose
//! failure that is: what asking again may fix (rate limits, overload, server
//! errors, timeouts, lost connections, malformed answers) is retried and is
//! the platform's; a rejected key is configuration; any other refusal is the
//! agent's.

use std::time::Duration;

use crate::turn::ErrorClass;

/// Why a model request gave no usable answer.
///
/// Messages are complete on their own (records keep only the text), so a
/// transport error's message already holds its source chain; the source is
/// kept too for callers that walk it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The API answered with an error status other than a rejected key.
    #[error("failed to get an answer: HTTP {status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The provider's `error.message`, else the tail of the body; redacted.
        message: String,
        /// How long the server asked to wait (`retry-after-ms`, `retry-after`).
        retry_after: Option<Duration>,
    },
    /// The key was rejected (401, 403). The message names where the key comes from, never the key.
    #[error("failed to authenticate with the model API (HTTP {status}): check {key_check}")]
    Auth {
        /// The HTTP status.
        status: u16,
        /// What to check, e.g. `the key in ANTHROPIC_API_KEY on the host`.
        key_check: String,
    },
    /// No answer within the request's limit.
    #[error("failed to get an answer within {:.1}s", .limit.as_secs_f64())]
    Timeout {
        /// The request's limit.
        limit: Duration,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The API could not be reached, or the connection broke.
    #[error("failed to reach {url}: {message}")]
    Network {
        /// The URL asked.
        url: String,
        /// The error and its sources, redacted.
        message: String,
        /// The transport's error.
        #[source]
        source: reqwest::Error,
    },
    /// The answer was not what was asked for (not JSON, no verdict, a bad argument).
    #[error("failed to read the answer: {message}")]
    Malformed {
        /// What was wrong.
        message: String,
        /// The parser's error, when JSON did not parse.
        #[source]
        source: Option<serde_json::Error>,
    },
    /// The model refused to answer.
    #[error("failed to get an answer: the model refused ({0})")]
    Refused(String),
    /// The answer was cut at its token limit.
    #[error("failed to get an answer: it was cut at the token limit")]
    Truncated,
}

impl LlmError {
    /// An answer that is not what was asked for.
    pub fn malformed(message: impl Into<String>) -> Self {
        LlmError::Malformed { message: message.into(), source: None }
    }

    /// `what` is not JSON.
    pub fn not_json(what: &str, error: serde_json::Error) -> Self {
        LlmError::Malformed {
            message: format!("{what} is not JSON ({error})"),
            source: Some(error),
        }
    }

    /// Whether asking again may help: rate limits, overload, server errors,
    /// timeouts, lost connections and malformed answers.
    pub fn retryable(&self) -> bool {
        match self {
            LlmError::Status { status, .. } => retryable_status(*status),
            LlmError::Timeout { .. } | LlmError::Network { .. } | LlmError::Malformed { .. } => {
                true
            }
            LlmError::Auth { .. } | LlmError::Refused(_) | LlmError::Truncated => false,
        }
    }

    /// Whose failure this is, for a harness: what asking again may fix is the
    /// platform's, a rejected key is configuration, any other refusal is the agent's.
    pub fn class(&self) -> ErrorClass {
        match self {
            LlmError::Auth { .. } => ErrorClass::Config,
            LlmError::Refused(_) | LlmError::Truncated => ErrorClass::Agent,
            LlmError::Status { status, .. } if !retryable_status(*status) => ErrorClass::Agent,
            _ => ErrorClass::Infra,
        }
    }

    /// The HTTP status, when the API answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            LlmError::Status { status, .. } | LlmError::Auth { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How long the server asked to wait before asking again.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Request timeout, conflict, rate limit, and every server error (529, Anthropic's overload, included).
fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || status >= 500
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_failures_are_classified() {
        assert!(LlmError::malformed("x").retryable());
        assert_eq!(LlmError::malformed("x").class(), ErrorClass::Infra);
        assert!(!LlmError::Refused("no".into()).retryable() && !LlmError::Truncated.retryable());
        assert_eq!(
            (LlmError::Refused("no".into()).class(), LlmError::Truncated.class()),
            (ErrorClass::Agent, ErrorClass::Agent)
        );
    }
}
