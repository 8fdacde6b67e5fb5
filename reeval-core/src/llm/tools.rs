//! The tools a model acts in the sandbox with, shared by the built-in `openai`
//! agent and the agentic judge: read a file, list a directory or the files
//! under it, run a shell command (in the workspace, or in a throwaway copy of
//! it), write a file. A call returns the text the model is shown and the
//! [`ToolCall`] the record keeps.
//!
//! Every schema is in the strict subset of JSON schema (every property
//! required, no others), which OpenAI's strict mode asks for and every
//! provider accepts.

use std::time::Duration;

use serde_json::{Value, json};

use crate::exec::{Command, ExecOutput};
use crate::sandbox::SandboxHandle;
use crate::turn::{EditKind, FileEdit, ToolCall};

/// How much of a file, a listing or a command's stream the model is shown.
pub const OUTPUT_LIMIT: usize = 16_000;
/// The most paths `list_files` gives.
const LIST_FILES_LIMIT: usize = 1000;
/// Where a throwaway command copies the workspace; removed after every command.
const SCRATCH: &str = "/tmp/reeval-scratch-ws";
/// What the throwaway script says when the copy fails.
const COPY_FAILED: &str = "reeval: failed to copy the workspace";
/// The exit code the throwaway script gives when the copy fails.
const COPY_FAILED_CODE: i64 = 125;

/// A tool as a model is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    /// The name the model calls it by.
    pub name: &'static str,
    /// What it does, for the model.
    pub description: String,
    /// The JSON schema of its input, in the strict subset.
    pub schema: Value,
    /// Keywords outside the strict subset, by property (`{"score": {"minimum": 0}}`),
    /// for the providers that take them (Anthropic).
    pub extra_keywords: Option<Value>,
}

impl ToolDef {
    /// A tool whose input is an object of the string `properties` (name, description), all required.
    pub fn strings(
        name: &'static str,
        description: impl Into<String>,
        properties: &[(&str, &str)],
    ) -> Self {
        let props: serde_json::Map<String, Value> = properties
            .iter()
            .map(|(p, d)| (p.to_string(), json!({"type": "string", "description": d})))
            .collect();
        // Required in the properties' (sorted) order, so a tool's schema reads the same however it was built.
        let required: Vec<&String> = props.keys().collect();
        let schema = json!({"type": "object", "properties": props, "required": required, "additionalProperties": false});
        Self { name, description: description.into(), schema, extra_keywords: None }
    }

    /// As an OpenAI chat completions function (`{"type": "function", "function": ..}`);
    /// with `strict`, the API holds the model to the schema.
    pub fn chat_function(&self, strict: bool) -> Value {
        let mut function =
            json!({"name": self.name, "description": self.description, "parameters": self.schema});
        if strict {
            function["strict"] = json!(true);
        }
        json!({"type": "function", "function": function})
    }

    /// The schema with [`ToolDef::extra_keywords`] merged into its properties.
    pub fn schema_with_extra_keywords(&self) -> Value {
        let mut schema = self.schema.clone();
        for (property, keywords) in
            self.extra_keywords.as_ref().and_then(Value::as_object).into_iter().flatten()
        {
            for (keyword, value) in keywords.as_object().into_iter().flatten() {
                schema["properties"][property][keyword] = value.clone();
            }
        }
        schema
    }
}

/// Where a command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandScope {
    /// In the workspace: what it changes stays (an agent's `bash`).
    Workspace,
    /// In a fresh copy of the workspace, removed afterwards, so that nothing it
    /// does changes the workspace (the agentic judge's `run_command`).
    ThrowawayCopy,
}

/// A shell-command tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandTool {
    /// The name the model calls it by (`bash`, `run_command`).
    pub name: &'static str,
    /// The shell: the command runs as `<shell> -c <command>`.
    pub shell: &'static str,
    /// Where it runs.
    pub scope: CommandScope,
    /// How long one command may run before it is killed.
    pub timeout: Duration,
}

/// One tool of the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tool {
    /// `read_file {path}`: a text file, cut at [`OUTPUT_LIMIT`] with a note.
    ReadFile,
    /// `list_dir {path}`: one directory, as `ls -la` lists it.
    ListDir,
    /// `list_files {path}`: the paths under a directory, recursively, `.git` left out.
    ListFiles,
    /// `write_file {path, content}`: a file created with its directories, or replaced; the edit is recorded.
    WriteFile,
    /// `<name> {command}`: a shell command; its exit code, stdout and stderr.
    Command(CommandTool),
}

impl Tool {
    /// The name the model calls it by.
    pub fn name(&self) -> &'static str {
        match self {
            Tool::ReadFile => "read_file",
            Tool::ListDir => "list_dir",
            Tool::ListFiles => "list_files",
            Tool::WriteFile => "write_file",
            Tool::Command(c) => c.name,
        }
    }

    /// The tool as the model is told about it.
    pub fn def(&self) -> ToolDef {
        let name = self.name();
        match self {
            Tool::ReadFile => ToolDef::strings(
                name,
                "Read a text file of the sandbox. Relative paths are in the workspace.",
                &[("path", "The file's path.")],
            ),
            Tool::ListDir => ToolDef::strings(
                name,
                "List a directory of the sandbox (ls -la). Relative paths are in the workspace.",
                &[("path", "The directory's path; `.` is the workspace.")],
            ),
            Tool::ListFiles => ToolDef::strings(
                name,
                "List files under a directory, recursively (.git excluded).",
                &[("path", "The directory; `.` is the workspace.")],
            ),
            Tool::WriteFile => ToolDef::strings(
                name,
                "Write a file (created with its directories, or replaced). Relative paths are in the workspace.",
                &[("path", "The file's path."), ("content", "The whole new content.")],
            ),
            Tool::Command(c) => {
                let description = match c.scope {
                    CommandScope::Workspace => format!(
                        "Run a {} command in the workspace. Returns the exit code, stdout and stderr.",
                        c.shell
                    ),
                    CommandScope::ThrowawayCopy => format!(
                        "Run a shell command ({} -c) in a fresh copy of the workspace; whatever it changes is thrown away. Returns the exit code, stdout and stderr.",
                        c.shell
                    ),
                };
                ToolDef::strings(name, description, &[("command", "The shell command.")])
            }
        }
    }
}

/// What one tool call gave.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model is shown: the output, or why the tool failed.
    pub text: String,
    /// Whether the tool failed to run. A command that ran and exited non-zero
    /// did not: its exit code is in the text and the record's `error`.
    pub failed: bool,
    /// The record of the call: its output as `result`, or its failure (or a
    /// command's non-zero exit) as `error`.
    pub call: ToolCall,
    /// The edit a `write_file` made.
    pub edit: Option<FileEdit>,
}

/// The tools one model may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toolset {
    tools: Vec<Tool>,
    /// Variables for the commands the tools run (a turn's own).
    env: Vec<(String, String)>,
}

/// A tool that ran: its text, the failure the record keeps (a command's
/// non-zero exit), and the edit it made.
type Ran = (String, Option<String>, Option<FileEdit>);

impl Toolset {
    /// These tools, in the order the model is told about them.
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> Self {
        Self { tools: tools.into_iter().collect(), env: Vec::new() }
    }

    /// These tools, their commands run with `env` besides the sandbox's.
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    /// The tools.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tools as the model is told about them.
    pub fn defs(&self) -> Vec<ToolDef> {
        self.tools.iter().map(Tool::def).collect()
    }

    /// Runs the call of tool `name` with `input` in `sandbox`. A failure is
    /// text for the model, never an error: the model may try another way.
    ///
    /// # Errors
    /// None: a tool that failed is [`ToolOutput::failed`], its cause the text.
    ///
    /// # Cancel safety
    /// Dropping it drops the sandbox call in progress; a command may keep
    /// running in the sandbox until its timeout or teardown, and a throwaway
    /// copy stays until the next command of the scope replaces it.
    pub async fn run(&self, sandbox: &SandboxHandle, name: &str, input: &Value) -> ToolOutput {
        let ran = match self.tools.iter().find(|t| t.name() == name) {
            None => {
                Err(format!("failed to run {name}: there is no such tool; use {}", self.names()))
            }
            Some(_) if !input.is_object() => {
                Err(format!("failed to run {name}: its arguments are not a JSON object"))
            }
            Some(tool) => run(tool, sandbox, input, &self.env).await,
        };
        let call = |result, error| ToolCall {
            name: name.to_string(),
            input: input.clone(),
            result,
            error,
        };
        match ran {
            Ok((text, error, edit)) => {
                ToolOutput { call: call(Some(text.clone()), error), text, failed: false, edit }
            }
            Err(error) => ToolOutput {
                call: call(None, Some(error.clone())),
                text: error,
                failed: true,
                edit: None,
            },
        }
    }

    /// `a, b or c`.
    fn names(&self) -> String {
        let names: Vec<&str> = self.tools.iter().map(Tool::name).collect();
        match names.split_last() {
            None => "none: there are no tools".to_string(),
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        }
    }
}

/// Runs one tool whose input is an object.
async fn run(
    tool: &Tool,
    sandbox: &SandboxHandle,
    input: &Value,
    env: &[(String, String)],
) -> Result<Ran, String> {
    let name = tool.name();
    let arg = |key: &str| {
        input[key].as_str().map(str::to_string).ok_or_else(|| {
            format!("failed to run {name}: the `{key}` argument is missing or not a string")
        })
    };
    let exec = async |mut cmd: Command| {
        for (k, v) in env {
            cmd = cmd.env(k.clone(), v.clone());
        }
        sandbox.exec(cmd).await.map_err(|e| e.to_string())
    };
    match tool {
        Tool::ReadFile => {
            let path = arg("path")?;
            let bytes = sandbox.read_file(&path).await.map_err(|e| e.to_string())?;
            match String::from_utf8(bytes) {
                Ok(text) => Ok((truncate(&text, OUTPUT_LIMIT, "file"), None, None)),
                Err(e) => Err(format!(
                    "failed to read {path} as text: it is binary ({} bytes)",
                    e.as_bytes().len()
                )),
            }
        }
        Tool::ListDir => {
            let path = arg("path")?;
            let out = exec(
                Command::new("ls").args(["-la", "--", &path]).timeout(Duration::from_secs(30)),
            )
            .await?;
            if !out.success() {
                return Err(format!("failed to list {path}: {}", out.stderr.trim()));
            }
            Ok((truncate(&out.stdout, OUTPUT_LIMIT, "listing"), None, None))
        }
        Tool::ListFiles => {
            let path = arg("path")?;
            // The path is `$1` of the script: data, never spliced into it.
            let script = format!(
                "find \"$1\" -not -path '*/.git' -not -path '*/.git/*' | sort | head -n {LIST_FILES_LIMIT}"
            );
            let out = exec(
                Command::new("sh")
                    .arg("-c")
                    .arg(script)
                    .arg(name)
                    .arg(&path)
                    .timeout(Duration::from_secs(60)),
            )
            .await?;
            if out.stdout.trim().is_empty() && !out.stderr.trim().is_empty() {
                return Err(format!("failed to list {path}: {}", out.stderr.trim()));
            }
            Ok((truncate(&out.stdout, OUTPUT_LIMIT, "listing"), None, None))
        }
        Tool::WriteFile => {
            let path = arg("path")?;
            let content = arg("content")?;
            let existed = exec(Command::new("test").arg("-e").arg(&path)).await?.success();
            sandbox
                .write_file(&path, content.as_bytes(), 0o644)
                .await
                .map_err(|e| e.to_string())?;
            let kind = if existed { EditKind::Update } else { EditKind::Add };
            Ok((
                format!("wrote {} bytes to {path}", content.len()),
                None,
                Some(FileEdit { path, kind }),
            ))
        }
        Tool::Command(c) => {
            let command = arg("command")?;
            let out = exec(c.command(sandbox, &command)).await?;
            if c.scope == CommandScope::ThrowawayCopy
                && out.exit_code == COPY_FAILED_CODE
                && out.stderr.contains(COPY_FAILED)
            {
                return Err(format!(
                    "failed to copy the workspace for the command: {}",
                    out.stderr.trim()
                ));
            }
            let status = if out.timed_out {
                format!("killed after {}s", c.timeout.as_secs())
            } else {
                format!("exit code {}", out.exit_code)
            };
            Ok((command_text(&status, &out), (!out.success()).then_some(status), None))
        }
    }
}

impl CommandTool {
    /// The sandbox command that runs `command` in this tool's scope.
    fn command(&self, sandbox: &SandboxHandle, command: &str) -> Command {
        let shell = self.shell;
        let cmd = match self.scope {
            CommandScope::Workspace => Command::new(shell).arg("-c").arg(command),
            CommandScope::ThrowawayCopy => {
                // The workspace is `$0` and the command `$1` of the script: data, never spliced into it.
                let script = format!(
                    "rm -rf {SCRATCH} && cp -a \"$0\" {SCRATCH} && cd {SCRATCH} || {{ echo '{COPY_FAILED}' >&2; exit {COPY_FAILED_CODE}; }}\n\
                     {shell} -c \"$1\"\nrc=$?\ncd / && rm -rf {SCRATCH}\nexit $rc"
                );
                Command::new("sh").arg("-c").arg(script).arg(sandbox.workspace()).arg(command)
            }
        };
        cmd.timeout(self.timeout)
    }
}

/// A command's status, then each stream that printed anything, each cut to its
/// last [`OUTPUT_LIMIT`] bytes (where errors and summaries are) with a note.
fn command_text(status: &str, out: &ExecOutput) -> String {
    let mut text = status.to_string();
    for (name, stream) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        if stream.is_empty() {
            continue;
        }
        let shown = crate::exec::tail(stream, OUTPUT_LIMIT);
        text.push_str(&format!("\n--- {name} ---\n"));
        if shown.len() < stream.len() {
            text.push_str(&format!(
                "[{name} truncated: the last {} of {} bytes are shown]\n",
                shown.len(),
                stream.len()
            ));
        }
        // The section's own line break stands for the stream's last one.
        text.push_str(shown.strip_suffix('\n').unwrap_or(shown));
    }
    text
}

/// The first `limit` bytes of `text`, cut at a character boundary.
pub(crate) fn head(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text` cut at `limit` bytes with a visible notice naming what was cut.
pub(crate) fn truncate(text: &str, limit: usize, what: &str) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let shown = head(text, limit);
    format!(
        "{shown}\n[{what} truncated: the first {} of {} bytes are shown]",
        shown.len(),
        text.len()
    )
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
