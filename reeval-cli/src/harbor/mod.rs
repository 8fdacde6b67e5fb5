//! `reeval harbor run`: Harbor tasks and datasets run as evals, with
//! Harbor's everyday flags in Harbor's meaning beside the eval suite's own
//! (in any order). Harbor's flags are declared here ([`RunArgs`]); the
//! suite's come from the option table ([`suite_flags`]) and go to the
//! suite's runner as its command line, so each option is spelled once.
//! Where both name one setting (`-n` and `--test-threads`, `-k` and
//! `--trials`, `-r` and `--retries`, `-a` and `--harness`), giving both is
//! a usage error: no flag means two things.

mod agents;
mod run;
pub mod suite_flags;

use std::path::PathBuf;

use clap::{Args, Subcommand};

pub use run::run;

/// The heading Harbor's flags are listed under.
const HARBOR: &str = "Harbor options (as `harbor run` takes them)";

/// `reeval harbor …`.
#[derive(Debug, Subcommand)]
pub enum HarborCommand {
    /// Run Harbor tasks (a task, a dataset directory, or a registry dataset) as evals
    #[command(
        long_about = "Run Harbor tasks as evals: the task or dataset directory PATH (or -p), or a \
                      dataset of a registry.json (-d NAME[@VERSION] with --registry-path or \
                      --registry-url), with Harbor's flags and an eval suite's, in any order. The \
                      records go under the record dir; -o or --job-name also writes Harbor's job \
                      directory. Exit code: the suite's; 2 when a task cannot run (each is named \
                      first; the rest run).",
        after_help = "Examples:\n  reeval harbor run -p tasks/ -a oracle -n 4\n  reeval harbor run \
                      -d bench@1.0 --registry-path registry.json -a claude-code -m \
                      anthropic/claude-sonnet-4-5 -k 3 -x 'slow-*' -o jobs\n  reeval harbor run \
                      tasks/ --harness shell --list"
    )]
    Run(Box<RunArgs>),
}

/// `harbor run`'s flags (the suite's are added from the option table).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The Harbor task, or dataset directory of tasks (as -p); with -p or -d, a filter
    #[arg(value_name = "PATH")]
    pub path_arg: Option<PathBuf>,
    /// Run only evals whose name contains one of these (the suite's filters; after `--`, any word)
    #[arg(value_name = "FILTER")]
    pub filters: Vec<String>,

    /// A task directory, or a directory of task directories
    #[arg(short = 'p', long = "path", value_name = "PATH", help_heading = HARBOR, conflicts_with = "dataset")]
    pub path: Option<PathBuf>,
    /// A dataset of the registry, NAME@VERSION (NAME alone: head, else its highest version)
    #[arg(short = 'd', long = "dataset", value_name = "NAME[@VERSION]", help_heading = HARBOR)]
    pub dataset: Option<String>,
    /// The registry: a registry.json, or the directory holding one
    #[arg(long, value_name = "PATH", help_heading = HARBOR, conflicts_with = "registry_url", requires = "dataset")]
    pub registry_path: Option<PathBuf>,
    /// The registry: a registry.json's URL, fetched
    #[arg(long, value_name = "URL", help_heading = HARBOR, requires = "dataset")]
    pub registry_url: Option<String>,
    /// Only this task of the dataset (its name or its directory's)
    #[arg(short = 't', long = "task", value_name = "NAME", help_heading = HARBOR)]
    pub task: Option<String>,
    /// Only tasks whose directory name matches (a glob; repeatable)
    #[arg(short = 'i', long = "include-task-name", value_name = "GLOB", help_heading = HARBOR)]
    pub include: Vec<String>,
    /// No task whose directory name matches (a glob; repeatable)
    #[arg(short = 'x', long = "exclude-task-name", value_name = "GLOB", help_heading = HARBOR)]
    pub exclude: Vec<String>,
    /// At most N tasks, after -i and -x
    #[arg(short = 'l', long = "n-tasks", value_name = "N", help_heading = HARBOR)]
    pub n_tasks: Option<usize>,

    /// The agent: oracle, nop, claude-code, codex, gemini-cli, cursor-cli, opencode, pi,
    /// mini-swe-agent, or a reeval harness (default: oracle)
    #[arg(short = 'a', long = "agent", value_name = "NAME", help_heading = HARBOR, conflicts_with = "harness")]
    pub agent: Option<String>,
    /// The agent's model, provider/model (repeatable: one harness per model)
    #[arg(short = 'm', long = "model", value_name = "MODEL", help_heading = HARBOR, requires = "agent")]
    pub models: Vec<String>,
    /// Trials at once (as --test-threads)
    #[arg(short = 'n', long = "n-concurrent", value_name = "N", help_heading = HARBOR,
          value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "test-threads")]
    pub n_concurrent: Option<u32>,
    /// Attempts per task (as --trials)
    #[arg(short = 'k', long = "n-attempts", value_name = "N", help_heading = HARBOR,
          value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "trials")]
    pub n_attempts: Option<u32>,
    /// Retries of a trial the platform failed (as --retries; reeval retries infra errors only)
    #[arg(short = 'r', long = "max-retries", value_name = "N", help_heading = HARBOR, conflicts_with = "retries")]
    pub max_retries: Option<u32>,

    /// Write Harbor's job directory under DIR (default jobs, with --job-name)
    #[arg(short = 'o', long = "jobs-dir", value_name = "DIR", help_heading = HARBOR)]
    pub jobs_dir: Option<PathBuf>,
    /// The job directory's name (default: the UTC time, YYYY-MM-DD__HH-MM-SS)
    #[arg(long, value_name = "NAME", help_heading = HARBOR)]
    pub job_name: Option<String>,

    /// Multiply the agent's and the verifier's timeouts
    #[arg(long, value_name = "X", help_heading = HARBOR, value_parser = positive)]
    pub timeout_multiplier: Option<f64>,
    /// Multiply the agent's timeout (over --timeout-multiplier)
    #[arg(long, value_name = "X", help_heading = HARBOR, value_parser = positive)]
    pub agent_timeout_multiplier: Option<f64>,
    /// Multiply the verifier's timeout (over --timeout-multiplier)
    #[arg(long, value_name = "X", help_heading = HARBOR, value_parser = positive)]
    pub verifier_timeout_multiplier: Option<f64>,
    /// Accepted; reeval has no agent setup timeout (the harness is part of its image)
    #[arg(long, value_name = "X", help_heading = HARBOR, value_parser = positive)]
    pub agent_setup_timeout_multiplier: Option<f64>,
    /// Accepted; reeval has no image build timeout
    #[arg(long, value_name = "X", help_heading = HARBOR, value_parser = positive)]
    pub environment_build_timeout_multiplier: Option<f64>,
    /// An attempt passes when its reward reaches X (default 1.0)
    #[arg(long, value_name = "X", help_heading = HARBOR, value_parser = finite)]
    pub reward_threshold: Option<f64>,

    /// An environment variable for the agent, KEY=VALUE (repeatable; its turns and solve.sh only)
    #[arg(long = "agent-env", visible_alias = "ae", value_name = "KEY=VALUE", help_heading = HARBOR, value_parser = key_value)]
    pub agent_env: Vec<(String, String)>,
    /// An environment variable for the verifier, KEY=VALUE (repeatable)
    #[arg(long = "verifier-env", visible_alias = "ve", value_name = "KEY=VALUE", help_heading = HARBOR, value_parser = key_value)]
    pub verifier_env: Vec<(String, String)>,
    /// Build environment/Dockerfile even when the task names a prebuilt docker_image
    #[arg(long, help_heading = HARBOR)]
    pub force_build: bool,
    /// Run the agent but not the verifier (no reward; the attempt passes)
    #[arg(long, help_heading = HARBOR)]
    pub disable_verification: bool,
    /// List what would run (as --list), tasks fetched
    #[arg(long, help_heading = HARBOR)]
    pub dry_run: bool,
    /// Accepted; reeval asks nothing
    #[arg(short = 'y', long = "yes", help_heading = HARBOR)]
    pub yes: bool,
}

/// A multiplier: a finite number above 0.
fn positive(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n > 0.0)
        .ok_or_else(|| format!("a positive number, not {s:?}"))
}

/// A finite number.
fn finite(s: &str) -> Result<f64, String> {
    s.parse::<f64>().ok().filter(|n| n.is_finite()).ok_or_else(|| format!("a number, not {s:?}"))
}

/// `KEY=VALUE`, as Harbor splits it (at the first `=`, both trimmed).
fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.trim().to_string())),
        _ => Err(format!("KEY=VALUE, not {s:?}")),
    }
}
