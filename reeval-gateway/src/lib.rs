//! The egress gateway of reeval sandboxes.
//!
//! A sandbox runs with `network_mode: none`. Its only way out is a unix
//! socket bind-mounted from the host; [`relay`] (`reeval-relay`, inside the
//! sandbox) listens on `127.0.0.1:3128` and forwards each connection to that
//! socket. The agent's environment says `HTTP_PROXY`/`HTTPS_PROXY=http://127.0.0.1:3128`
//! and `NO_PROXY=localhost,127.0.0.1`. This crate is the host side: an
//! HTTP(S) forward proxy that
//!
//! - refuses every host outside the attempt's allowlist **before** dialling
//!   it (403 with a body that says why: `reeval egress gateway: host X … is
//!   not on this sandbox's allowlist`);
//! - swaps real secrets in for placeholders, only where a [`Binding`] says;
//! - records every request, tunnel and refusal as an [`EgressEntry`] (host,
//!   method, path without its query string, status, bytes, duration; never a
//!   header or body value);
//! - streams bodies frame by frame (SSE arrives as it is sent).
//!
//! One [`Gateway`] per run holds the per-run CA and the pooled upstream
//! client; [`Gateway::attempt`] gives each attempt an [`AttemptGateway`]
//! with its own [`Policy`], bindings and log, and every connection that
//! arrives on that attempt's listener ([`AttemptGateway::bind_unix`],
//! [`AttemptGateway::serve_tcp`]) is that attempt's. The runner switches the
//! policy as phases change ([`AttemptGateway::set_policy`]): setup may
//! reach more, checks nothing unless asked, and checks-only secrets are
//! active only while checks run.
//!
//! # Routes
//!
//! | route | the sandbox sends | the gateway | swaps |
//! |---|---|---|---|
//! | `http` | `GET http://host/path` (absolute form) | forwards over plain HTTP | never |
//! | `tunnel` | `CONNECT host:443` to a host with no binding | dials, answers 200, copies bytes both ways untouched (TLS, HTTP/2, websockets work end to end) | never |
//! | `intercept` | `CONNECT host:443` to a host some binding targets | answers 200, terminates TLS with a leaf for `host` signed by the per-run CA ([`Gateway::ca_pem`]; the sandbox must trust it), serves HTTP/1.1 or HTTP/2 (ALPN), forwards each request to `https://host` | yes |
//! | `base_url` | `GET /_reeval/upstream/<host>/<rest>` (origin form, for CLIs that take a base URL; [`base_url`], [`BASE_URL_PREFIX`]) | forwards to `https://<host>/<rest>` | yes |
//!
//! # Placeholders
//!
//! The sandbox holds only a placeholder for each secret. The gateway puts
//! the real value in a header only when the request goes to the binding's
//! host on the intercept or base-url route, the binding is active in the
//! current policy, the bound header's value is exactly the placeholder or
//! exactly `Bearer <placeholder>`, and the optional method and path prefix
//! match. A placeholder sent anywhere else (another host, another header,
//! part of a longer value, plain HTTP) arrives as it was sent. Secrets live
//! in [`secrecy::SecretString`] and never appear in Debug output, errors or
//! the egress log.
//!
//! # Upstreams
//!
//! Upstream TLS trusts webpki-roots plus any extra PEM roots
//! ([`GatewayOptions::extra_root_pem`]). Hosts that resolve to loopback,
//! private, link-local or other non-public addresses are refused unless
//! [`GatewayOptions::allow_private_upstreams`] is set, so a sandbox with
//! [`Egress::Any`] still cannot reach the host's own services. A connect or
//! TLS failure is a 502 with a body that says which.
//!
//! [`GatewayOptions::resolve`] maps a host name to a socket address like
//! `curl --resolve`. **It is for tests only**: it lets a test stand up a fake
//! `api.anthropic.com` on 127.0.0.1 while SNI and certificate verification
//! still use the name.
//!
//! # Binary
//!
//! `reeval-gateway --config FILE` runs the same library as its own process
//! (for remote engines); see the crate's README for the configuration.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
mod body;
mod broker;
mod ca;
pub mod config;
mod egress;
mod error;
mod gateway;
mod proxy;
pub mod relay;
mod rules;
mod upstream;

pub use broker::Binding;
pub use ca::CertificateAuthority;
pub use egress::{EgressCounters, EgressEntry, Route};
pub use error::GatewayError;
pub use gateway::{AttemptGateway, Gateway, GatewayOptions, Listening, Serving};
pub use http::Method;
pub use proxy::{BASE_URL_PREFIX, base_url};
pub use rules::{Egress, HostPattern, Policy};
pub use secrecy::{ExposeSecret, SecretString};
