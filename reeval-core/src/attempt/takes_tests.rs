//! What a harness's agent cannot take (MCP servers, skills) is refused when
//! its session starts, not silently left out: an eval counting on it would
//! measure an agent without it. What is given "where taken" is left out.

use super::tests::{run_one, scripted};
use crate::environment::Environment;
use crate::eval::Eval;
use crate::outcome::Outcome;

fn sends(name: &'static str) -> Eval {
    Eval::new(name, |c| Box::pin(async move { c.send("true").await.map(|_| ()) }))
}

#[tokio::test]
async fn an_agent_without_mcp_support_is_refused_the_servers_it_would_run_without() {
    use crate::environment::McpServer;
    let backend = scripted();
    let asked = sends("mcp_asked")
        .environment(|| Environment::new().mcp(McpServer::stdio("fs", ["mcp-fs"])));
    let r = run_one(&backend, asked).await;
    assert_eq!(r.outcome, Outcome::Config, "{:?}", r.message);
    let message = r.message.as_deref().unwrap_or_default();
    assert!(message.contains("script harness: its agent has no MCP support"), "{message}");
    assert!(message.contains("MCP server fs"), "{message}");
    // Given where taken (as a Harbor task's are), it is left out and the turn runs.
    let where_taken = sends("mcp_where_taken")
        .environment(|| Environment::new().mcp_where_taken(McpServer::stdio("fs", ["mcp-fs"])));
    let r = run_one(&backend, where_taken).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
}

#[tokio::test]
async fn an_agent_that_reads_no_skills_is_refused_them_and_sandbox_skills_are_left_out() {
    let dir = std::env::temp_dir().join(format!("reeval-skill-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("greet")).unwrap();
    std::fs::write(dir.join("greet/SKILL.md"), "---\nname: greet\n---\nGreet.\n").unwrap();
    let backend = scripted();
    let skill = dir.join("greet");
    let asked = sends("skill_asked").environment(move || Environment::new().skill(skill.clone()));
    let r = run_one(&backend, asked).await;
    assert_eq!(r.outcome, Outcome::Config, "{:?}", r.message);
    let message = r.message.as_deref().unwrap_or_default();
    assert!(message.contains("script harness: its agent reads no skills"), "{message}");
    assert!(message.contains("greet"), "{message}");
    // Copied from the sandbox (a Harbor task's `skills_dir`): left out, the turn runs.
    let in_sandbox = sends("skills_in_sandbox")
        .environment(|| Environment::new().skills_in_sandbox("/opt/skills"));
    let r = run_one(&backend, in_sandbox).await;
    assert_eq!(r.outcome, Outcome::Pass, "{:?}", r.message);
    let _ = std::fs::remove_dir_all(&dir);
}
