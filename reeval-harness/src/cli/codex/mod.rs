//! OpenAI Codex CLI: `codex exec --json --dangerously-bypass-approvals-and-sandbox
//! --skip-git-repo-check [--model m] -- <task>`, later turns with
//! `codex exec .. resume <thread_id> -- <task>`. Config home: `CODEX_HOME`
//! (`config.toml` holds MCP servers, skills go in its `skills/`). The
//! `--json` stream has no model and no reasoning count: both are read from
//! the session's rollout file in `CODEX_HOME/sessions/` after the turn.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use reeval_core::Command;
use reeval_core::environment::McpServer;
use reeval_core::harness::SessionSetup;
use reeval_core::sandbox::SandboxHandle;

use super::{CliAgent, CliHarness, CliIdentity, EventParser, FileToWrite, Invocation, TurnBuilder};
use reeval_core::egress::HarnessEgress;

/// The pinned npm release of Codex (the one the real-CLI tests run, from the
/// `openai-codex-cli-bin` wheel of the same version).
pub const VERSION: &str = "0.163.0";

/// Where the harness's image keeps the model catalog of the Codex it installed.
pub const BAKED_CATALOG: &str = "/usr/local/share/reeval/codex-models.json";

/// Codex's SQLite state of a session whose home is `home`: beside it.
fn state_dir(home: &str) -> String {
    format!("{home}-state")
}

/// Where an image's Codex finds its model catalog, as the first session on
/// that image found it (see [`Codex::prepare`]).
#[derive(Debug, Clone)]
enum Catalog {
    /// Baked into the image at [`BAKED_CATALOG`].
    Baked,
    /// Dumped by the CLI (`codex debug models --bundled`): written into each
    /// session's home with its config.
    Dumped(Arc<Vec<u8>>),
    /// Not found (an older release or a stand-in without the command, or a
    /// lookup that failed): the CLI keeps its own lookup. Never remembered.
    Unknown,
}

/// What each image's catalog lookup found, by `SessionSetup::image` and the
/// program, for this process: a session on an image already seen needs no
/// exec to find it.
static CATALOGS: LazyLock<Mutex<HashMap<String, Catalog>>> = LazyLock::new(Default::default);

/// Codex's specifics.
#[derive(Debug, Clone, Copy, Default)]
pub struct Codex;

/// The Codex harness.
pub type CodexHarness = CliHarness<Codex>;

/// A Codex harness for `model` (`gpt-5`, `gpt-5-codex`, …).
pub fn harness(model: Option<&str>) -> CodexHarness {
    CliHarness::new(Codex, model)
}

/// A TOML basic string (a JSON string literal is one).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The model provider the harness's config selects: OpenAI's API as Codex's
/// built-in `openai` provider reaches it, but without Codex's own retries.
pub const PROVIDER_ID: &str = "openai-reeval";

/// The `[model_providers]` table of [`PROVIDER_ID`] at `base_url` (the
/// harness's: `https://api.openai.com/v1`, reached by interception). Codex
/// retries every failed stream, a rejected key (401) included, five times over
/// its WebSocket and five more over HTTP, with backoff: 13 to 14 s before a
/// 401 reaches reeval. Its built-in `openai` provider cannot be reconfigured
/// (Codex refuses a `[model_providers.openai]`), so this one repeats what the
/// built-in sets (its auth, WebSocket transport and headers) with
/// `request_max_retries` and `stream_max_retries` at 0, as Claude Code runs
/// with `CLAUDE_CODE_MAX_RETRIES=0`: reeval's retry policy decides what is
/// tried again.
pub fn provider_table(base_url: &str) -> String {
    format!(
        "\n[model_providers.{PROVIDER_ID}]\nname = \"OpenAI\"\nbase_url = {}\nwire_api = \"responses\"\n\
         requires_openai_auth = true\nsupports_websockets = true\n\
         request_max_retries = 0\nstream_max_retries = 0\n\
         http_headers = {{ version = {} }}\n\
         env_http_headers = {{ \"OpenAI-Organization\" = \"OPENAI_ORGANIZATION\", \"OpenAI-Project\" = \"OPENAI_PROJECT\" }}\n",
        toml_str(base_url),
        toml_str(VERSION)
    )
}

/// `config.toml`: no startup calls past the allowlist (each refused one costs
/// seconds of retries): the model catalog from a file (`catalog`, the CLI's
/// bundled one) instead of chatgpt.com, no plugin marketplace, no telemetry;
/// its SQLite state beside the home (`state`), not in it, so that the home
/// kept for the record is its sessions and config, not 3 MB of databases;
/// OpenAI's API without Codex's own retries ([`provider_table`]); then the
/// MCP servers.
fn config_toml(servers: &[McpServer], catalog: Option<&str>, state: &str) -> String {
    let mut out = String::from("# Written by reeval for this attempt.\n");
    if let Some(path) = catalog {
        out.push_str(&format!("model_catalog_json = {}\n", toml_str(path)));
    }
    out.push_str(&format!("sqlite_home = {}\n", toml_str(state)));
    out.push_str(&format!("model_provider = {}\n", toml_str(PROVIDER_ID)));
    out.push_str("\n[features]\nplugins = false\nremote_plugin = false\n");
    out.push_str("\n[analytics]\nenabled = false\n");
    out.push_str(&provider_table("https://api.openai.com/v1"));
    for s in servers {
        out.push_str(&format!("\n[mcp_servers.{}]\n", toml_str(s.name())));
        match s {
            McpServer::Stdio { argv, env, .. } => {
                out.push_str(&format!(
                    "command = {}\n",
                    toml_str(argv.first().map(String::as_str).unwrap_or_default())
                ));
                let args: Vec<String> = argv.iter().skip(1).map(|a| toml_str(a)).collect();
                out.push_str(&format!("args = [{}]\n", args.join(", ")));
                if !env.is_empty() {
                    let pairs: Vec<String> = env
                        .iter()
                        .map(|(k, v)| format!("{} = {}", toml_str(k), toml_str(v)))
                        .collect();
                    out.push_str(&format!("env = {{ {} }}\n", pairs.join(", ")));
                }
            }
            McpServer::Http { url, .. } => out.push_str(&format!("url = {}\n", toml_str(url))),
        }
    }
    out
}

#[async_trait]
impl CliAgent for Codex {
    const IDENTITY: CliIdentity = CliIdentity {
        name: "codex",
        program: "codex",
        version: Some(VERSION),
        rules_file: "AGENTS.md",
    };

    fn install_steps(&self) -> Vec<String> {
        let mut steps = super::npm_install_steps("@openai/codex", VERSION);
        // Its bundled model catalog, so sessions skip both chatgpt.com and a dump at start.
        steps.push(format!(
            "mkdir -p $(dirname {BAKED_CATALOG}) && CODEX_HOME=$(mktemp -d) codex debug models --bundled > {BAKED_CATALOG}"
        ));
        steps
    }

    fn credentials(&self, _model: Option<&str>) -> Vec<String> {
        vec!["OPENAI_API_KEY".into()]
    }

    fn egress(&self, _model: Option<&str>) -> HarnessEgress {
        // Codex honours only its config key for a base URL: intercepted instead.
        super::egress_of(vec![super::openai()], &[])
    }

    fn env(&self, home: &str, sandbox_env: &[(String, String)]) -> Vec<(String, String)> {
        let mut env = vec![("CODEX_HOME".to_string(), home.to_string())];
        // `codex exec` also reads CODEX_API_KEY; give it the same (placeholder) value.
        if let Some((_, key)) = sandbox_env.iter().rev().find(|(k, _)| k == "OPENAI_API_KEY") {
            env.push(("CODEX_API_KEY".into(), key.clone()));
        }
        env
    }

    fn session_files(&self, home: &str, setup: &SessionSetup) -> Result<Vec<FileToWrite>, String> {
        let mut files = vec![FileToWrite::new(
            format!("{home}/config.toml"),
            config_toml(&setup.mcp, None, &state_dir(home)),
            0o600,
        )];
        files.extend(super::skill_files(&self.skills_dir(home).unwrap_or_default(), &setup.skills));
        Ok(files)
    }

    async fn prepare(
        &self,
        sandbox: &SandboxHandle,
        program: &str,
        home: &str,
        setup: &SessionSetup,
        mut files: Vec<FileToWrite>,
    ) -> Vec<FileToWrite> {
        let key = setup.image.as_ref().map(|image| format!("{image} {program}"));
        let known = key
            .as_ref()
            .and_then(|key| CATALOGS.lock().unwrap_or_else(|e| e.into_inner()).get(key).cloned());
        let catalog = match known {
            Some(catalog) => catalog,
            None => {
                let catalog = find_catalog(sandbox, program, home).await;
                // Only what the image surely has: a lookup that found nothing
                // (a timeout, a full disk, an engine error) is asked again next session.
                if let Some(key) = key.filter(|_| !matches!(catalog, Catalog::Unknown)) {
                    CATALOGS.lock().unwrap_or_else(|e| e.into_inner()).insert(key, catalog.clone());
                }
                catalog
            }
        };
        let dumped = format!("{home}/models.json");
        let path = match catalog {
            Catalog::Baked => BAKED_CATALOG.to_string(),
            Catalog::Dumped(bytes) => {
                files.push(FileToWrite::new(dumped.clone(), bytes.to_vec(), 0o600));
                dumped
            }
            Catalog::Unknown => return files,
        };
        let config_path = format!("{home}/config.toml");
        let config = config_toml(&setup.mcp, Some(&path), &state_dir(home)).into_bytes();
        match files.iter_mut().find(|f| f.path == config_path) {
            Some(file) => file.bytes = config,
            None => files.push(FileToWrite::new(config_path, config, 0o600)),
        }
        files
    }

    fn command(&self, inv: &Invocation<'_>) -> Command {
        let mut cmd = Command::new(inv.program).args([
            "exec",
            "--json",
            "--dangerously-bypass-approvals-and-sandbox",
            "--skip-git-repo-check",
        ]);
        if let Some(model) = inv.model {
            cmd = cmd.arg("--model").arg(model);
        }
        if let Some(thread) = inv.resume {
            cmd = cmd.arg("resume").arg(thread);
        }
        cmd.arg("--").arg(inv.prompt)
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::<Parser>::default()
    }

    fn fallback_model(&self, selected: Option<&str>) -> Option<String> {
        selected.map(str::to_string)
    }

    async fn after_turn(
        &self,
        sandbox: &SandboxHandle,
        home: &str,
        selected_model: Option<&str>,
        turn: &mut TurnBuilder,
    ) {
        // The rollout would only repeat what is known: the model asked for
        // (`--model` is the slug sent to the API) and the stream's reasoning count.
        if selected_model.is_some() && turn.usage.reasoning.is_some() {
            return;
        }
        let Some(thread) = turn
            .session_id
            .clone()
            .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        else {
            return;
        };
        let find = Command::new("find")
            .arg(format!("{home}/sessions"))
            .args(["-type", "f", "-name"])
            .arg(format!("rollout-*{thread}.jsonl"));
        let Ok(found) = sandbox.exec(find).await else { return };
        let Some(path) =
            found.stdout.lines().map(str::trim).find(|l| !l.is_empty()).map(str::to_string)
        else {
            return;
        };
        let Ok(bytes) = sandbox.read_file(&path).await else { return };
        read_rollout(&String::from_utf8_lossy(&bytes), turn);
    }
}

/// The catalog of the Codex installed in this sandbox's image: baked into
/// the harness's image at install, else `codex debug models --bundled`,
/// written by the CLI itself into the home (made for it) and read back, so
/// that later sessions on the image get it with their config. One exec (and a
/// read when dumped). [`Catalog::Unknown`] when the CLI has no such command,
/// or the lookup failed.
async fn find_catalog(sandbox: &SandboxHandle, program: &str, home: &str) -> Catalog {
    let dumped = format!("{home}/models.json");
    let find = Command::new("sh")
        .arg("-c")
        .arg(r#"if test -s "$2"; then echo baked; else mkdir -p "$CODEX_HOME" && "$0" debug models --bundled > "$1" && test -s "$1" && echo dumped; fi"#)
        .arg(program)
        .arg(&dumped)
        .arg(BAKED_CATALOG)
        .env("CODEX_HOME", home);
    let Ok(out) = sandbox.exec(find).await else { return Catalog::Unknown };
    match out.stdout.trim() {
        "baked" if out.success() => Catalog::Baked,
        "dumped" if out.success() => match sandbox.read_file(&dumped).await {
            Ok(bytes) if !bytes.is_empty() => Catalog::Dumped(Arc::new(bytes.to_vec())),
            _ => Catalog::Unknown,
        },
        _ => Catalog::Unknown,
    }
}

mod events;
use events::{Parser, read_rollout};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::SessionTotal;
    use reeval_core::turn::Usage;

    fn parse(lines: &[&str]) -> TurnBuilder {
        let mut p = Parser::default();
        let mut t = TurnBuilder::new("/workspace");
        for l in lines {
            if let Some(ev) = super::super::ndjson::parse_event(l) {
                p.event(&ev, &mut t);
            }
        }
        p.finish(&mut t);
        t
    }

    #[test]
    fn input_excludes_cached_tokens() {
        let t = parse(&[
            r#"{"type":"thread.started","thread_id":"th-1"}"#,
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"bash -lc ls","status":"in_progress"}}"#,
            r#"{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"bash -lc ls","aggregated_output":"nope\n","exit_code":2,"status":"failed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i2","type":"file_change","changes":[{"path":"/workspace/hello.py","kind":"add"}],"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"i3","type":"agent_message","text":"Done."}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1200,"cached_input_tokens":1000,"output_tokens":50}}"#,
        ]);
        assert_eq!(
            t.usage,
            Usage {
                input: Some(200),
                output: Some(50),
                cache_read: Some(1000),
                cache_write: None,
                reasoning: None,
                partial: false,
            }
        );
        assert_eq!(t.tool_calls.len(), 2);
        assert!(t.tool_calls[0].error.as_deref().unwrap().contains("exit code 2"));
        assert_eq!(t.file_edits[0].path, "hello.py");
        assert_eq!(t.final_message.as_deref(), Some("Done."));
        assert!(t.failure.is_none());
    }

    /// Runs `lines` as one turn after a turn that left `before` as the thread's total.
    fn parse_after(before: Option<SessionTotal>, lines: &[&str]) -> TurnBuilder {
        let mut p = Parser::default();
        let mut t = TurnBuilder::new("/workspace");
        t.session_total = before;
        for l in lines {
            if let Some(ev) = super::super::ndjson::parse_event(l) {
                p.event(&ev, &mut t);
            }
        }
        p.finish(&mut t);
        t
    }

    fn counts(input: u64, output: u64, cached: u64, reasoning: u64) -> Usage {
        Usage {
            input: Some(input),
            output: Some(output),
            cache_read: Some(cached),
            cache_write: None,
            reasoning: Some(reasoning),
            partial: false,
        }
    }

    #[test]
    fn a_resumed_turns_usage_is_its_own_not_the_threads() {
        // codex 0.163.0 reports totals over the thread on every turn.
        let first = parse_after(
            None,
            &[
                r#"{"type":"thread.started","thread_id":"th-1"}"#,
                r#"{"type":"turn.started"}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":1216,"cached_input_tokens":800,"output_tokens":100,"reasoning_output_tokens":20,"cache_write_input_tokens":0}}"#,
            ],
        );
        assert_eq!(first.usage, counts(416, 100, 800, 20));
        let second = parse_after(
            first.session_total.clone(),
            &[
                r#"{"type":"thread.started","thread_id":"th-1"}"#,
                r#"{"type":"turn.started"}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":1827,"cached_input_tokens":1200,"output_tokens":150,"reasoning_output_tokens":32,"cache_write_input_tokens":0}}"#,
            ],
        );
        // 611 input (400 of them cached), 50 output: not 1827 / 150 / 1200.
        assert_eq!(second.usage, counts(211, 50, 400, 12));
        assert_eq!(
            second.session_total.as_ref().map(|t| (t.session.as_str(), t.usage.clone())),
            Some(("th-1", counts(627, 150, 1200, 32)))
        );
        // A new thread starts from zero.
        let other = parse_after(
            second.session_total,
            &[
                r#"{"type":"thread.started","thread_id":"th-2"}"#,
                r#"{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5,"reasoning_output_tokens":0}}"#,
            ],
        );
        assert_eq!(other.usage, counts(10, 5, 0, 0));
    }

    #[test]
    fn a_turn_cut_short_before_turn_completed_has_partial_usage() {
        let t = parse(&[
            r#"{"type":"thread.started","thread_id":"th-1"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.started","item":{"id":"i1","type":"command_execution","command":"/bin/bash -lc 'sleep 600'","status":"in_progress"}}"#,
        ]);
        assert!(t.usage.partial);
        assert_eq!(t.usage.output, None);
    }

    #[test]
    fn a_non_fatal_error_item_is_a_notice_of_the_turn() {
        let t = parse(&[
            r#"{"type":"thread.started","thread_id":"th-1"}"#,
            r#"{"type":"turn.started"}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Code Mode is unavailable: install codex-code-mode-host beside codex"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"I could not run the tool."}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":100,"cached_input_tokens":0,"output_tokens":10}}"#,
        ]);
        assert!(t.failure.is_none());
        assert_eq!(
            t.notices,
            vec!["Code Mode is unavailable: install codex-code-mode-host beside codex"]
        );
        assert!(t.tool_calls.is_empty());
    }

    #[test]
    fn an_error_without_a_completed_turn_fails_it() {
        let t = parse(&[
            r#"{"type":"error","message":"Reconnecting... 1/5"}"#,
            r#"{"type":"turn.completed","usage":{}}"#,
        ]);
        assert!(t.failure.is_none());
        let t = parse(&[r#"{"type":"error","message":"exceeded retry limit, last status: 429"}"#]);
        assert!(t.failure.unwrap().message.contains("429"));
    }

    #[test]
    fn the_rollout_gives_model_and_reasoning_of_the_last_turn() {
        let mut t = TurnBuilder::new("/workspace");
        read_rollout(
            concat!(
                r#"{"type":"turn_context","payload":{"model":"gpt-5"}}"#,
                "\n",
                r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"reasoning_output_tokens":30}}}}"#,
                "\n",
                r#"{"type":"turn_context","payload":{"model":"gpt-5-codex"}}"#,
                "\n",
                r#"{"type":"event_msg","payload":{"type":"token_count","info":null}}"#,
                "\n",
                r#"{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"reasoning_output_tokens":75}}}}"#,
                "\n",
            ),
            &mut t,
        );
        assert_eq!(t.model.as_deref(), Some("gpt-5-codex"));
        assert_eq!(t.usage.reasoning, Some(45));
    }

    #[test]
    fn mcp_servers_go_to_config_toml() {
        let toml = config_toml(
            &[
                McpServer::stdio("fs", ["npx", "-y", "a \"b\""]),
                McpServer::http("api", "https://x/mcp"),
            ],
            Some("/h/models.json"),
            "/h-state",
        );
        // Top-level keys before any table.
        assert!(toml.contains("\nmodel_catalog_json = \"/h/models.json\"\nsqlite_home = \"/h-state\"\nmodel_provider = \"openai-reeval\"\n\n[features]\nplugins = false\nremote_plugin = false\n\n[analytics]\nenabled = false\n"), "{toml}");
        // OpenAI's API without Codex's own retries of a failed stream (a 401 too).
        assert!(
            toml.contains("[model_providers.openai-reeval]\nname = \"OpenAI\"\nbase_url = \"https://api.openai.com/v1\"\nwire_api = \"responses\"\nrequires_openai_auth = true\nsupports_websockets = true\nrequest_max_retries = 0\nstream_max_retries = 0\n"),
            "{toml}"
        );
        assert!(
            toml.contains(
                "[mcp_servers.\"fs\"]\ncommand = \"npx\"\nargs = [\"-y\", \"a \\\"b\\\"\"]"
            ),
            "{toml}"
        );
        assert!(toml.contains("[mcp_servers.\"api\"]\nurl = \"https://x/mcp\""), "{toml}");
        // Codex reads it as TOML: the provider it selects is the table written.
        let parsed: toml::Table = toml.parse().expect("valid TOML");
        assert_eq!(parsed["model_provider"].as_str(), Some(PROVIDER_ID));
        let provider = &parsed["model_providers"][PROVIDER_ID];
        assert_eq!(provider["stream_max_retries"].as_integer(), Some(0));
        assert_eq!(provider["request_max_retries"].as_integer(), Some(0));
        assert_eq!(provider["http_headers"]["version"].as_str(), Some(VERSION));
        assert_eq!(parsed["mcp_servers"]["fs"]["args"].as_array().map(Vec::len), Some(2));
    }

    /// A session on an image seen before finds Codex's catalog without an
    /// exec: baked, its config points there; dumped, the catalog goes in with
    /// the config. Another image is asked again.
    #[tokio::test]
    async fn the_catalog_is_looked_up_once_per_image() {
        use reeval_sandbox::archive::Entry;
        use reeval_sandbox::fake::{FakeBackend, FakeReply};
        use reeval_sandbox::{Backend, SandboxSpec};

        let home = "/tmp/reeval-agent/codex";
        let backend = FakeBackend::new().on_exec(move |exec, files| {
            let line = exec.line();
            if !line.contains("debug models") {
                return FakeReply::ok("");
            }
            // This image has no baked catalog when its program is `codex-dumps`.
            if line.contains("codex-dumps") {
                let bytes = b"{\"models\":[]}".to_vec();
                files.insert(format!("{home}/models.json"), Entry::File { mode: 0o600, bytes });
                FakeReply::ok("dumped\n")
            } else {
                FakeReply::ok("baked\n")
            }
        });
        let catalog_execs = |b: &FakeBackend| {
            b.execs().iter().filter(|e| e.line().contains("debug models")).count()
        };
        let prepare = |image: &str, program: &'static str| {
            let backend = backend.clone();
            let setup = SessionSetup { image: Some(image.to_string()), ..SessionSetup::default() };
            let image = image.to_string();
            async move {
                let spec = SandboxSpec {
                    image: image.to_string(),
                    labels: Default::default(),
                    workdir: "/workspace".into(),
                    limits: Default::default(),
                    network: Default::default(),
                    ..Default::default()
                };
                let sandbox = backend.create(&spec).await.unwrap();
                let handle = SandboxHandle::new(sandbox, "/workspace", Vec::new()).as_agent();
                let files = Codex.session_files(home, &setup).unwrap();
                Codex.prepare(&handle, program, home, &setup, files).await
            }
        };
        let config = |files: &[FileToWrite]| {
            let file = files.iter().find(|f| f.path.ends_with("/config.toml")).unwrap();
            String::from_utf8(file.bytes.clone()).unwrap()
        };

        let first = prepare("sha256:catalog-test-a", "codex").await;
        assert_eq!(catalog_execs(&backend), 1);
        let again = prepare("sha256:catalog-test-a", "codex").await;
        assert_eq!(catalog_execs(&backend), 1, "the second session on the image asked again");
        let baked = format!("model_catalog_json = \"{BAKED_CATALOG}\"");
        assert!(config(&first).contains(&baked) && config(&again).contains(&baked));

        let first = prepare("sha256:catalog-test-b", "codex-dumps").await;
        let again = prepare("sha256:catalog-test-b", "codex-dumps").await;
        assert_eq!(catalog_execs(&backend), 2, "another image is asked once");
        let dumped = format!("model_catalog_json = \"{home}/models.json\"");
        for files in [&first, &again] {
            assert!(config(files).contains(&dumped), "{}", config(files));
            let catalog = files.iter().find(|f| f.path.ends_with("/models.json"));
            assert_eq!(catalog.map(|f| f.bytes.as_slice()), Some(&b"{\"models\":[]}"[..]));
        }
        assert!(config(&again).contains(&format!("sqlite_home = \"{home}-state\"")));
    }
}
