use reeval::prelude::*;

#[reeval::eval(timeout = "10 x")]
async fn bad_duration(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
