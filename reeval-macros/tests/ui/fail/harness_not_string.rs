use reeval::prelude::*;

#[reeval::eval(harness = ["shell", 3])]
async fn harness_not_string(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
