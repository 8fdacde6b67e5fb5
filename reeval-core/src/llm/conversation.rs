//! The provider-neutral conversation the judge holds with a model: the
//! provider, the model asked, messages, tool calls and results, a request
//! and its reply. The wire formats (`anthropic.rs`, `openai.rs`) and the
//! sending (`chat.rs`) use it; it names neither.

use serde_json::Value;

use super::LlmClient;
use super::tools::ToolDef;
use crate::turn::Usage;

/// Which API a model is served by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Provider {
    Anthropic,
    OpenAi,
}

impl Provider {
    /// Every provider a judge spec can name.
    pub(crate) const ALL: [Provider; 2] = [Provider::Anthropic, Provider::OpenAi];

    /// The host variable holding the key by default.
    pub(crate) fn default_key_env(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_API_KEY",
            Provider::OpenAi => "OPENAI_API_KEY",
        }
    }

    /// The host variable naming another base URL, as the providers' SDKs read it.
    pub(crate) fn base_url_env(self) -> &'static str {
        match self {
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::OpenAi => "OPENAI_BASE_URL",
        }
    }

    /// Anthropic's is the host; OpenAI's includes the version.
    pub(crate) fn default_base_url(self) -> &'static str {
        match self {
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::OpenAi => "https://api.openai.com/v1",
        }
    }

    /// How the key is sent.
    pub(crate) fn key_header(self) -> super::KeyHeader {
        match self {
            Provider::Anthropic => super::KeyHeader::XApiKey,
            Provider::OpenAi => super::KeyHeader::Bearer,
        }
    }
}

/// One tool call of the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) input: Value,
}

/// One tool's result, sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    pub(crate) id: String,
    pub(crate) content: String,
    pub(crate) is_error: bool,
}

/// A message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    User(String),
    Assistant { text: Option<String>, calls: Vec<Call> },
    Results(Vec<ToolResult>),
}

/// Which tool the model must call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    /// This one.
    Tool(&'static str),
    /// Any of them.
    Any,
}

/// One model request.
#[derive(Debug)]
pub(crate) struct ChatRequest<'a> {
    pub(crate) system: &'a str,
    pub(crate) messages: &'a [Message],
    pub(crate) tools: &'a [ToolDef],
    pub(crate) choice: Choice,
    /// With `Some(name)`, a request forcing its only tool asks an OpenAI-compatible
    /// API for that tool's schema as `response_format` (named `name`) instead,
    /// and reads the content as the tool's call. Anthropic always forces the call.
    pub(crate) json_schema: Option<&'static str>,
}

impl ChatRequest<'_> {
    /// The tool whose schema is asked for as `response_format`, when this request uses it.
    pub(crate) fn json_schema_tool(&self) -> Option<(&'static str, &ToolDef)> {
        let name = self.json_schema?;
        match (self.choice, self.tools) {
            (Choice::Tool(forced), [only]) if only.name == forced => Some((name, only)),
            _ => None,
        }
    }
}

/// What one model request answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Reply {
    pub(crate) calls: Vec<Call>,
    pub(crate) text: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) usage: Usage,
}

/// A model ready to be asked: provider, model, URL, sampling and the client.
#[derive(Debug)]
pub(crate) struct ChatModel {
    pub(crate) provider: Provider,
    pub(crate) model: String,
    /// Without a trailing slash.
    pub(crate) base_url: String,
    pub(crate) temperature: Option<f64>,
    /// Anthropic only: OpenAI's limit stays the provider's.
    pub(crate) max_tokens: u32,
    pub(crate) client: LlmClient,
}
