//! A suite whose outcomes are known per harness and trial, run by the
//! project's own tests (`tests/runner_outputs.rs`): the cell statistics,
//! thresholds, tags, `--rerun-failed`, `--resume`, the JSON event stream,
//! JUnit and the HTML report. Not a tutorial: see `quickstart.rs` for that.
//! Two harnesses: `shell`, and `shell:alt` (the same agent, another cell).

use reeval::prelude::*;

/// Whether this attempt should fail: `fails` lists (harness, trial) pairs.
fn fails(c: &Ctx, fails: &[(&str, u32)]) -> bool {
    let r = c.record();
    fails.iter().any(|(h, t)| r.harness == *h && r.trial == *t)
}

#[reeval::eval(timeout = "2m", trials = 3, harness = ["shell", "shell:alt"], tags = ["matrix"])]
async fn all_pass(c: &mut Ctx) -> reeval::Result<()> {
    expect(c.exec("true").await?).to_succeed()
}

/// shell: 2 of 3 (trial 3 fails); shell:alt: 1 of 3 (trials 2 and 3 fail).
#[reeval::eval(timeout = "2m", trials = 3, harness = ["shell", "shell:alt"], tags = ["matrix"])]
async fn two_of_three(c: &mut Ctx) -> reeval::Result<()> {
    c.send("printf 'hello\\n' > greeting.txt && echo wrote it").await?;
    let fail = fails(c, &[("shell", 3), ("shell:alt", 2), ("shell:alt", 3)]);
    let check = if fail { "echo checked greeting.txt; exit 1" } else { "cat greeting.txt" };
    expect(c.exec(check).await?).to_succeed()
}

/// shell: 0 of 3; shell:alt: trial 1 an infra error, trials 2 and 3 fail.
#[reeval::eval(timeout = "2m", trials = 3, harness = ["shell", "shell:alt"], tags = ["matrix"])]
async fn never(c: &mut Ctx) -> reeval::Result<()> {
    if fails(c, &[("shell:alt", 1)]) {
        return Err(reeval::Error::infra("reach the fixture's service", "it is down on purpose"));
    }
    expect(c.exec("exit 1").await?).to_succeed()
}

/// 2 of 3, and 2 of 3 is enough.
#[reeval::eval(timeout = "2m", trials = 3, harness = "shell", min_pass_rate = 0.66, tags = ["threshold"])]
async fn flaky_but_ok(c: &mut Ctx) -> reeval::Result<()> {
    let fail = fails(c, &[("shell", 3)]);
    expect(c.exec(if fail { "exit 1" } else { "true" }).await?).to_succeed()
}

/// Trials 1 and 2 pass at once; trial 3's turn runs until the run is
/// stopped, unless `REEVAL_FIXTURE_QUICK` is set (the resumed run).
#[reeval::eval(timeout = "10m", trials = 3, harness = "shell", tags = ["resume"])]
async fn resumable(c: &mut Ctx) -> reeval::Result<()> {
    if c.record().trial == 3 && std::env::var_os("REEVAL_FIXTURE_QUICK").is_none() {
        c.send("echo working on it; touch started.txt; sleep 600").await?;
    }
    expect(c.exec("true").await?).to_succeed()
}

/// Prints as an eval does while it is written (`println!`, `eprintln!`, a
/// `print!` without a newline, a host subprocess); trial 2 then fails. Each
/// trial's record must hold only its own lines, and `--format json` stay JSON.
#[reeval::eval(timeout = "2m", trials = 2, harness = "shell", tags = ["output"])]
async fn prints(c: &mut Ctx) -> reeval::Result<()> {
    let trial = c.record().trial;
    println!("stdout of trial {trial}: before the check");
    let ran = c.exec("echo in the sandbox").await?;
    eprintln!("stderr of trial {trial}: the check said {}", ran.stdout.trim());
    // Many lines, one a poll, while the other trial prints too: both wait
    // here (up to 10 s, for --test-threads 1) until both are here.
    static HERE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    HERE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..1000 {
        if HERE.load(std::sync::atomic::Ordering::SeqCst) >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    for i in 0..200 {
        println!("line {i} of trial {trial}");
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    print!("no newline from trial {trial}");
    let _ = std::process::Command::new("echo").arg(format!("subprocess of trial {trial}")).status();
    expect(trial).to_equal(1)
}

reeval::main!();
