//! The run's gateway in this process as one attempt's way out: its identity
//! on the gateway, served on a unix socket in a host directory that the
//! backend mounts into the sandbox ([`NetworkSpec::GatewaySocket`]), beside
//! the static relay (and, for TLS interception, the run's CA). One of the two
//! things a backend can choose for its sandboxes (see
//! [`crate::sandbox::Backend::place_gateway`]); the other is a gateway it
//! runs next to the sandbox.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use async_trait::async_trait;
use reeval_gateway::relay::{self, RelayReport};
use reeval_gateway::{AttemptGateway, Policy, Serving};

use super::run::{OUTSIDE, RunGateway};
use crate::sandbox::{GatewayContainer, NetworkSpec, SandboxError};

/// The attempt's identity on the run's gateway and its socket.
#[derive(Debug)]
pub(super) struct SocketGateway {
    pub(super) gateway: AttemptGateway,
    pub(super) serving: std::sync::Mutex<Option<Serving>>,
    /// The attempt's directory of this host (socket, relay, CA), mounted into the sandbox.
    pub(super) dir: PathBuf,
    pub(super) run: Arc<RunGateway>,
    /// The canary's connections before this attempt: any more is a leak.
    pub(super) canary_before: u64,
}

#[async_trait]
impl GatewayContainer for SocketGateway {
    fn network(&self) -> NetworkSpec {
        NetworkSpec::GatewaySocket {
            host_dir: self.dir.clone(),
            sandbox_dir: relay::SANDBOX_SOCKET_DIR.into(),
        }
    }

    fn upstream(&self) -> String {
        relay::SANDBOX_SOCKET_PATH.into()
    }

    fn probes(&self) -> Vec<std::net::SocketAddr> {
        // The run's probes are this host's addresses, then the outside ones.
        let hosts = self.run.probes.len() - OUTSIDE.len();
        self.run.probes[..hosts].to_vec()
    }

    fn place(&self) -> &'static str {
        "in this process"
    }

    fn mounted(&self) -> bool {
        true
    }

    fn leaks(&self) -> u64 {
        self.run.canary_hits.load(Ordering::SeqCst) - self.canary_before
    }

    async fn set_policy(&self, policy: &str) -> Result<(), SandboxError> {
        let policy: Policy = serde_json::from_str(policy)
            .map_err(|e| SandboxError::engine("switch the egress policy", e))?;
        self.gateway
            .set_policy(policy)
            .map_err(|e| SandboxError::engine_says("switch the egress policy", e))
    }

    async fn isolation(&self, within: Duration) -> Result<RelayReport, SandboxError> {
        let report = self
            .gateway
            .isolation(within)
            .await
            .map_err(|e| SandboxError::engine_says("start the egress gateway", e))?;
        Ok((*report).clone())
    }

    async fn close(&self) -> Vec<reeval_gateway::EgressEntry> {
        let _ = self.gateway.set_policy(Policy::deny_all());
        let serving = self.serving.lock().expect("serving lock").take();
        if let Some(serving) = serving {
            serving.shutdown().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        self.gateway.take_log()
    }
}
