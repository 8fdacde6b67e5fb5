//! mini-swe-agent (the SWE-bench community's reference agent): `mini --yolo
//! --exit-immediately --agent-class default --model <litellm model> --task
//! <task> --cost-limit 0 --output <home>/turn.traj.json`, one bash tool, any
//! provider through litellm. Its stdout is a console log, not events: the
//! turn is read from the trajectory file it saves after every step (messages,
//! each model response with its usage, the exit status).
//!
//! mini-swe-agent cannot resume: every run starts a new conversation. A later
//! turn therefore runs with the session's earlier tasks listed before the new
//! one (the workspace holds what they changed); the model does not see the
//! earlier turns' messages. Each turn's usage is its own run's.
//!
//! Only the model API is reached: litellm uses its bundled model cost map
//! (`LITELLM_LOCAL_MODEL_COST_MAP`, `LITELLM_OFFLINE_MODE`), and neither
//! mini-swe-agent (`MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT=1`) nor the OpenAI
//! client under litellm (`model.model_kwargs.max_retries=0`) retries, so a
//! 429, 529 or 401 reaches reeval's classification in seconds. The key
//! reaches the provider by TLS interception, brokered by the gateway.
//! Config home: `MSWEA_GLOBAL_CONFIG_DIR`; its trajectories are kept under
//! `turns/`. No skills or MCP servers; it reads no rules file by itself.

use reeval_core::Command;
use reeval_core::egress::HarnessEgress;
use reeval_core::harness::SessionSetup;
use reeval_core::sandbox::SandboxHandle;
use reeval_core::turn::Usage;
use serde_json::Value;

use super::report::{count, string, text_of};
use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};

/// The pinned PyPI release of mini-swe-agent (the one the real-CLI tests run).
pub const VERSION: &str = "2.4.6";

/// The model when none is selected (a litellm model name, provider first).
pub const DEFAULT_MODEL: &str = "anthropic/claude-sonnet-4-5-20250929";

/// Where a turn's trajectory is written in the config home, before it is
/// moved to `turns/turn-<n>.traj.json` once read.
const TRAJECTORY: &str = "turn.traj.json";

/// The exit status of a run the agent finished by submitting.
const SUBMITTED: &str = "Submitted";

/// mini-swe-agent's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct MiniSwe;

/// The mini-swe-agent harness.
pub type MiniSweHarness = CliHarness<MiniSwe>;

/// A mini-swe-agent harness for `model` (a litellm model name such as
/// `openai/gpt-5` or `anthropic/claude-sonnet-4-5-20250929`).
pub fn harness(model: Option<&str>) -> MiniSweHarness {
    CliHarness::new(MiniSwe, model)
}

fn model_or_default(model: Option<&str>) -> &str {
    model.unwrap_or(DEFAULT_MODEL)
}

/// The task of a turn: the session's earlier tasks first, since the new run
/// does not see the earlier conversations.
pub fn task_with_history(prompt: &str, earlier: &[String]) -> String {
    if earlier.is_empty() {
        return prompt.to_string();
    }
    let mut task = String::from(
        "Earlier tasks of this session, already worked on in this workspace (their changes are in the files):\n",
    );
    for (i, t) in earlier.iter().enumerate() {
        task.push_str(&format!("{}. {}\n", i + 1, t.trim()));
    }
    task.push_str("\nThe task now:\n");
    task.push_str(prompt);
    task
}

#[async_trait::async_trait]
impl CliAgent for MiniSwe {
    const IDENTITY: CliIdentity = CliIdentity {
        name: "mini-swe-agent",
        program: "mini",
        version: Some(VERSION),
        rules_file: "AGENTS.md",
    };

    fn install_steps(&self) -> Vec<String> {
        vec![format!(
            "python3 -m pip install --no-cache-dir --quiet --disable-pip-version-check mini-swe-agent=={VERSION}"
        )]
    }

    fn credentials(&self, model: Option<&str>) -> Vec<String> {
        vec![super::provider_key(&super::provider_of(Some(model_or_default(model))))]
    }

    fn egress(&self, model: Option<&str>) -> HarnessEgress {
        let provider = super::provider_of(Some(model_or_default(model)));
        super::egress_of(super::provider_broker(&provider).into_iter().collect(), &[])
    }

    fn env(&self, home: &str, _sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        [
            ("MSWEA_GLOBAL_CONFIG_DIR", home),
            // No first-run setup dialog, no banner.
            ("MSWEA_CONFIGURED", "true"),
            ("MSWEA_SILENT_STARTUP", "1"),
            // A model missing from litellm's cost map is no reason to stop the agent.
            ("MSWEA_COST_TRACKING", "ignore_errors"),
            // mini-swe-agent retries a failed model call ten times, with waits
            // of 4 to 60 s; reeval's retry policy decides instead.
            ("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT", "1"),
            // litellm fetches its model cost map from GitHub at import (three
            // tries each time): its bundled copy instead, and nothing else fetched.
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("LITELLM_OFFLINE_MODE", "true"),
            // A plain traceback: typer's rich one renders every frame's locals (seconds).
            ("_TYPER_STANDARD_TRACEBACK", "1"),
            ("PYTHONUNBUFFERED", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    // No MCP support: the core refuses an environment naming servers (`Harness::takes_mcp`).
    fn takes_mcp(&self) -> bool {
        false
    }

    // No skills: `Environment::skill` is refused below, `skills_in_sandbox` left out.
    fn skills_dir(&self, _home: &str) -> Option<String> {
        None
    }

    fn session_files(&self, _home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        if let Some(s) = setup.skills.first() {
            return Err(format!(
                "mini-swe-agent has no skills, so skill {} cannot be given to it; drop it from this eval's environment",
                s.name
            ));
        }
        Ok(Vec::new())
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        Command::new(inv.program)
            .args(["--yolo", "--exit-immediately", "--agent-class", "default"])
            .arg("--model")
            .arg(model_or_default(inv.model))
            // No cost limit of its own: reeval's turn timeout and budget bound the run.
            .args(["--cost-limit", "0"])
            .arg("--output")
            .arg(format!("{}/{TRAJECTORY}", inv.home))
            // Its own config first (any `--config` replaces the default), then ours on top.
            .args(["--config", "mini.yaml", "--config", "model.model_kwargs.max_retries=0"])
            .arg("--task")
            .arg(task_with_history(inv.prompt, inv.earlier))
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(NoEvents)
    }

    fn fallback_model(&self, selected: Option<&str>) -> Option<String> {
        Some(model_or_default(selected).to_string())
    }

    async fn after_turn(
        &self,
        sandbox: &SandboxHandle,
        home: &str,
        _selected_model: Option<&str>,
        turn: &mut TurnBuilder,
    ) {
        // Moved aside once read, so the next turn never reads this one's file.
        let script = r#"f=$1/turn.traj.json; [ -f "$f" ] || exit 3; mkdir -p "$1/turns"; n=$(ls "$1/turns" | wc -l); t="$1/turns/turn-$((n + 1)).traj.json"; mv "$f" "$t" && printf %s "$t""#;
        let moved = sandbox.exec(Command::new("sh").args(["-c", script, "sh", home])).await;
        let Some(path) = moved.ok().filter(|o| o.success()).map(|o| o.stdout.trim().to_string())
        else {
            // Killed before its first step was saved: nothing was reported.
            turn.usage.partial = true;
            return;
        };
        let Ok(bytes) = sandbox.read_file(&path).await else {
            turn.usage.partial = true;
            return;
        };
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(trajectory) => read_trajectory(&trajectory, turn),
            Err(_) => turn.usage.partial = true,
        }
    }
}

/// mini-swe-agent prints a console log, not events: the turn is read from its trajectory.
struct NoEvents;

impl EventParser for NoEvents {
    fn event(&mut self, _event: &Value, _turn: &mut TurnBuilder) {}
}

/// One model response's usage as litellm reports it: `prompt_tokens`
/// includes the cached tokens and, for Anthropic (whose usage carries
/// `cache_creation_input_tokens`), the cache writes too. Anthropic reports no
/// reasoning count of its own (thinking is billed as output): litellm's
/// `reasoning_tokens` there is its own figure, left out as Claude Code's harness does.
fn usage_of(u: &Value) -> Usage {
    let mut usage = Usage::from_chat_completions(u);
    if let Some(write) = count(u, "cache_creation_input_tokens") {
        usage.cache_write = Some(write);
        usage.input = usage.input.map(|i| i.saturating_sub(write));
        usage.reasoning = None;
    }
    usage
}

/// Reads a trajectory (`mini-swe-agent-1.1`): assistant messages with their
/// `tool_calls` (the bash commands) and `extra.response` (model, usage), tool
/// messages with each command's output, and a final `exit` message with the
/// exit status. A trajectory without an exit message is a run cut short: its
/// usage is marked partial.
pub fn read_trajectory(trajectory: &Value, turn: &mut TurnBuilder) {
    let messages = trajectory.get("messages").and_then(Value::as_array);
    let mut usage = Usage::default();
    let mut exited = false;
    let mut last_text = None;
    let mut pending_submit = None;
    for m in messages.into_iter().flatten() {
        // Each message saved is one of the turn's events: its stdout carries none.
        turn.events += 1;
        let extra = m.get("extra").unwrap_or(&Value::Null);
        // Responses that failed to parse (format errors) were billed too.
        if let Some(response) = extra.get("response") {
            if let Some(u) = response.get("usage") {
                usage.add(&usage_of(u));
            }
            if let Some(model) = string(response, "model").filter(|m| !m.is_empty()) {
                turn.model = Some(model.to_string());
            }
        }
        match string(m, "role") {
            Some("assistant") => {
                if let Some(text) = m.get("content").map(text_of).filter(|t| !t.trim().is_empty()) {
                    last_text = Some(text);
                }
                for call in m.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
                    let id = string(call, "id").unwrap_or_default();
                    let function = call.get("function").unwrap_or(&Value::Null);
                    let name = string(function, "name").unwrap_or("bash");
                    let input = string(function, "arguments")
                        .and_then(|a| serde_json::from_str::<Value>(a).ok())
                        .unwrap_or(Value::Null);
                    turn.tool_started(Some(id), name, input);
                    pending_submit = Some(id.to_string());
                }
            }
            Some("tool") => {
                let id = string(m, "tool_call_id").unwrap_or_default();
                let output = string(extra, "raw_output").unwrap_or_default().to_string();
                let failed = string(extra, "exception_info").filter(|e| !e.is_empty());
                match failed {
                    Some(e) => turn.tool_finished(id, "bash", Some(output), Some(e.to_string())),
                    None => turn.tool_finished(id, "bash", Some(output), None),
                }
                if pending_submit.as_deref() == Some(id) {
                    pending_submit = None;
                }
            }
            Some("exit") => {
                exited = true;
                let status = string(extra, "exit_status").unwrap_or_default();
                if status == SUBMITTED {
                    // The submitting command gets no tool message: its result is the submission.
                    let submission = string(extra, "submission").unwrap_or_default();
                    if let Some(id) = pending_submit.take() {
                        turn.tool_finished(&id, "bash", Some(submission.to_string()), None);
                    }
                } else {
                    let message = string(extra, "exception_str")
                        .or_else(|| string(m, "content"))
                        .filter(|t| !t.is_empty())
                        .unwrap_or(status);
                    let code = status_of_exception(status)
                        .or_else(|| string(extra, "traceback").and_then(status_in_traceback));
                    turn.fail(format!("{status}: {message}"), code);
                }
            }
            _ => {}
        }
    }
    usage.partial = !exited;
    turn.usage = usage;
    if turn.failure.is_none() {
        turn.final_message = last_text;
    }
}

/// The HTTP status a litellm exception stands for, where it says one.
fn status_of_exception(name: &str) -> Option<u16> {
    Some(match name {
        "AuthenticationError" => 401,
        "PermissionDeniedError" => 403,
        "RateLimitError" => 429,
        "InternalServerError" => 500,
        "BadGatewayError" => 502,
        "ServiceUnavailableError" | "APIConnectionError" => 503,
        "Timeout" => 504,
        _ => return None,
    })
}

/// The provider's status in the OpenAI client's error under litellm's
/// (`openai.APIStatusError: Error code: 529 - {...}`): litellm names a 529 only `APIError`.
fn status_in_traceback(traceback: &str) -> Option<u16> {
    let (_, rest) = traceback.rsplit_once("Error code: ")?;
    rest.get(..3)?.parse().ok().filter(|s| (100..600).contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assistant(id: &str, text: &str, command: &str, usage: Value) -> Value {
        let call = json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": json!({"command": command}).to_string()}});
        json!({"role": "assistant", "content": text, "tool_calls": [call],
               "extra": {"actions": [{"command": command, "tool_call_id": id}],
                         "response": {"id": "chatcmpl-1", "model": "gpt-4.1-2025-04-14", "object": "chat.completion", "usage": usage},
                         "cost": 0.001}})
    }

    /// As mini-swe-agent 2.4.6 saved it (through litellm 1.110.2, OpenAI chat completions).
    fn submitted() -> Value {
        json!({"info": {"exit_status": "Submitted", "submission": ""}, "trajectory_format": "mini-swe-agent-1.1",
        "messages": [
          {"role": "system", "content": "You are a helpful assistant"},
          {"role": "user", "content": "Please solve this issue: Create hello.py"},
          assistant("call_w", "Writing it.", "printf 'x' > hello.py",
              json!({"completion_tokens": 40, "prompt_tokens": 500, "total_tokens": 540,
                     "completion_tokens_details": {"reasoning_tokens": 7}, "prompt_tokens_details": {"cached_tokens": 100}})),
          {"role": "tool", "tool_call_id": "call_w", "content": "{\"returncode\": 0}",
           "extra": {"raw_output": "", "returncode": 0, "exception_info": ""}},
          assistant("call_s", "Done.", "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT",
              json!({"completion_tokens": 10, "prompt_tokens": 600, "total_tokens": 610,
                     "completion_tokens_details": {"reasoning_tokens": 2}, "prompt_tokens_details": {"cached_tokens": 500}})),
          {"role": "exit", "content": "", "extra": {"exit_status": "Submitted", "submission": ""}}
        ]})
    }

    #[test]
    fn a_submitted_run_gives_calls_usage_model_and_message() {
        let mut t = TurnBuilder::new("/workspace");
        read_trajectory(&submitted(), &mut t);
        assert_eq!(
            t.usage,
            Usage {
                input: Some(500),
                output: Some(50),
                cache_read: Some(600),
                cache_write: None,
                reasoning: Some(9),
                partial: false
            }
        );
        assert_eq!(t.model.as_deref(), Some("gpt-4.1-2025-04-14"));
        assert_eq!(t.tool_calls.len(), 2);
        assert_eq!(t.tool_calls[0].name, "bash");
        assert_eq!(t.tool_calls[0].input["command"], "printf 'x' > hello.py");
        assert_eq!(t.tool_calls[0].result.as_deref(), Some(""));
        assert_eq!(t.tool_calls[1].result.as_deref(), Some(""), "the submission");
        assert_eq!(t.final_message.as_deref(), Some("Done."));
        assert!(t.failure.is_none());
    }

    #[test]
    fn a_run_cut_short_has_partial_usage() {
        let mut trajectory = submitted();
        trajectory["messages"].as_array_mut().unwrap().truncate(4);
        let mut t = TurnBuilder::new("/workspace");
        read_trajectory(&trajectory, &mut t);
        assert!(t.usage.partial);
        assert_eq!(t.usage.output, Some(40));
    }

    #[test]
    fn a_provider_error_is_a_failure_with_its_status() {
        let trajectory = json!({"messages": [
            {"role": "system", "content": "s"},
            {"role": "exit", "content": "litellm.RateLimitError: scripted 429",
             "extra": {"exit_status": "RateLimitError", "submission": "", "exception_str": "litellm.RateLimitError: RateLimitError: OpenAIException - scripted 429"}}]});
        let mut t = TurnBuilder::new("/workspace");
        read_trajectory(&trajectory, &mut t);
        let f = t.failure.expect("failure");
        assert_eq!(f.status, Some(429));
        assert!(f.message.contains("scripted 429"), "{}", f.message);
        assert_eq!(t.usage, Usage::default());

        // A status litellm does not name: the OpenAI client's error in the traceback says it.
        let trajectory = json!({"messages": [{"role": "exit", "content": "x", "extra": {
            "exit_status": "APIError", "exception_str": "litellm.APIError: APIError: OpenAIException - Overloaded",
            "traceback": "Traceback (most recent call last):\n...\nopenai.APIStatusError: Error code: 529 - {'error': {}}\n\nDuring handling..."}}]});
        let mut t = TurnBuilder::new("/workspace");
        read_trajectory(&trajectory, &mut t);
        assert_eq!(t.failure.expect("failure").status, Some(529));
    }

    #[test]
    fn anthropic_cache_writes_are_apart_from_the_input() {
        // litellm's Anthropic usage: prompt_tokens = input + cache reads + cache writes.
        let u = json!({"prompt_tokens": 1540, "completion_tokens": 23, "cache_creation_input_tokens": 1500,
                       "cache_read_input_tokens": 0, "prompt_tokens_details": {"cached_tokens": 0, "cache_creation_tokens": 1500},
                       "completion_tokens_details": {"reasoning_tokens": 0}});
        let usage = usage_of(&u);
        assert_eq!(
            (usage.input, usage.cache_write, usage.cache_read, usage.reasoning),
            (Some(40), Some(1500), Some(0), None)
        );
    }

    #[test]
    fn later_turns_carry_the_earlier_tasks() {
        assert_eq!(task_with_history("b", &[]), "b");
        let t = task_with_history("Run it.", &["Create hello.py.".into()]);
        assert!(t.starts_with("Earlier tasks"), "{t}");
        assert!(
            t.contains("1. Create hello.py.\n") && t.ends_with("The task now:\nRun it."),
            "{t}"
        );
    }

    #[test]
    fn headless_without_retries_or_fetches() {
        let cmd = MiniSwe.command(&Invocation {
            program: "mini",
            prompt: "it's $(id)",
            model: Some("openai/gpt-4.1"),
            resume: None,
            earlier: &[],
            home: "/h",
            mcp: false,
        });
        let argv = cmd.argv();
        for flag in ["--yolo", "--exit-immediately", "model.model_kwargs.max_retries=0"] {
            assert!(argv.iter().any(|a| a == flag), "{argv:?}");
        }
        assert_eq!(argv.last().map(String::as_str), Some("it's $(id)"));
        let env = MiniSwe.env("/h", &[]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT"), Some("1"));
        assert_eq!(get("LITELLM_LOCAL_MODEL_COST_MAP"), Some("True"));
        assert_eq!(MiniSwe.credentials(Some("openai/gpt-4.1")), vec!["OPENAI_API_KEY"]);
        assert_eq!(MiniSwe.credentials(None), vec!["ANTHROPIC_API_KEY"]);
        assert_eq!(MiniSwe.egress(Some("openai/gpt-4.1")).hosts, vec!["api.openai.com"]);
    }
}
