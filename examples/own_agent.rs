//! An agent of your own, written in Rust and evaluated like any built-in one.
//!
//! Implement [`reeval::Harness`]: the harness runs in process on the host and
//! acts in the sandbox through the same calls the checks use (`exec`,
//! `read_file`, `write_file` on the [`SandboxHandle`]). Register it by name
//! with `reeval::register_harness!` and select it with `harness = "<name>"`
//! (or `--harness <name>` on the command line).
//!
//! Run it with `cargo run --example own_agent` (add `-- -v` to see every phase).
//! The agent here is scripted, so it needs no model: swap its `turn` for a
//! loop that asks your model what to do next.

use reeval::async_trait;
use reeval::prelude::*;
use reeval::{
    EditKind, FileEdit, Harness, HarnessError, SandboxHandle, ToolCall, TurnContext, TurnReport,
    TurnStatus,
};

/// A tiny agent: on any prompt it writes `greet.py` and a test, runs the test,
/// and reports what it did.
#[derive(Debug, Default)]
struct ScriptedAgent {
    turns: u32,
}

const GREET: &str = "def greet(name):\n    return f\"Hello, {name}!\" if name else \"Hello!\"\n";
const TEST: &str = "from greet import greet\n\nassert greet(\"Ada\") == \"Hello, Ada!\"\nassert greet(\"\") == \"Hello!\"\nprint(\"ok\")\n";

#[async_trait]
impl Harness for ScriptedAgent {
    fn name(&self) -> &str {
        "scripted-agent"
    }

    async fn turn(
        &mut self,
        sandbox: &SandboxHandle,
        prompt: &str,
        _turn: &TurnContext,
    ) -> Result<TurnReport, HarnessError> {
        self.turns += 1;
        let mut report = TurnReport::default();
        // Each action is a tool call in the record, as a model-driven agent's would be.
        for (path, content) in [("greet.py", GREET), ("test_greet.py", TEST)] {
            sandbox.write_file(path, content.as_bytes(), 0o644).await?;
            report.tool_calls.push(ToolCall {
                name: "write_file".into(),
                input: reeval::serde_json::json!({ "path": path }),
                result: Some(format!("wrote {} bytes", content.len())),
                error: None,
            });
            report.file_edits.push(FileEdit { path: path.into(), kind: EditKind::Add });
        }
        let out = sandbox.exec("python3 -B test_greet.py").await?;
        report.tool_calls.push(ToolCall {
            name: "bash".into(),
            input: reeval::serde_json::json!({ "command": "python3 -B test_greet.py" }),
            result: Some(out.stdout.clone()),
            error: (!out.success()).then(|| format!("exit code {}", out.exit_code)),
        });
        report.events = report.tool_calls.len() as u64;
        if out.success() {
            report.final_message = Some(format!(
                "Turn {}: done with {prompt:?}; greet.py is written and its test passes.",
                self.turns
            ));
        } else {
            report.status = TurnStatus::Failed;
            report.error = Some(format!("the test failed: {}", out.stderr.trim()));
        }
        Ok(report)
    }
}

reeval::register_harness!("scripted-agent", |_model| Box::new(ScriptedAgent::default()));

/// The agent's work is graded like any other agent's: by its diff and by checks.
#[reeval::eval(timeout = "2m", harness = "scripted-agent")]
async fn writes_a_tested_greet_module(c: &mut Ctx) -> reeval::Result<()> {
    let turn = c.send("Create greet.py with greet(name) and a test for it.").await?;
    expect(turn.diff.paths().join(",")).to_equal("greet.py,test_greet.py")?;
    expect(turn.tool_calls.len()).to_equal(3)?;
    expect(turn.final_message.unwrap_or_default()).to_contain("its test passes")?;
    expect(c.exec("python3 -c 'from greet import greet; print(greet(\"reeval\"))'").await?)
        .to_contain("Hello, reeval!")?;
    Ok(())
}

reeval::main!();
