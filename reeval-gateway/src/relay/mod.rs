//! The in-sandbox relay, `reeval-relay`: a static std-only executable built
//! from `relay/main.rs` by the build script, embedded here, and copied into
//! each sandbox. Inside the sandbox (which has no network), it listens on
//! [`SANDBOX_PROXY_ADDR`] and forwards every connection to the gateway's
//! unix socket, bind-mounted at [`SANDBOX_SOCKET_PATH`].
//!
//! Modes (argv after the program name):
//!
//! - `serve --listen 127.0.0.1:3128 --socket /run/reeval/gateway.sock`
//! - `verify [--tcp IP:PORT[,IP:PORT...]] [--dns] [--socket PATH]`: tries
//!   each TCP target (500 ms), sends a DNS query to every nameserver of
//!   `/etc/resolv.conf` plus 1.1.1.1 and 8.8.8.8 (1 s), and connects to the
//!   socket; prints one [`RelayReport`] JSON line and exits 0.
//! - `start --listen .. --socket .. [--tcp ..] [--dns]`: verify, then
//!   `serve` in the background (its own process group, stdio to /dev/null),
//!   wait up to 2 s for the port to accept, print the report with
//!   `"listening": true` and the relay's `"pid"`, exit 0 (1 if it never listened). One exec starts
//!   and verifies isolation. See [`start_argv`].

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// The relay executable for the host target (x86_64 Linux, static).
pub const RELAY_BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/reeval-relay"));

/// Where the runner puts the relay in the sandbox.
pub const SANDBOX_RELAY_PATH: &str = "/usr/local/bin/reeval-relay";
/// The directory bind-mounted from the host that holds the gateway socket.
pub const SANDBOX_SOCKET_DIR: &str = "/run/reeval";
/// The gateway's unix socket as the sandbox sees it.
pub const SANDBOX_SOCKET_PATH: &str = "/run/reeval/gateway.sock";
/// Where the relay listens in the sandbox.
pub const SANDBOX_PROXY_ADDR: &str = "127.0.0.1:3128";
/// The proxy URL the sandbox's tools get (`HTTP_PROXY`, `HTTPS_PROXY`).
pub const SANDBOX_PROXY_URL: &str = "http://127.0.0.1:3128";
/// Where the runner puts the per-run CA for `update-ca-certificates`.
pub const SANDBOX_CA_PATH: &str = "/usr/local/share/ca-certificates/reeval-gateway.crt";
/// The system bundle that holds the CA after `update-ca-certificates` (Debian layout).
pub const SANDBOX_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The argv of one exec that verifies isolation and starts the relay:
/// every `probe` address must fail to connect, DNS must not answer.
pub fn start_argv(probe: &[SocketAddr], dns: bool) -> Vec<String> {
    let mut argv = vec![
        SANDBOX_RELAY_PATH.to_owned(),
        "start".to_owned(),
        "--listen".to_owned(),
        SANDBOX_PROXY_ADDR.to_owned(),
        "--socket".to_owned(),
        SANDBOX_SOCKET_PATH.to_owned(),
    ];
    if !probe.is_empty() {
        argv.push("--tcp".to_owned());
        argv.push(probe.iter().map(ToString::to_string).collect::<Vec<_>>().join(","));
    }
    if dns {
        argv.push("--dns".to_owned());
    }
    argv
}

/// The path on which the relay reports its isolation check to the gateway.
pub const ISOLATION_PATH: &str = "/_reeval/isolation";

/// Where the CA the relay installs is read from, in the mounted gateway directory.
pub const SANDBOX_CA_SOURCE: &str = "/run/reeval/ca.pem";

/// The argv of a sandbox's main process when its gateway directory (socket
/// and relay) is mounted at [`SANDBOX_SOCKET_DIR`]: `relay` verifies that
/// every `probe` address fails to connect and DNS does not answer, installs
/// the CA when `install_ca`, starts serving, and reports to the gateway
/// ([`AttemptGateway::isolation`](crate::AttemptGateway::isolation)).
pub fn supervise_argv(
    relay: &str,
    probe: &[SocketAddr],
    dns: bool,
    install_ca: bool,
) -> Vec<String> {
    let mut argv = vec![
        relay.to_owned(),
        "supervise".to_owned(),
        "--listen".to_owned(),
        SANDBOX_PROXY_ADDR.to_owned(),
        "--socket".to_owned(),
        SANDBOX_SOCKET_PATH.to_owned(),
    ];
    if !probe.is_empty() {
        argv.push("--tcp".to_owned());
        argv.push(probe.iter().map(ToString::to_string).collect::<Vec<_>>().join(","));
    }
    if dns {
        argv.push("--dns".to_owned());
    }
    if install_ca {
        argv.extend(
            [
                "--ca",
                SANDBOX_CA_SOURCE,
                "--ca-to",
                SANDBOX_CA_PATH,
                "--ca-bundle",
                SANDBOX_CA_BUNDLE,
            ]
            .map(str::to_owned),
        );
    }
    argv
}

/// `argv` (a [`supervise_argv`]) with `session` started by the relay first,
/// as a child with the sandbox's own stdin and stdout, which only the
/// engine's attach reaches (see `Sandbox::attach_main` in reeval-sandbox).
/// `None` when `argv` is not the relay's `supervise`.
pub fn supervise_with_session(argv: &[String], session: &[String]) -> Option<Vec<String>> {
    if argv.get(1).map(String::as_str) != Some("supervise") || session.is_empty() {
        return None;
    }
    let mut argv = argv.to_vec();
    argv.push("--session".to_owned());
    argv.extend(session.iter().cloned());
    Some(argv)
}

/// The environment that routes a sandbox's tools through the relay and
/// makes them trust the per-run CA (installed in the system bundle at
/// [`SANDBOX_CA_BUNDLE`]; Node reads only `NODE_EXTRA_CA_CERTS`).
pub fn sandbox_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("HTTP_PROXY", SANDBOX_PROXY_URL),
        ("HTTPS_PROXY", SANDBOX_PROXY_URL),
        ("http_proxy", SANDBOX_PROXY_URL),
        ("https_proxy", SANDBOX_PROXY_URL),
        ("NO_PROXY", "localhost,127.0.0.1"),
        ("no_proxy", "localhost,127.0.0.1"),
        ("SSL_CERT_FILE", SANDBOX_CA_BUNDLE),
        ("REQUESTS_CA_BUNDLE", SANDBOX_CA_BUNDLE),
        ("PIP_CERT", SANDBOX_CA_BUNDLE),
        ("CURL_CA_BUNDLE", SANDBOX_CA_BUNDLE),
        ("GIT_SSL_CAINFO", SANDBOX_CA_BUNDLE),
        ("CARGO_HTTP_CAINFO", SANDBOX_CA_BUNDLE),
        ("NODE_EXTRA_CA_CERTS", SANDBOX_CA_PATH),
        ("NODE_USE_ENV_PROXY", "1"),
    ]
}

/// What `verify` and `start` print.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RelayReport {
    /// One result per TCP target.
    pub tcp: Vec<TcpProbe>,
    /// The DNS probe, when asked for.
    #[serde(default)]
    pub dns: Option<DnsProbe>,
    /// Whether the gateway socket accepted a connection.
    #[serde(default)]
    pub socket: Option<SocketProbe>,
    /// `start` only: whether the relay's port accepted a connection.
    #[serde(default)]
    pub listening: Option<bool>,
    /// `start` only: the process id of the background `serve`.
    #[serde(default)]
    pub pid: Option<u32>,
    /// `start` and `supervise`: why it did not start.
    #[serde(default)]
    pub error: Option<String>,
    /// `supervise` with a CA: whether it was installed.
    #[serde(default)]
    pub ca: Option<CaInstall>,
}

/// How installing the per-run CA went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaInstall {
    /// Whether the CA is in the sandbox's store.
    pub installed: bool,
    /// Why not.
    #[serde(default)]
    pub error: Option<String>,
}

impl RelayReport {
    /// Whether the sandbox is isolated: no TCP target connected and no DNS
    /// server answered.
    pub fn isolated(&self) -> bool {
        self.tcp.iter().all(|t| !t.connected) && self.dns.as_ref().is_none_or(|d| !d.answered)
    }
}

/// One TCP target of `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpProbe {
    /// The target as given.
    pub addr: String,
    /// Whether it connected (isolation wants false).
    pub connected: bool,
    /// Why it did not.
    #[serde(default)]
    pub error: Option<String>,
}

/// The DNS probe of `verify`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsProbe {
    /// Whether any server answered (isolation wants false).
    pub answered: bool,
    /// The server that answered.
    #[serde(default)]
    pub by: Option<String>,
    /// The servers queried.
    #[serde(default)]
    pub servers: Vec<String>,
    /// Send failures per server.
    #[serde(default)]
    pub errors: Vec<String>,
}

/// The socket probe of `verify`/`start`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketProbe {
    /// The socket path.
    pub path: String,
    /// Whether it accepted a connection.
    pub connected: bool,
    /// Why it did not.
    #[serde(default)]
    pub error: Option<String>,
}
