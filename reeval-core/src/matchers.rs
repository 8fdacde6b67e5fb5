//! vitest-style matchers: `expect(x).to_succeed()?`, `.to_contain(s)?`, `.not()`.
//! A failed matcher is an `assertion` failure whose message shows the eval,
//! the source line, expected vs actual and the command's output tail.

use std::fmt::Debug;
use std::panic::Location;

use crate::error::{AssertionFailure, Error, Result};
use crate::exec::ExecOutput;

tokio::task_local! {
    /// The eval being run, for failure messages.
    pub(crate) static CURRENT_EVAL: String;
}

/// How much output a failure message shows.
const TAIL: usize = 1500;

/// A value under test.
#[derive(Debug)]
pub struct Expectation<T> {
    value: T,
    negated: bool,
    location: &'static Location<'static>,
}

/// Starts an expectation on `value`.
#[track_caller]
pub fn expect<T>(value: T) -> Expectation<T> {
    Expectation { value, negated: false, location: Location::caller() }
}

impl<T> Expectation<T> {
    /// Negates the next matcher.
    #[expect(
        clippy::should_implement_trait,
        reason = "vitest's `.not()`; `!expect(x)` would read worse"
    )]
    pub fn not(mut self) -> Self {
        self.negated = !self.negated;
        self
    }

    fn check(
        &self,
        ok: bool,
        matcher: &str,
        expected: String,
        actual: String,
        output: Option<&ExecOutput>,
    ) -> Result<()> {
        self.check_with_diff(ok, matcher, expected, actual, output, None)
    }

    /// As [`Self::check`]; a `diff` (unified, of multi-line values) stands in for the expected and actual lines.
    fn check_with_diff(
        &self,
        ok: bool,
        matcher: &str,
        expected: String,
        actual: String,
        output: Option<&ExecOutput>,
        diff: Option<String>,
    ) -> Result<()> {
        if ok != self.negated {
            return Ok(());
        }
        let eval = CURRENT_EVAL.try_with(|e| e.clone()).ok();
        let not = if self.negated { "not." } else { "" };
        let mut message = format!("expect(..).{not}{matcher} failed");
        if let Some(eval) = eval {
            message = format!("{message} in eval {eval}");
        }
        match diff {
            Some(diff) => {
                message.push_str(&format!("\n  diff (-expected +actual):\n{}", indent(&diff)))
            }
            None => message.push_str(&format!(
                "\n  expected: {}{expected}\n    actual: {actual}",
                if self.negated { "not " } else { "" }
            )),
        }
        if let Some(out) = output {
            message.push_str(&format!("\n   command: {}", out.command));
            if !out.stdout.is_empty() {
                message.push_str(&format!("\n  stdout (tail):\n{}", indent(out.stdout_tail(TAIL))));
            }
            if !out.stderr.is_empty() {
                message.push_str(&format!("\n  stderr (tail):\n{}", indent(out.stderr_tail(TAIL))));
            }
        }
        Err(Error::Assertion(AssertionFailure {
            message,
            location: Some(format!("{}:{}", self.location.file(), self.location.line())),
        }))
    }
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("    | {l}")).collect::<Vec<_>>().join("\n")
}

fn exit_desc(out: &ExecOutput) -> String {
    if out.timed_out {
        "killed by its timeout".into()
    } else {
        format!("exit code {}", out.exit_code)
    }
}

impl Expectation<ExecOutput> {
    /// The command exited 0.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_succeed(self) -> Result<()> {
        self.check(
            self.value.success(),
            "to_succeed()",
            "exit code 0".into(),
            exit_desc(&self.value),
            Some(&self.value),
        )
    }

    /// The command exited non-zero.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_fail(self) -> Result<()> {
        self.check(
            !self.value.success(),
            "to_fail()",
            "a non-zero exit code".into(),
            exit_desc(&self.value),
            Some(&self.value),
        )
    }

    /// The command exited with `code`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_exit_with(self, code: i64) -> Result<()> {
        self.check(
            self.value.exit_code == code && !self.value.timed_out,
            &format!("to_exit_with({code})"),
            format!("exit code {code}"),
            exit_desc(&self.value),
            Some(&self.value),
        )
    }

    /// The command's stdout contains `needle`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_contain(self, needle: &str) -> Result<()> {
        self.check(
            self.value.stdout.contains(needle),
            "to_contain(..)",
            format!("stdout containing {needle:?}"),
            "it does not".into(),
            Some(&self.value),
        )
    }
}

/// `expect(&out)`: the same matchers on a borrowed output, so a check's
/// output can be matched and still used afterwards.
impl Expectation<&ExecOutput> {
    fn owned(&self) -> Expectation<ExecOutput> {
        Expectation { value: self.value.clone(), negated: self.negated, location: self.location }
    }

    /// The command exited 0.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_succeed(self) -> Result<()> {
        self.owned().to_succeed()
    }

    /// The command exited non-zero.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_fail(self) -> Result<()> {
        self.owned().to_fail()
    }

    /// The command exited with `code`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_exit_with(self, code: i64) -> Result<()> {
        self.owned().to_exit_with(code)
    }

    /// The command's stdout contains `needle`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_contain(self, needle: &str) -> Result<()> {
        self.owned().to_contain(needle)
    }
}

/// Text a matcher reads (`to_contain`, `to_match`): `&str`, `String`, `&String`,
/// `Cow<str>`, `Box<str>`, `Arc<str>`, `Rc<str>`, and references to them.
/// Implement it for a type of your own to match on its text.
///
/// Not a blanket impl over `AsRef<str>`: [`ExecOutput`] has its own
/// `to_contain` (stdout or stderr), and the compiler accepts both only while it
/// can tell that `ExecOutput` is not text, which a trait of this crate lets it
/// (`ExecOutput` lives in reeval-sandbox).
pub trait Text {
    /// The text.
    fn text(&self) -> &str;
}

impl Text for str {
    fn text(&self) -> &str {
        self
    }
}

impl Text for String {
    fn text(&self) -> &str {
        self
    }
}

impl Text for Box<str> {
    fn text(&self) -> &str {
        self
    }
}

impl Text for std::borrow::Cow<'_, str> {
    fn text(&self) -> &str {
        self
    }
}

impl Text for std::sync::Arc<str> {
    fn text(&self) -> &str {
        self
    }
}

impl Text for std::rc::Rc<str> {
    fn text(&self) -> &str {
        self
    }
}

impl<T: Text + ?Sized> Text for &T {
    fn text(&self) -> &str {
        (**self).text()
    }
}

impl<T: Text + ?Sized> Text for &mut T {
    fn text(&self) -> &str {
        (**self).text()
    }
}

impl<T: Text> Expectation<T> {
    /// The text contains `needle`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    pub fn to_contain(self, needle: &str) -> Result<()> {
        let text = self.value.text();
        self.check(
            text.contains(needle),
            "to_contain(..)",
            format!("text containing {needle:?}"),
            quote(text),
            None,
        )
    }

    /// The text matches the regular expression `pattern`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise, or when `pattern` is not a valid regex.
    pub fn to_match(self, pattern: &str) -> Result<()> {
        // The eval's own mistake: an assertion failure at its `expect(..)`, never the agent's.
        let re = regex::Regex::new(pattern).map_err(|e| {
            Error::Assertion(AssertionFailure {
                message: format!(
                    "expect(..).to_match(..): the eval's regex {pattern:?} does not compile: {e}"
                ),
                location: Some(format!("{}:{}", self.location.file(), self.location.line())),
            })
        })?;
        let text = self.value.text();
        self.check(
            re.is_match(text),
            "to_match(..)",
            format!("text matching /{pattern}/"),
            quote(text),
            None,
        )
    }
}

impl<T: Debug> Expectation<T> {
    /// The value equals `expected`.
    ///
    /// # Errors
    /// An `assertion` failure otherwise.
    /// Multi-line strings fail with a unified line diff of expected and actual.
    pub fn to_equal<U: Debug>(self, expected: U) -> Result<()>
    where
        T: PartialEq<U>,
    {
        let ok = self.value == expected;
        let (expected, actual) = (format!("{expected:?}"), format!("{:?}", self.value));
        // Only a failure shows the diff, and `.not()` fails on equal values, which have none.
        let diff = if ok || self.negated { None } else { line_diff(&expected, &actual) };
        self.check_with_diff(ok, "to_equal(..)", expected, actual, None, diff)
    }
}

/// A verdict's matcher fails with kind `judge`, not `assertion`: it is the judge's call.
fn as_judge_failure(result: Result<()>) -> Result<()> {
    result.map_err(|e| match e {
        Error::Assertion(failure) => Error::Judge { message: failure.to_string() },
        other => other,
    })
}

fn describe_verdict(v: &crate::record::Verdict) -> String {
    match &v.error {
        Some(e) => format!("no verdict on {:?}: {e}", v.criterion),
        None => format!(
            "{:?} {} with score {:.2} (threshold {:.2}): {}",
            v.criterion,
            if v.pass { "passed" } else { "did not pass" },
            v.score,
            v.threshold,
            v.reasoning
        ),
    }
}

impl Expectation<crate::record::Verdict> {
    /// The verdict passed. Fails at once with kind `judge` otherwise.
    ///
    /// # Errors
    /// A `judge` failure otherwise.
    pub fn to_pass(self) -> Result<()> {
        as_judge_failure(self.check(
            self.value.pass,
            "to_pass()",
            "a passing verdict".into(),
            describe_verdict(&self.value),
            None,
        ))
    }
}

impl Expectation<crate::judge::JudgeResult> {
    /// Every verdict passed. Fails at once with kind `judge` otherwise.
    ///
    /// # Errors
    /// A `judge` failure otherwise, naming the first verdict that did not pass.
    pub fn to_pass(self) -> Result<()> {
        let actual = match self.value.first_failure() {
            Some(v) => describe_verdict(v),
            None => format!("{} verdicts passed", self.value.verdicts.len()),
        };
        as_judge_failure(self.check(
            self.value.passed(),
            "to_pass()",
            "every verdict passing".into(),
            actual,
            None,
        ))
    }
}

/// A unified diff (`--- expected`, `+++ actual`) when both values print as
/// strings and either spans lines. Strings are recognised by their `Debug`
/// form, the one thing `to_equal` may ask of any `T`, and unescaped from it.
fn line_diff(expected_debug: &str, actual_debug: &str) -> Option<String> {
    let (expected, actual) =
        (unescape_debug_str(expected_debug)?, unescape_debug_str(actual_debug)?);
    if !expected.contains('\n') && !actual.contains('\n') {
        return None;
    }
    let diff = similar::TextDiff::from_lines(&expected, &actual);
    Some(
        diff.unified_diff()
            .context_radius(3)
            .header("expected", "actual")
            .to_string()
            .trim_end()
            .to_string(),
    )
}

/// The text of a `str`'s `Debug` form (`"a\nb"`), or `None` for anything else.
fn unescape_debug_str(debug: &str) -> Option<String> {
    let inner = debug.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(match chars.next()? {
                'n' => '\n',
                'r' => '\r',
                't' => '\t',
                '0' => '\0',
                '\\' => '\\',
                '"' => '"',
                '\'' => '\'',
                'u' => {
                    let hex: String = chars.by_ref().skip(1).take_while(|c| *c != '}').collect();
                    char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?
                }
                _ => return None,
            }),
            // An unescaped quote: not one string's Debug form.
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

fn quote(text: &str) -> String {
    if text.len() > TAIL {
        format!("{:?} (last {TAIL} of {} bytes)", crate::exec::tail(text, TAIL), text.len())
    } else {
        format!("{text:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: i64, stdout: &str) -> ExecOutput {
        ExecOutput {
            command: "make test".into(),
            exit_code: code,
            stdout: stdout.into(),
            stderr: "boom".into(),
            stdout_bytes: 0,
            stderr_bytes: 4,
            duration_ms: 1,
            timed_out: false,
        }
    }

    #[test]
    fn an_invalid_regex_is_the_evals_assertion_at_its_expect() {
        let err = expect("text").to_match("(unclosed").unwrap_err();
        assert!(
            matches!(&err, Error::Assertion(f) if f.location.as_deref().is_some_and(|l| l.contains("matchers.rs:"))),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("the eval's regex \"(unclosed\" does not compile"),
            "{err}"
        );
        assert_eq!(
            crate::outcome::classify(&err),
            crate::Outcome::Fail(crate::FailKind::Assertion)
        );
    }

    #[test]
    fn exec_matchers() {
        assert!(expect(out(0, "")).to_succeed().is_ok());
        assert!(expect(out(1, "")).to_fail().is_ok());
        assert!(expect(out(3, "")).to_exit_with(3).is_ok());
        assert!(expect(out(0, "")).not().to_fail().is_ok());
        let err = expect(out(2, "some output")).to_succeed().unwrap_err().to_string();
        assert!(err.contains("expected: exit code 0"), "{err}");
        assert!(err.contains("actual: exit code 2"), "{err}");
        assert!(err.contains("make test"), "{err}");
        assert!(err.contains("| boom"), "{err}");
        assert!(err.contains("matchers.rs:"), "{err}");
    }

    #[test]
    fn exec_matchers_take_a_borrowed_output() {
        let output = out(2, "kept");
        assert!(expect(&output).to_exit_with(2).is_ok());
        assert!(expect(&output).not().to_succeed().is_ok());
        let err = expect(&output).to_contain("missing").unwrap_err().to_string();
        assert!(err.contains("matchers.rs:"), "the caller's line, not the forwarding one: {err}");
        // Still usable after matching.
        assert_eq!(output.stdout, "kept");
    }

    #[test]
    fn verdict_matchers_fail_with_kind_judge() {
        let verdict = |pass: bool| crate::record::Verdict {
            criterion: "has tests".into(),
            score: if pass { 0.9 } else { 0.2 },
            pass,
            reasoning: "no test file".into(),
            threshold: 0.5,
            model: None,
            usage: Default::default(),
            error: None,
            tool_calls: Vec::new(),
        };
        assert!(expect(verdict(true)).to_pass().is_ok());
        assert!(expect(verdict(false)).not().to_pass().is_ok());
        let err = expect(verdict(false)).to_pass().unwrap_err();
        assert_eq!(
            crate::outcome::classify(&err),
            crate::outcome::Outcome::Fail(crate::outcome::FailKind::Judge)
        );
        let text = err.to_string();
        assert!(
            text.contains("did not pass with score 0.20") && text.contains("no test file"),
            "{text}"
        );
        let result = crate::judge::JudgeResult { verdicts: vec![verdict(true), verdict(false)] };
        assert!(
            expect(result.clone())
                .to_pass()
                .unwrap_err()
                .to_string()
                .contains("\"has tests\" did not pass")
        );
        assert!(
            expect(crate::judge::JudgeResult { verdicts: vec![verdict(true)] }).to_pass().is_ok()
        );
    }

    #[test]
    fn text_matchers() {
        assert!(expect("def greet(name)").to_contain("def greet").is_ok());
        assert!(expect(String::from("abc123")).to_match(r"\d+$").is_ok());
        assert!(expect("abc").not().to_contain("z").is_ok());
        assert!(expect(String::from("x")).to_equal("x").is_ok());
        let err = expect("abc").to_equal("abd").unwrap_err().to_string();
        assert!(err.contains("expected: \"abd\""), "{err}");
        assert!(expect("abc").to_match("(").is_err());
    }

    #[test]
    fn multi_line_strings_fail_with_a_unified_diff() {
        let expected = "def greet(name):\n    return f\"hi {name}\"\n\nprint(greet('x'))\n";
        let actual = String::from("def greet(name):\n    return \"hi\"\n\nprint(greet('x'))\n");
        let err = CURRENT_EVAL
            .sync_scope("greets".into(), || expect(&actual).to_equal(expected))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "expect(..).to_equal(..) failed in eval greets\n  diff (-expected +actual):\n"
            ),
            "{err}"
        );
        for line in [
            "    | --- expected",
            "    | +++ actual",
            "    | @@ -1,4 +1,4 @@",
            "    |  def greet(name):",
            "    | -    return f\"hi {name}\"",
            "    | +    return \"hi\"",
            "    |  print(greet('x'))",
        ] {
            assert!(err.lines().any(|l| l == line), "missing {line:?} in:\n{err}");
        }
        assert!(err.contains("\n  at ") && err.contains("matchers.rs:"), "the location: {err}");
        // Single-line values keep expected and actual; equal multi-line values under .not() have no diff to show.
        let err = expect("abc").to_equal("abd").unwrap_err().to_string();
        assert!(
            err.contains("expected: \"abd\"\n    actual: \"abc\"") && !err.contains("---"),
            "{err}"
        );
        let err = expect("a\nb").not().to_equal("a\nb").unwrap_err().to_string();
        assert!(err.contains("expected: not \"a\\nb\""), "{err}");
        // Not strings: no diff, whatever their Debug form.
        assert!(!expect(vec![1, 2]).to_equal(vec![1, 3]).unwrap_err().to_string().contains("---"));
        assert_eq!(
            unescape_debug_str(&format!("{:?}", "tab\there \"q\" \\ \u{1b}é")).as_deref(),
            Some("tab\there \"q\" \\ \u{1b}é")
        );
        assert_eq!(unescape_debug_str("\"a\" + \"b\""), None);
    }
}
