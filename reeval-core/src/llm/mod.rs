//! Talking to model APIs, for the judge and for agents that run on the host.
//!
//! - [`LlmClient`] (`client.rs`): one JSON POST with the key, a per-request
//!   timeout, provider error messages and redaction of the key; [`LlmError`]
//!   (`error.rs`): the status classified, and whose failure it is; and
//!   [`RetryPolicy`] (`retry.rs`): exponential backoff with jitter that
//!   honours the server's `retry-after-ms` / `retry-after`.
//! - [`tools`]: the tools an agent (or an agentic judge) acts in the sandbox
//!   with: read a file, list files, run a command, write a file.
//! - The provider-neutral conversation the judge holds (`conversation.rs`),
//!   its two wire formats (Anthropic Messages, OpenAI chat completions) and
//!   the sending (`chat.rs`) are crate-private: the judge sits on top of them.

pub(crate) mod anthropic;
pub(crate) mod chat;
mod client;
pub(crate) mod conversation;
mod error;
pub(crate) mod openai;
mod retry;
pub mod tools;

pub use client::{ApiKey, KeyHeader, LlmClient};
pub use error::LlmError;
pub use retry::{RETRY_AFTER_CAP, RetryPolicy, Tries};
