//! Engine errors that name the engine they came from: every engine a run
//! connects ([`BackendConfig::connect`](super::BackendConfig::connect)) is
//! wrapped so that a failed engine call reads "failed to create a container
//! on docker (unix:///var/run/docker.sock): …", whichever backend it is and
//! however many engines the run spreads over. A backend writes its errors
//! without knowing its own name.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    Backend, Capabilities, Connected, EngineInfo, ExecRequest, ExecStream, FoundSetup,
    GatewayContainer, GatewayOffer, GatewayRequest, ImageSpec, PortStream, Preflight, ReadyImage,
    RunNeeds, Sandbox, SandboxError, SandboxSpec, SandboxState, Signal, Sweep,
};
use crate::exec::ExecOutput;

/// `engine` with its errors naming it: `docker (unix:///var/run/docker.sock)`.
pub(super) fn named(engine: Connected) -> Connected {
    let kind = engine.backend.name();
    let label = if engine.name.is_empty() || engine.name == kind {
        kind.to_string()
    } else {
        format!("{kind} ({})", engine.name)
    };
    let backend = Arc::new(Named { inner: engine.backend, on: label.into() });
    Connected { backend, ..engine }
}

impl SandboxError {
    /// This error, saying which engine it came from (`on docker (tcp://b:2376)`),
    /// where it is an engine call's.
    pub fn on(self, engine: &str) -> Self {
        match self {
            SandboxError::Engine { op, message, source } => {
                SandboxError::Engine { op: format!("{op} on {engine}"), message, source }
            }
            other => other,
        }
    }
}

/// A backend whose engine errors name it.
#[derive(Debug)]
struct Named {
    inner: Arc<dyn Backend>,
    on: Arc<str>,
}

/// A sandbox of a [`Named`] backend.
#[derive(Debug)]
struct NamedSandbox {
    inner: Arc<dyn Sandbox>,
    on: Arc<str>,
}

impl Named {
    fn name_it<T>(&self, result: Result<T, SandboxError>) -> Result<T, SandboxError> {
        result.map_err(|e| e.on(&self.on))
    }
}

impl NamedSandbox {
    fn name_it<T>(&self, result: Result<T, SandboxError>) -> Result<T, SandboxError> {
        result.map_err(|e| e.on(&self.on))
    }
}

#[async_trait]
impl Backend for Named {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    async fn ping(&self) -> Result<EngineInfo, SandboxError> {
        self.name_it(self.inner.ping().await)
    }

    async fn ensure_image(
        &self,
        spec: &ImageSpec,
        extra: &str,
    ) -> Result<ReadyImage, SandboxError> {
        self.name_it(self.inner.ensure_image(spec, extra).await)
    }

    async fn create(&self, spec: &SandboxSpec) -> Result<Arc<dyn Sandbox>, SandboxError> {
        let inner = self.name_it(self.inner.create(spec).await)?;
        Ok(Arc::new(NamedSandbox { inner, on: self.on.clone() }))
    }

    async fn sweep(&self, scope: Sweep<'_>) -> Result<usize, SandboxError> {
        self.name_it(self.inner.sweep(scope).await)
    }

    async fn check_run(&self, run: &RunNeeds) -> Preflight {
        self.inner.check_run(run).await
    }

    fn runs_services(&self, services: &[crate::Service]) -> Result<(), String> {
        self.inner.runs_services(services)
    }

    fn mounts(&self, mounts: &[crate::Mount]) -> Result<(), String> {
        self.inner.mounts(mounts)
    }

    fn caches_setups(&self) -> bool {
        self.inner.caches_setups()
    }

    async fn find_setup(&self, digest: &str) -> Result<Option<FoundSetup>, SandboxError> {
        self.name_it(self.inner.find_setup(digest).await)
    }

    async fn forget_setup(&self, digest: &str) -> Result<(), SandboxError> {
        self.name_it(self.inner.forget_setup(digest).await)
    }

    async fn commit_setup(
        &self,
        sandbox_id: &str,
        digest: &str,
        labels: &BTreeMap<String, String>,
        max_bytes: u64,
    ) -> Result<(), SandboxError> {
        self.name_it(self.inner.commit_setup(sandbox_id, digest, labels, max_bytes).await)
    }

    async fn place_gateway(
        &self,
        offer: &dyn GatewayOffer,
    ) -> Result<Box<dyn GatewayContainer>, SandboxError> {
        self.name_it(self.inner.place_gateway(offer).await)
    }

    async fn start_gateway(
        &self,
        request: &GatewayRequest,
    ) -> Result<Box<dyn GatewayContainer>, SandboxError> {
        self.name_it(self.inner.start_gateway(request).await)
    }
}

#[async_trait]
impl Sandbox for NamedSandbox {
    fn id(&self) -> &str {
        self.inner.id()
    }

    async fn start(&self) -> Result<(), SandboxError> {
        self.name_it(self.inner.start().await)
    }

    fn start_note(&self) -> Option<String> {
        self.inner.start_note()
    }

    async fn exec(&self, request: ExecRequest<'_>) -> Result<ExecOutput, SandboxError> {
        self.name_it(self.inner.exec(request).await)
    }

    async fn exec_in_service(
        &self,
        service: &str,
        command: &crate::exec::Command,
    ) -> Result<ExecOutput, SandboxError> {
        self.name_it(self.inner.exec_in_service(service, command).await)
    }

    async fn download_from_service(
        &self,
        service: &str,
        path: &str,
        limit: u64,
    ) -> Result<Bytes, SandboxError> {
        self.name_it(self.inner.download_from_service(service, path, limit).await)
    }

    async fn kill(&self, signal: Signal) -> Result<(), SandboxError> {
        self.name_it(self.inner.kill(signal).await)
    }

    async fn upload(&self, dir: &str, tar: Bytes) -> Result<(), SandboxError> {
        self.name_it(self.inner.upload(dir, tar).await)
    }

    async fn download(&self, path: &str, limit: u64) -> Result<Bytes, SandboxError> {
        self.name_it(self.inner.download(path, limit).await)
    }

    async fn open_stream(&self, argv: Vec<String>) -> Result<ExecStream, SandboxError> {
        self.name_it(self.inner.open_stream(argv).await)
    }

    async fn attach_main(&self) -> Result<ExecStream, SandboxError> {
        self.name_it(self.inner.attach_main().await)
    }

    async fn connect_port(&self, port: u16) -> Result<Option<PortStream>, SandboxError> {
        self.name_it(self.inner.connect_port(port).await)
    }

    async fn state(&self) -> SandboxState {
        self.inner.state().await
    }

    async fn destroy(&self) -> Result<(), SandboxError> {
        self.name_it(self.inner.destroy().await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::FakeBackend;

    #[test]
    fn an_engine_error_names_its_engine_and_others_stay_as_they_are() {
        let e = SandboxError::engine_says("create a container", "no space left on device")
            .on("docker (tcp://b:2376)");
        assert_eq!(
            e.to_string(),
            "failed to create a container on docker (tcp://b:2376): no space left on device"
        );
        let missing = SandboxError::NotFound { path: "/x".into() }.on("docker");
        assert_eq!(
            missing.to_string(),
            "failed to read /x in the sandbox: no such file or directory"
        );
    }

    fn engine(backend: FakeBackend) -> Connected {
        named(Connected { name: "tcp://b:2376".into(), backend: Arc::new(backend), slots: None })
    }

    fn spec() -> SandboxSpec {
        SandboxSpec {
            image: "img".into(),
            labels: BTreeMap::new(),
            workdir: "/work".into(),
            limits: Default::default(),
            network: Default::default(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_connected_engine_names_itself_in_its_errors_and_its_sandboxes() {
        use crate::fake::FakeFailure;
        let failing = engine(FakeBackend::new().failing(FakeFailure::Create));
        assert_eq!(failing.name, "tcp://b:2376");
        let e = failing.backend.create(&spec()).await.expect_err("fails on purpose");
        assert_eq!(
            e.to_string(),
            "failed to create a container on fake (tcp://b:2376): the fake fails here on purpose"
        );
        let starting = engine(FakeBackend::new().failing(FakeFailure::Start));
        let sandbox = starting.backend.create(&spec()).await.expect("created");
        let e = sandbox.start().await.expect_err("fails on purpose");
        assert!(
            e.to_string().starts_with("failed to start the container on fake (tcp://b:2376): "),
            "{e}"
        );
        assert!(sandbox.id().starts_with("fake"));
    }
}
