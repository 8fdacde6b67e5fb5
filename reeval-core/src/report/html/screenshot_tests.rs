//! The report of a suite-sized run (30 evals, 3 trials each, on the fake
//! backend: 90 attempts in seconds) in headless Chromium, as a person reads
//! it: the top, a view filtered from the URL's fragment and one attempt
//! opened alone. Screenshots of each are written next to the report, and
//! the DOM Chromium built from the same URL must show exactly the expected
//! rows (the page's script did the filtering).

use crate::settings::Settings;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use crate::attempt::tests::{Script, scripted};
use crate::error::Error;
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::matchers::expect;
use crate::runner::{RunConfig, Runner};
use crate::turn::TurnOptions;

/// Six evals of each of five shapes; each eval's name says its shape.
fn suite() -> Vec<Eval> {
    let mut evals = Vec::new();
    for i in 1..=6 {
        // Writes README.md (the page must show it as written) and passes.
        evals.push(Eval::new(format!("adds_readme_{i:02}"), |c| {
            Box::pin(async move {
                let turn = c.send("write README.md # Project").await?;
                expect(turn.diff.paths().join(",")).to_equal("README.md")?;
                expect(c.exec("true").await?).to_succeed()
            })
        }));
        // Fails its check on the third trial only.
        evals.push(Eval::new(format!("flaky_fix_{i:02}"), |c| {
            Box::pin(async move {
                c.send("write src/Parser.rs fn parse() {}").await?;
                let trial = c.record().trial;
                expect(c.exec(format!("exit {}", u8::from(trial == 3))).await?).to_succeed()
            })
        }));
        // Its check always fails.
        evals.push(Eval::new(format!("broken_build_{i:02}"), |c| {
            Box::pin(async move {
                c.send("write Makefile all:").await?;
                expect(c.exec("exit 2").await?).to_succeed()
            })
        }));
        // The agent's turn runs past its own limit; the check after it fails.
        evals.push(Eval::new(format!("slow_agent_{i:02}"), |c| {
            Box::pin(async move {
                let limit =
                    TurnOptions { timeout: Some(Duration::from_millis(300)), ..Default::default() };
                c.send_with("sleep 60000", limit).await?;
                expect(c.exec("exit 1").await?).to_succeed()
            })
        }));
        // An infra error on the second trial.
        evals.push(Eval::new(format!("sandbox_hiccup_{i:02}"), |c| {
            Box::pin(async move {
                c.send("write notes.txt ok").await?;
                if c.record().trial == 2 {
                    return Err(Error::infra("reach the package mirror", "connection reset"));
                }
                Ok(())
            })
        }));
    }
    evals.into_iter().map(|e| e.harness("script").trials(3)).collect()
}

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()))
}

/// Chromium on `url` with `args`: its stdout.
fn browse(chromium: &str, url: &str, args: &[&str]) -> String {
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"])
        .args(["--allow-file-access-from-files", "--virtual-time-budget=2000"])
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn screenshot(chromium: &str, url: &str, to: &Path, height: u32) {
    browse(
        chromium,
        url,
        &[&format!("--screenshot={}", to.display()), &format!("--window-size=1280,{height}")],
    );
    let size = std::fs::metadata(to).map(|m| m.len()).unwrap_or(0);
    assert!(size > 20_000, "{} is {size} bytes", to.display());
}

/// The ids of the attempts the DOM shows (not hidden by the page's script), in order.
fn shown_attempts(dom: &str) -> Vec<String> {
    dom.split("<details class=\"attempt\"")
        .skip(1)
        .filter_map(|rest| {
            let tag = &rest[..rest.find('>').expect("a tag ends")];
            let id = tag.split("id=\"attempt-").nth(1)?.split('"').next()?;
            (!tag.contains(" hidden=\"\"")).then(|| id.to_string())
        })
        .collect()
}

/// How many eval groups the DOM shows open.
fn open_evals(dom: &str) -> usize {
    dom.split("<details class=\"eval\"")
        .skip(1)
        .filter(|rest| rest[..rest.find('>').expect("a tag ends")].contains(" open=\"\""))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_eval_run_reads_well_in_chromium() {
    let Some(chromium) = chromium() else {
        let required = std::env::var("REEVAL_REQUIRE_DOCKER").is_ok_and(|v| v == "1");
        assert!(!required, "chromium is not installed (.ci/run installs it)");
        eprintln!("skipping: chromium is not installed");
        return;
    };
    let dir = std::env::temp_dir().join(format!(
        "reeval-report-{}-{}",
        std::process::id(),
        crate::runner::new_run_id()
    ));
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    let config = RunConfig::from(Settings {
        record_dir: dir,
        infra_retries: 0,
        test_threads: 16,
        ..Settings::default()
    });
    let runner = Runner::new(config, harnesses).with_backend(Arc::new(scripted()));
    let began = std::time::Instant::now();
    let report = runner.run(suite()).await.expect("preflight");
    eprintln!("90 attempts in {:.1}s", began.elapsed().as_secs_f64());
    assert_eq!(report.records.len(), 90);
    assert_eq!(report.summary.cells.len(), 30);
    let run_dir = report.run_dir.clone();
    let page = run_dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://"), "nothing from the network");
    let url = format!("file://{}", page.display());

    // The top: every eval collapsed to one line, failing evals first.
    screenshot(chromium, &url, &run_dir.join("report-top.png"), 1000);
    let dom = browse(chromium, &url, &["--dump-dom"]);
    assert_eq!(shown_attempts(&dom).len(), 90, "no filter hides nothing");
    assert!(dom.contains("90 attempts in 30 evals"), "the count");
    assert_eq!(open_evals(&dom), 0, "groups start collapsed");
    let first = dom.find("id=\"eval-broken_build_01\"").unwrap();
    assert!(first < dom.find("id=\"eval-adds_readme_01\"").unwrap(), "failing evals first");

    // Filtered from the fragment: the flaky evals' failures, which is their third trials.
    let filtered = format!("{url}#outcome=fail&q=flaky");
    screenshot(chromium, &filtered, &run_dir.join("report-filtered.png"), 700);
    let dom = browse(chromium, &filtered, &["--dump-dom"]);
    let mut expected: Vec<String> = (1..=6).map(|i| format!("flaky_fix_{i:02}-script-3")).collect();
    expected.sort();
    let mut shown = shown_attempts(&dom);
    shown.sort();
    assert_eq!(shown, expected, "exactly the flaky evals' failed trials");
    assert!(dom.contains("showing 6 of 90 attempts in 6 of 30 evals"), "the count");
    assert_eq!(open_evals(&dom), 6, "the matching evals are open");
    // And by kind: the infra errors, one per hiccup eval.
    let dom = browse(chromium, &format!("{url}#kind=infra"), &["--dump-dom"]);
    let shown = shown_attempts(&dom);
    assert_eq!(shown.len(), 6, "{shown:?}");
    assert!(shown.iter().all(|id| id.starts_with("sandbox_hiccup_") && id.ends_with("-2")));

    // One attempt alone and open: its turn timed out, then its check failed, in that order.
    let alone = format!("{url}#attempt=slow_agent_03-script-2");
    screenshot(chromium, &alone, &run_dir.join("report-attempt.png"), 900);
    let dom = browse(chromium, &alone, &["--dump-dom"]);
    assert_eq!(shown_attempts(&dom), ["slow_agent_03-script-2"]);
    assert!(dom.contains("id=\"attempt-slow_agent_03-script-2\" data-outcome=\"fail\""));
    let opened = &dom[dom.find("id=\"attempt-slow_agent_03-script-2\"").unwrap()..];
    let turn = opened.find("turn 1 timed out after 0.").expect("the stopped turn, as such");
    let check = opened.find("check `exit 1` exited 1 in ").expect("the check");
    assert!(turn < check, "in the order they ran");
    assert!(!opened[..check].contains("exited 143"), "not the harness's exit");
    // A passing attempt opened alone: its turn's files as written, and its diff.
    let readme = format!("{url}#attempt=adds_readme_01-script-1");
    screenshot(chromium, &readme, &run_dir.join("report-diff.png"), 800);
    let dom = browse(chromium, &readme, &["--dump-dom"]);
    assert!(dom.contains("<code>README.md (added)</code>"), "the path byte for byte");
    assert!(dom.contains("<span class=\"d-add\">+# Project</span>"), "the diff");
    eprintln!("screenshots in {}", run_dir.display());
}
