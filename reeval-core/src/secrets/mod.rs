//! Secret values: read on the host in preflight, held in `secrecy` types,
//! shown to the sandbox only as placeholders (or, for checks-only secrets, to
//! checks), and scrubbed from everything written or printed by the one
//! [`Redactor`] built in preflight.

mod redactor;

pub use redactor::{REDACTED, Redactor, write_atomically};
pub use secrecy::{ExposeSecret, SecretString};

/// Who may see a secret's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretScope {
    /// The sandbox sees a placeholder (the egress gateway swaps the value in on the wire).
    Placeholder,
    /// `exec` checks see the value; the agent, setup and harness see nothing.
    Checks,
    /// Only the host process uses it (a judge's key, which preflight keeps
    /// apart from the cell's secrets); the sandbox sees nothing.
    Host,
}

/// A secret resolved on the host. Its value never reaches a record, a log or the agent.
#[derive(Clone)]
pub struct Secret {
    /// The variable name, on the host and in the sandbox.
    pub name: String,
    /// The value.
    pub value: SecretString,
    /// Who may see it.
    pub scope: SecretScope,
}

impl Secret {
    /// A secret named `name` with `value`.
    pub fn new(name: impl Into<String>, value: impl Into<String>, scope: SecretScope) -> Self {
        Self { name: name.into(), value: SecretString::from(value.into()), scope }
    }

    /// The placeholder the sandbox sees instead of the value.
    pub fn placeholder(&self) -> String {
        placeholder(&self.name)
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("name", &self.name)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// A value the run's sinks replace as a secret's, held by an environment
/// (`Environment::redact`): its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Redacted(String);

impl Redacted {
    /// `value`, to be redacted.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value.
    pub fn value(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Redacted(…)")
    }
}

/// The placeholder the sandbox sees for a secret.
pub fn placeholder(name: &str) -> String {
    format!("reeval-placeholder-{name}")
}

/// Replaces every value of `secrets` in `text`: a one-off [`Redactor`], for
/// code that holds a single key (a model client). Sinks use the run's redactor.
pub fn redact(text: &str, secrets: &[String]) -> String {
    Redactor::new(secrets.iter().map(String::as_str)).redact(text).into_owned()
}

/// The redactor of panic output: every secret any run of this process resolved.
static PANIC_REDACTOR: std::sync::RwLock<Option<Redactor>> = std::sync::RwLock::new(None);

/// Adds `redactor`'s values to what panic output is scrubbed of.
pub fn remember(redactor: &Redactor) {
    let mut slot = PANIC_REDACTOR.write().unwrap_or_else(|e| e.into_inner());
    *slot = Some(match slot.take() {
        Some(old) => old.union(redactor),
        None => redactor.clone(),
    });
}

/// `text` (an eval's output echoed live) scrubbed of every secret any run of this process resolved.
pub(crate) fn redact_output(text: &str) -> String {
    match PANIC_REDACTOR.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        Some(r) => r.redact(text).into_owned(),
        None => text.to_string(),
    }
}

/// Replaces panic output with a redacted copy: an eval's `assert!` may show a secret it read.
pub fn install_redacting_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let redactor =
            PANIC_REDACTOR.read().map(|r| r.clone()).unwrap_or_default().unwrap_or_default();
        let thread = std::thread::current();
        eprintln!(
            "thread '{}' {}",
            thread.name().unwrap_or("<unnamed>"),
            redactor.redact(&info.to_string())
        );
    }));
}
