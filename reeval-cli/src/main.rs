//! `reeval`: what is not a test run. Recorded runs (`report`, `runs`),
//! reeval's images (`images`), and leftover sandboxes (`clean`).
//!
//! ```text
//! reeval report [DIR]          rebuild a run's summary.json and report.html from its records
//! reeval runs                  list recorded runs with their figures
//! reeval images [list]         list reeval's images
//! reeval images build PATH     build a Dockerfile as an eval's `Image::dockerfile` would
//! reeval images prune          remove reeval's built images and the setup cache (rebuilt on demand)
//! reeval clean                 remove the sandboxes of runners that are gone
//! reeval compare A B           the paired comparison of two recorded runs
//! reeval regrade RUN           re-run RUN's checks and judge on its recorded work
//! reeval harbor run PATH ...   run Harbor tasks as evals (the suite's flags follow PATH)
//! ```

mod commands;

use std::path::PathBuf;

/// The help text.
const HELP: &str = "Usage: reeval <COMMAND> [OPTIONS]

Commands:
  report [DIR]          rebuild a run's summary.json and report.html from its records
                        (DIR: a run directory; default: the last run under the record dir)
  runs                  list recorded runs, oldest first, with their figures
  images [list]         list reeval's images (reeval/*)
  images build PATH     build the Dockerfile at PATH, tagged by its content digest
  images prune          remove reeval's built images (reeval/img:*) and cached setups
                        (reeval/setup:*); they are rebuilt on demand. --run RUN_ID: only
                        the cached setups that run made
  clean                 remove leftover sandboxes of runners that are gone (killed with SIGKILL)
  compare RUN_A RUN_B   compare two recorded runs (A the control, B the treatment), paired by
                        eval and trial: a table here, an HTML page and JSON figures written
                        (RUN: a run directory or a run id under the record dir)
  regrade RUN           re-run the checks and judge of RUN's attempts against their recorded
                        work, no agent: runs the suite binary that recorded RUN with --regrade RUN
                        (exit code: the suite's)
      --out <FILE>      where the HTML page goes (default <record dir>/compare.<A>.vs.<B>.html;
                        the JSON beside it)
  harbor run PATH [FLAGS]
                        run the Harbor task at PATH, or every task of the dataset directory
                        PATH, as evals: the flags after PATH are an eval suite's (--harness,
                        --trials, --list, filters, --tag, --record-dir, ...; see --help after
                        PATH); --compare control,NAME with a [variants.NAME] of reeval.toml;
                        exit code: the suite's
      --timeout-multiplier X, --agent-timeout-multiplier X, --verifier-timeout-multiplier X
                        multiply the tasks' agent and verifier timeouts (as Harbor's flags)
      --reward-threshold X
                        an attempt passes when its reward reaches X (default 1.0)

Options:
      --record-dir <DIR>  where runs are recorded (env REEVAL_RECORD_DIR;
                          default $CARGO_TARGET_DIR/reeval/runs, else target/reeval/runs)
  -h, --help              this text

Exit code: 0 done, 1 the command failed, 2 a usage error.";

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Command {
    Report(Option<PathBuf>),
    Runs,
    Images(ImagesCommand),
    Clean,
    Compare { control: String, treatment: String, out: Option<PathBuf> },
    Regrade(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ImagesCommand {
    List,
    Build(PathBuf),
    Prune(Option<String>),
}

/// The parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cli {
    command: Command,
    record_dir: Option<PathBuf>,
}

/// A command line that cannot be understood.
#[derive(Debug, thiserror::Error)]
#[error("failed to parse arguments: {0}; see reeval --help")]
struct UsageError(String);

fn parse(argv: impl IntoIterator<Item = std::ffi::OsString>) -> Result<Option<Cli>, UsageError> {
    use lexopt::prelude::*;
    let mut p = lexopt::Parser::from_args(argv);
    let mut words: Vec<String> = Vec::new();
    let mut record_dir = None;
    let mut run = None;
    let mut out = None;
    while let Some(arg) = p.next().map_err(|e| UsageError(e.to_string()))? {
        match arg {
            Short('h') | Long("help") => return Ok(None),
            Long("record-dir") => {
                record_dir = Some(PathBuf::from(p.value().map_err(|e| UsageError(e.to_string()))?))
            }
            Long("run") => {
                run = Some(
                    p.value()
                        .map_err(|e| UsageError(e.to_string()))?
                        .to_string_lossy()
                        .into_owned(),
                )
            }
            Long("out") => {
                out = Some(PathBuf::from(p.value().map_err(|e| UsageError(e.to_string()))?))
            }
            Value(v) => {
                words.push(v.into_string().map_err(|v| UsageError(format!("{v:?} is not UTF-8")))?)
            }
            other => return Err(UsageError(other.unexpected().to_string())),
        }
    }
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let command = match words.as_slice() {
        ["report"] => Command::Report(None),
        ["report", dir] => Command::Report(Some(PathBuf::from(dir))),
        ["runs"] => Command::Runs,
        ["images"] | ["images", "list"] => Command::Images(ImagesCommand::List),
        ["images", "build", path] => Command::Images(ImagesCommand::Build(PathBuf::from(path))),
        ["images", "prune"] => Command::Images(ImagesCommand::Prune(run)),
        ["clean"] => Command::Clean,
        ["compare", a, b] => {
            Command::Compare { control: a.to_string(), treatment: b.to_string(), out: out.take() }
        }
        ["regrade", run] => Command::Regrade(run.to_string()),
        ["compare", ..] => return Err(UsageError("compare takes two runs: RUN_A RUN_B".into())),
        [] => return Err(UsageError("a command is needed".into())),
        other => return Err(UsageError(format!("unknown command `{}`", other.join(" ")))),
    };
    if out.is_some() {
        return Err(UsageError("--out goes with compare".into()));
    }
    Ok(Some(Cli { command, record_dir }))
}

/// `reeval harbor run PATH [FLAGS]`: the tasks at PATH run by the suite's
/// own `main` with FLAGS, so every runner flag works as in `cargo test --test evals`.
fn harbor(argv: &[std::ffi::OsString]) -> i32 {
    let path = match argv {
        [run, path, ..] if run == "run" => PathBuf::from(path),
        _ => {
            eprintln!(
                "error: failed to parse arguments: harbor takes `run PATH [FLAGS]`; see reeval --help"
            );
            return 2;
        }
    };
    let (multipliers, rest) = match timeout_multipliers(&argv[2..]) {
        Ok(split) => split,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    match reeval_harbor::Dataset::read(&path, |_| true) {
        Ok(mut dataset) => {
            for warning in dataset.warnings() {
                eprintln!("reeval: warning: {warning}");
            }
            for task in dataset.tasks.iter_mut().flatten() {
                task.agent_timeout_multiplier = multipliers.agent;
                task.verifier_timeout_multiplier = multipliers.verifier;
                if let Some(threshold) = multipliers.reward_threshold {
                    task.reward_threshold = threshold;
                }
            }
            let evals = dataset.into_evals();
            reeval_core::runner::main_with_args(evals, reeval_harness::registry(), rest)
        }
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

/// Harbor's timeout multipliers, as `harbor run` takes them, and the reward
/// an attempt must reach to pass.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Multipliers {
    agent: f64,
    verifier: f64,
    /// `--reward-threshold X` (1.0 unless given).
    reward_threshold: Option<f64>,
}

/// `--timeout-multiplier X` (both), `--agent-timeout-multiplier X`,
/// `--verifier-timeout-multiplier X` and `--reward-threshold X` taken out of
/// `args`; the rest are the suite's.
fn timeout_multipliers(
    args: &[std::ffi::OsString],
) -> Result<(Multipliers, Vec<std::ffi::OsString>), UsageError> {
    let (mut both, mut agent, mut verifier, mut threshold) = (None, None, None, None);
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let text = arg.to_string_lossy();
        let (flag, inline) = match text.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (text.to_string(), None),
        };
        let slot = match flag.as_str() {
            "--timeout-multiplier" => &mut both,
            "--agent-timeout-multiplier" => &mut agent,
            "--verifier-timeout-multiplier" => &mut verifier,
            "--reward-threshold" => &mut threshold,
            _ => {
                rest.push(arg.clone());
                continue;
            }
        };
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .map(|v| v.to_string_lossy().into_owned())
                .ok_or_else(|| UsageError(format!("{flag} needs a number")))?,
        };
        let threshold_flag = flag == "--reward-threshold";
        let n: f64 = value
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite() && (threshold_flag || *n > 0.0))
            .ok_or_else(|| {
                let kind = if threshold_flag { "a number" } else { "a positive number" };
                UsageError(format!("{flag} takes {kind}, not {value:?}"))
            })?;
        *slot = Some(n);
    }
    // A phase's own multiplier wins over the shared one, as in Harbor.
    let m = Multipliers {
        agent: agent.or(both).unwrap_or(1.0),
        verifier: verifier.or(both).unwrap_or(1.0),
        reward_threshold: threshold,
    };
    Ok((m, rest))
}

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if argv.first().is_some_and(|a| a == "harbor") {
        std::process::exit(harbor(&argv[1..]));
    }
    let cli = match parse(argv) {
        Ok(Some(cli)) => cli,
        Ok(None) => {
            println!("{HELP}");
            return;
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: failed to start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let record_dir = cli.record_dir.clone().unwrap_or_else(commands::record_dir);
    let done = runtime.block_on(async {
        match cli.command {
            Command::Report(dir) => commands::report(&record_dir, dir),
            Command::Runs => commands::runs(&record_dir),
            Command::Images(ImagesCommand::List) => commands::images_list().await,
            Command::Images(ImagesCommand::Build(path)) => commands::images_build(&path).await,
            Command::Images(ImagesCommand::Prune(run)) => {
                commands::images_prune(run.as_deref()).await
            }
            Command::Clean => commands::clean().await,
            Command::Compare { control, treatment, out } => {
                commands::compare(&record_dir, &control, &treatment, out)
            }
            Command::Regrade(run) => match commands::regrade(&record_dir, &run) {
                Ok(code) => std::process::exit(code),
                Err(e) => Err(e),
            },
        }
    });
    if let Err(e) = done {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<Option<Cli>, UsageError> {
        parse(a.iter().map(std::ffi::OsString::from))
    }

    #[test]
    fn harbor_takes_its_timeout_multipliers_and_passes_the_rest() {
        let os = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        let (m, rest) = timeout_multipliers(&os(&[
            "--timeout-multiplier",
            "2",
            "--harness",
            "oracle",
            "--verifier-timeout-multiplier=3",
            "--reward-threshold",
            "0.5",
        ]))
        .unwrap();
        assert_eq!(m, Multipliers { agent: 2.0, verifier: 3.0, reward_threshold: Some(0.5) });
        assert_eq!(rest, os(&["--harness", "oracle"]));
        let e = timeout_multipliers(&os(&["--agent-timeout-multiplier", "-1"])).unwrap_err();
        assert!(e.to_string().contains("positive number"), "{e}");
        assert!(timeout_multipliers(&os(&["--timeout-multiplier"])).is_err());
    }

    #[test]
    fn commands_parse() {
        let cli = args(&["report", "runs/x", "--record-dir", "d"]).unwrap().unwrap();
        assert_eq!(cli.command, Command::Report(Some(PathBuf::from("runs/x"))));
        assert_eq!(cli.record_dir, Some(PathBuf::from("d")));
        assert_eq!(
            args(&["images"]).unwrap().unwrap().command,
            Command::Images(ImagesCommand::List)
        );
        assert_eq!(
            args(&["images", "build", "Dockerfile"]).unwrap().unwrap().command,
            Command::Images(ImagesCommand::Build(PathBuf::from("Dockerfile")))
        );
        assert_eq!(args(&["clean"]).unwrap().unwrap().command, Command::Clean);
        assert!(args(&["--help"]).unwrap().is_none());
        assert!(args(&["frob"]).unwrap_err().to_string().contains("unknown command `frob`"));
        assert!(args(&[]).is_err());
        assert_eq!(
            args(&["compare", "a", "b", "--out", "c.html"]).unwrap().unwrap().command,
            Command::Compare {
                control: "a".into(),
                treatment: "b".into(),
                out: Some(PathBuf::from("c.html"))
            }
        );
        assert!(args(&["compare", "a"]).is_err());
        assert!(args(&["runs", "--out", "x"]).is_err());
    }
}
