//! Compile-fail tests of `#[reeval::eval]` and `reeval::main!()`: each file in
//! `tests/ui/fail` must fail with exactly the error beside it, pointing at the
//! offending token. What the macros accept is tested by the reeval crate's
//! `tests/macro_defaults.rs` and `tests/macro_registrations.rs`, plain test
//! binaries against the real crate.
//!
//! The files name `reeval`, here the stand-in of `ui-stub/` (the real macros,
//! none of reeval's dependencies), so trybuild checks a handful of crates in
//! its own target directory instead of the whole tree again.
//!
//! Regenerate the expected errors with
//! `TRYBUILD=overwrite cargo test -p reeval-macros --test compile_fail`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
}
