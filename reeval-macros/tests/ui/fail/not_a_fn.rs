#[reeval::eval]
struct NotAFn;

fn main() {}
