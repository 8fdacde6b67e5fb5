//! Asking a model: a conversation (`conversation.rs`) sent over
//! [`LlmClient`](super::LlmClient) in its provider's wire format, and a judge
//! spec (`anthropic:<model>`) read.

use super::conversation::{ChatModel, ChatRequest, Provider, Reply};
use super::{LlmError, anthropic, openai};

impl ChatModel {
    /// One request, not retried: the caller retries what it needs to, parsing included.
    ///
    /// # Errors
    /// As [`LlmClient::post`]; [`LlmError::Malformed`], [`LlmError::Refused`] or
    /// [`LlmError::Truncated`] when the answer cannot be read as a reply.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping it drops the request.
    pub(crate) async fn send(&self, req: &ChatRequest<'_>) -> Result<Reply, LlmError> {
        match self.provider {
            Provider::Anthropic => {
                let url = format!("{}/v1/messages", self.base_url);
                let answer = self
                    .client
                    .post(
                        &url,
                        &[("anthropic-version", anthropic::API_VERSION)],
                        &anthropic::body(self, req),
                    )
                    .await?;
                anthropic::parse(&answer)
            }
            Provider::OpenAi => {
                let url = format!("{}/chat/completions", self.base_url);
                let answer = self.client.post(&url, &[], &openai::body(self, req)).await?;
                openai::parse(&answer, req.json_schema_tool().map(|(_, tool)| tool.name))
            }
        }
    }
}

/// `anthropic:claude-sonnet-4-5` → (Anthropic, `claude-sonnet-4-5`).
pub(crate) fn parse_spec(spec: &str) -> std::result::Result<(Provider, String), String> {
    let (provider, model) = spec.split_once(':').ok_or_else(|| {
        format!(
            "judge model `{spec}` names no provider; write `anthropic:<model>` or `openai:<model>`"
        )
    })?;
    let provider = match provider.trim() {
        "anthropic" => Provider::Anthropic,
        "openai" => Provider::OpenAi,
        other => {
            return Err(format!(
                "judge provider `{other}` of `{spec}` is not known; use `anthropic:<model>` or `openai:<model>`"
            ));
        }
    };
    let model = model.trim();
    if model.is_empty() {
        return Err(format!("judge model `{spec}` names no model after the colon"));
    }
    Ok((provider, model.to_string()))
}

/// The host variable holding the key for a judge spec (`anthropic:..` → `ANTHROPIC_API_KEY`),
/// for a preflight that checks it before anything starts.
///
/// # Errors
/// The spec's problem, when it names no known provider or no model.
pub(crate) fn key_env(spec: &str) -> std::result::Result<&'static str, String> {
    parse_spec(spec).map(|(provider, _)| provider.default_key_env())
}
