//! The egress log: one entry per request, tunnel and refusal, with no header
//! or body value and no query string.

use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::addresses::InternalGrant;

/// How a request left the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// A CONNECT tunnel passed through untouched (bytes counted, content unseen).
    Tunnel,
    /// A CONNECT to a host with a credential binding: TLS terminated with a
    /// leaf from the per-run CA, each request forwarded over TLS.
    Intercept,
    /// A plain HTTP request to `/_reeval/upstream/<host>/…`, forwarded over TLS.
    BaseUrl,
    /// A plain HTTP request in absolute form, forwarded as plain HTTP.
    Http,
}

impl Route {
    /// The name used in JSON (`tunnel`, `intercept`, `base_url`, `http`).
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Tunnel => "tunnel",
            Route::Intercept => "intercept",
            Route::BaseUrl => "base_url",
            Route::Http => "http",
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One request, tunnel or refusal of an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressEntry {
    /// When it started, in milliseconds since the Unix epoch.
    pub at_unix_ms: u64,
    /// The upstream host (lowercase).
    pub host: String,
    /// The upstream port.
    pub port: u16,
    /// The method (`CONNECT` for tunnels and refused CONNECTs).
    pub method: String,
    /// The path without its query string (query strings can hold secrets); empty for CONNECT.
    pub path: String,
    /// The status the sandbox got: 403 when refused, the CONNECT status for tunnels, 502 when the upstream failed.
    pub status: u16,
    /// Body bytes sent upstream (for tunnels, every byte from the sandbox).
    pub bytes_up: u64,
    /// Body bytes received from upstream (for tunnels, every byte to the sandbox).
    pub bytes_down: u64,
    /// From the request's arrival to its response's end (for tunnels, to the close).
    pub duration_ms: u64,
    /// False when the gateway refused it.
    pub allowed: bool,
    /// How it left.
    pub route: Route,
    /// Names of the bindings whose secret was swapped in (names only, never values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub brokered: Vec<String>,
    /// The gateway's own explanation of a refusal or failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why it was refused, as data (the words are in `error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<Refusal>,
    /// The private or reserved address it reached, and the opt-in's entry
    /// that opened it (`allow_internal`); absent when it reached public addresses only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal: Option<InternalGrant>,
}

/// Why the gateway refused a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Refusal {
    /// The attempt's current phase has no egress at all.
    NoEgress,
    /// The host is not on the allowlist of the current phase.
    NotAllowed,
    /// The host resolves to a private or reserved address that the opt-in
    /// (`allow_internal`) does not open.
    #[serde(rename_all = "camelCase")]
    Internal {
        /// The address.
        addr: IpAddr,
        /// What it is (`a private address`, `a reserved address`, …).
        what: String,
    },
    /// The host resolves to an address no opt-in opens (this host's own,
    /// link-local, cloud metadata, …).
    #[serde(rename_all = "camelCase")]
    Closed {
        /// The address.
        addr: IpAddr,
        /// What it is.
        what: String,
    },
}

/// An attempt's totals so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EgressCounters {
    /// Entries recorded, refusals included.
    pub requests: u64,
    /// Entries refused.
    pub refused: u64,
    /// Sum of `bytes_up`.
    pub bytes_up: u64,
    /// Sum of `bytes_down`.
    pub bytes_down: u64,
}

/// Where an attempt's entries go.
#[derive(Debug, Default)]
pub(crate) struct EgressLog {
    entries: Mutex<Sink>,
    requests: AtomicU64,
    refused: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

#[derive(Debug, Default)]
enum Sink {
    #[default]
    Keep,
    Kept(Vec<EgressEntry>),
    Send(mpsc::UnboundedSender<EgressEntry>),
}

impl EgressLog {
    pub(crate) fn record(&self, entry: EgressEntry) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if !entry.allowed {
            self.refused.fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_up.fetch_add(entry.bytes_up, Ordering::Relaxed);
        self.bytes_down.fetch_add(entry.bytes_down, Ordering::Relaxed);
        let mut sink = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *sink {
            Sink::Keep => *sink = Sink::Kept(vec![entry]),
            Sink::Kept(entries) => entries.push(entry),
            Sink::Send(tx) => {
                // A dropped receiver means nobody wants entries any more; they are not kept either.
                let _ = tx.send(entry);
            }
        }
    }

    pub(crate) fn take(&self) -> Vec<EgressEntry> {
        let mut sink = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *sink {
            Sink::Kept(entries) => std::mem::take(entries),
            _ => Vec::new(),
        }
    }

    pub(crate) fn subscribe(&self) -> mpsc::UnboundedReceiver<EgressEntry> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut sink = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Sink::Kept(entries) = &mut *sink {
            for entry in entries.drain(..) {
                let _ = tx.send(entry);
            }
        }
        *sink = Sink::Send(tx);
        rx
    }

    pub(crate) fn counters(&self) -> EgressCounters {
        EgressCounters {
            requests: self.requests.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            bytes_up: self.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.bytes_down.load(Ordering::Relaxed),
        }
    }
}

/// An entry being filled in while its request runs; recorded exactly once,
/// when dropped (the response body ended, the tunnel closed, or the
/// connection went away).
pub(crate) struct Pending {
    log: Arc<EgressLog>,
    entry: EgressEntry,
    started: Instant,
    pub(crate) up: Arc<AtomicU64>,
    pub(crate) down: Arc<AtomicU64>,
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pending").field("entry", &self.entry).finish_non_exhaustive()
    }
}

impl Pending {
    pub(crate) fn new(
        log: Arc<EgressLog>,
        route: Route,
        host: &str,
        port: u16,
        method: &str,
        path: &str,
    ) -> Self {
        let at_unix_ms =
            SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        // The query string is cut here, once, for every route.
        let path = path.split_once('?').map_or(path, |(p, _)| p).to_owned();
        Pending {
            log,
            entry: EgressEntry {
                at_unix_ms,
                host: host.to_owned(),
                port,
                method: method.to_owned(),
                path,
                status: 0,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                allowed: true,
                route,
                brokered: Vec::new(),
                error: None,
                refusal: None,
                internal: None,
            },
            started: Instant::now(),
            up: Arc::new(AtomicU64::new(0)),
            down: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn status(&mut self, status: u16) {
        self.entry.status = status;
    }

    pub(crate) fn refused(&mut self, status: u16, why: String, refusal: Refusal) {
        self.entry.status = status;
        self.entry.allowed = false;
        self.entry.error = Some(why);
        self.entry.refusal = Some(refusal);
    }

    pub(crate) fn internal(&mut self, grant: Option<InternalGrant>) {
        if grant.is_some() {
            self.entry.internal = grant;
        }
    }

    pub(crate) fn failed(&mut self, status: u16, why: String) {
        self.entry.status = status;
        self.entry.error = Some(why);
    }

    pub(crate) fn note(&mut self, why: &str) {
        self.entry.error = Some(why.to_owned());
    }

    pub(crate) fn brokered(&mut self, names: Vec<String>) {
        self.entry.brokered = names;
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut entry = std::mem::replace(
            &mut self.entry,
            EgressEntry {
                at_unix_ms: 0,
                host: String::new(),
                port: 0,
                method: String::new(),
                path: String::new(),
                status: 0,
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                allowed: false,
                route: Route::Http,
                brokered: Vec::new(),
                error: None,
                refusal: None,
                internal: None,
            },
        );
        entry.bytes_up = self.up.load(Ordering::Relaxed);
        entry.bytes_down = self.down.load(Ordering::Relaxed);
        entry.duration_ms = self.started.elapsed().as_millis() as u64;
        self.log.record(entry);
    }
}
