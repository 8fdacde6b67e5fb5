//! Harbor's agents (`-a`) with their models (`-m provider/model`) as
//! reeval's harness specs: `-a claude-code -m anthropic/claude-sonnet-4-5`
//! is `claude-code:claude-sonnet-4-5`. Each CLI harness takes its model as
//! Harbor hands it to that CLI: Claude Code, Codex, Gemini CLI and Cursor
//! without the provider; opencode, pi and mini-swe-agent (litellm) with it.

use reeval_core::HarnessRegistry;
use reeval_harbor::job::JobAgent;

/// How a harness takes Harbor's `provider/model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    /// Not at all (the oracle, nop): one harness whatever `-m` says.
    None,
    /// Without the provider (`claude-sonnet-4-5`).
    Bare,
    /// As given (`anthropic/claude-sonnet-4-5`).
    Full,
}

/// Harbor's agent name, reeval's harness, and how the model goes to it.
const AGENTS: &[(&str, &str, Model)] = &[
    ("oracle", "oracle", Model::None),
    ("nop", "nop", Model::None),
    ("claude-code", "claude-code", Model::Bare),
    ("codex", "codex", Model::Bare),
    ("gemini-cli", "gemini", Model::Bare),
    ("cursor-cli", "cursor", Model::Bare),
    ("opencode", "opencode", Model::Full),
    ("pi", "pi", Model::Full),
    ("mini-swe-agent", "mini-swe-agent", Model::Full),
];

/// The harness specs of `-a agent` with each `-m model` (or none).
///
/// # Errors
/// An agent reeval has no harness for, named with what there is.
pub fn specs(
    agent: &str,
    models: &[String],
    registry: &HarnessRegistry,
) -> Result<Vec<JobAgent>, String> {
    let (harness, form) = match AGENTS.iter().find(|(name, ..)| *name == agent) {
        Some((_, harness, form)) => (*harness, *form),
        // reeval's own names work too (`-a shell`, `-a gemini`), their model as given.
        None if registry.make(agent).is_some() => (agent, Model::Full),
        None => return Err(unknown(agent, registry)),
    };
    let spec = |model: Option<&String>| {
        let given = match (form, model) {
            (Model::None, _) | (_, None) => None,
            (Model::Bare, Some(m)) => Some(m.rsplit_once('/').map_or(m.as_str(), |(_, n)| n)),
            (Model::Full, Some(m)) => Some(m.as_str()),
        };
        JobAgent {
            spec: match given {
                Some(m) => format!("{harness}:{m}"),
                None => harness.to_string(),
            },
            name: agent.to_string(),
            model: model.cloned(),
        }
    };
    if models.is_empty() || form == Model::None {
        return Ok(vec![spec(models.first())]);
    }
    Ok(models.iter().map(|m| spec(Some(m))).collect())
}

/// Why `agent` cannot run: the nearest name, Harbor's agents reeval has, and reeval's harnesses.
fn unknown(agent: &str, registry: &HarnessRegistry) -> String {
    let harbor: Vec<&str> = AGENTS.iter().map(|(name, ..)| *name).collect();
    let near = reeval_core::suggest::nearest(agent, harbor.iter().copied().chain(registry.names()))
        .map(|n| format!("did you mean `{n}`? "))
        .unwrap_or_default();
    let mut own: Vec<&str> = registry.names().collect();
    own.sort_unstable();
    format!(
        "reeval has no harness for Harbor's agent `{agent}`; {near}Harbor's agents reeval runs: {}; \
         reeval's harnesses: {}",
        harbor.join(", "),
        own.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> HarnessRegistry {
        reeval_harness::registry()
    }

    fn of(agent: &str, models: &[&str]) -> Vec<String> {
        let models: Vec<String> = models.iter().map(|m| m.to_string()).collect();
        specs(agent, &models, &registry()).unwrap().into_iter().map(|a| a.spec).collect()
    }

    #[test]
    fn harbor_agents_are_harness_specs() {
        assert_eq!(
            of("claude-code", &["anthropic/claude-sonnet-4-5"]),
            ["claude-code:claude-sonnet-4-5"]
        );
        assert_eq!(
            of("codex", &["openai/gpt-5", "openai/gpt-5-codex"]),
            ["codex:gpt-5", "codex:gpt-5-codex"]
        );
        assert_eq!(of("gemini-cli", &["google/gemini-2.5-pro"]), ["gemini:gemini-2.5-pro"]);
        assert_eq!(of("mini-swe-agent", &["openai/gpt-5"]), ["mini-swe-agent:openai/gpt-5"]);
        assert_eq!(of("opencode", &[]), ["opencode"]);
        assert_eq!(of("oracle", &["x/y", "x/z"]), ["oracle"], "the oracle has no model");
        assert_eq!(of("nop", &[]), ["nop"]);
        assert_eq!(of("shell", &[]), ["shell"], "reeval's own names work too");
        let a = specs("claude-code", &["anthropic/claude-sonnet-4-5".into()], &registry()).unwrap();
        assert_eq!(
            (a[0].name.as_str(), a[0].model.as_deref()),
            ("claude-code", Some("anthropic/claude-sonnet-4-5"))
        );
    }

    #[test]
    fn an_agent_without_a_harness_is_named_with_what_there_is() {
        let e = specs("terminus-2", &[], &registry()).unwrap_err();
        assert!(e.starts_with("reeval has no harness for Harbor's agent `terminus-2`"), "{e}");
        assert!(
            e.contains("Harbor's agents reeval runs: oracle, nop, claude-code")
                && e.contains("reeval's harnesses: "),
            "{e}"
        );
        let e = specs("claude-cod", &[], &registry()).unwrap_err();
        assert!(e.contains("did you mean `claude-code`?"), "{e}");
    }
}
