//! A stand-in for the `reeval` crate in reeval-macros' compile-fail tests
//! (`reeval-macros/tests/compile_fail.rs`): the names the test files use, the
//! real macros, and none of reeval's dependencies, so that trybuild checks
//! five crates instead of every crate reeval is built from (about three
//! minutes of CI). The macros' errors are spanned by the macros themselves,
//! so what rustc prints for them is the same under either crate.

#![forbid(unsafe_code)]

pub use reeval_macros::{eval, main};

/// reeval's result type, as far as the test files need it.
pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The context an eval takes.
#[derive(Debug)]
pub struct Ctx;

/// What `use reeval::prelude::*;` brings into the test files.
pub mod prelude {
    pub use crate::Ctx;
}

/// What the macros' expansions call.
#[doc(hidden)]
pub mod __private {
    /// `reeval::main!()`'s body.
    pub fn main() {}
}
