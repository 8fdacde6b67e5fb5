//! cli/mod.rs's tests.

use super::*;
use reeval_core::environment::{McpServer, Skill};

#[test]
fn provider_keys_follow_the_model_prefix() {
    assert_eq!(provider_key(&provider_of(None)), "ANTHROPIC_API_KEY");
    assert_eq!(provider_key(&provider_of(Some("openai/gpt-5"))), "OPENAI_API_KEY");
    assert_eq!(provider_key(&provider_of(Some("gpt-5"))), "OPENAI_API_KEY");
    assert_eq!(provider_key(&provider_of(Some("gemini-2.5-pro"))), "GEMINI_API_KEY");
    assert_eq!(provider_key(&provider_of(Some("my-llm/x"))), "MY_LLM_API_KEY");
}

fn inv<'a>(prompt: &'a str, resume: Option<&'a str>) -> Invocation<'a> {
    Invocation {
        program: "agent",
        prompt,
        model: Some("m"),
        resume,
        earlier: &[],
        home: "/tmp/reeval-agent/x",
        mcp: false,
    }
}

fn agents() -> Vec<Box<dyn Harness>> {
    vec![
        Box::new(claude_code::harness(Some("sonnet"))),
        Box::new(codex::harness(None)),
        Box::new(cursor::harness(None)),
        Box::new(gemini::harness(None)),
        Box::new(opencode::harness(Some("openai/gpt-5"))),
        Box::new(pi::harness(None)),
        Box::new(mini_swe::harness(Some("openai/gpt-4.1"))),
    ]
}

#[test]
fn the_task_is_one_argv_element_never_a_shell_string() {
    let task = "it's \"x\" $(rm -rf /) `id`; echo\nnext -p --resume y";
    let argvs = [
        (codex::Codex.command(&inv(task, None)), task.to_string()),
        (cursor::Cursor.command(&inv(task, None)), task.to_string()),
        (gemini::Gemini.command(&inv(task, None)), format!("--prompt={task}")),
        (opencode::Opencode.command(&inv(task, None)), task.to_string()),
        (pi::Pi.command(&inv(task, None)), task.to_string()),
        (mini_swe::MiniSwe.command(&inv(task, None)), task.to_string()),
    ];
    for (cmd, element) in argvs {
        assert_eq!(cmd.argv()[0], "agent");
        assert_eq!(cmd.argv().iter().filter(|a| a.contains("$(rm")).count(), 1, "{:?}", cmd.argv());
        assert_eq!(cmd.argv().last(), Some(&element), "{:?}", cmd.argv());
        assert!(
            !cmd.argv().iter().any(|a| a == "sh" || a == "bash" || a == "-c"),
            "{:?}",
            cmd.argv()
        );
    }
    // Claude Code reads the task on stdin.
    let claude = claude_code::ClaudeCode.command(&inv(task, None));
    assert!(!claude.argv().iter().any(|a| a.contains("$(rm")), "{:?}", claude.argv());
}

#[test]
fn later_turns_resume_the_session() {
    let has = |cmd: Command, seq: &[&str]| cmd.argv().windows(seq.len()).any(|w| w == seq);
    assert!(has(claude_code::ClaudeCode.command(&inv("t", Some("s1"))), &["--resume", "s1"]));
    assert!(has(codex::Codex.command(&inv("t", Some("th"))), &["resume", "th", "--", "t"]));
    assert!(has(cursor::Cursor.command(&inv("t", Some("c1"))), &["--resume", "c1"]));
    assert!(has(gemini::Gemini.command(&inv("t", Some("g"))), &["--resume", "latest"]));
    assert!(has(opencode::Opencode.command(&inv("t", Some("ses_1"))), &["-s", "ses_1"]));
    assert!(has(pi::Pi.command(&inv("t", Some("p"))), &["--continue"]));
    assert!(!has(pi::Pi.command(&inv("t", None)), &["--continue"]));
}

#[test]
fn images_are_pinned_installs_on_the_base_image() {
    for h in agents() {
        let Some(ImageSpec::Install { base, steps }) = h.image() else {
            panic!("{} has no install image", h.name())
        };
        assert_eq!(base, DEFAULT_IMAGE);
        assert!(
            steps.iter().any(|s| s.contains('@')
                || s.contains("==")
                || s.contains("downloads.cursor.com/lab/2")),
            "{}: {steps:?}",
            h.name()
        );
    }
}

#[test]
fn rules_files_and_credentials() {
    let got: Vec<(String, String, Vec<String>)> = agents()
        .iter()
        .map(|h| (h.name().to_string(), h.rules_file().to_string(), h.credentials()))
        .collect();
    let want = [
        ("claude-code", "CLAUDE.md", "ANTHROPIC_API_KEY"),
        ("codex", "AGENTS.md", "OPENAI_API_KEY"),
        ("cursor", "AGENTS.md", "CURSOR_API_KEY"),
        ("gemini", "GEMINI.md", "GEMINI_API_KEY"),
        ("opencode", "AGENTS.md", "OPENAI_API_KEY"),
        ("pi", "AGENTS.md", "ANTHROPIC_API_KEY"),
        ("mini-swe-agent", "AGENTS.md", "OPENAI_API_KEY"),
    ];
    for ((name, rules, creds), (n, r, c)) in got.iter().zip(want) {
        assert_eq!((name.as_str(), rules.as_str(), creds.clone()), (n, r, vec![c.to_string()]));
    }
}

#[test]
fn skills_land_under_their_name() {
    let skills = vec![Skill {
        name: "review".into(),
        files: vec![
            FileToWrite::new("SKILL.md", b"x".to_vec(), 0o644),
            FileToWrite::new("../evil", vec![], 0o644),
        ],
    }];
    let files = skill_files("/h/skills", &skills);
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, "/h/skills/review/SKILL.md");
}

#[test]
fn mcp_servers_in_the_common_shape() {
    let servers =
        vec![McpServer::stdio("fs", ["npx", "-y", "srv"]), McpServer::http("api", "https://x/mcp")];
    let v = Value::Object(mcp_servers(&servers, true, "url"));
    assert_eq!(v["fs"]["command"], "npx");
    assert_eq!(v["fs"]["args"][1], "srv");
    assert_eq!(v["fs"]["type"], "stdio");
    assert_eq!(v["api"]["url"], "https://x/mcp");
    assert_eq!(v["api"]["type"], "http");
}
