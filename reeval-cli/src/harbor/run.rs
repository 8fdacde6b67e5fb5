//! `reeval harbor run`'s steps: where the tasks come from, which run (a task
//! that cannot is a config outcome of its own, listed when the run starts), Harbor's flags made the
//! tasks' settings and the suite's command line, and Harbor's job directory.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::ArgMatches;
use reeval_harbor::dataset::{self, Found, Selection, Source};
use reeval_harbor::fetch::TaskCache;
use reeval_harbor::job::{JobAgent, JobOutput, JobSettings, JobSource, JobTask};
use reeval_harbor::registry::{Registry, split_name_version};
use reeval_harbor::{HarborTask, Loaded};

use super::{RunArgs, agents, suite_flags};

/// A command line that cannot run (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

/// Runs `reeval harbor run`; the exit code. A task that cannot run is a
/// config outcome of its own cells, listed when the run starts; the rest run.
pub fn run(args: RunArgs, m: &ArgMatches) -> i32 {
    match prepare(&args, m) {
        Ok(Prepared { evals, suite_argv, job }) => {
            let extra: Vec<Box<dyn reeval_core::Reporter>> = match job {
                Some(job) => vec![Box::new(job)],
                None => Vec::new(),
            };
            reeval_core::runner::main_with_reporters(
                evals,
                reeval_harness::registry(),
                suite_argv,
                extra,
            )
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// What the run needs, made from the command line.
struct Prepared {
    evals: Vec<reeval_core::Eval>,
    suite_argv: Vec<OsString>,
    job: Option<JobOutput>,
}

fn prepare(args: &RunArgs, m: &ArgMatches) -> Result<Prepared, Usage> {
    warn_accepted(args);
    let (source, job_source, filters) = source(args)?;
    let selection = Selection {
        task: args.task.clone(),
        include: args.include.clone(),
        exclude: args.exclude.clone(),
        n_tasks: args.n_tasks,
    };
    let cache = TaskCache::new(TaskCache::default_root());
    let found = dataset::find(&source, &selection, &cache).map_err(|e| Usage(e.to_string()))?;
    let mut loaded = Loaded::from_found(&found);
    for warning in loaded.warnings() {
        eprintln!("reeval: warning: {warning}");
    }
    for task in loaded.read_tasks_mut() {
        configure(task, args);
    }
    let registry = reeval_harness::registry();
    let agents = match &args.agent {
        Some(agent) => agents::specs(agent, &args.models, &registry).map_err(Usage)?,
        None => Vec::new(),
    };
    let suite_argv = suite_argv(args, m, &agents, &filters);
    let job = job_output(args, m, job_source, &agents, &loaded, &found)?;
    let evals = loaded.into_evals();
    Ok(Prepared { evals, suite_argv, job })
}

/// Harbor's flags reeval takes and ignores, said so.
fn warn_accepted(args: &RunArgs) {
    if args.agent_setup_timeout_multiplier.is_some() {
        eprintln!(
            "reeval: --agent-setup-timeout-multiplier changes nothing: reeval has no agent setup timeout (the harness is part of its image)"
        );
    }
    if args.environment_build_timeout_multiplier.is_some() {
        eprintln!(
            "reeval: --environment-build-timeout-multiplier changes nothing: reeval has no image build timeout"
        );
    }
}

/// Where the tasks come from, as Harbor's job config says it, and the words
/// that are the suite's filters (PATH is one when -p or -d is given).
fn source(args: &RunArgs) -> Result<(Source, JobSource, Vec<String>), Usage> {
    let mut filters = args.filters.clone();
    let positional = args.path_arg.clone();
    if let Some(spec) = &args.dataset {
        filters.splice(0..0, positional.map(|p| p.to_string_lossy().into_owned()));
        let (name, version) = split_name_version(spec);
        let registry = match (&args.registry_path, &args.registry_url) {
            (Some(path), _) => Registry::read(path),
            (None, Some(url)) => fetch_registry(url)?,
            (None, None) => {
                return Err(Usage(format!(
                    "-d {spec} needs its registry: --registry-path FILE_OR_DIR or --registry-url URL \
                     (reeval does not reach Harbor's hub)"
                )));
            }
        }
        .map_err(|e| Usage(e.to_string()))?;
        let job = JobSource::Registry {
            name: name.to_string(),
            version: version.map(str::to_string),
            registry_path: args.registry_path.clone(),
            registry_url: args.registry_url.clone(),
        };
        let source = Source::Registry {
            registry,
            name: name.to_string(),
            version: version.map(str::to_string),
        };
        return Ok((source, job, filters));
    }
    if args.registry_path.is_some() || args.registry_url.is_some() {
        return Err(Usage("--registry-path and --registry-url go with -d NAME[@VERSION]".into()));
    }
    let path =
        match (&args.path, positional) {
            (Some(p), positional) => {
                filters.splice(0..0, positional.map(|p| p.to_string_lossy().into_owned()));
                p.clone()
            }
            (None, Some(p)) => p,
            (None, None) => return Err(Usage(
                "give the tasks: PATH, -p PATH or -d NAME[@VERSION]; see reeval harbor run --help"
                    .into(),
            )),
        };
    let job = if path.join("task.toml").is_file() {
        JobSource::Task(path.clone())
    } else {
        JobSource::Dir(path.clone())
    };
    Ok((Source::Path(path), job, filters))
}

fn fetch_registry(url: &str) -> Result<Result<Registry, reeval_harbor::DatasetError>, Usage> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Usage(format!("failed to start the async runtime: {e}")))?;
    Ok(runtime.block_on(Registry::fetch(url)))
}

/// Harbor's per-task flags on one task: multipliers, threshold, env, build, verification.
fn configure(task: &mut HarborTask, args: &RunArgs) {
    task.agent_timeout_multiplier =
        args.agent_timeout_multiplier.or(args.timeout_multiplier).unwrap_or(1.0);
    task.verifier_timeout_multiplier =
        args.verifier_timeout_multiplier.or(args.timeout_multiplier).unwrap_or(1.0);
    if let Some(threshold) = args.reward_threshold {
        task.reward_threshold = threshold;
    }
    for (k, v) in &args.agent_env {
        task.agent_env.retain(|(key, _)| key != k);
        task.agent_env.push((k.clone(), v.clone()));
    }
    for (k, v) in &args.verifier_env {
        for env in std::iter::once(&mut task.verifier_env).chain(task.step_verifier_envs.iter_mut())
        {
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), v.clone()));
        }
    }
    if args.force_build {
        task.force_build();
    }
    task.disable_verification = args.disable_verification;
}

/// The suite's command line: its own flags as given, Harbor's where they
/// are the suite's (`-n`, `-k`, `-r`, `-a`/`-m`, `--dry-run`), then the filters.
fn suite_argv(
    args: &RunArgs,
    m: &ArgMatches,
    agents: &[JobAgent],
    filters: &[String],
) -> Vec<OsString> {
    let mut argv = suite_flags::argv(m);
    let mut flag = |name: &str, value: String| {
        argv.push(OsString::from(name));
        argv.push(OsString::from(value));
    };
    if let Some(n) = args.n_concurrent {
        flag("--test-threads", n.to_string());
    }
    if let Some(k) = args.n_attempts {
        flag("--trials", k.to_string());
    }
    if let Some(r) = args.max_retries {
        flag("--retries", r.to_string());
    }
    for a in agents {
        flag("--harness", a.spec.clone());
    }
    // Harbor's default agent is the oracle, where the suite's is `shell`.
    let harness_set = !agents.is_empty()
        || suite_flags::given(m, "harness")
        || std::env::var_os("REEVAL_HARNESS").is_some_and(|v| !v.is_empty());
    if !harness_set {
        flag("--harness", "oracle".into());
    }
    // Harbor's users expect speed: the attempts next in line get their
    // container (and gateway) made while they wait for a slot, one per slot.
    // Their records say so, and their clocks start with their slots.
    let prestart_set = suite_flags::given(m, "prestart")
        || std::env::var_os("REEVAL_PRESTART").is_some_and(|v| !v.is_empty());
    if !prestart_set {
        let slots = args
            .n_concurrent
            .map(|n| n as usize)
            .or_else(|| suite_flags::value(m, "test-threads"))
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        flag("--prestart", slots.to_string());
    }
    if args.dry_run {
        argv.push("--list".into());
    }
    if !filters.is_empty() {
        argv.push("--".into());
        argv.extend(filters.iter().map(OsString::from));
    }
    argv
}

/// Harbor's job directory, when `-o` or `--job-name` asks for it.
fn job_output(
    args: &RunArgs,
    m: &ArgMatches,
    source: JobSource,
    agents: &[JobAgent],
    loaded: &Loaded,
    found: &Found,
) -> Result<Option<JobOutput>, Usage> {
    if args.jobs_dir.is_none() && args.job_name.is_none() {
        return Ok(None);
    }
    let jobs_dir = args.jobs_dir.clone().unwrap_or_else(|| PathBuf::from("jobs"));
    let name = args.job_name.clone().unwrap_or_else(default_job_name);
    if jobs_dir.join(&name).exists() {
        return Err(Usage(format!(
            "the job directory {} exists: give another --job-name (reeval does not resume Harbor jobs)",
            jobs_dir.join(&name).display()
        )));
    }
    let mut agents = agents.to_vec();
    for spec in m.get_many::<OsString>("harness").into_iter().flatten() {
        for spec in spec.to_string_lossy().split(',') {
            agents.push(JobAgent::of_spec(spec.trim()));
        }
    }
    if agents.is_empty() {
        agents.push(JobAgent::of_spec("oracle"));
    }
    let settings = JobSettings {
        source,
        include: args.include.clone(),
        exclude: args.exclude.clone(),
        n_tasks: args.n_tasks,
        n_attempts: args.n_attempts.or_else(|| suite_flags::value(m, "trials")).unwrap_or(1),
        n_concurrent: args
            .n_concurrent
            .map(|n| n as usize)
            .or_else(|| suite_flags::value(m, "test-threads"))
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        max_retries: args.max_retries.or_else(|| suite_flags::value(m, "retries")).unwrap_or(2),
        timeout_multiplier: args.timeout_multiplier.unwrap_or(1.0),
        agent_timeout_multiplier: args.agent_timeout_multiplier,
        verifier_timeout_multiplier: args.verifier_timeout_multiplier,
        force_build: args.force_build,
        disable_verification: args.disable_verification,
        agents,
    };
    let tasks = loaded
        .tasks
        .iter()
        .filter_map(|(id, task)| {
            let task = task.as_ref().ok()?;
            Some(JobTask { task: task.clone(), id: id.clone(), source: found.source.clone() })
        })
        .collect();
    Ok(Some(JobOutput::new(&jobs_dir, &name, settings, tasks)))
}

/// Harbor's default job name, `YYYY-MM-DD__HH-MM-SS` (here in UTC).
fn default_job_name() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.trim_end_matches('Z').replacen('T', "__", 1).replace(':', "-")
}
