//! One client for model APIs: a JSON POST with the key and a timeout, the
//! answer's status classified (`error.rs`), and retries with jittered
//! exponential backoff (`retry.rs`).
//!
//! The key never leaves this file in clear: it is sent as a header, left out
//! of `Debug`, and cut from every error message (a rejected key's body is not
//! kept at all, since providers echo part of the key in it).

use std::error::Error as _;
use std::fmt;
use std::time::Duration;

use serde_json::Value;

use super::error::LlmError;
use super::retry::{RetryPolicy, retry_after};

/// The limit of one request when the caller sets none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// How much of a non-JSON error body a message keeps.
const BODY_TAIL: usize = 300;

/// How an API key is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHeader {
    /// `authorization: Bearer <key>` (OpenAI and compatible servers).
    Bearer,
    /// `x-api-key: <key>` (Anthropic).
    XApiKey,
}

/// An API key, how it is sent, and what a user should check when it is rejected.
/// The value never shows in `Debug` output or in an error.
#[derive(Clone)]
pub struct ApiKey {
    value: Option<String>,
    header: KeyHeader,
    check: String,
}

impl ApiKey {
    /// The key the host variable `env` holds; `None` (or empty) sends no key.
    /// A rejected key's error says to check the key in `env` on the host.
    pub fn from_env(header: KeyHeader, env: &str, value: Option<String>) -> Self {
        Self::new(header, value, format!("the key in {env} on the host"))
    }

    /// A key from elsewhere; `check` is what a rejected key's error tells the
    /// user to check (`OPENAI_API_KEY or the key given to ..`).
    pub fn new(header: KeyHeader, value: Option<String>, check: impl Into<String>) -> Self {
        Self { value: value.filter(|v| !v.is_empty()), header, check: check.into() }
    }

    /// Whether a key is sent at all.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKey")
            .field("header", &self.header)
            .field("check", &self.check)
            .field("set", &self.is_set())
            .finish()
    }
}

/// A client for one model API: its transport, key, request limit and retry policy.
#[derive(Debug, Clone)]
pub struct LlmClient {
    http: reqwest::Client,
    timeout: Duration,
    retry: RetryPolicy,
    key: Option<ApiKey>,
}

impl LlmClient {
    /// A client over `http` (share one to share its connection pool), with a
    /// 2-minute request limit, the default [`RetryPolicy`] and no key.
    pub fn new(http: reqwest::Client) -> Self {
        Self { http, timeout: DEFAULT_TIMEOUT, retry: RetryPolicy::default(), key: None }
    }

    /// The limit of one request, the answer's body included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The retry policy of [`LlmClient::post_retrying`].
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The key sent with every request.
    pub fn key(mut self, key: ApiKey) -> Self {
        self.key = Some(key);
        self
    }

    /// `text` with the key cut out. Every message from the API goes through here.
    pub fn redact(&self, text: &str) -> String {
        match self.key.as_ref().and_then(|k| k.value.as_ref()) {
            Some(key) => crate::secrets::redact(text, std::slice::from_ref(key)),
            None => text.to_string(),
        }
    }

    /// POSTs `body` as JSON to `url` with the key and `headers`, once, and
    /// returns the JSON answer of a 2xx.
    ///
    /// # Errors
    /// [`LlmError::Auth`] for 401 and 403, [`LlmError::Status`] for any other
    /// status outside 2xx, [`LlmError::Timeout`] or [`LlmError::Network`] when
    /// the transport fails, [`LlmError::Malformed`] when the answer is not JSON.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it drops the request.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Value, LlmError> {
        let mut request = self.http.post(url).timeout(self.timeout).json(body);
        if let Some(ApiKey { value: Some(key), header, .. }) = &self.key {
            request = match header {
                KeyHeader::Bearer => request.bearer_auth(key),
                KeyHeader::XApiKey => request.header("x-api-key", key),
            };
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.map_err(|e| self.transport_error(url, e))?;
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let text = response.text().await.map_err(|e| self.transport_error(url, e))?;
        match self.status_error(status, retry_after, &text) {
            Some(error) => Err(error),
            None => serde_json::from_str(&text).map_err(|e| LlmError::not_json("the answer", e)),
        }
    }

    /// [`LlmClient::post`], retried by the client's [`RetryPolicy`].
    ///
    /// # Errors
    /// The last try's error, as [`LlmClient::post`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it drops the request or the wait in progress.
    pub async fn post_retrying(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Result<Value, LlmError> {
        self.retry.run(|| self.post(url, headers, body)).await
    }

    /// The error a status stands for; `None` for 2xx.
    fn status_error(
        &self,
        status: u16,
        retry_after: Option<Duration>,
        body: &str,
    ) -> Option<LlmError> {
        if (200..300).contains(&status) {
            return None;
        }
        if status == 401 || status == 403 {
            // The body may echo part of the key: it is not kept.
            let key_check = match &self.key {
                Some(key) if key.is_set() => key.check.clone(),
                Some(key) => format!("{} (no key was sent)", key.check),
                None => "the key (no key was sent)".to_string(),
            };
            return Some(LlmError::Auth { status, key_check });
        }
        let message = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| crate::exec::tail(body.trim(), BODY_TAIL).to_string());
        let message = if message.trim().is_empty() {
            "the answer has no message".to_string()
        } else {
            self.redact(&message)
        };
        Some(LlmError::Status { status, message, retry_after })
    }

    /// A transport failure: a timeout, or a network error with its source chain.
    fn transport_error(&self, url: &str, e: reqwest::Error) -> LlmError {
        if e.is_timeout() {
            return LlmError::Timeout { limit: self.timeout, source: e };
        }
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message = format!("{message}: {s}");
            source = s.source();
        }
        LlmError::Network { url: self.redact(url), message: self.redact(&message), source: e }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;
    use crate::turn::ErrorClass;
    use std::ops::ControlFlow;

    const KEY: &str = "sk-test-0123456789abcdef";

    fn client() -> LlmClient {
        LlmClient::new(reqwest::Client::new()).key(ApiKey::from_env(
            KeyHeader::Bearer,
            "TEST_KEY",
            Some(KEY.into()),
        ))
    }

    #[test]
    fn statuses_are_classified() {
        let c = client();
        // (status, auth error, retryable, class)
        let table = [
            (400, false, false, ErrorClass::Agent),
            (401, true, false, ErrorClass::Config),
            (403, true, false, ErrorClass::Config),
            (404, false, false, ErrorClass::Agent),
            (408, false, true, ErrorClass::Infra),
            (409, false, true, ErrorClass::Infra),
            (413, false, false, ErrorClass::Agent),
            (422, false, false, ErrorClass::Agent),
            (429, false, true, ErrorClass::Infra),
            (500, false, true, ErrorClass::Infra),
            (502, false, true, ErrorClass::Infra),
            (503, false, true, ErrorClass::Infra),
            (529, false, true, ErrorClass::Infra),
        ];
        for (status, auth, retryable, class) in table {
            let e = c.status_error(status, None, "{}").expect("an error status");
            assert_eq!(matches!(e, LlmError::Auth { .. }), auth, "{status}");
            assert_eq!(
                (e.retryable(), e.class(), e.status()),
                (retryable, class, Some(status)),
                "{status}"
            );
        }
        assert!(
            c.status_error(200, None, "{}").is_none() && c.status_error(204, None, "").is_none()
        );
    }

    #[test]
    fn error_messages_come_from_the_provider_and_lose_the_key() {
        let c = client();
        let body = json!({"error": {"message": format!("Rate limit reached for {KEY}"), "type": "rate_limit_error"}}).to_string();
        let e = c.status_error(429, Some(Duration::from_secs(2)), &body).unwrap();
        assert_eq!(
            e.to_string(),
            "failed to get an answer: HTTP 429: Rate limit reached for [redacted]"
        );
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        let e = c.status_error(502, None, "<html>Bad Gateway</html>").unwrap();
        assert_eq!(e.to_string(), "failed to get an answer: HTTP 502: <html>Bad Gateway</html>");
        let e = c.status_error(503, None, "").unwrap();
        assert_eq!(e.to_string(), "failed to get an answer: HTTP 503: the answer has no message");
        let e = c.status_error(401, None, &format!("Incorrect API key provided: {KEY}")).unwrap();
        assert_eq!(
            e.to_string(),
            "failed to authenticate with the model API (HTTP 401): check the key in TEST_KEY on the host"
        );
        assert!(!format!("{c:?}").contains(KEY));
        let keyless = LlmClient::new(reqwest::Client::new()).key(ApiKey::from_env(
            KeyHeader::XApiKey,
            "TEST_KEY",
            Some(String::new()),
        ));
        assert!(
            keyless
                .status_error(403, None, "")
                .unwrap()
                .to_string()
                .ends_with("check the key in TEST_KEY on the host (no key was sent)")
        );
    }

    /// A loopback server answering each connection with the next of `answers`
    /// (`None`: never answer), keeping each request's head and body.
    async fn serve(answers: Vec<Option<String>>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            for answer in answers {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let request = read_request(&mut stream).await;
                kept.lock().unwrap().push(request);
                match answer {
                    Some(answer) => {
                        let _ = stream.write_all(answer.as_bytes()).await;
                        let _ = stream.shutdown().await;
                    }
                    None => held.push(stream),
                }
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        (url, seen)
    }

    async fn read_request(stream: &mut tokio::net::TcpStream) -> String {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap_or(0);
            bytes.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&bytes).to_string();
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                    })
                    .unwrap_or(0);
                if body.len() >= length {
                    return text;
                }
            }
            if n == 0 {
                return text;
            }
        }
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Option<String> {
        let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
        Some(format!(
            "HTTP/1.1 {status} Status\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{body}",
            body.len()
        ))
    }

    #[tokio::test]
    async fn a_retried_request_succeeds() {
        let (url, seen) = serve(vec![
            response(503, &[("retry-after-ms", "20")], r#"{"error":{"message":"overloaded"}}"#),
            response(500, &[], "oops"),
            response(200, &[], r#"{"answer":42}"#),
        ])
        .await;
        let c = client().retry(RetryPolicy {
            retries: 2,
            base: Duration::from_millis(1),
            max: Duration::from_millis(5),
        });
        let answer = c.post_retrying(&url, &[("x-extra", "1")], &json!({"q": "?"})).await.unwrap();
        assert_eq!(answer, json!({"answer": 42}));
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 3);
        let first = seen[0].to_ascii_lowercase();
        assert!(first.starts_with("post /v1/chat/completions http/1.1"), "{first}");
        assert!(
            first.contains(&format!("authorization: bearer {}", KEY.to_ascii_lowercase())),
            "{first}"
        );
        assert!(
            first.contains("x-extra: 1") && first.contains("content-type: application/json"),
            "{first}"
        );
        assert!(first.ends_with(r#"{"q":"?"}"#), "{first}");
    }

    #[tokio::test]
    async fn retries_run_out_and_the_last_error_is_kept() {
        let (url, seen) =
            serve(vec![response(529, &[], r#"{"error":{"message":"Overloaded"}}"#); 2]).await;
        let c = client().retry(RetryPolicy {
            retries: 1,
            base: Duration::from_millis(1),
            max: Duration::from_millis(1),
        });
        let e = c.post_retrying(&url, &[], &json!({})).await.unwrap_err();
        assert_eq!(
            (e.status(), e.to_string().as_str()),
            (Some(529), "failed to get an answer: HTTP 529: Overloaded")
        );
        assert_eq!(seen.lock().unwrap().len(), 2);
    }

    #[tokio::test]
    async fn a_rejected_key_is_not_retried_nor_shown() {
        let echo =
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}")}}).to_string();
        let (url, seen) = serve(vec![response(401, &[], &echo), response(200, &[], "{}")]).await;
        let e = client().post_retrying(&url, &[], &json!({})).await.unwrap_err();
        assert!(matches!(e, LlmError::Auth { status: 401, .. }), "{e:?}");
        assert_eq!(e.class(), ErrorClass::Config);
        assert!(e.to_string().contains("TEST_KEY") && !e.to_string().contains(KEY), "{e}");
        assert!(!format!("{e:?}").contains(KEY), "{e:?}");
        assert_eq!(seen.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_parse_failure_is_retried_as_malformed() {
        let (url, _) = serve(vec![
            response(200, &[], "not json"),
            response(200, &[], r#"{"n":1}"#),
            response(200, &[], r#"{"n":2}"#),
        ])
        .await;
        let c = client();
        let mut tries = RetryPolicy {
            retries: 2,
            base: Duration::from_millis(1),
            max: Duration::from_millis(1),
        }
        .tries();
        let mut answers = 0;
        let n = loop {
            let result = async {
                let answer = c.post(&url, &[], &json!({})).await?;
                answers += 1;
                // The first JSON answer is "wrong": parsing it fails and is retried.
                answer["n"]
                    .as_u64()
                    .filter(|n| *n == 2)
                    .ok_or_else(|| LlmError::malformed("not two"))
            }
            .await;
            if let ControlFlow::Break(done) = tries.settle(result).await {
                break done.unwrap();
            }
        };
        assert_eq!((n, answers, tries.retried()), (2, 2, 2));
    }

    #[tokio::test]
    async fn transport_failures_are_timeouts_or_network_errors() {
        let (url, _) = serve(vec![None]).await;
        let c = client()
            .timeout(Duration::from_millis(200))
            .retry(RetryPolicy { retries: 0, ..RetryPolicy::default() });
        let e = c.post_retrying(&url, &[], &json!({})).await.unwrap_err();
        assert!(matches!(e, LlmError::Timeout { .. }), "{e:?}");
        assert_eq!(e.to_string(), "failed to get an answer within 0.2s");
        assert!(e.retryable() && e.source().is_some());

        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", closed.local_addr().unwrap());
        drop(closed);
        let e = c.post(&url, &[], &json!({})).await.unwrap_err();
        assert!(matches!(e, LlmError::Network { .. }), "{e:?}");
        assert_eq!(e.class(), ErrorClass::Infra);
        let message = e.to_string();
        // The source chain is in the message: the reason is not lost when only the text is kept.
        assert!(
            message.starts_with(&format!("failed to reach {url}: "))
                && message.matches(": ").count() >= 2,
            "{message}"
        );
        assert!(e.source().is_some());
    }
}
