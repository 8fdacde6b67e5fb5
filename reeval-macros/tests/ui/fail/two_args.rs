use reeval::prelude::*;

#[reeval::eval]
async fn two_args(c: &mut Ctx, attempt: u32) -> reeval::Result<()> {
    let _ = (c, attempt);
    Ok(())
}

fn main() {}
