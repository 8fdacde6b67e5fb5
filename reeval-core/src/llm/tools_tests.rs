//! tools.rs's tests.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;

use super::*;
use crate::sandbox::{ExecRequest, ExecStream, Sandbox, SandboxError, Signal};

/// A sandbox that records the argv of every command and answers each with `exit_code` and `stderr`.
#[derive(Debug, Default)]
struct Fake {
    ran: Mutex<Vec<(Vec<String>, Option<Duration>)>>,
    uploads: Mutex<Vec<String>>,
    exit_code: i64,
    stderr: String,
}

#[async_trait]
impl Sandbox for Fake {
    fn id(&self) -> &str {
        "fake"
    }
    async fn start(&self) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError> {
        let cmd = request.command;
        self.ran.lock().unwrap().push((cmd.argv().to_vec(), cmd.time_limit()));
        let stdout = "out\n".to_string();
        Ok(ExecOutput {
            command: cmd.argv().join(" "),
            exit_code: self.exit_code,
            stdout_bytes: stdout.len() as u64,
            stdout,
            stderr_bytes: self.stderr.len() as u64,
            stderr: self.stderr.clone(),
            duration_ms: 1,
            timed_out: false,
        })
    }
    async fn kill(&self, _: Signal) -> Result<(), SandboxError> {
        Ok(())
    }
    async fn upload(&self, dir: &str, _: Bytes) -> Result<(), SandboxError> {
        self.uploads.lock().unwrap().push(dir.to_string());
        Ok(())
    }
    async fn download(&self, path: &str, _: u64) -> Result<Bytes, SandboxError> {
        Err(SandboxError::NotFound { path: path.to_string() })
    }
    async fn open_stream(&self, _: Vec<String>) -> Result<ExecStream, SandboxError> {
        Err(SandboxError::engine_says("open a stream", "the fake has none"))
    }
    async fn destroy(&self) -> Result<(), SandboxError> {
        Ok(())
    }
}

fn handle(fake: Fake) -> (Arc<Fake>, SandboxHandle) {
    let fake = Arc::new(fake);
    (fake.clone(), SandboxHandle::new(fake, "/workspace", Vec::new()))
}

fn shell(scope: CommandScope) -> Toolset {
    Toolset::new([
        Tool::Command(CommandTool {
            name: "sh_tool",
            shell: "bash",
            scope,
            timeout: Duration::from_secs(7),
        }),
        Tool::WriteFile,
        Tool::ReadFile,
    ])
}

#[tokio::test]
async fn a_command_runs_in_the_workspace_or_a_throwaway_copy() {
    let (fake, sandbox) = handle(Fake::default());
    let out = shell(CommandScope::Workspace)
        .run(&sandbox, "sh_tool", &json!({"command": "make test"}))
        .await;
    assert_eq!(
        (out.text.as_str(), out.failed, out.call.error.as_deref()),
        ("exit code 0\n--- stdout ---\nout", false, None)
    );
    assert_eq!(out.call.result.as_deref(), Some(out.text.as_str()));
    let (argv, timeout) = fake.ran.lock().unwrap().remove(0);
    assert_eq!(
        (argv, timeout),
        (vec!["bash".to_string(), "-c".into(), "make test".into()], Some(Duration::from_secs(7)))
    );

    shell(CommandScope::ThrowawayCopy)
        .run(&sandbox, "sh_tool", &json!({"command": "make test"}))
        .await;
    let (argv, _) = fake.ran.lock().unwrap().remove(0);
    // The script copies `$0` (the workspace) and runs `$1` (the command) with the tool's shell; both stay data.
    assert_eq!(
        (argv[0].as_str(), argv[1].as_str(), argv[3].as_str(), argv[4].as_str()),
        ("sh", "-c", "/workspace", "make test")
    );
    assert!(
        argv[2].contains(&format!("cp -a \"$0\" {SCRATCH}"))
            && argv[2].contains("bash -c \"$1\"")
            && !argv[2].contains("make test"),
        "{}",
        argv[2]
    );
}

#[tokio::test]
async fn a_non_zero_exit_is_recorded_and_a_failed_copy_is_a_failure() {
    let (_, sandbox) = handle(Fake { exit_code: 2, stderr: "boom".into(), ..Fake::default() });
    let out =
        shell(CommandScope::Workspace).run(&sandbox, "sh_tool", &json!({"command": "false"})).await;
    assert!(
        !out.failed
            && out.text.starts_with("exit code 2")
            && out.text.ends_with("--- stderr ---\nboom"),
        "{}",
        out.text
    );
    assert_eq!(out.call.error.as_deref(), Some("exit code 2"));

    let (_, sandbox) = handle(Fake {
        exit_code: COPY_FAILED_CODE,
        stderr: format!("cp: no space\n{COPY_FAILED}"),
        ..Fake::default()
    });
    let out = shell(CommandScope::ThrowawayCopy)
        .run(&sandbox, "sh_tool", &json!({"command": "true"}))
        .await;
    assert!(
        out.failed
            && out.text.starts_with("failed to copy the workspace for the command: cp: no space"),
        "{}",
        out.text
    );
    assert_eq!((out.call.result, out.call.error.as_deref()), (None, Some(out.text.as_str())));
}

#[tokio::test]
async fn bad_calls_fail_without_touching_the_sandbox() {
    let (fake, sandbox) = handle(Fake::default());
    let tools = shell(CommandScope::Workspace);
    let unknown = tools.run(&sandbox, "rm_rf", &json!({})).await;
    assert_eq!(
        unknown.text,
        "failed to run rm_rf: there is no such tool; use sh_tool, write_file or read_file"
    );
    let not_object = tools.run(&sandbox, "sh_tool", &json!("ls")).await;
    assert_eq!(not_object.text, "failed to run sh_tool: its arguments are not a JSON object");
    let missing = tools.run(&sandbox, "write_file", &json!({"path": "a.txt"})).await;
    assert_eq!(
        missing.text,
        "failed to run write_file: the `content` argument is missing or not a string"
    );
    assert!(unknown.failed && not_object.failed && missing.failed);
    assert!(fake.ran.lock().unwrap().is_empty());
    let absent = tools.run(&sandbox, "read_file", &json!({"path": "nope.txt"})).await;
    assert!(absent.failed && absent.text.contains("/workspace/nope.txt"), "{}", absent.text);
}

#[tokio::test]
async fn a_written_file_is_an_edit() {
    // `test -e` exits 0: the file was there.
    let (fake, sandbox) = handle(Fake::default());
    let out = shell(CommandScope::Workspace)
        .run(&sandbox, "write_file", &json!({"path": "src/a.py", "content": "x = 1\n"}))
        .await;
    assert_eq!(out.text, "wrote 6 bytes to src/a.py");
    assert_eq!(out.edit, Some(FileEdit { path: "src/a.py".into(), kind: EditKind::Update }));
    assert_eq!(*fake.uploads.lock().unwrap(), ["/workspace/src"]);
    let (_, sandbox) = handle(Fake { exit_code: 1, ..Fake::default() });
    let out = shell(CommandScope::Workspace)
        .run(&sandbox, "write_file", &json!({"path": "b.py", "content": ""}))
        .await;
    assert_eq!(out.edit.map(|e| e.kind), Some(EditKind::Add));
}

fn every_tool() -> Toolset {
    let command = |scope| {
        Tool::Command(CommandTool {
            name: "run_command",
            shell: "sh",
            scope,
            timeout: Duration::from_secs(1),
        })
    };
    Toolset::new([
        Tool::ReadFile,
        Tool::ListDir,
        Tool::ListFiles,
        Tool::WriteFile,
        command(CommandScope::Workspace),
        command(CommandScope::ThrowawayCopy),
    ])
}

#[test]
fn schemas_are_strict() {
    for def in every_tool().defs() {
        let schema = &def.schema;
        assert_eq!(schema["additionalProperties"], false, "{}", def.name);
        let required: Vec<&str> =
            schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let properties: Vec<&str> =
            schema["properties"].as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(required, properties, "{}", def.name);
    }
    assert_eq!(Tool::WriteFile.def().schema["required"], json!(["content", "path"]));
}

#[test]
fn functions_and_extra_keywords() {
    let mut def = Tool::ReadFile.def();
    let f = def.chat_function(false);
    assert_eq!(
        (f["type"].as_str(), f["function"]["name"].as_str()),
        (Some("function"), Some("read_file"))
    );
    assert!(f["function"].get("strict").is_none());
    assert_eq!(def.chat_function(true)["function"]["strict"], true);
    assert_eq!(def.schema_with_extra_keywords(), def.schema);
    def.extra_keywords = Some(json!({"path": {"maxLength": 10}}));
    assert_eq!(
        def.schema_with_extra_keywords()["properties"]["path"],
        json!({"type": "string", "description": "The file's path.", "maxLength": 10})
    );
}

#[test]
fn command_descriptions_say_where_it_runs() {
    let tool = |scope| {
        Tool::Command(CommandTool {
            name: "bash",
            shell: "bash",
            scope,
            timeout: Duration::from_secs(1),
        })
        .def()
    };
    assert!(tool(CommandScope::Workspace).description.contains("bash command in the workspace"));
    assert!(tool(CommandScope::ThrowawayCopy).description.contains("thrown away"));
}

#[test]
fn unknown_tools_name_the_known_ones() {
    assert_eq!(
        every_tool().names(),
        "read_file, list_dir, list_files, write_file, run_command or run_command"
    );
    assert_eq!(Toolset::new([Tool::ReadFile]).names(), "read_file");
}

#[test]
fn command_output_keeps_each_streams_tail() {
    let out = |stdout: &str, stderr: &str| ExecOutput {
        command: "c".into(),
        exit_code: 0,
        stdout: stdout.into(),
        stderr: stderr.into(),
        stdout_bytes: stdout.len() as u64,
        stderr_bytes: stderr.len() as u64,
        duration_ms: 1,
        timed_out: false,
    };
    assert_eq!(command_text("exit code 0", &out("", "")), "exit code 0");
    assert_eq!(
        command_text("exit code 1", &out("a\n", "b\n")),
        "exit code 1\n--- stdout ---\na\n--- stderr ---\nb"
    );
    let long = format!("start{}end", "x".repeat(OUTPUT_LIMIT));
    let text = command_text("exit code 0", &out(&long, ""));
    assert!(
        text.contains(&format!(
            "[stdout truncated: the last {OUTPUT_LIMIT} of {} bytes are shown]",
            long.len()
        )),
        "{}",
        &text[..200]
    );
    assert!(text.ends_with("end") && !text.contains("start"));
}

#[test]
fn truncation_is_visible_and_keeps_characters_whole() {
    assert_eq!(truncate("short", 10, "file"), "short");
    assert_eq!(truncate("ééé", 3, "file"), "é\n[file truncated: the first 2 of 6 bytes are shown]");
    assert_eq!(head("ééé", 5), "éé");
}
