//! What a run asks of a backend before anything starts ([`RunNeeds`],
//! which [`Backend::check_run`](crate::Backend::check_run) answers with a
//! [`Preflight`]).

use std::collections::BTreeMap;

use secrecy::SecretString;

use crate::ImageSpec;

/// What a run asks of its engines, for their own preflight ([`Backend::check_run`](crate::Backend::check_run)).
#[derive(Debug, Clone, Default)]
pub struct RunNeeds {
    /// Every cell (an eval × a harness) that will run.
    pub cells: Vec<CellNeeds>,
}

/// What one cell's attempts ask of an engine.
#[derive(Debug, Clone)]
pub struct CellNeeds {
    /// The eval's name.
    pub eval: String,
    /// The images its attempts may use (the eval's, else its harness's).
    pub images: Vec<ImageSpec>,
    /// Whether its attempts need a way out through the egress gateway.
    pub egress: bool,
    /// The real values of the secrets its gateway swaps in, by the
    /// gateway's variable (`REEVAL_GW_SECRET_<NAME>`), for engines that run
    /// the gateway away from this process.
    pub brokered: BTreeMap<String, SecretString>,
}

/// What a backend's own preflight found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// Misses that stop the run, each a whole sentence naming what to fix.
    pub missing: Vec<String>,
    /// Things a user should know, that do not stop it.
    pub warnings: Vec<String>,
}
