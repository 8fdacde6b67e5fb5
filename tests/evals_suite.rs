//! An eval suite laid out the way users lay theirs out: a `[[test]]` target
//! with `harness = false` that ends in `reeval::main!()`, so plain `cargo test`
//! runs it (here with the `shell` harness, in real containers).

use reeval::prelude::*;

#[reeval::eval(timeout = "2m", harness = "shell", tags = ["smoke"])]
async fn a_turn_edits_and_a_check_grades(c: &mut Ctx) -> reeval::Result<()> {
    let turn = c.send("mkdir -p src && printf 'def double(x):\\n    return 2 * x\\n' > src/calc.py && echo done").await?;
    expect(turn.final_message.unwrap_or_default()).to_equal("done")?;
    expect(
        c.exec("cd src && python3 -B -c 'from calc import double; assert double(21) == 42'")
            .await?,
    )
    .to_succeed()?;
    expect(c.diff().await?.paths().join(",")).to_equal("src/calc.py")?;
    Ok(())
}

reeval::main!();
