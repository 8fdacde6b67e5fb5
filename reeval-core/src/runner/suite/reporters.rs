//! The reporters a suite's flags ask for: libtest's lines or its JSON
//! (`--format json`), `-v` and `--stream`, JUnit XML, the live progress at
//! a terminal; and the evals' own output captured from here on.

use super::select::Chosen;
use crate::report::{Console, Junit, LibtestJson, Lines, Progress, Reporter, say};
use crate::settings::{Args, Settings};

/// The reporters of the flags, then `extra`. From here the eval's own output
/// (println!, a subprocess's) is captured into its record; the reporters
/// write to the real stdout and stderr.
pub(super) fn of_flags(
    args: &Args,
    settings: &Settings,
    chosen: &Chosen<'_>,
    verbose: bool,
    extra: Vec<Box<dyn Reporter>>,
) -> Vec<Box<dyn Reporter>> {
    let show_progress = show_progress(args, settings);
    if let Err(e) = crate::eval_output::install() {
        say(&format!("reeval: warning: failed to capture the evals' output: {e}\n"));
    }
    let progress = show_progress.then(Progress::new);
    let out = Lines::around(progress.as_ref().map(Progress::bar));
    if args.nocapture || std::env::var_os("RUST_TEST_NOCAPTURE").is_some_and(|v| v != "0") {
        // libtest's --nocapture: shown as it is printed (on stderr when stdout is JSON).
        crate::eval_output::echo_live(out.clone(), args.json);
    }
    let ignored: Vec<String> = chosen.ignored.iter().map(|e| e.name.clone()).collect();
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
    if args.json {
        reporters.push(Box::new(LibtestJson::new(ignored, chosen.filtered_out)));
        // -v and --stream still go to stderr.
        if verbose || settings.stream {
            reporters.push(Box::new(Console::new(false, verbose).stream(settings.stream)));
        }
    } else {
        reporters.push(Box::new(
            Console::new(true, verbose)
                .selection(ignored, chosen.filtered_out)
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
    reporters
}

/// A progress display only for a person at a terminal: not under nextest
/// (which draws its own), not with `--format json`, not when stderr is a file or pipe.
fn show_progress(args: &Args, settings: &Settings) -> bool {
    use std::io::IsTerminal;
    !args.json && !settings.under_nextest && std::io::stderr().is_terminal()
}
