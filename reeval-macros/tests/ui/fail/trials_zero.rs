use reeval::prelude::*;

#[reeval::eval(trials = 0)]
async fn trials_zero(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
