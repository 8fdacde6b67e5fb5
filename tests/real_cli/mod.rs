//! What the real-CLI tests share (tests/real_clis.rs, tests/real_mini_swe.rs):
//! the images `scripts/fetch-real-clis.sh` builds, a scripted provider behind
//! reeval's real gateway, and running one eval against it.
//!
//! Not in tests/common, which every test binary compiles: this needs
//! tests/model_server and the gateway's test upstreams. The including file
//! declares `mod common;` and `mod model_server;` beside `mod real_cli;`.

#![allow(dead_code, reason = "each test binary uses a different subset")]

mod images;
#[path = "../../reeval-gateway/tests/common/mod.rs"]
#[allow(unused_imports)]
mod upstreams;

pub use images::images;
use reeval::egress::EgressSettings;
use reeval::prelude::expect;
use reeval::{Eval, Record, RunReport, Usage};

use crate::common;
use crate::model_server::streams::Billed;
use crate::model_server::{Answer, ModelServer, Options, Recorded};

/// The keys in the runs' env file: the gateway brokers them, the sandbox sees placeholders.
pub const ANTHROPIC_KEY: &str = "sk-ant-real-clis-REAL-0123456789abcdef";
pub const OPENAI_KEY: &str = "sk-openai-real-clis-REAL-0123456789abcdef";

/// The model API hosts the provider answers for.
const HOSTS: [&str; 2] = ["api.anthropic.com", "api.openai.com"];

/// The scripted provider: TLS for both API hosts on loopback, and the
/// gateway settings that route those hosts to it.
pub struct Provider {
    pub server: ModelServer,
    ca_pem: String,
}

impl Provider {
    /// A provider that also offers Codex's WebSocket transport.
    pub async fn start(
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(true, script).await
    }

    /// A provider over HTTP only: a WebSocket upgrade gets a 404.
    pub async fn without_websocket(
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        Self::start_with(false, script).await
    }

    /// A provider that answers every WebSocket upgrade with `status`, as
    /// OpenAI's API answers one with a rejected key (401), before any socket.
    pub async fn refusing_upgrades(
        status: u16,
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        Self::start_options(Options { refuse_upgrades: Some(status), ..Options::default() }, script)
            .await
    }

    async fn start_with(
        websocket: bool,
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        Self::start_options(Options { websocket, ..Options::default() }, script).await
    }

    /// A provider listening as `options` say, with TLS for both API hosts.
    async fn start_options(
        options: Options,
        script: impl Fn(usize, &Recorded) -> Answer + Send + Sync + 'static,
    ) -> Self {
        let pki = upstreams::TestPki::new();
        let tls = pki.server_config(&HOSTS);
        let options = Options { tls: Some(tls), ..options };
        let server = ModelServer::start_with(options, script).await;
        Self { server, ca_pem: pki.ca_pem.clone() }
    }

    /// A runner whose env file holds both keys and whose gateway reaches this provider.
    pub fn runner(&self, tag: &str) -> reeval::Runner {
        let env = common::env_file(
            tag,
            &[("ANTHROPIC_API_KEY", ANTHROPIC_KEY), ("OPENAI_API_KEY", OPENAI_KEY)],
        );
        let egress = EgressSettings {
            extra_roots_pem: vec![self.ca_pem.clone()],
            resolve: HOSTS.iter().map(|host| (host.to_string(), self.server.addr)).collect(),
            ..EgressSettings::default()
        };
        common::runner_with(tag, |c| {
            c.settings.env_file = Some(env);
            c.egress = egress;
        })
    }

    /// Every request the server received.
    pub fn requests(&self) -> Vec<Recorded> {
        self.server.requests()
    }

    /// The model requests (not the WebSocket handshakes Codex tries first).
    pub fn model_requests(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.method != "GET").collect()
    }
}

/// Runs `eval` once (no retries) and returns its record and the run's report.
pub async fn run_one(provider: &Provider, tag: &str, eval: Eval) -> (Record, RunReport) {
    let report = provider.runner(tag).run(vec![eval]).await.expect("preflight passes");
    assert_eq!(report.records.len(), 1, "one attempt (no retries)");
    (report.records[0].clone(), report)
}

/// An eval that sends one prompt.
pub fn sends(name: &str, prompt: &'static str) -> Eval {
    Eval::new(name, move |c| {
        Box::pin(async move {
            c.send(prompt).await?;
            Ok(())
        })
    })
}

/// Each CLI's two-turn eval: the sandbox sees a placeholder for `key_env`,
/// the first turn asks for hello.py, the second to run it into out.txt
/// (the scripted models answer these prompts), and out.txt holds `hello`.
pub fn writes_then_runs_hello(name: &str, key_env: &'static str) -> Eval {
    Eval::new(name, move |c| {
        Box::pin(async move {
            let env = c.exec(format!("printenv {key_env}")).await?;
            expect(env.stdout.contains("placeholder")).to_equal(true)?;
            c.send("Create hello.py that prints hello.").await?;
            c.send("Run hello.py into out.txt.").await?;
            expect(c.read_file("out.txt").await?).to_equal("hello\n")?;
            Ok(())
        })
    })
}

/// A record as pretty JSON, for assertion messages.
pub fn show(r: &Record) -> String {
    serde_json::to_string_pretty(r).unwrap_or_default()
}

/// Anthropic usage as reeval records it: cache writes apart, no reasoning.
pub fn anthropic_usage(b: Billed) -> Usage {
    Usage {
        input: Some(b.input),
        output: Some(b.output),
        cache_read: Some(b.cache_read),
        cache_write: Some(b.cache_write),
        reasoning: None,
        partial: false,
    }
}

/// OpenAI usage as reeval records it: cached tokens apart, reasoning reported, no cache writes.
pub fn openai_usage(b: Billed) -> Usage {
    Usage {
        input: Some(b.input),
        output: Some(b.output),
        cache_read: Some(b.cache_read),
        cache_write: None,
        reasoning: Some(b.reasoning),
        partial: false,
    }
}
