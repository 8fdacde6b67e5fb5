//! The pieces a CLI's configuration is made of, shared by the CLIs: npm
//! install steps, skill files, MCP server entries, and the provider's key
//! and broker a model name implies.

use reeval_core::egress::{Broker, HarnessEgress};
use reeval_core::environment::{McpServer, Skill};
use serde_json::Value;

use super::{FileToWrite, NODE_VERSION};

/// Install steps: Node.js (pinned) unless present, then `package@version` with npm.
pub fn npm_install_steps(package: &str, version: &str) -> Vec<String> {
    vec![
        format!(
            "command -v node >/dev/null 2>&1 || {{ case $(uname -m) in x86_64) a=x64;; aarch64) a=arm64;; *) echo unsupported arch >&2; exit 1;; esac; \
             curl -fsSL https://nodejs.org/dist/v{NODE_VERSION}/node-v{NODE_VERSION}-linux-$a.tar.gz | tar -xz -C /usr/local --strip-components=1 --no-same-owner; }}"
        ),
        format!("npm install -g --no-fund --no-audit --loglevel=error {package}@{version}"),
    ]
}

/// A config file in the CLI's home: `value` as pretty JSON, readable by its owner alone.
pub(crate) fn json_file(path: String, value: &Value) -> FileToWrite {
    FileToWrite::new(path, serde_json::to_vec_pretty(value).unwrap_or_default(), 0o600)
}

/// Files of `skills` under `dir/<skill name>/`.
pub fn skill_files(dir: &str, skills: &[Skill]) -> Vec<FileToWrite> {
    let mut files = Vec::new();
    for skill in skills {
        let name = skill.name.replace(['/', '\\'], "_");
        for FileToWrite { path: rel, bytes, mode } in &skill.files {
            let rel = rel.trim_start_matches("./");
            if rel.split('/').any(|c| c == "..") {
                continue;
            }
            files.push(FileToWrite::new(format!("{dir}/{name}/{rel}"), bytes.clone(), *mode));
        }
    }
    files
}

/// The common JSON shape of an MCP server (`command`/`args`/`env`, or `url`),
/// as Claude Code, Cursor and Gemini read it; `http_key` names the URL field.
pub fn mcp_json(server: &McpServer, typed: bool, http_key: &str) -> Value {
    let mut v = match server {
        McpServer::Stdio { argv, env, .. } => serde_json::json!({
            "command": argv.first().cloned().unwrap_or_default(),
            "args": argv.iter().skip(1).collect::<Vec<_>>(),
            "env": env.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect::<serde_json::Map<String, Value>>(),
        }),
        McpServer::Http { url, .. } => serde_json::json!({ http_key: url }),
    };
    if typed {
        v["type"] = Value::from(match server {
            McpServer::Stdio { .. } => "stdio",
            McpServer::Http { .. } => "http",
        });
    }
    v
}

/// `{"mcpServers": {name: server, ..}}` in the common JSON shape.
pub fn mcp_servers(
    servers: &[McpServer],
    typed: bool,
    http_key: &str,
) -> serde_json::Map<String, Value> {
    servers.iter().map(|s| (s.name().to_string(), mcp_json(s, typed, http_key))).collect()
}

/// The variable holding the API key of a provider (`anthropic` → `ANTHROPIC_API_KEY`).
pub fn provider_key(provider: &str) -> String {
    match provider.to_ascii_lowercase().as_str() {
        "anthropic" => "ANTHROPIC_API_KEY".into(),
        "openai" => "OPENAI_API_KEY".into(),
        "google" | "gemini" => "GEMINI_API_KEY".into(),
        "openrouter" => "OPENROUTER_API_KEY".into(),
        "groq" => "GROQ_API_KEY".into(),
        "mistral" => "MISTRAL_API_KEY".into(),
        "xai" => "XAI_API_KEY".into(),
        "deepseek" => "DEEPSEEK_API_KEY".into(),
        other => format!("{}_API_KEY", other.to_ascii_uppercase().replace(['-', '.'], "_")),
    }
}

/// Where a provider's key goes (host and header), by TLS interception; `None`
/// for providers whose API reeval does not know (their hosts must be allowed
/// by the environment, and their key is not brokered).
pub fn provider_broker(provider: &str) -> Option<(String, Broker)> {
    let (host, header) = match provider.to_ascii_lowercase().as_str() {
        "anthropic" => ("api.anthropic.com", "x-api-key"),
        "openai" => ("api.openai.com", "authorization"),
        "google" | "gemini" => ("generativelanguage.googleapis.com", "x-goog-api-key"),
        "openrouter" => ("openrouter.ai", "authorization"),
        "groq" => ("api.groq.com", "authorization"),
        "mistral" => ("api.mistral.ai", "authorization"),
        "xai" => ("api.x.ai", "authorization"),
        "deepseek" => ("api.deepseek.com", "authorization"),
        _ => return None,
    };
    Some((provider_key(provider), Broker::header(host, header)))
}

/// The provider a model name implies: its prefix (`openai/gpt-5`), else a
/// guess from the model family, else Anthropic.
pub fn provider_of(model: Option<&str>) -> String {
    let Some(model) = model else { return "anthropic".into() };
    if let Some((provider, _)) = model.split_once('/') {
        return provider.to_string();
    }
    let m = model.to_ascii_lowercase();
    if m.starts_with("gpt")
        || m.starts_with("o1")
        || m.starts_with("o3")
        || m.starts_with("o4")
        || m.starts_with("codex")
    {
        "openai".into()
    } else if m.starts_with("gemini") {
        "google".into()
    } else {
        "anthropic".into()
    }
}

/// Anthropic's API: `x-api-key` through `ANTHROPIC_BASE_URL` when the CLI takes a base URL.
pub(crate) fn anthropic(base_url_env: Option<&str>) -> (String, Broker) {
    let broker = Broker::header("api.anthropic.com", "x-api-key");
    let broker = match base_url_env {
        Some(env) => broker.base_url_env(env),
        None => broker,
    };
    ("ANTHROPIC_API_KEY".into(), broker)
}

/// OpenAI's API: `authorization: Bearer <key>`.
pub(crate) fn openai() -> (String, Broker) {
    ("OPENAI_API_KEY".into(), Broker::header("api.openai.com", "authorization"))
}

/// The egress of a CLI that reaches the hosts of `brokers` and `more`.
pub(crate) fn egress_of(brokers: Vec<(String, Broker)>, more: &[&str]) -> HarnessEgress {
    let mut hosts: Vec<String> = brokers.iter().map(|(_, b)| b.host().to_string()).collect();
    hosts.extend(more.iter().map(|h| h.to_string()));
    hosts.dedup();
    HarnessEgress { hosts, brokers }
}
