use reeval::prelude::*;

#[reeval::eval(environment = "python:3.12")]
async fn environment_not_path(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

fn main() {}
