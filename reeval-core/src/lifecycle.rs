//! The attempt's phases: the lazy start (image → container → env → workspace →
//! files and rules → setup → snapshot), the harness session on the first
//! turn, and the teardown.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use crate::ctx::Ctx;
use crate::diff::Snapshot;
use crate::environment::{DEFAULT_IMAGE, Environment, ImageSpec, WORKSPACE, Workspace};
use crate::error::{Error, Result};
use crate::exec::Command;
use crate::secrets::ExposeSecret;
use crate::sandbox::{LABEL_ATTEMPT, LABEL_RUN, Sandbox, SandboxHandle, SandboxSpec, archive};

/// Prepares the unprivileged agent user (see `AgentUser`), as root.
const AGENT_USER_SETUP: &str = "mkdir -p /home/agent && chown -R 1000:1000 /home/agent . && mkdir -p -m 1777 /tmp/.reeval-pids && chmod 1777 /tmp/.reeval-pids \
    && { command -v git >/dev/null 2>&1 && git config --system --add safe.directory '*' || true; }";

/// Teardown's own deadline: it never runs on the attempt's cancelled signal.
pub const TEARDOWN_DEADLINE: Duration = Duration::from_secs(120);

/// Runs the start phases in order. Called by `Ctx` on the first call that needs the sandbox.
pub(crate) async fn start(ctx: &mut Ctx) -> Result<SandboxHandle> {
    if ctx.sandbox.is_some() {
        return Err(Error::infra("start the sandbox", "an earlier start was interrupted"));
    }
    let backend = ctx.backend.clone().ok_or_else(|| Error::infra("start the sandbox", "no sandbox backend is configured"))?;
    let setup_began = Instant::now();

    // image
    let began = Instant::now();
    let spec = ctx.env.image.clone().or_else(|| ctx.harness.as_ref().and_then(|h| h.image())).unwrap_or_else(|| ImageSpec::From(DEFAULT_IMAGE.into()));
    let harness_id = ctx.harness.as_ref().map(|h| h.name().to_string()).unwrap_or_default();
    let image = crate::image::ensure(&backend, &spec, &harness_id).await?;
    ctx.log.phase(crate::phase::Phase::Image, began, &image.detail);
    ctx.record.image = Some(image.reference.clone());

    // container: kept by the context from creation on, so teardown destroys it whatever happens.
    let began = Instant::now();
    let labels = BTreeMap::from([(LABEL_RUN.to_string(), ctx.record.run_id.clone()), (LABEL_ATTEMPT.to_string(), ctx.record.artifacts_dir_name())]);
    // env: the agent's environment holds placeholders, never secret values.
    let mut env = vec![
        ("CI".to_string(), "1".to_string()),
        ("TERM".into(), "dumb".into()),
        ("NO_COLOR".into(), "1".into()),
        ("HOME".into(), crate::sandbox::AgentUser::HOME.into()),
    ];
    env.extend(ctx.env.env.iter().cloned());
    let placeholders: Vec<(String, String)> = ctx
        .secrets
        .iter()
        .filter(|s| s.scope == crate::ctx::SecretScope::Placeholder)
        .map(|s| (s.name.clone(), crate::secrets::placeholder(&s.name)))
        .collect();
    env.extend(placeholders.iter().cloned());
    let sandbox = backend.create(&SandboxSpec { image: image.reference.clone(), labels, workdir: WORKSPACE.into(), limits: ctx.env.limits.clone() }).await?;
    ctx.record.container = Some(sandbox.id().to_string());
    let handle = SandboxHandle::new(sandbox.clone(), WORKSPACE, env);
    ctx.sandbox = Some(handle.clone());
    sandbox.start().await?;
    let short_id: String = handle.sandbox().id().chars().take(12).collect();
    ctx.log.phase(crate::phase::Phase::Container, began, format!("{short_id} from {}, no network", image.reference));
    let began = Instant::now();
    ctx.log.phase(crate::phase::Phase::Env, began, format!("CI TERM NO_COLOR + {} variables, {} secret placeholders", ctx.env.env.len(), placeholders.len()));

    // workspace
    if let Some(ws) = ctx.env.workspace.clone() {
        let began = Instant::now();
        let detail = workspace(&handle, &ws).await?;
        ctx.log.phase(crate::phase::Phase::Workspace, began, detail);
    }

    // files and rules
    let rules_file = ctx.harness.as_ref().map(|h| h.rules_file().to_string()).unwrap_or_else(|| "AGENTS.md".into());
    let mut files = ctx.env.files.clone();
    if let Some(rules) = &ctx.env.rules {
        files.push((rules_file.clone(), rules.clone().into_bytes(), 0o644));
    }
    if ctx.env.context_summary {
        files.push(("CONTEXT.md".into(), context_summary(&ctx.env).into_bytes(), 0o644));
    }
    if !files.is_empty() {
        let began = Instant::now();
        write_files(&handle, &files).await?;
        let rules = if ctx.env.rules.is_some() { format!(", rules in {rules_file}") } else { String::new() };
        ctx.log.phase(crate::phase::Phase::Files, began, format!("{} files{rules}", files.len()));
    }

    // setup
    if !ctx.env.setup.is_empty() {
        let began = Instant::now();
        let result = setup(ctx, &handle).await;
        ctx.log.phase(crate::phase::Phase::Setup,
            began,
            match &result {
                Ok(n) => format!("{n} steps ok"),
                Err(e) => e.to_string(),
            },
        );
        result?;
    }

    // snapshot: nothing was written to an untouched workspace, so there is nothing to read.
    let began = Instant::now();
    // An image of the eval's or the harness's own may put files in the workspace: read it then too.
    let own_image = ctx.env.image.is_some() || ctx.harness.as_ref().is_some_and(|h| h.image().is_some());
    let baseline = if ctx.env.prepares_workspace() || own_image {
        // Before the snapshot, so the workspace's change of owner is not a change of the agent's.
        prepare_agent_user(ctx, &handle).await?;
        Snapshot::take(&handle).await?
    } else {
        Snapshot::default()
    };
    ctx.log.phase(crate::phase::Phase::Snapshot, began, format!("{} files", baseline.len()));
    ctx.baseline = Some(baseline);
    ctx.record.timings.setup_ms += setup_began.elapsed().as_millis() as u64;
    Ok(handle)
}

/// The agent's user: its home, the workspace and what the environment put in
/// it are its own; root's git may read its repository. Once per attempt,
/// before the agent's first action.
async fn prepare_agent_user(ctx: &mut Ctx, handle: &SandboxHandle) -> Result<()> {
    if ctx.agent_user_ready {
        return Ok(());
    }
    let out = handle.exec(Command::shell(AGENT_USER_SETUP)).await?;
    if !out.success() {
        return Err(Error::infra("prepare the agent user", out.stderr.trim()));
    }
    ctx.agent_user_ready = true;
    Ok(())
}

/// Starts the harness's session, on the first turn: an eval that only runs
/// checks never starts one. Not the eval's own work: the caller pauses the budget.
pub(crate) async fn start_harness(ctx: &mut Ctx, handle: &SandboxHandle) -> Result<()> {
    if ctx.harness_started {
        return Ok(());
    }
    let began = Instant::now();
    prepare_agent_user(ctx, handle).await?;
    let handle = handle.clone();

    if let Some(h) = ctx.harness.as_mut() {
        let wanted = h.credentials();
        let credentials = ctx.secrets.iter().filter(|s| wanted.contains(&s.name)).map(|s| (s.name.clone(), s.value.expose_secret().to_string())).collect();
        let setup = crate::harness::SessionSetup {
            credentials,
            skills: read_skills(&ctx.env.skills)?,
            mcp: ctx.env.mcp.clone(),
            artifacts_dir: Some(ctx.artifacts_dir.clone()),
        };
        h.start(&handle.as_agent(), &setup).await?;
        ctx.harness_started = true;
        let name = h.name().to_string();
        let model = h.model().map(|m| format!(" ({m})")).unwrap_or_default();
        ctx.log.phase(crate::phase::Phase::Harness, began, format!("{name}{model} ready"));
    }
    ctx.record.timings.setup_ms += began.elapsed().as_millis() as u64;
    Ok(())
}

fn read_skills(dirs: &[std::path::PathBuf]) -> Result<Vec<crate::environment::Skill>> {
    use std::os::unix::fs::PermissionsExt;
    // Preflight checked each has a SKILL.md.
    let mut skills = Vec::new();
    for dir in dirs {
        let fail = |e: std::io::Error| Error::infra(format!("read skill {}", dir.display()), e);
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "skill".into());
        let mut files = Vec::new();
        for rel in crate::image::files_under(dir).map_err(fail)? {
            let full = dir.join(&rel);
            let meta = std::fs::metadata(&full).map_err(fail)?;
            if meta.is_file() {
                files.push((rel.to_string_lossy().into_owned(), std::fs::read(&full).map_err(fail)?, meta.permissions().mode() & 0o7777));
            }
        }
        skills.push(crate::environment::Skill { name, files });
    }
    Ok(skills)
}

async fn workspace(handle: &SandboxHandle, ws: &Workspace) -> Result<String> {
    let (tar, what, init) = match ws {
        Workspace::Dir { path, init } => {
            let tar = crate::image::dir_tar(path).map_err(|e| Error::infra(format!("read workspace directory {}", path.display()), e))?;
            (tar, path.display().to_string(), *init)
        }
        Workspace::Git { url, rev, init } => (crate::workspace::fetch_git(url, rev).await?, format!("{url}@{rev}"), *init),
    };
    let bytes = tar.len();
    handle.sandbox().upload(handle.workspace(), tar.into()).await?;
    if init {
        let out = handle
            .exec(Command::shell(
                "git init -q && git add -A && git -c user.name=reeval -c user.email=reeval@localhost commit -qm 'workspace as given' --allow-empty",
            ))
            .await?;
        if !out.success() {
            return Err(Error::infra("initialise the workspace's git repository", out.stderr.trim()));
        }
    }
    Ok(format!("{what} ({bytes} bytes){}", if init { ", .git of one commit" } else { "" }))
}

async fn write_files(handle: &SandboxHandle, files: &[(String, Vec<u8>, u32)]) -> Result<()> {
    let (relative, absolute): (Vec<_>, Vec<_>) = files.iter().cloned().partition(|(p, _, _)| !p.starts_with('/'));
    if !relative.is_empty() {
        let cleaned: Vec<_> = relative.into_iter().map(|(p, b, m)| (p.trim_start_matches("./").to_string(), b, m)).collect();
        if cleaned.iter().any(|(p, _, _)| p.split('/').any(|c| c == "..")) {
            return Err(Error::Config("failed to write the environment's files: a path uses `..`".into()));
        }
        handle.sandbox().upload(handle.workspace(), archive::tar_of(&cleaned)?).await?;
    }
    for (path, bytes, mode) in absolute {
        handle.write_file(&path, &bytes, mode).await?;
    }
    Ok(())
}

async fn setup(ctx: &mut Ctx, handle: &SandboxHandle) -> Result<usize> {
    let log_path = ctx.artifacts_dir.join("setup.log");
    std::fs::create_dir_all(&ctx.artifacts_dir).map_err(|e| Error::infra("create the artifact directory", e))?;
    let mut log = std::fs::File::create(&log_path).map_err(|e| Error::infra(format!("create {}", log_path.display()), e))?;
    if !ctx.record.artifacts.iter().any(|a| a == "setup.log") {
        ctx.record.artifacts.push("setup.log".into());
    }
    let redactor = ctx.redactor.clone();
    for (i, step) in ctx.env.setup.clone().iter().enumerate() {
        let out = handle.exec(Command::shell(step.command.clone()).timeout(step.timeout)).await?;
        let text = format!(
            "$ {}\n{}{}[exit {}{} in {}ms]\n\n",
            step.command,
            out.stdout,
            out.stderr,
            out.exit_code,
            if out.timed_out { ", timed out" } else { "" },
            out.duration_ms
        );
        let _ = log.write_all(redactor.redact(&text).as_bytes());
        if !out.success() {
            let why = if out.timed_out { format!("timed out after {:?}", step.timeout) } else { format!("exited {}", out.exit_code) };
            let tail = crate::exec::tail(&format!("{}{}", out.stdout, out.stderr), 2000).to_string();
            return Err(Error::infra(
                format!("run setup step {} `{}`", i + 1, step.command),
                redactor.redact(&format!("{why}; output tail:\n{tail}")),
            ));
        }
    }
    Ok(ctx.env.setup.len())
}

/// The `CONTEXT.md` text: what the attempt was given.
pub(crate) fn context_summary(env: &Environment) -> String {
    let mut s = String::from("# What this task comes with\n\n");
    match &env.workspace {
        Some(Workspace::Git { url, rev, .. }) => s.push_str(&format!("- The workspace is the repository {} at {rev}.\n", without_credentials(url))),
        Some(Workspace::Dir { path, .. }) => {
            s.push_str(&format!("- The workspace holds the files of {}.\n", path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()))
        }
        None => s.push_str("- The workspace starts empty.\n"),
    }
    for (path, _, _) in &env.files {
        s.push_str(&format!("- File: {path}\n"));
    }
    if env.rules.is_some() {
        s.push_str("- Rules for you are in the rules file.\n");
    }
    for step in &env.setup {
        s.push_str(&format!("- Setup ran: `{}`\n", step.command));
    }
    s
}

/// `https://user:token@host/x` → `https://host/x`: the agent reads the summary.
fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme && !url[scheme + 3..at].contains('/') => format!("{}{}", &url[..scheme + 3], &url[at + 1..]),
        _ => url.to_string(),
    }
}

/// Closes the session, collects the final workspace, destroys the sandbox.
/// Runs whatever happened before, under its own deadline.
pub(crate) async fn teardown(ctx: &mut Ctx) {
    let began = Instant::now();
    let destroyed = match tokio::time::timeout(TEARDOWN_DEADLINE, teardown_inner(ctx)).await {
        Ok(destroyed) => destroyed,
        Err(_) => {
            ctx.log.event(format!("failed to finish teardown within {TEARDOWN_DEADLINE:?}"));
            match &ctx.sandbox {
                Some(h) => matches!(tokio::time::timeout(Duration::from_secs(30), h.sandbox().destroy()).await, Ok(Ok(()))),
                None => true,
            }
        }
    };
    ctx.record.timings.teardown_ms = began.elapsed().as_millis() as u64;
    let detail = match (&ctx.sandbox, destroyed) {
        (None, _) => "no sandbox was started",
        (Some(_), true) => "sandbox destroyed",
        (Some(_), false) => "failed to destroy the sandbox; the run's end sweep or the next run removes it",
    };
    ctx.log.phase(crate::phase::Phase::Teardown, began, detail);
}

/// Adds files a harness wrote to the top of the artifact directory to the record's list.
fn list_harness_artifacts(ctx: &mut Ctx) {
    let Ok(entries) = std::fs::read_dir(&ctx.artifacts_dir) else { return };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !ctx.record.artifacts.contains(n))
        .collect();
    names.sort();
    ctx.record.artifacts.extend(names);
}

/// Returns whether the sandbox is gone.
async fn teardown_inner(ctx: &mut Ctx) -> bool {
    for forward in ctx.forwards.drain(..) {
        forward.task.abort();
    }
    let Some(handle) = ctx.sandbox.clone() else { return true };
    if ctx.harness_started
        && let Some(h) = ctx.harness.as_mut()
    {
        match tokio::time::timeout(Duration::from_secs(15), h.stop(&handle.as_agent())).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => ctx.log.event(format!("failed to stop the harness: {e}")),
            Err(_) => ctx.log.event("failed to stop the harness within 15s"),
        }
        // What the harness kept (transcripts, its config home) belongs to the record.
        list_harness_artifacts(ctx);
    }
    // An aborted turn's processes must not change the workspace while it is read.
    if ctx.turn_unsettled.load(std::sync::atomic::Ordering::SeqCst) {
        let _ = handle.sandbox().kill("KILL").await;
    }
    if let Some(baseline) = ctx.baseline.clone() {
        let began = Instant::now();
        let before = ctx.last_snapshot.clone().unwrap_or_else(|| baseline.clone());
        match before.refresh(&handle).await {
            Ok(last) => {
                ctx.record.final_diff = Some(baseline.diff(&last));
                ctx.record.workspace_collected = true;
            }
            Err(e) => ctx.log.event(format!("failed to collect the final workspace: {e}")),
        }
        ctx.record.timings.diff_ms += began.elapsed().as_millis() as u64;
    }
    let mut destroyed = handle.sandbox().destroy().await;
    if destroyed.is_err() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        destroyed = handle.sandbox().destroy().await;
    }
    match destroyed {
        Ok(()) => true,
        Err(e) => {
            ctx.log.event(format!("failed to destroy the sandbox: {e}"));
            false
        }
    }
}
