// No options, the shapes of argument an eval may take, and `reeval::main!()` as the binary's `main`.
// Every eval here is `ignore`d or defaulted-but-trivial so that running the binary needs no sandbox.
use reeval::prelude::*;

#[reeval::eval(ignore)]
async fn no_options_but_ignore(c: &mut Ctx) -> reeval::Result<()> {
    let _ = c;
    Ok(())
}

// rustfmt would drop the trailing comma this eval exists to test.
#[rustfmt::skip]
#[reeval::eval(ignore,)]
async fn trailing_comma(_: &mut reeval::Ctx) -> reeval::Result<()> {
    Ok(())
}

#[reeval::eval(ignore)]
async fn mutable_binding(mut ctx: &'_ mut ::reeval::Ctx) -> reeval::Result<()> {
    let _ = &mut ctx;
    Ok(())
}

mod nested {
    use reeval::prelude::*;

    #[reeval::eval(ignore)]
    pub(crate) async fn in_a_module(c: &mut Ctx) -> reeval::Result<()> {
        let _ = c;
        Ok(())
    }
}

reeval::main!();
