//! `[[environment.mcp_servers]]`: the MCP servers Harbor gives its agents,
//! as reeval's harnesses take them (`Environment::mcp_where_taken`: an agent
//! without MCP support runs without them, as Harbor's do). A `stdio` server
//! (its `command` and `args`, started by the agent in the sandbox) and a
//! `streamable-http` one (`http` too; its `url`) are given as they are,
//! later ones replacing earlier ones of the same name, as Harbor merges
//! them. A server over `sse` (Harbor's default transport) or with `headers`
//! cannot be said to a reeval harness: it is left out, and a warning names
//! it. The oracle uses none.

use reeval_core::environment::McpServer;
use serde::Deserialize;

use super::error::HarborError;

/// One `[[environment.mcp_servers]]` table (Harbor's `MCPServerConfig`).
#[derive(Debug, Clone, Deserialize)]
struct Declared {
    name: String,
    #[serde(default = "sse")]
    transport: String,
    url: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    headers: std::collections::BTreeMap<String, String>,
}

fn sse() -> String {
    "sse".to_string()
}

/// The servers the agent is given, and a warning for each left out.
///
/// # Errors
/// [`HarborError::Parse`] naming the task for a table Harbor refuses too: no
/// `name`, an unknown transport, no `url` for an HTTP transport, no
/// `command` (or `headers`) for `stdio`.
pub(super) fn servers(
    task: &str,
    tables: &[toml::Value],
) -> Result<(Vec<McpServer>, Vec<String>), HarborError> {
    let parse = |message: String| HarborError::Parse { task: task.to_string(), message };
    let mut given: Vec<McpServer> = Vec::new();
    let mut warnings = Vec::new();
    for table in tables {
        let d = Declared::deserialize(table.clone())
            .map_err(|e| parse(format!("[[environment.mcp_servers]]: {e}")))?;
        let what = format!("[[environment.mcp_servers]] {}", d.name);
        let server = match (d.transport.as_str(), &d.url, &d.command) {
            ("stdio", _, None) => {
                return Err(parse(format!("{what}: `command` is required for stdio")));
            }
            ("stdio", _, Some(_)) if !d.headers.is_empty() => {
                return Err(parse(format!("{what}: `headers` are for HTTP transports only")));
            }
            ("stdio", _, Some(command)) => McpServer::stdio(
                d.name.clone(),
                std::iter::once(command.clone()).chain(d.args.clone()),
            ),
            ("sse" | "streamable-http" | "http", None, _) => {
                return Err(parse(format!("{what}: `url` is required for {}", d.transport)));
            }
            ("sse", Some(_), _) => {
                warnings.push(format!("{what} is not given to the agent: reeval's harnesses take no MCP server over sse"));
                continue;
            }
            ("streamable-http" | "http", Some(_), _) if !d.headers.is_empty() => {
                warnings.push(format!("{what} is not given to the agent: reeval's harnesses take no MCP server headers"));
                continue;
            }
            ("streamable-http" | "http", Some(url), _) => {
                McpServer::http(d.name.clone(), url.clone())
            }
            (other, _, _) => {
                return Err(parse(format!(
                    "{what}: transport {other:?} is not one of stdio, sse, streamable-http"
                )));
            }
        };
        given.retain(|s| s.name() != d.name);
        given.push(server);
    }
    Ok((given, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(toml: &str) -> Result<(Vec<McpServer>, Vec<String>), String> {
        let table: toml::Table = toml::from_str(toml).unwrap();
        let tables = table["mcp_servers"].as_array().unwrap().clone();
        servers("org/t", &tables).map_err(|e| e.to_string())
    }

    #[test]
    fn mcp_servers_map_onto_the_harnesses_or_are_named_as_left_out() {
        let (given, warnings) = read(
            "[[mcp_servers]]\nname = \"fs\"\ntransport = \"stdio\"\ncommand = \"npx\"\nargs = [\"-y\", \"fs\"]\n\
             [[mcp_servers]]\nname = \"api\"\ntransport = \"http\"\nurl = \"http://tools:8000/mcp\"\n\
             [[mcp_servers]]\nname = \"old\"\nurl = \"http://tools:8000/sse\"\n\
             [[mcp_servers]]\nname = \"auth\"\ntransport = \"streamable-http\"\nurl = \"http://x/mcp\"\nheaders = { Authorization = \"Bearer ${T}\" }\n\
             [[mcp_servers]]\nname = \"fs\"\ntransport = \"stdio\"\ncommand = \"fs-server\"\n",
        )
        .unwrap();
        assert_eq!(
            given,
            [
                McpServer::http("api", "http://tools:8000/mcp"),
                McpServer::stdio("fs", ["fs-server"])
            ],
            "a later server of one name replaces the earlier"
        );
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("old") && warnings[0].contains("sse"),
            "sse is Harbor's default"
        );
        assert!(warnings[1].contains("auth") && warnings[1].contains("headers"));
        let e = read("[[mcp_servers]]\nname = \"x\"\ntransport = \"stdio\"\n").unwrap_err();
        assert!(e.contains("org/t") && e.contains("`command` is required"), "{e}");
        let e =
            read("[[mcp_servers]]\nname = \"x\"\ntransport = \"streamable-http\"\n").unwrap_err();
        assert!(e.contains("`url` is required"), "{e}");
        let e =
            read("[[mcp_servers]]\nname = \"x\"\ntransport = \"ws\"\nurl = \"u\"\n").unwrap_err();
        assert!(e.contains("not one of"), "{e}");
    }

    #[test]
    fn a_tasks_mcp_servers_are_given_where_taken_and_those_left_out_warned() {
        let dir = std::env::temp_dir().join(format!("reeval-harbor-mcp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (path, text) in [
            (
                "task.toml",
                "[[environment.mcp_servers]]\nname = \"fs\"\ntransport = \"stdio\"\ncommand = \"mcp-fs\"\n\
                 [[environment.mcp_servers]]\nname = \"old\"\nurl = \"http://tools:8000/sse\"\n",
            ),
            ("instruction.md", "hi"),
            ("environment/Dockerfile", "FROM reeval/base:latest\n"),
            ("tests/test.sh", "true"),
        ] {
            std::fs::create_dir_all(dir.join(path).parent().unwrap()).unwrap();
            std::fs::write(dir.join(path), text).unwrap();
        }
        let task = crate::eval::HarborTask::read(&dir, &|_| None).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let env = task.environment();
        let (required, where_taken) = env.mcp_servers();
        assert!(required.is_empty(), "no harness is refused for a Harbor task's servers");
        assert_eq!(where_taken, [McpServer::stdio("fs", ["mcp-fs"])]);
        assert!(
            task.warnings.iter().any(|w| w.contains("old") && w.contains("sse")),
            "{:?}",
            task.warnings
        );
    }
}
