//! The reward a Harbor verifier leaves, read as Harbor 0.26 reads it
//! (`harbor/verifier/verifier.py`): `reward.json` wins when present (an
//! object of finite numbers, every key kept); else `reward.txt`, the whole
//! file parsed as a float (surrounding whitespace allowed), kept as
//! `{"reward": x}`. Neither, or an empty one, is no reward at all.

use std::collections::BTreeMap;

/// Where the verifier writes its reward.
pub const REWARD_JSON: &str = "/logs/verifier/reward.json";
/// The plain-number form.
pub const REWARD_TXT: &str = "/logs/verifier/reward.txt";

/// Why there is no reward.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewardError {
    /// Neither file exists (Harbor's `RewardFileNotFoundError`).
    #[error("no reward file found at {REWARD_TXT} or {REWARD_JSON}")]
    NotFound,
    /// The file is empty (`RewardFileEmptyError`).
    #[error("the reward file {0} is empty")]
    Empty(&'static str),
    /// The file does not hold a reward (`VerifierOutputParseError`).
    #[error("failed to parse the reward file {file}: {message}")]
    Parse {
        /// The file.
        file: &'static str,
        /// Why.
        message: String,
    },
}

/// The reward from the two files' contents (`None`: the file does not exist).
///
/// # Errors
/// A [`RewardError`] as Harbor raises them.
pub fn parse(
    json: Option<&[u8]>,
    txt: Option<&[u8]>,
) -> Result<BTreeMap<String, f64>, RewardError> {
    if let Some(bytes) = json {
        return parse_json(bytes);
    }
    match txt {
        Some(bytes) => parse_txt(bytes),
        None => Err(RewardError::NotFound),
    }
}

fn parse_json(bytes: &[u8]) -> Result<BTreeMap<String, f64>, RewardError> {
    let fail = |message: String| RewardError::Parse { file: REWARD_JSON, message };
    if bytes.is_empty() {
        return Err(RewardError::Empty(REWARD_JSON));
    }
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| fail(format!("not JSON: {e}")))?;
    let serde_json::Value::Object(map) = value else {
        return Err(fail(format!("expected an object of numbers, got {value}")));
    };
    map.into_iter()
        .map(|(key, v)| {
            // Python's bool is an int: Harbor takes `true` as 1.
            let n = match &v {
                serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
                serde_json::Value::Number(n) => n.as_f64(),
                _ => None,
            };
            match n {
                Some(n) if n.is_finite() => Ok((key, n)),
                Some(_) => Err(fail(format!("non-finite reward {v} for {key:?}"))),
                None => Err(fail(format!("non-numeric reward {v} for {key:?}"))),
            }
        })
        .collect()
}

fn parse_txt(bytes: &[u8]) -> Result<BTreeMap<String, f64>, RewardError> {
    let fail = |message: String| RewardError::Parse { file: REWARD_TXT, message };
    if bytes.is_empty() {
        return Err(RewardError::Empty(REWARD_TXT));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| fail("not UTF-8".into()))?;
    let trimmed = text.trim();
    let value = python_float(trimmed)
        .ok_or_else(|| fail(format!("could not convert {trimmed:?} to a float")))?;
    if !value.is_finite() {
        return Err(fail(format!("non-finite reward {trimmed}")));
    }
    Ok(BTreeMap::from([("reward".to_string(), value)]))
}

/// Python's `float(str)` for what a reward file holds: decimal and exponent
/// forms, `_` between digits, `inf`/`nan` (refused later as non-finite).
fn python_float(s: &str) -> Option<f64> {
    let bytes = s.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'_' {
            let digit =
                |j: Option<usize>| j.and_then(|j| bytes.get(j)).is_some_and(u8::is_ascii_digit);
            if !digit(i.checked_sub(1)) || !digit(Some(i + 1)) {
                return None;
            }
        }
    }
    s.replace('_', "").parse().ok()
}

/// Whether a reward passes: its `reward` key when it has one, else every key,
/// at or above `threshold` ([`reeval_core::stats::reward::reaches`]).
pub fn passes(reward: &BTreeMap<String, f64>, threshold: f64) -> bool {
    reeval_core::stats::reward::reaches(reward, threshold)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_wins_and_keeps_every_key() {
        let r = parse(Some(br#"{"accuracy": 0.5, "reward": 1, "ok": true}"#), Some(b"0")).unwrap();
        assert_eq!(r["accuracy"], 0.5);
        assert_eq!(r["reward"], 1.0);
        assert_eq!(r["ok"], 1.0);
    }

    #[test]
    fn txt_is_one_float_with_whitespace() {
        assert_eq!(parse(None, Some(b" 0.75\n")).unwrap()["reward"], 0.75);
        assert_eq!(parse(None, Some(b"1_0")).unwrap()["reward"], 10.0);
        assert_eq!(parse(None, Some(b"1e0")).unwrap()["reward"], 1.0);
    }

    #[test]
    fn missing_empty_and_bad_files_are_no_reward() {
        assert_eq!(parse(None, None), Err(RewardError::NotFound));
        assert_eq!(parse(None, Some(b"")), Err(RewardError::Empty(REWARD_TXT)));
        assert_eq!(parse(Some(b""), Some(b"1")), Err(RewardError::Empty(REWARD_JSON)));
        assert!(matches!(parse(None, Some(b"1 2")), Err(RewardError::Parse { .. })));
        assert!(matches!(parse(None, Some(b"nan")), Err(RewardError::Parse { .. })));
        assert!(matches!(parse(None, Some(b"1__0")), Err(RewardError::Parse { .. })));
        assert!(matches!(parse(Some(b"1.0"), None), Err(RewardError::Parse { .. })));
        assert!(matches!(parse(Some(br#"{"a": "1"}"#), None), Err(RewardError::Parse { .. })));
        assert!(matches!(parse(Some(br#"{"a": 1e999}"#), None), Err(RewardError::Parse { .. })));
    }

    #[test]
    fn the_reward_key_decides_else_every_key() {
        let r = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
            pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        assert!(passes(&r(&[("reward", 1.0)]), 1.0));
        assert!(!passes(&r(&[("reward", 0.99), ("x", 5.0)]), 1.0));
        assert!(passes(&r(&[("a", 1.0), ("b", 2.0)]), 1.0));
        assert!(!passes(&r(&[("a", 1.0), ("b", 0.0)]), 1.0));
        assert!(!passes(&r(&[]), 1.0));
    }
}
