use reeval::prelude::*;

#[reeval::eval]
fn not_async(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
