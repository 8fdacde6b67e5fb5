//! Compile-fail tests of `#[reeval::eval]` and `reeval::main!()`; what they
//! accept is tested by `tests/macro_defaults.rs` and `tests/macro_registrations.rs`,
//! plain test binaries, so that trybuild only checks (a pass case would make it
//! build every dependency a second time, in its own target directory).
//!
//! Regenerate the expected errors with `TRYBUILD=overwrite cargo test --test macros`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
