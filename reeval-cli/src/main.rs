//! `reeval`: what is not a test run. Recorded runs (`report`, `runs`,
//! `compare`, `regrade`), reeval's images (`images`), leftover sandboxes
//! (`clean`), and Harbor tasks and datasets run with Harbor's own flags
//! (`harbor run`). The command line is `clap`'s: every command has `--help`
//! (and `reeval help CMD`), and a mistyped command or flag gets a did-you-mean.

mod commands;
mod harbor;

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// The exit codes, under every command's help.
const EXIT_CODES: &str = "Exit code: 0 done, 1 the command failed, 2 a usage error; \
                          `harbor run` and `regrade`: the suite's (0 all passed, 1 any fail, \
                          2 config or usage error, 3 infra errors and no fail).";

/// The `reeval` command line.
#[derive(Debug, Parser)]
#[command(
    name = "reeval",
    version,
    about = "reeval's tool for what is not a test run: recorded runs, images, leftover sandboxes, Harbor tasks",
    after_help = EXIT_CODES,
    subcommand_required = true,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Rebuild a run's summary.json and report.html from its records, or combine several runs into one
    #[command(
        long_about = "Rebuild a run's summary.json and report.html from its records. Several runs \
                      (the parts of a partitioned run) are read as one and written as one run \
                      directory: their records and artifacts, and summary.json and report.html over \
                      the union; an attempt recorded in two of them is an error."
    )]
    Report {
        /// Run directories or run ids under the record dir (default: the last run)
        runs: Vec<String>,
        /// Where a combined run goes (default <record dir>/<RUN>+<RUN>+...)
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// List recorded runs, oldest first, with their figures
    Runs,
    /// List, build or prune reeval's images (default: list)
    Images {
        #[command(subcommand)]
        command: Option<ImagesCommand>,
    },
    /// Remove leftover sandboxes of runners that are gone (killed with SIGKILL)
    Clean,
    /// Compare two recorded runs (A the control, B the treatment), paired by eval and trial
    #[command(
        long_about = "Compare two recorded runs (A the control, B the treatment), paired by eval and \
                      trial: a table here, an HTML page and its JSON figures written. RUN: a run \
                      directory or a run id under the record dir, or several joined by commas, read \
                      as one (the parts of a partitioned run: A1,A2 B1,B2)."
    )]
    Compare {
        /// The control run (or runs, joined by commas)
        run_a: String,
        /// The treatment run (or runs, joined by commas)
        run_b: String,
        /// Where the HTML page goes (default <record dir>/compare.<A>.vs.<B>.html; the JSON beside it)
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Re-run a recorded run's checks and judge on its recorded work, no agent
    #[command(
        long_about = "Re-run the checks and judge of RUN's attempts against their recorded work, no \
                      agent: runs the suite binary that recorded RUN with --regrade RUN (exit code: \
                      the suite's)."
    )]
    Regrade {
        /// A run directory or a run id under the record dir
        run: String,
    },
    /// Run Harbor tasks and datasets as evals, with Harbor's flags
    Harbor {
        #[command(subcommand)]
        command: harbor::HarborCommand,
    },
}

/// `reeval images …`.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
enum ImagesCommand {
    /// List reeval's images (reeval/*)
    List,
    /// Build the Dockerfile at PATH, tagged by its content digest
    Build {
        /// A Dockerfile
        path: PathBuf,
    },
    /// Remove reeval's built images (reeval/img:*) and cached setups (reeval/setup:*); rebuilt on demand
    Prune {
        /// Only the cached setups this run made
        #[arg(long, value_name = "RUN_ID")]
        run: Option<String>,
    },
}

/// The command line's definition: the derived commands, `--record-dir`
/// (every command's, from the option table) and `harbor run`'s suite flags.
fn command() -> clap::Command {
    Cli::command()
        .arg(harbor::suite_flags::record_dir_arg().global(true))
        .mut_subcommand("harbor", |h| h.mut_subcommand("run", harbor::suite_flags::add))
}

fn main() {
    let matches = command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let record_dir = matches.get_one::<std::ffi::OsString>("record-dir").map(PathBuf::from);
    if let Command::Harbor { command: harbor::HarborCommand::Run(args) } = cli.command {
        let (_, h) = matches.subcommand().expect("a command");
        let (_, run) = h.subcommand().expect("harbor's command");
        std::process::exit(harbor::run(*args, run));
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let record_dir = record_dir.unwrap_or_else(commands::record_dir);
    let done = runtime.block_on(async {
        match cli.command {
            Command::Report { runs, out } => commands::report(&record_dir, &runs, out),
            Command::Runs => commands::runs(&record_dir),
            Command::Images { command } => match command.unwrap_or(ImagesCommand::List) {
                ImagesCommand::List => commands::images_list().await,
                ImagesCommand::Build { path } => commands::images_build(&path).await,
                ImagesCommand::Prune { run } => commands::images_prune(run.as_deref()).await,
            },
            Command::Clean => commands::clean().await,
            Command::Compare { run_a, run_b, out } => {
                commands::compare(&record_dir, &run_a, &run_b, out)
            }
            Command::Regrade { run } => match commands::regrade(&record_dir, &run) {
                Ok(code) => std::process::exit(code),
                Err(e) => Err(e),
            },
            Command::Harbor { .. } => unreachable!("harbor run returned above"),
        }
    });
    if let Err(e) = done {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(a: &[&str]) -> Result<Cli, clap::Error> {
        let m =
            command().try_get_matches_from(std::iter::once("reeval").chain(a.iter().copied()))?;
        Cli::from_arg_matches(&m)
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn commands_parse() {
        assert!(matches!(
            parse(&["report", "runs/x", "--record-dir", "d"]).unwrap().command,
            Command::Report { runs, out: None } if runs == ["runs/x"]
        ));
        assert!(matches!(
            parse(&["report", "a", "b", "--out", "ab"]).unwrap().command,
            Command::Report { runs, out: Some(o) } if runs == ["a", "b"] && o == Path::new("ab")
        ));
        assert!(matches!(parse(&["images"]).unwrap().command, Command::Images { command: None }));
        assert!(matches!(
            parse(&["images", "build", "Dockerfile"]).unwrap().command,
            Command::Images { command: Some(ImagesCommand::Build { .. }) }
        ));
        assert!(matches!(parse(&["clean"]).unwrap().command, Command::Clean));
        assert!(matches!(
            parse(&["compare", "a", "b", "--out", "c.html"]).unwrap().command,
            Command::Compare { out: Some(_), .. }
        ));
        assert!(parse(&["compare", "a"]).is_err());
        assert!(parse(&["runs", "--out", "x"]).is_err());
        let e = parse(&["reprot"]).unwrap_err().to_string();
        assert!(e.contains("similar subcommand exists: 'report'"), "{e}");
        assert_eq!(parse(&["--help"]).unwrap_err().kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
