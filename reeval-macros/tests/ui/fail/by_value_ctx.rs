use reeval::prelude::*;

#[reeval::eval]
async fn by_value_ctx(c: Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
