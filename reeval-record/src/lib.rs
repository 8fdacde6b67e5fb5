//! The data of a reeval run as it is recorded: the phases of an attempt, its
//! outcome, the record every attempt leaves and the run's summary, turns,
//! workspace diffs, a comparison's figures, prices and the
//! statistics behind pass rates. This is the serde surface a viewer or
//! another tool reads (as nextest keeps `nextest-metadata` apart), and the
//! bottom of the workspace: it names no sandbox, runner, reporter, judge,
//! compare or replay code. `reeval-core` re-exports each module under the
//! same path (`reeval_core::record`, `reeval::record`, …).
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod comparison;
pub mod diff;
pub mod outcome;
pub mod phase;
pub mod prices;
pub mod record;
pub mod stats;
pub mod turn;
