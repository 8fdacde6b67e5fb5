//! Who is to blame for a failed turn, from the CLI's exit code and output:
//! rate limits, overload, provider 5xx and network loss are the platform's
//! (infra, retried); missing or rejected credentials are the run's
//! configuration; anything else is the agent's own.

use std::sync::LazyLock;

use reeval_core::turn::ErrorClass;
use regex::Regex;

use super::report::Failure;

static CONFIG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        // A bare number or word anywhere (a test's output) must not count: only a status in an error's words.
        r"(?i)(status|http/?[0-9.]*|error|code)[ :=]{0,3}\b(401|403)\b|unauthori[sz]ed|\b403 forbidden\b|not logged in|log ?in required|please (run )?(/login|log ?in)",
        r"|invalid[ _-]?(x-)?api[ _-]?key|api[ _-]?key (is )?(missing|invalid|not (set|found|valid))|(missing|no) api[ _-]?key",
        r"|authentication[ _]?(error|failed|required)|permission_error|auth(entication)? method|credentials? (are |is )?(missing|invalid|rejected)",
    ))
    .expect("valid regex")
});

static INFRA: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?i)(status|http/?[0-9.]*|error|code)[ :=]{0,3}\b(429|500|502|503|504|529)\b|rate[ _-]?limit|too many requests|overloaded|resource[ _]exhausted|quota exceeded|exceeded your (current )?quota",
        r"|service unavailable|internal server error|bad gateway|gateway time-?out|upstream connect error",
        r"|econnreset|econnrefused|etimedout|enotfound|eai_again|socket hang up|fetch failed|network (error|is unreachable)",
        r"|connection (reset|refused|closed|error|lost)|stream disconnected|error sending request",
    ))
    .expect("valid regex")
});

/// The class an HTTP status implies, if any.
pub fn from_status(status: u16) -> Option<ErrorClass> {
    match status {
        401 | 403 => Some(ErrorClass::Config),
        408 | 429 | 500..=599 => Some(ErrorClass::Infra),
        _ => None,
    }
}

/// The class an error message implies, if any (credentials are checked first).
pub fn from_text(text: &str) -> Option<ErrorClass> {
    if CONFIG.is_match(text) {
        Some(ErrorClass::Config)
    } else if INFRA.is_match(text) {
        Some(ErrorClass::Infra)
    } else {
        None
    }
}

/// Classifies a failed turn: the CLI's exit code when it has a meaning of its
/// own, then the reported status, the reported message, then stderr; else the agent.
pub fn classify(
    by_exit: Option<ErrorClass>,
    failure: Option<&Failure>,
    stderr: &str,
) -> ErrorClass {
    by_exit
        .or_else(|| failure.and_then(|f| f.status).and_then(from_status))
        .or_else(|| failure.and_then(|f| from_text(&f.message)))
        .or_else(|| from_text(stderr))
        .unwrap_or(ErrorClass::Agent)
}

#[cfg(test)]
mod tests {

    #[test]
    fn numbers_and_words_in_ordinary_output_are_the_agents() {
        for text in [
            "FAILED test_api.py::test_status - assert 500 == 200",
            "the page said forbidden",
            "renamed quota.py",
            "expected 401 got 200",
        ] {
            assert_eq!(from_text(text), None, "{text}");
        }
        assert_eq!(from_text("API Error: 529 overloaded"), Some(ErrorClass::Infra));
        assert_eq!(from_text("Request failed with status code 429"), Some(ErrorClass::Infra));
        assert_eq!(from_text("HTTP 401: invalid x-api-key"), Some(ErrorClass::Config));
    }

    use super::*;

    fn f(message: &str, status: Option<u16>) -> Failure {
        Failure { message: message.into(), status }
    }

    #[test]
    fn provider_trouble_is_infra() {
        for m in [
            "API Error: 429 {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}",
            "exceeded retry limit, last status: 429 Too Many Requests",
            "Overloaded",
            "API Error: 529",
            "[API Error: got status: 503 Service Unavailable]",
            "stream disconnected before completion: error sending request",
            "TypeError: fetch failed (ECONNRESET)",
            "RESOURCE_EXHAUSTED: Quota exceeded",
        ] {
            assert_eq!(classify(None, Some(&f(m, None)), ""), ErrorClass::Infra, "{m}");
        }
        assert_eq!(classify(None, Some(&f("boom", Some(500))), ""), ErrorClass::Infra);
    }

    #[test]
    fn credentials_are_config() {
        for m in [
            "Not logged in · Please run /login",
            "Invalid API key · Fix external API key",
            "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header",
            "Error: Authentication required. Please run 'cursor-agent login' first",
            "No API key found for anthropic",
        ] {
            assert_eq!(classify(None, Some(&f(m, None)), ""), ErrorClass::Config, "{m}");
        }
        assert_eq!(classify(None, Some(&f("x", Some(403))), ""), ErrorClass::Config);
        assert_eq!(classify(Some(ErrorClass::Config), None, ""), ErrorClass::Config);
        assert_eq!(
            classify(None, None, "Please set an Auth method in your settings.json"),
            ErrorClass::Config
        );
    }

    #[test]
    fn anything_else_is_the_agents() {
        assert_eq!(classify(None, Some(&f("error_max_turns", None)), ""), ErrorClass::Agent);
        assert_eq!(classify(None, None, "Traceback: ValueError in 2500 lines"), ErrorClass::Agent);
    }
}
