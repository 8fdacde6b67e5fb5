//! Sandboxes and the engines that run them, from the `reeval-sandbox` crate
//! (below this one: the compiler refuses an import of the attempt, the runner
//! or a reporter there). Its public names keep their paths here
//! (`reeval_core::sandbox::Backend`, `reeval_core::sandbox::docker`, …); see
//! [`reeval_sandbox`] for the module note.

pub use reeval_sandbox::*;
