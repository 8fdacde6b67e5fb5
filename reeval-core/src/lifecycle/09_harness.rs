//! The harness phase: the agent's session starts on the first turn (an eval
//! that only runs checks never starts one), with skills and MCP servers
//! placed where this harness reads them.

use crate::sandbox::FileToWrite;
use std::path::{Path, PathBuf};

use crate::environment::{Environment, Skill};
use crate::error::{Error, Result};
use crate::harness::{Harness, SessionSetup};
use crate::sandbox::SandboxHandle;
use crate::secrets::{ExposeSecret, Secret};

/// Starts the session, acting as the agent user; the phase's detail.
pub(crate) async fn start(
    harness: &mut dyn Harness,
    agent: &SandboxHandle,
    env: &Environment,
    secrets: &[Secret],
    artifacts_dir: &Path,
    record: &crate::record::Record,
    image: Option<String>,
) -> Result<String> {
    // An agent without MCP support would run without the servers the eval counts on.
    if let Some(server) = env.mcp.first().filter(|_| !harness.takes_mcp()) {
        return Err(Error::Config(format!(
            "failed to start the {} harness: its agent has no MCP support, so MCP server {} cannot be given to it; drop it from this eval's environment, or give it with `Environment::mcp_where_taken` to leave it out where it cannot be taken",
            harness.name(),
            server.name()
        )));
    }
    // Nor may one that reads no skills run as if it had read them.
    if let Some(skill) = env.skills.first().filter(|_| !harness.takes_skills()) {
        return Err(Error::Config(format!(
            "failed to start the {} harness: its agent reads no skills, so skill {} cannot be given to it; drop it from this eval's environment, or run the eval with a harness whose agent reads skills",
            harness.name(),
            skill.display()
        )));
    }
    let wanted = harness.credentials();
    // Only an in-process harness uses these values, on the host; a CLI's agent sees placeholders.
    let credentials = secrets
        .iter()
        .filter(|s| wanted.contains(&s.name))
        .map(|s| (s.name.clone(), s.value.expose_secret().to_string()))
        .collect();
    let setup = SessionSetup {
        credentials,
        skills: read_skills(&env.skills)?,
        skills_in_sandbox: env.skills_in_sandbox.clone(),
        mcp: env.mcp.clone(),
        mcp_where_taken: env.mcp_where_taken.clone(),
        artifacts_dir: Some(artifacts_dir.to_path_buf()),
        eval: record.eval.clone(),
        trial: record.trial,
        arm: record.arm.clone(),
        image,
    };
    harness.start(agent, &setup).await?;
    let model = harness.model().map(|m| format!(" ({m})")).unwrap_or_default();
    Ok(format!("{}{model} ready", harness.name()))
}

fn read_skills(dirs: &[PathBuf]) -> Result<Vec<Skill>> {
    use std::os::unix::fs::PermissionsExt;
    // Preflight checked each has a SKILL.md.
    let mut skills = Vec::new();
    for dir in dirs {
        let fail =
            |e: std::io::Error| Error::infra_from(format!("read skill {}", dir.display()), e);
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "skill".into());
        let mut files = Vec::new();
        for rel in crate::image::files_under(dir).map_err(fail)? {
            let full = dir.join(&rel);
            let meta = std::fs::metadata(&full).map_err(fail)?;
            if meta.is_file() {
                files.push(FileToWrite::new(
                    rel.to_string_lossy().into_owned(),
                    std::fs::read(&full).map_err(fail)?,
                    meta.permissions().mode() & 0o7777,
                ));
            }
        }
        skills.push(Skill { name, files });
    }
    Ok(skills)
}
