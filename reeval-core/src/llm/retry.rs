//! Retries with jittered exponential backoff that honour the server's
//! `retry-after-ms` / `retry-after`: [`RetryPolicy`] for a request run as a
//! closure, [`Tries`] for a caller that writes its own loop.

use std::ops::ControlFlow;
use std::time::Duration;

use super::error::LlmError;

/// The longest wait a server's `retry-after` can ask for; a longer one is cut to this.
pub const RETRY_AFTER_CAP: Duration = Duration::from_secs(60);

/// How often and how long to wait before asking again.
///
/// Retry `n` (0-based) waits what the server asked for (capped at
/// [`RETRY_AFTER_CAP`]), else a random time in the upper half of
/// `base * 2^n` capped at `max`: the jitter keeps clients that failed together
/// from retrying together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first try.
    pub retries: u32,
    /// The backoff ceiling of the first retry.
    pub base: Duration,
    /// The highest backoff ceiling.
    pub max: Duration,
}

impl Default for RetryPolicy {
    /// 2 retries, 1 s doubling to 32 s.
    fn default() -> Self {
        Self { retries: 2, base: Duration::from_secs(1), max: Duration::from_secs(32) }
    }
}

impl RetryPolicy {
    /// The backoff ceiling of retry `n`: `base * 2^n`, at most `max`.
    pub fn ceiling(&self, n: u32) -> Duration {
        self.base.saturating_mul(2u32.saturating_pow(n)).min(self.max)
    }

    /// How long to wait before retry `n`: the server's `hint` capped at
    /// [`RETRY_AFTER_CAP`], else a random time within `[ceiling / 2, ceiling]`.
    pub fn delay(&self, n: u32, hint: Option<Duration>) -> Duration {
        self.delay_at(n, hint, random_unit())
    }

    /// [`RetryPolicy::delay`] with the random draw `unit` (in `[0, 1)`) given.
    fn delay_at(&self, n: u32, hint: Option<Duration>, unit: f64) -> Duration {
        if let Some(hint) = hint {
            return hint.min(RETRY_AFTER_CAP);
        }
        let ceiling = self.ceiling(n);
        let half = ceiling / 2;
        half + (ceiling - half).mul_f64(unit.clamp(0.0, 1.0))
    }

    /// The tries of one request under this policy, for a caller that writes
    /// its own loop (one that counts usage or parses the answer in it, say).
    pub fn tries(&self) -> Tries {
        Tries { policy: *self, retried: 0 }
    }

    /// Runs `op` until it succeeds, fails in a way asking again cannot fix
    /// ([`LlmError::retryable`]), or has used its retries; waits
    /// [`RetryPolicy::delay`] between tries.
    ///
    /// # Errors
    /// The last try's error.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it drops the try or the wait in progress.
    pub async fn run<T, F>(&self, mut op: impl FnMut() -> F) -> Result<T, LlmError>
    where
        F: Future<Output = Result<T, LlmError>>,
    {
        let mut tries = self.tries();
        loop {
            if let ControlFlow::Break(done) = tries.settle(op().await).await {
                return done;
            }
        }
    }
}

/// The tries of one request: [`Tries::settle`] each one's result.
///
/// A loop of its own rather than a closure handed to [`RetryPolicy::run`]
/// lets the caller borrow what it likes (`&mut` counters) across tries.
#[derive(Debug, Clone)]
pub struct Tries {
    policy: RetryPolicy,
    retried: u32,
}

impl Tries {
    /// Settles one try: `Break` with its result when it succeeded, when asking
    /// again cannot help, or when the retries are used up; otherwise waits
    /// [`RetryPolicy::delay`] and returns `Continue`: try again.
    ///
    /// # Errors
    /// None of its own: a `Break` gives back the try's error when the try failed.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it drops the wait.
    pub async fn settle<T>(
        &mut self,
        result: Result<T, LlmError>,
    ) -> ControlFlow<Result<T, LlmError>> {
        match result {
            Err(e) if e.retryable() && self.retried < self.policy.retries => {
                tokio::time::sleep(self.policy.delay(self.retried, e.retry_after())).await;
                self.retried += 1;
                ControlFlow::Continue(())
            }
            done => ControlFlow::Break(done),
        }
    }

    /// How many retries were made so far.
    pub fn retried(&self) -> u32 {
        self.retried
    }
}

/// A random number in `[0, 1)`. `RandomState` is seeded from the OS and differs
/// per instance: enough to spread retries, without a dependency.
fn random_unit() -> f64 {
    use std::hash::BuildHasher;
    let bits =
        std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// `retry-after-ms` (milliseconds, as OpenAI sends) or `retry-after` (seconds),
/// when the server sent one; an HTTP-date is not read.
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    // Too large for a Duration is still "a long time": the cap applies later.
    let duration = |secs: f64| Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX);
    number("retry-after-ms")
        .map(|ms| duration(ms / 1000.0))
        .or_else(|| number("retry-after").map(duration))
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn retry_after_reads_milliseconds_then_seconds() {
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            h
        };
        assert_eq!(retry_after(&headers(&[("retry-after", "2")])), Some(Duration::from_secs(2)));
        assert_eq!(
            retry_after(&headers(&[("retry-after", " 1.5 ")])),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250"), ("retry-after", "9")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "soon"), ("retry-after", "3")])),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")])),
            None
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")])), None);
        assert_eq!(retry_after(&headers(&[])), None);
        // A huge hint is read, then capped when waited.
        let huge = retry_after(&headers(&[("retry-after", "1e300")]));
        assert_eq!(RetryPolicy::default().delay(0, huge), RETRY_AFTER_CAP);
        assert_eq!(
            RetryPolicy::default().delay(0, Some(Duration::from_secs(120))),
            RETRY_AFTER_CAP
        );
        assert_eq!(
            RetryPolicy::default().delay(5, Some(Duration::from_millis(10))),
            Duration::from_millis(10)
        );
    }

    #[test]
    fn backoff_doubles_with_jitter_up_to_its_cap() {
        let p = RetryPolicy {
            retries: 9,
            base: Duration::from_millis(500),
            max: Duration::from_secs(8),
        };
        let ceilings: Vec<u64> = (0..7).map(|n| p.ceiling(n).as_millis() as u64).collect();
        assert_eq!(ceilings, [500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(p.ceiling(u32::MAX), Duration::from_secs(8));
        for n in 0..7 {
            let ceiling = p.ceiling(n);
            assert_eq!(p.delay_at(n, None, 0.0), ceiling / 2);
            assert_eq!(p.delay_at(n, None, 1.0), ceiling);
            for _ in 0..50 {
                let d = p.delay(n, None);
                assert!(
                    d >= ceiling / 2 && d <= ceiling,
                    "retry {n}: {d:?} outside [{:?}, {ceiling:?}]",
                    ceiling / 2
                );
            }
        }
        // The draws differ: two clients that failed together do not retry together.
        let draws: std::collections::BTreeSet<Duration> =
            (0..20).map(|_| p.delay(3, None)).collect();
        assert!(draws.len() > 1, "{draws:?}");
    }
}
