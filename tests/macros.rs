//! Compile-fail and compile-pass tests of `#[reeval::eval]` and `reeval::main!()`.
//!
//! Regenerate the expected errors with `TRYBUILD=overwrite cargo test --test macros`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
