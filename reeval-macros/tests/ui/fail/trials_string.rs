use reeval::prelude::*;

#[reeval::eval(trials = "x")]
async fn trials_string(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
