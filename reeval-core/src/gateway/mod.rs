//! The egress gateway in use, enforcing the policy of [`crate::egress`]:
//!
//! - `run.rs`: the run's gateway service (one per run, started when an
//!   attempt first needs it).
//! - `attempt.rs`: the attempt's egress: its plan, its identity on the
//!   gateway, the offer its backend places the gateway from, the gateway
//!   phase that verifies the sandbox's isolation, the policy switched per
//!   phase, the record of what went out.
//! - `socket.rs`: the run's gateway in this process as an attempt's way out.
//! - `refused.rs`: what the gateway refused, as a failed attempt's message
//!   ends with it.
//!
//! It sits above the environment, the harness trait and the errors it
//! reads; the attempt and the runner use it.

pub(crate) mod attempt;
mod refused;
mod run;
mod socket;

pub(crate) use attempt::AttemptEgress;
pub(crate) use run::RunEgress;
