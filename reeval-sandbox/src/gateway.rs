//! The egress gateway as a backend sees it: the network a sandbox gets (its
//! only way out is the gateway: [`NetworkSpec`]), a gateway it runs next to a
//! sandbox ([`GatewayRequest`], [`GatewayContainer`]) and the ways to it the
//! attempt offers ([`GatewayOffer`], see [`Backend::place_gateway`](crate::Backend::place_gateway)).

use crate::FileToWrite;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;

use crate::SandboxError;

/// What network a sandbox gets. The sandbox never gets a network of its own
/// that reaches anything: its only way out is the egress gateway.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum NetworkSpec {
    /// No network at all: only the loopback interface.
    #[default]
    None,
    /// No network, and a host directory holding the gateway's unix socket
    /// mounted read-only into the sandbox (a local engine only).
    GatewaySocket {
        /// The directory on the host.
        host_dir: PathBuf,
        /// Where it appears in the sandbox.
        sandbox_dir: String,
    },
    /// An internal network of the engine (no route out, no address on the
    /// host) that only the sandbox and its gateway container are on.
    Internal {
        /// The network's name.
        network: String,
    },
    /// Kubernetes: a NetworkPolicy that denies everything but egress to the
    /// pods with these labels (the run's gateway pod) on this TCP port.
    PodGateway {
        /// The gateway pod's labels.
        pod_labels: BTreeMap<String, String>,
        /// The port of this attempt's gateway process.
        port: u16,
    },
}

/// A gateway the backend runs next to a sandbox, for engines where a socket of
/// this host cannot be mounted into the sandbox: the `reeval-gateway` binary
/// in a container on the sandbox's internal network and on a normal one (a
/// remote Docker engine), or as a process in the run's gateway pod
/// (Kubernetes). reeval-core builds it for an attempt (its `gateway::attempt`).
#[derive(Debug, Clone)]
pub struct GatewayRequest {
    /// Labels (run, attempt); the backend adds its owner label.
    pub labels: BTreeMap<String, String>,
    /// The `reeval-gateway` executable, built for the engine's architecture.
    pub binary: Arc<Vec<u8>>,
    /// The image it is put in (it needs the C library the binary links).
    pub base_image: String,
    /// Files the gateway reads (its configuration, its CA), by absolute path.
    pub files: Vec<FileToWrite>,
    /// Its environment: the secrets it swaps in (they reach this container only).
    pub env: Vec<(String, secrecy::SecretString)>,
    /// Its command line.
    pub command: Vec<String>,
    /// The port it listens on.
    pub port: u16,
}

/// A running gateway container or process, attached (see [`Backend::start_gateway`](crate::Backend::start_gateway)).
#[async_trait]
pub trait GatewayContainer: Send + Sync + fmt::Debug {
    /// The network the sandbox joins.
    fn network(&self) -> NetworkSpec;

    /// What the sandbox's relay connects to: `tcp:IP:PORT`.
    fn upstream(&self) -> String;

    /// Addresses of the engine's host the sandbox must not reach.
    fn probes(&self) -> Vec<std::net::SocketAddr>;

    /// Replaces the gateway's policy (a JSON object) and waits until it applies.
    ///
    /// # Errors
    /// [`SandboxError`] when the gateway does not acknowledge it.
    ///
    /// # Cancel safety
    /// A cancelled switch may still apply.
    async fn set_policy(&self, policy: &str) -> Result<(), SandboxError>;

    /// The isolation report the sandbox's relay sent to the gateway, waiting up to `within`.
    ///
    /// # Errors
    /// [`SandboxError`] when none arrived.
    ///
    /// # Cancel safety
    /// Safe.
    async fn isolation(
        &self,
        within: std::time::Duration,
    ) -> Result<reeval_gateway::relay::RelayReport, SandboxError>;

    /// Where it runs, for the gateway phase's detail.
    fn place(&self) -> &'static str {
        "a container next to the sandbox"
    }

    /// Whether the sandbox gets the gateway's directory mounted (the relay and
    /// the CA in it: nothing to upload), as the run's gateway in this process
    /// does; a gateway next to the sandbox is reached over the network.
    fn mounted(&self) -> bool {
        false
    }

    /// Connections to this host's canary listener since the attempt began,
    /// where the gateway has one (any is a leak).
    fn leaks(&self) -> u64 {
        0
    }

    /// `None` where the engine enforces the sandbox's isolation; otherwise
    /// why it does not (a Kubernetes test cluster on the host network): the
    /// relay's probes still run, and what they reach is reported instead of
    /// failing the attempt.
    fn unenforced(&self) -> Option<String> {
        None
    }

    /// Stops the gateway and removes it and the network; what went out.
    ///
    /// # Cancel safety
    /// A cancelled close leaves the container and network to the sweep.
    async fn close(&self) -> Vec<reeval_gateway::EgressEntry>;
}

/// The ways to the egress gateway the attempt offers a backend, which picks
/// one for its sandboxes ([`Backend::place_gateway`](crate::Backend::place_gateway)): neither is made until asked for.
#[async_trait]
pub trait GatewayOffer: Send + Sync {
    /// The run's gateway in this process, with a socket for this attempt in
    /// a directory of this host that the sandbox gets mounted
    /// ([`NetworkSpec::GatewaySocket`]): for engines that can mount one.
    ///
    /// # Errors
    /// [`SandboxError`] when the gateway cannot start or take the attempt.
    ///
    /// # Cancel safety
    /// Safe: the attempt's directory is removed with the run's gateway.
    async fn in_process(&self) -> Result<Box<dyn GatewayContainer>, SandboxError>;

    /// What a gateway that the backend runs next to the sandbox needs (see
    /// [`Backend::start_gateway`](crate::Backend::start_gateway)).
    ///
    /// # Errors
    /// [`SandboxError`] when its binary or CA cannot be had.
    ///
    /// # Cancel safety
    /// Safe.
    async fn beside(&self) -> Result<GatewayRequest, SandboxError>;
}
