use reeval::prelude::*;

#[reeval::eval(trials = 2, timeout = "1m", trials = 3)]
async fn duplicate_key(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
