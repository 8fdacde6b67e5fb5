//! The agentic judge's tools: read a file, list a directory, run a command in
//! a throwaway copy of the workspace (the shared [`crate::llm::tools`]), then
//! the verdict. Nothing they do changes the workspace.

use std::time::Duration;

use super::verdict_tool;
use crate::llm::tools::{CommandScope, CommandTool, Tool, ToolDef, Toolset};

/// How long one judge command may run.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);

/// The tools the judge looks around with.
pub(crate) fn toolset() -> Toolset {
    Toolset::new([
        Tool::ReadFile,
        Tool::ListDir,
        Tool::Command(CommandTool {
            name: "run_command",
            shell: "sh",
            scope: CommandScope::ThrowawayCopy,
            timeout: COMMAND_TIMEOUT,
        }),
    ])
}

/// The tools as the judge is told about them, the verdict last.
pub(crate) fn tools() -> Vec<ToolDef> {
    let mut tools = toolset().defs();
    tools.push(verdict_tool());
    tools
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_strict() {
        for tool in tools() {
            let schema = &tool.schema;
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name);
            let required: Vec<&str> = schema["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            for key in schema["properties"].as_object().unwrap().keys() {
                assert!(required.contains(&key.as_str()), "{}: {key} is not required", tool.name);
            }
        }
        let names: Vec<&str> = tools().iter().map(|t| t.name).collect();
        assert_eq!(names, ["read_file", "list_dir", "run_command", super::super::SUBMIT_VERDICT]);
    }
}
