//! The quickstart suite: evals with the `shell` harness in real containers,
//! no API key needed. Run it with `cargo run --example quickstart` (add `-- -v`
//! to see every phase).
//!
//! The `shell` harness runs each prompt as a bash script, standing in for an
//! agent; swap `harness = "shell"` for `"claude-code:sonnet"` and write the
//! prompts in prose to evaluate a real agent the same way.

use reeval::prelude::*;

/// One turn creates a file; a check reads it back.
#[reeval::eval(timeout = "2m", harness = "shell")]
async fn creates_a_file(c: &mut Ctx) -> reeval::Result<()> {
    c.send("printf 'def greet(name):\\n    return f\"Hello, {name}!\"\\n' > greet.py").await?;
    expect(c.read_file("greet.py").await?).to_contain("def greet")?;
    let out = c.exec("python3 -c 'from greet import greet; print(greet(\"reeval\"))'").await?;
    expect(out.clone()).to_succeed()?;
    expect(out.stdout).to_equal("Hello, reeval!\n")?;
    Ok(())
}

fn project() -> Environment {
    Environment::new()
        .file("app.py", "def add(a, b):\n    return a + b\n")
        .rules("Keep functions small and tested.")
        .setup("python3 -c 'import app; assert app.add(1, 2) == 3'")
}

/// The README's first eval, with the `shell` harness: the prompt is the
/// script an agent would run to do the task, and the checks are the same
/// (`python -m pytest` runs in the default image, `reeval/base`).
#[reeval::eval(timeout = "2m", harness = "shell", environment = project)]
async fn adds_a_tested_sub_function(c: &mut Ctx) -> reeval::Result<()> {
    c.send("printf 'def sub(a, b):\\n    return a - b\\n' >> app.py && printf 'from app import sub\\n\\n\\ndef test_sub():\\n    assert sub(3, 1) == 2\\n' > test_app.py").await?;
    expect(c.exec("python -m pytest -q").await?).to_succeed()?;
    expect(c.read_file("app.py").await?).to_contain("def sub")?;
    // pytest's caches are the check's own (on its record), not the agent's work.
    expect(c.diff().await?.paths().join(",")).to_equal("app.py,test_app.py")?;
    Ok(())
}

/// Two turns edit a project the environment provides; the diff shows only the agent's work.
#[reeval::eval(timeout = "2m", harness = "shell", environment = project)]
async fn edits_over_two_turns(c: &mut Ctx) -> reeval::Result<()> {
    let first = c.send("printf 'def sub(a, b):\\n    return a - b\\n' >> app.py").await?;
    expect(first.diff.paths().join(",")).to_equal("app.py")?;
    c.send("printf 'from app import add, sub\\nassert add(2, 2) == 4 and sub(3, 1) == 2\\n' > test_app.py").await?;
    expect(c.exec("python3 test_app.py").await?).to_succeed()?;

    let diff = c.diff().await?;
    // Files, rules and setup are in the snapshot, and the `__pycache__` the check
    // wrote is the check's (on its record): only the turns' work shows.
    expect(diff.paths().join(",")).to_equal("app.py,test_app.py")?;
    expect(diff.patch).to_contain("+def sub(a, b):")?;
    Ok(())
}

/// The agent starts a web service; the eval reaches it from the host and keeps the page as evidence.
#[reeval::eval(timeout = "2m", harness = "shell")]
async fn serves_a_page(c: &mut Ctx) -> reeval::Result<()> {
    c.send("mkdir -p site && echo '<h1>It works</h1>' > site/index.html && cd site && (nohup python3 -m http.server 8000 >/tmp/server.log 2>&1 &)").await?;
    let url = c.serve(8000).await?;
    let page = c.capture("home", Artifact::url(format!("{url}/index.html"))).await?;
    expect(page.text).to_contain("<h1>It works</h1>")?;
    Ok(())
}

/// An eval that never touches the sandbox starts no container.
#[reeval::eval(timeout = "10s")]
async fn pure_logic_needs_no_sandbox(_c: &mut Ctx) -> reeval::Result<()> {
    expect("reeval".len()).to_equal(6)?;
    Ok(())
}

reeval::main!();
