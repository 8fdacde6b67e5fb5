//! The `main` of an eval suite (`reeval::main!()`): the command line, the
//! selection (filters, `--skip`, `--ignored`, `--tag`, `--rerun-failed`,
//! `--partition`),
//! `--list`, the reporters the flags ask for, signals, and the exit code.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::part::Part;
use super::{Args, RunConfig, Runner};
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::record::SuiteIdentity;
use crate::report::{Console, Junit, LibtestJson, Lines, Progress, Reporter, say};
use crate::settings::{self, Settings};

/// The exit code of a run whose stdout was closed before it ended (as if killed by SIGPIPE).
pub(super) const EXIT_OUTPUT_LOST: i32 = 141;

/// The `main` of an eval suite: parses the command line, lists or runs, and
/// returns the exit code.
pub fn main(evals: Vec<Eval>, harnesses: HarnessRegistry) -> i32 {
    main_with_args(evals, harnesses, std::env::args_os().skip(1))
}

/// [`main`] with the command line given (`reeval harbor run PATH …` passes
/// what follows PATH): the same flags, selection, reporters and exit code.
pub fn main_with_args(
    evals: Vec<Eval>,
    harnesses: HarnessRegistry,
    argv: impl IntoIterator<Item = std::ffi::OsString>,
) -> i32 {
    main_with_reporters(evals, harnesses, argv, Vec::new())
}

/// [`main_with_args`] with reporters of the caller's beside the ones the
/// flags ask for (`reeval harbor run -o DIR` writes Harbor's job directory
/// from the run's records this way). They see a run's events only when it
/// runs: not under `--list`, nor when the command line or settings fail.
pub fn main_with_reporters(
    evals: Vec<Eval>,
    harnesses: HarnessRegistry,
    argv: impl IntoIterator<Item = std::ffi::OsString>,
    extra: Vec<Box<dyn Reporter>>,
) -> i32 {
    let args = match Args::parse(argv) {
        Ok(Some(a)) => a,
        Ok(None) => return 0,
        Err(e) => {
            say(&format!("error: {e}\n"));
            return 2;
        }
    };
    let tags = Settings::tags(&args, settings::process_env);
    let selected: Vec<&Eval> = evals
        .iter()
        .filter(|e| args.selects(&e.name, e.options.ignore))
        .filter(|e| Args::tagged(&tags, &e.options.tags))
        .collect();
    let mut filtered_out = evals.len() - selected.len();
    let partition = match Settings::partition(&args, settings::process_env) {
        Ok(p) => p,
        Err(e) => {
            say(&format!("error: {e}\n"));
            return 2;
        }
    };
    if args.list {
        // Side-effect free: a sort over statics, no Docker, no network, no keys.
        let part = match partition.map(|p| list_part(p, &args, &selected)).transpose() {
            Ok(part) => part,
            Err(e) => {
                say(&format!("error: {e}\n"));
                return 2;
            }
        };
        let listed: Vec<&&Eval> =
            selected.iter().filter(|e| part.as_ref().is_none_or(|p| p.has_eval(&e.name))).collect();
        let mut text = String::new();
        for e in &listed {
            text.push_str(&format!("{}: test\n", e.name));
        }
        if !args.terse {
            text.push_str(&format!("\n{} tests, 0 benchmarks\n", listed.len()));
            if let Some(part) = &part {
                text.push_str(&format!("{}\n", part.said(true)));
            }
        }
        let _ = Lines::default().out(&text);
        return if crate::report::stdout_closed() { EXIT_OUTPUT_LOST } else { 0 };
    }
    let (mut to_run, ignored): (Vec<&Eval>, Vec<&Eval>) =
        selected.into_iter().partition(|e| args.runs(e.options.ignore));
    if args.bench {
        return 0;
    }
    // Flags, environment and reeval.toml, read once (after --list, which reads none of them).
    let settings = match Settings::load(&args, settings::process_env) {
        Ok(s) => s,
        Err(e) => {
            say(&format!("error: {e}\n"));
            return 2;
        }
    };
    // The console reporter below prints libtest's lines; the runner adds no other.
    let mut config = RunConfig { print: false, ..settings.run_config() };
    // Which binary this is, in the summary: --rerun-failed and --resume take only its runs.
    let suite = SuiteIdentity::new(
        SuiteIdentity::current_binary(),
        evals.iter().map(|e| e.name.clone()).collect(),
    );
    config.suite = Some(suite.clone());
    let known_variants = match crate::compare::known_variants(&settings) {
        Ok(known) => known,
        Err(e) => {
            say(&format!("error: {e}\n"));
            return 2;
        }
    };
    match settings.arms(&known_variants) {
        Ok((arms, variant)) => (config.compare, config.variant) = (arms, variant),
        Err(e) => {
            say(&format!("error: {e}\n"));
            return 2;
        }
    }
    let mut kept = Vec::new();
    let mut previous_comparison = None;
    let mut only_cells = None;
    if let Some(run_id) = &args.resume {
        let run_dir = config.record_dir.join(run_id);
        match crate::report::runs::records(&run_dir) {
            Ok(records) => kept = records,
            Err(e) => {
                say(&format!("error: failed to resume run {run_id}: {e}\n"));
                return 2;
            }
        }
        if let Err(why) = crate::report::runs::belongs_to(&run_dir, &suite) {
            say(&format!("error: failed to resume run {run_id}: {why}\n"));
            return 2;
        }
        say(&format!(
            "reeval: resuming run {run_id} of the suite binary `{}` ({} attempts recorded)\n",
            suite.binary,
            kept.len()
        ));
        let recorded = crate::report::runs::summaries(&run_dir).unwrap_or_default();
        // A compare run resumed is a later look at its comparison.
        previous_comparison = recorded.iter().find_map(|s| s.comparison.clone());
        // A part resumed is the same part: its cells, not the whole run's.
        let part = recorded.iter().find_map(|s| s.partition.as_deref()?.parse().ok());
        match (part, config.partition) {
            (Some(p), None) => config.partition = Some(p),
            (Some(p), Some(given)) if p != given => {
                say(&format!(
                    "error: failed to resume run {run_id}: it is part {p} of a partitioned run, not {given}\n"
                ));
                return 2;
            }
            _ => {}
        }
        // Resuming a comparison without naming its arms again compares the same arms.
        if let Some(previous) = previous_comparison.as_ref().filter(|_| config.compare.is_none()) {
            match crate::compare::Arms::recorded(previous, &kept, &known_variants) {
                Ok(arms) => {
                    if let crate::compare::Arms::Harnesses(a, b) = &arms {
                        config.harnesses = vec![a.clone(), b.clone()];
                    }
                    config.compare = Some(arms);
                }
                Err(e) => {
                    say(&format!("error: failed to resume run {run_id}: {e}\n"));
                    return 2;
                }
            }
        }
        config.run_id = run_id.clone();
    }
    let mut regraded = None;
    if let Some(run) = &args.regrade {
        match crate::replay::regrade_plan(&config.record_dir, run) {
            Ok(plan) => {
                config.harnesses = plan.harnesses.clone();
                config.trials = Some(plan.trials);
                let before = to_run.len();
                to_run.retain(|e| plan.cells.iter().any(|(eval, _)| *eval == e.name));
                filtered_out += before - to_run.len();
                only_cells = Some(plan.cells.clone());
                regraded = Some(plan);
            }
            Err(e) => {
                say(&format!("error: {e}\n"));
                return 2;
            }
        }
    }
    let mut rerun_of = None;
    if args.rerun_failed {
        let last = crate::report::runs::latest_of(&config.record_dir, &suite)
            .and_then(|run| crate::report::runs::records(&run.path).map(|records| (run, records)));
        let (run, cells) = match last {
            Ok((run, records)) => (run, crate::report::runs::failed_cells(&records)),
            Err(e) => {
                say(&format!(
                    "error: failed to find the last run's failures (--rerun-failed): {e}\n"
                ));
                return 2;
            }
        };
        let names: Vec<String> = cells.iter().map(|(e, h)| format!("{e} [{h}]")).collect();
        say(&format!(
            "reeval: --rerun-failed: the failed cells of run {} of the suite binary `{}`: {}\n",
            run.id,
            suite.binary,
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ));
        let before = to_run.len();
        to_run.retain(|e| cells.iter().any(|(eval, _)| *eval == e.name));
        filtered_out += before - to_run.len();
        only_cells = Some(cells);
        rerun_of = Some(run.id);
    }
    let verbose = config.verbose;
    let partition = config.partition;
    let mut runner = Runner::new(config, harnesses).resuming(kept);
    if let Some(cells) = only_cells {
        runner = runner.only_cells(cells);
    }
    // After every other selection, as nextest partitions: this part's cells only.
    let mut empty_part = false;
    if let Some(p) = partition {
        let part = Part::of(p, to_run.iter().copied(), |e| runner.harness_specs(e));
        say(&format!("reeval: {}\n", part.said(false)));
        let before = to_run.len();
        to_run.retain(|e| part.has_eval(&e.name));
        filtered_out += before - to_run.len();
        empty_part = part.is_empty_of_some();
        runner = runner.only_cells(part.cells);
    }
    // A run that selected nothing is no green: say why, unless asked for. Evals
    // selected but marked ignore are reported as ignored, as libtest does: a
    // suite of ignored evals is not a run of nothing that claims to pass. A
    // part of a partitioned run that got no cell is a part, not a mistake.
    if empty_part && ignored.is_empty() {
        return match super::part::record_nothing(&runner.config) {
            Ok(dir) => {
                say(&format!("reeval: recorded the empty part in {}\n", dir.display()));
                0
            }
            Err(e) => {
                say(&format!("error: {e}\n"));
                3
            }
        };
    }
    if to_run.is_empty() && ignored.is_empty() && !settings.allow_empty && !empty_part {
        let why = nothing_selected(&args, &tags, &evals, rerun_of.as_deref());
        say(&format!(
            "error: no eval selected: {why}; pass --allow-empty (or REEVAL_ALLOW_EMPTY=1) to accept a run of nothing\n"
        ));
        return 2;
    }

    let show_progress = show_progress(&args, &settings);
    // From here the eval's own output (println!, a subprocess's) is captured into its
    // record; the reporters write to the real stdout and stderr.
    if let Err(e) = crate::eval_output::install() {
        say(&format!("reeval: warning: failed to capture the evals' output: {e}\n"));
    }
    let progress = show_progress.then(Progress::new);
    let out = Lines::around(progress.as_ref().map(Progress::bar));
    if args.nocapture || std::env::var_os("RUST_TEST_NOCAPTURE").is_some_and(|v| v != "0") {
        // libtest's --nocapture: shown as it is printed (on stderr when stdout is JSON).
        crate::eval_output::echo_live(out.clone(), args.json);
    }
    let ignored: Vec<String> = ignored.iter().map(|e| e.name.clone()).collect();
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
    if args.json {
        reporters.push(Box::new(LibtestJson::new(ignored, filtered_out)));
        // -v and --stream still go to stderr.
        if verbose || settings.stream {
            reporters.push(Box::new(Console::new(false, verbose).stream(settings.stream)));
        }
    } else {
        reporters.push(Box::new(
            Console::new(true, verbose)
                .selection(ignored, filtered_out)
                .slow_after(settings.slow_after)
                .stream(settings.stream)
                .printing_to(out),
        ));
    }
    if let Some(path) = &settings.junit {
        reporters.push(Box::new(Junit::new(path.clone())));
    }
    if let Some(p) = progress {
        reporters.push(Box::new(p));
    }
    reporters.extend(extra);

    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            say(&format!("error: failed to start the async runtime: {e}\n"));
            return 2;
        }
    };
    if let Some(previous) = &previous_comparison {
        runner = runner.comparing_after(previous);
    }
    crate::secrets::install_redacting_panic_hook();
    let code = runtime.block_on(async {
        let shutdown = runner.shutdown_token();
        let interrupted = Arc::new(AtomicBool::new(false));
        let flag = interrupted.clone();
        tokio::spawn(async move {
            let name = termination().await;
            say(&format!("reeval: {name}; tearing down sandboxes and writing records\n"));
            flag.store(true, Ordering::SeqCst);
            shutdown.cancel();
        });
        match runner.run_with(to_run.into_iter().cloned().collect(), reporters).await {
            Ok(report) if interrupted.load(Ordering::SeqCst) => {
                say(&format!(
                    "reeval: run {} was interrupted; complete it with --resume {}\n",
                    report.run_id, report.run_id
                ));
                super::EXIT_INTERRUPTED
            }
            Ok(report) => {
                if let Some(plan) = &regraded {
                    say(&crate::replay::regrade_delta(plan, &report.records));
                }
                report.exit_code()
            }
            Err(e) => {
                say(&format!("error: {e}\n"));
                2
            }
        }
    });
    // Output lost to a closed stdout (`| head`) never reads as success.
    if crate::report::stdout_closed() && code == 0 { EXIT_OUTPUT_LOST } else { code }
}

/// The part `partition` of the evals `selected` for `--list`: their cells
/// need the harnesses the settings give (flags, variables, `reeval.toml`).
fn list_part(
    partition: settings::Partition,
    args: &Args,
    selected: &[&Eval],
) -> Result<Part, settings::SettingsError> {
    let harnesses = Settings::load(args, settings::process_env)?.harnesses;
    Ok(Part::of(partition, selected.iter().copied(), |e| super::harness_specs_of(&harnesses, e)))
}

/// Waits for a signal that ends the run and names it: SIGINT, SIGTERM, SIGHUP (the
/// terminal closed: a dropped SSH session, `tmux kill-session`) or SIGQUIT. Each is
/// handled alike: attempts are interrupted, sandboxes torn down, records written.
/// A signal the process was started ignoring (`nohup` ignores SIGHUP) stays ignored.
async fn termination() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let ignored = ignored_signals();
    let wait = |kind: SignalKind, name: &'static str| async move {
        if ignored & (1 << (kind.as_raw_value() - 1)) != 0 {
            return std::future::pending().await;
        }
        match signal(kind) {
            Ok(mut s) => {
                s.recv().await;
                name
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        name = wait(SignalKind::interrupt(), "interrupted (SIGINT)") => name,
        name = wait(SignalKind::terminate(), "terminated (SIGTERM)") => name,
        name = wait(SignalKind::hangup(), "hung up (SIGHUP)") => name,
        name = wait(SignalKind::quit(), "quit (SIGQUIT)") => name,
    }
}

/// The signals this process was started ignoring, as the kernel's mask (bit
/// `n - 1` for signal `n`), from `/proc/self/status`; none where it cannot say.
fn ignored_signals() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0)
}

/// Why a run selected no eval, in the words of the flags that did it.
fn nothing_selected(
    args: &Args,
    tags: &[String],
    evals: &[Eval],
    rerun_of: Option<&str>,
) -> String {
    if evals.is_empty() {
        return "this suite binary has no eval".into();
    }
    if let Some(run) = rerun_of {
        return format!("--rerun-failed found no failed cell to run again in run {run}");
    }
    if !tags.is_empty() && !evals.iter().any(|e| Args::tagged(tags, &e.options.tags)) {
        let mut known: Vec<&str> =
            evals.iter().flat_map(|e| &e.options.tags).map(String::as_str).collect();
        known.sort_unstable();
        known.dedup();
        return format!(
            "no eval has the tag {} (tags of this suite: {})",
            tags.join(" or "),
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        );
    }
    let mut asked = Vec::new();
    if !args.filters.is_empty() {
        asked.push(format!(
            "the filter{} `{}`{}",
            if args.filters.len() == 1 { "" } else { "s" },
            args.filters.join("`, `"),
            if args.exact { " (--exact)" } else { "" }
        ));
    }
    if !args.skip.is_empty() {
        asked.push(format!("--skip `{}`", args.skip.join("`, `")));
    }
    if !tags.is_empty() {
        asked.push(format!("--tag {}", tags.join(",")));
    }
    if args.ignored {
        asked.push("--ignored".into());
    }
    if args.regrade.is_some() {
        asked.push("--regrade".into());
    }
    format!(
        "{} matched none of the {} evals of this suite binary",
        asked.join(" with "),
        evals.len()
    )
}

/// A progress display only for a person at a terminal: not under nextest
/// (which draws its own), not with `--format json`, not when stderr is a file or pipe.
fn show_progress(args: &Args, settings: &Settings) -> bool {
    use std::io::IsTerminal;
    !args.json && !settings.under_nextest && std::io::stderr().is_terminal()
}
