use reeval::prelude::*;

#[reeval::eval(timeout = "10m", retries = 2)]
async fn unknown_key(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
