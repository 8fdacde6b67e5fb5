//! reeval's agent harnesses behind the [`reeval_core::Harness`] trait.
#![forbid(unsafe_code)]

pub mod shell;

use reeval_core::HarnessRegistry;

pub use shell::ShellHarness;

/// Adds the built-in harnesses to `registry`.
pub fn register_builtins(registry: &mut HarnessRegistry) {
    registry.register("shell", |_| Box::new(ShellHarness));
}

/// A registry with the built-in harnesses and every harness registered in this binary.
pub fn registry() -> HarnessRegistry {
    let mut r = HarnessRegistry::new();
    register_builtins(&mut r);
    r.with_registered()
}
