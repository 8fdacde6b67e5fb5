#[reeval::eval]
async fn no_args() -> reeval::Result<()> {
    Ok(())
}

fn main() {}
