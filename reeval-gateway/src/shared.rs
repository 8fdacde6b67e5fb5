//! What every connection of an attempt reads: the run's gateway parts (its
//! CA, its dialler, the pooled upstream clients) and the attempt's own (its
//! policy, bindings, egress log and isolation report). `gateway.rs` makes
//! them and ties listeners to them; `proxy.rs` serves each connection from them.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::addresses::InternalRule;
use crate::broker::Bindings;
use crate::ca::CertificateAuthority;
use crate::egress::EgressLog;
use crate::rules::Policy;
use crate::upstream::{self, Dialer, UpstreamClient};

/// The run's parts every attempt shares.
pub(crate) struct GatewayShared {
    pub(crate) ca: CertificateAuthority,
    pub(crate) dialer: Dialer,
    /// A pooled client per set of opt-in rules (the empty set's is made first).
    clients: Mutex<HashMap<Vec<InternalRule>, UpstreamClient>>,
}

impl GatewayShared {
    /// The run's parts, with the pooled client of the empty set of rules made first.
    pub(crate) fn new(ca: CertificateAuthority, dialer: Dialer) -> Self {
        let clients = HashMap::from([(Vec::new(), upstream::client(dialer.clone(), &[]))]);
        Self { ca, dialer, clients: Mutex::new(clients) }
    }

    /// The pooled client of requests under `rules`.
    pub(crate) fn client(&self, rules: &[InternalRule]) -> UpstreamClient {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(rules.to_vec())
            .or_insert_with(|| upstream::client(self.dialer.clone(), rules))
            .clone()
    }
}

impl fmt::Debug for GatewayShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayShared")
            .field("ca", &self.ca)
            .field("dialer", &self.dialer)
            .finish_non_exhaustive()
    }
}

/// One attempt's parts, shared by its connections.
#[derive(Debug)]
pub(crate) struct AttemptShared {
    pub(crate) gateway: Arc<GatewayShared>,
    pub(crate) policy: watch::Sender<Arc<Policy>>,
    pub(crate) bindings: Bindings,
    pub(crate) log: Arc<EgressLog>,
    /// The relay's isolation report; only the first one counts (it comes
    /// before anything else in the sandbox runs).
    pub(crate) isolation: watch::Sender<Option<Arc<crate::relay::RelayReport>>>,
}
