//! reeval's agent harnesses behind the [`reeval_core::Harness`] trait.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod cli;
pub mod nop;
pub mod openai;
pub mod shell;

use reeval_core::HarnessRegistry;

pub use nop::NopHarness;
pub use shell::ShellHarness;

/// Adds the built-in harnesses to `registry`.
pub fn register_builtins(registry: &mut HarnessRegistry) {
    registry.register("shell", |_| Box::new(ShellHarness));
    registry.register(nop::NOP, |_| Box::new(NopHarness));
    registry.register(reeval_core::replay::REPLAY, |m| {
        // A replay runs in the recorded harness's image, so checks see the agent's tools.
        let recorded = reeval_core::replay::recorded_harness(m)
            .filter(|h| !reeval_core::replay::is_replay(h))
            .and_then(|h| crate::registry().make(h));
        Box::new(reeval_core::replay::ReplayHarness::new(m).in_image_of(recorded.as_deref()))
    });
    registry
        .register(reeval_core::oracle::ORACLE, |_| Box::new(reeval_core::oracle::OracleHarness));
    registry.register("claude-code", |m| Box::new(cli::claude_code::harness(m)));
    registry.register("codex", |m| Box::new(cli::codex::harness(m)));
    registry.register("cursor", |m| Box::new(cli::cursor::harness(m)));
    registry.register("gemini", |m| Box::new(cli::gemini::harness(m)));
    registry.register("opencode", |m| Box::new(cli::opencode::harness(m)));
    registry.register("pi", |m| Box::new(cli::pi::harness(m)));
    registry.register("mini-swe-agent", |m| Box::new(cli::mini_swe::harness(m)));
    registry.register("openai", |m| Box::new(openai::OpenAiAgent::new(m)));
}

/// A registry with the built-in harnesses and every harness registered in this binary.
pub fn registry() -> HarnessRegistry {
    let mut r = HarnessRegistry::new();
    register_builtins(&mut r);
    r.with_registered()
}
