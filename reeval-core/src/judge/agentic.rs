//! The agentic judge's tools: read a file, list a directory, run a command in
//! a throwaway copy of the workspace. Nothing they do changes the workspace.

use std::time::Duration;

use serde_json::json;

use super::{Call, ToolDef, verdict_tool};
use crate::exec::Command;
use crate::sandbox::SandboxHandle;

/// Where `run_command` copies the workspace; removed after every command.
pub(crate) const SCRATCH: &str = "/tmp/reeval-judge-ws";
/// How long one judge command may run.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// What the script says when the copy fails.
const COPY_FAILED: &str = "reeval-judge: failed to copy the workspace";
/// How much of a tool's output the judge is shown.
const OUTPUT_LIMIT: usize = 16_000;

/// The tools, the verdict last.
pub(crate) fn tools() -> Vec<ToolDef> {
    let one_string = |name: &str, description: &str| {
        json!({
            "type": "object",
            "properties": {name: {"type": "string", "description": description}},
            "required": [name],
            "additionalProperties": false
        })
    };
    vec![
        ToolDef {
            name: "read_file",
            description: "Read a text file of the sandbox. Relative paths are in the workspace.",
            schema: one_string("path", "The file's path."),
        },
        ToolDef {
            name: "list_dir",
            description: "List a directory of the sandbox (ls -la). Relative paths are in the workspace.",
            schema: one_string("path", "The directory's path; `.` is the workspace."),
        },
        ToolDef {
            name: "run_command",
            description: "Run a shell command (sh -c) in a fresh copy of the workspace; whatever it changes is thrown away. Returns the exit code, stdout and stderr.",
            schema: one_string("command", "The shell command."),
        },
        verdict_tool(),
    ]
}

/// Runs one tool call: its output, or its error, as text for the judge.
pub(crate) async fn run(sandbox: &SandboxHandle, call: &Call) -> Result<String, String> {
    let arg =
        |name: &str| call.input[name].as_str().map(str::to_string).ok_or_else(|| format!("failed to run {}: the `{name}` argument is missing", call.name));
    match call.name.as_str() {
        "read_file" => {
            let path = arg("path")?;
            let bytes = sandbox.read_file(&path).await.map_err(|e| e.to_string())?;
            match String::from_utf8(bytes) {
                Ok(text) => Ok(super::prompt::truncate(&text, OUTPUT_LIMIT, "file")),
                Err(e) => Err(format!("failed to read {path} as text: it is binary ({} bytes)", e.as_bytes().len())),
            }
        }
        "list_dir" => {
            let path = arg("path")?;
            let out = sandbox.exec(Command::new("ls").args(["-la", "--", &path]).timeout(Duration::from_secs(30))).await.map_err(|e| e.to_string())?;
            if out.success() {
                Ok(super::prompt::truncate(&out.stdout, OUTPUT_LIMIT, "listing"))
            } else {
                Err(format!("failed to list {path}: {}", out.stderr.trim()))
            }
        }
        "run_command" => {
            let command = arg("command")?;
            // The command is `$1` of the script: data, never spliced into it.
            let script = format!(
                "rm -rf {SCRATCH} && cp -a \"$0\" {SCRATCH} && cd {SCRATCH} || {{ echo '{COPY_FAILED}' >&2; exit 125; }}\nsh -c \"$1\"\nrc=$?\ncd / && rm -rf {SCRATCH}\nexit $rc"
            );
            let cmd = Command::new("sh").arg("-c").arg(script).arg(sandbox.workspace()).arg(&command).timeout(COMMAND_TIMEOUT);
            let out = sandbox.exec(cmd).await.map_err(|e| e.to_string())?;
            if out.exit_code == 125 && out.stderr.contains(COPY_FAILED) {
                return Err(format!("failed to copy the workspace for the command: {}", out.stderr.trim()));
            }
            let status = if out.timed_out { format!("killed after {}s", COMMAND_TIMEOUT.as_secs()) } else { format!("exit code {}", out.exit_code) };
            Ok(super::prompt::truncate(&format!("{status}\n--- stdout ---\n{}\n--- stderr ---\n{}", out.stdout, out.stderr), OUTPUT_LIMIT, "output"))
        }
        other => Err(format!("failed to run {other}: there is no such tool; use read_file, list_dir, run_command or submit_verdict")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_strict() {
        for tool in tools() {
            let schema = &tool.schema;
            assert_eq!(schema["additionalProperties"], false, "{}", tool.name);
            let required: Vec<&str> = schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            for key in schema["properties"].as_object().unwrap().keys() {
                assert!(required.contains(&key.as_str()), "{}: {key} is not required", tool.name);
            }
        }
        assert_eq!(tools().last().unwrap().name, super::super::SUBMIT_VERDICT);
    }
}
