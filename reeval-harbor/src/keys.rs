//! The keys Harbor 0.26 knows in `task.toml` (`harbor/models/task/config.py`),
//! so that a key neither Harbor nor reeval knows (`timeout_secs`,
//! `[verifer]`) is said, with the nearest known key, instead of ignored in
//! silence (Harbor ignores it; a one-hour default then applies without a word).

/// What a key holds.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// A value, not looked into.
    Value,
    /// A table of free keys (`[metadata]`, an `env` table).
    FreeTable,
    /// A table of these keys.
    Table(&'static [(&'static str, Shape)]),
    /// A list whose tables have these keys (strings pass).
    Tables(&'static [(&'static str, Shape)]),
}

use Shape::{FreeTable, Table, Tables, Value};

const NETWORK: [(&str, Shape); 2] = [("network_mode", Value), ("allowed_hosts", Value)];

const HEALTHCHECK: &[(&str, Shape)] = &[
    ("command", Value),
    ("interval_sec", Value),
    ("timeout_sec", Value),
    ("start_period_sec", Value),
    ("start_interval_sec", Value),
    ("retries", Value),
];

const MCP_SERVER: &[(&str, Shape)] = &[
    ("name", Value),
    ("transport", Value),
    ("url", Value),
    ("command", Value),
    ("args", Value),
    ("headers", FreeTable),
];

const ENVIRONMENT: &[(&str, Shape)] = &[
    NETWORK[0],
    NETWORK[1],
    ("build_timeout_sec", Value),
    ("docker_image", Value),
    ("os", Value),
    ("cpus", Value),
    ("memory_mb", Value),
    ("storage_mb", Value),
    ("gpus", Value),
    ("gpu_types", Value),
    ("tpu", Table(&[("type", Value), ("topology", Value)])),
    ("mcp_servers", Tables(MCP_SERVER)),
    ("env", FreeTable),
    ("skills_dir", Value),
    ("healthcheck", Table(HEALTHCHECK)),
    ("workdir", Value),
    ("allow_internet", Value),
    // Deprecated forms Harbor still maps.
    ("memory", Value),
    ("storage", Value),
];

const AGENT: &[(&str, Shape)] = &[NETWORK[0], NETWORK[1], ("timeout_sec", Value), ("user", Value)];

const COLLECT: &[(&str, Shape)] =
    &[("command", Value), ("service", Value), ("timeout_sec", Value), ("user", Value)];

const VERIFIER: &[(&str, Shape)] = &[
    NETWORK[0],
    NETWORK[1],
    ("timeout_sec", Value),
    ("env", FreeTable),
    ("user", Value),
    ("environment_mode", Value),
    ("environment", Table(ENVIRONMENT)),
    ("collect", Tables(COLLECT)),
];

const ARTIFACT: &[(&str, Shape)] =
    &[("source", Value), ("destination", Value), ("exclude", Value), ("service", Value)];

const STEP: &[(&str, Shape)] = &[
    ("name", Value),
    ("agent", Table(AGENT)),
    ("verifier", Table(VERIFIER)),
    ("min_reward", Value),
    ("healthcheck", Table(HEALTHCHECK)),
    ("artifacts", Tables(ARTIFACT)),
];

const TASK: &[(&str, Shape)] = &[
    ("name", Value),
    ("version", Value),
    ("description", Value),
    ("authors", Tables(&[("name", Value), ("email", Value)])),
    ("keywords", Value),
];

const TOP: &[(&str, Shape)] = &[
    ("schema_version", Value),
    ("version", Value),
    ("task", Table(TASK)),
    ("metadata", FreeTable),
    ("verifier", Table(VERIFIER)),
    ("agent", Table(AGENT)),
    ("environment", Table(ENVIRONMENT)),
    ("solution", Table(&[("env", FreeTable)])),
    ("source", Value),
    ("multi_step_reward_strategy", Value),
    ("steps", Tables(STEP)),
    ("artifacts", Tables(ARTIFACT)),
];

/// Each key of `config` Harbor 0.26 does not know, as
/// `` `[agent].timeout_secs` is not a key Harbor knows (did you mean `timeout_sec`?) ``.
pub(crate) fn unknown(config: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    walk(config, TOP, "", &mut out);
    out
}

fn walk(table: &toml::Table, keys: &[(&str, Shape)], at: &str, out: &mut Vec<String>) {
    for (key, value) in table {
        let Some((_, shape)) = keys.iter().find(|(k, _)| k == key) else {
            let shown = if at.is_empty() { format!("`{key}`") } else { format!("`[{at}].{key}`") };
            let hint =
                nearest(key, keys).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
            out.push(format!("{shown} is not a key Harbor knows; it is ignored{hint}"));
            continue;
        };
        let path = if at.is_empty() { key.clone() } else { format!("{at}.{key}") };
        match (shape, value) {
            (Table(inner), toml::Value::Table(t)) => walk(t, inner, &path, out),
            (Tables(inner), toml::Value::Array(items)) => {
                for item in items {
                    if let toml::Value::Table(t) = item {
                        walk(t, inner, &path, out);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The known key nearest to `key`, when one is near enough to be a typo.
fn nearest<'a>(key: &str, keys: &[(&'a str, Shape)]) -> Option<&'a str> {
    reeval_core::suggest::nearest(key, keys.iter().map(|(k, _)| *k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unknown_in(text: &str) -> Vec<String> {
        unknown(&text.parse::<toml::Table>().unwrap())
    }

    #[test]
    fn typos_are_named_with_the_nearest_key_and_harbors_own_keys_pass() {
        let found = unknown_in(
            "[verifer]\ntimeout_sec = 1\n[agent]\ntimeout_secs = 5\n\
             [environment]\nworkdir = \"/app\"\nhealthcheck = { command = \"true\", retries = 2 }\n\
             [[steps]]\nname = \"a\"\nmin_rewards = 1\n[[verifier.collect]]\ncommand = \"x\"\n\
             [metadata]\nanything = 1\n",
        );
        assert_eq!(
            found,
            [
                "`[agent].timeout_secs` is not a key Harbor knows; it is ignored (did you mean `timeout_sec`?)",
                "`[steps].min_rewards` is not a key Harbor knows; it is ignored (did you mean `min_reward`?)",
                "`verifer` is not a key Harbor knows; it is ignored (did you mean `verifier`?)",
            ]
        );
        assert!(
            unknown_in("[environment]\nzzz_nothing_like_it = 1\n")[0].ends_with("it is ignored")
        );
    }
}
