use reeval::prelude::*;

#[reeval::eval]
async fn missing_return_type(c: &mut Ctx) {
    let _ = c;
}

fn main() {}
