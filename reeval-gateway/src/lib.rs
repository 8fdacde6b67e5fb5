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
//! ([`GatewayOptions::extra_root_pem`]; [`HostRoots`] are what this host's
//! trust store adds to the public roots, an intercepting proxy's CA among
//! them). A connect or TLS failure is a 502 with a body that says which.
//!
//! Every address a host resolves to is checked before it is dialled, so a
//! sandbox with [`Egress::Any`] still cannot reach the host's own services:
//!
//! | address | reached |
//! |---|---|
//! | public | when the allowlist allows the host |
//! | private (`10/8`, `172.16/12`, `192.168/16`, `fc00::/7`), shared (`100.64/10`) or reserved (documentation, benchmarking, `240/4`) | only when the policy's `allow_internal` ([`InternalRule`]) names the host or a range holding the address; the request's entry says which ([`EgressEntry::internal`]) |
//! | this host's own (loopback, every address of its interfaces: the engine's bridges), the gateway of its network's default route (for a gateway container, the engine's bridge), link-local (`169.254/16`, `fe80::/10`: cloud metadata), `fd00:ec2::254`, unspecified, multicast, broadcast | never |
//!
//! A name with any refused address is refused (403, [`Refusal`]); "this
//! host's own" is asked of the kernel at each dial, so bridges made during a
//! run count.
//!
//! [`GatewayOptions::upstream_proxy`] sends upstream connections through an
//! HTTP proxy ([`UpstreamProxy`], read from `HTTPS_PROXY`/`HTTP_PROXY`/
//! `NO_PROXY` by [`UpstreamProxy::from_env`]): `CONNECT` for TLS and the
//! sandbox's tunnels, absolute-form requests for plain HTTP. The address
//! rules apply to what this host resolves a name to; a name only the proxy
//! can resolve is the proxy's to refuse.
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
mod addresses;
mod body;
mod broker;
mod ca;
pub mod config;
mod egress;
mod error;
mod gateway;
mod headers;
mod hosts;
mod proxy;
pub mod relay;
mod rules;
mod shared;
mod trust;
mod upstream;
mod upstream_proxy;

pub use addresses::{InternalGrant, InternalRule};
pub use broker::Binding;
pub use ca::CertificateAuthority;
pub use egress::{EgressCounters, EgressEntry, Refusal, Route};
pub use error::GatewayError;
pub use gateway::{AttemptGateway, Gateway, GatewayOptions, Listening, Serving};
pub use hosts::HostPattern;
pub use http::Method;
pub use proxy::{BASE_URL_PREFIX, base_url};
pub use rules::{Egress, Policy};
pub use secrecy::{ExposeSecret, SecretString};
pub use trust::HostRoots;
pub use upstream_proxy::{ProxyUrl, UpstreamProxy};
