//! What an attempt is given before the agent's first token: the builder
//! returned by `#[reeval::eval(environment = ..)]`.

use crate::sandbox::FileToWrite;
use std::path::PathBuf;
use std::time::Duration;

use crate::egress::{Broker, Egress};
use crate::sandbox::Limits;

pub use crate::sandbox::{Condition, Healthcheck, Mount, MountSource, Service};
pub use crate::sandbox::{Image, ImageSpec};

mod parts;
pub use parts::{McpServer, SecretSpec, SetupCache, SetupStep, Skill, Workspace, WorkspaceDir};

/// The default image: built offline by `scripts/build-base-image.sh`.
pub const DEFAULT_IMAGE: &str = "reeval/base:latest";
/// The default timeout of one setup step.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// The workspace directory inside the sandbox, unless the environment puts
/// it elsewhere ([`Environment::workspace_dir`]).
pub const WORKSPACE: &str = "/workspace";

/// The environment of an attempt's sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    pub(crate) image: Option<ImageSpec>,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) secrets: Vec<SecretSpec>,
    pub(crate) workspace: Option<Workspace>,
    /// Where the workspace lives in the sandbox.
    pub(crate) workspace_dir: WorkspaceDir,
    pub(crate) files: Vec<FileToWrite>,
    pub(crate) rules: Option<String>,
    pub(crate) setup: Vec<SetupStep>,
    pub(crate) context_summary: bool,
    pub(crate) limits: Limits,
    pub(crate) skills: Vec<PathBuf>,
    /// Directories in the sandbox whose skill folders go where the harness reads skills.
    pub(crate) skills_in_sandbox: Vec<String>,
    pub(crate) mcp: Vec<McpServer>,
    pub(crate) mcp_where_taken: Vec<McpServer>,
    /// Hosts the agent may reach besides its harness's API hosts.
    pub(crate) allow_egress: Vec<String>,
    /// Whether the agent may reach any public host (a Harbor task's `public` network).
    pub(crate) any_egress: bool,
    /// Private or reserved addresses the allowed hosts may resolve to.
    pub(crate) allow_internal: Vec<String>,
    /// What setup steps may reach, when not the agent's allowlist.
    pub(crate) setup_network: Option<Egress>,
    /// What checks may reach (nothing unless set).
    pub(crate) check_network: Option<Egress>,
    /// Secrets the gateway swaps in, by name.
    pub(crate) brokers: Vec<(String, Broker)>,
    /// Whether the prepared sandbox may be cached (see `crate::setup_cache`).
    pub(crate) setup_cache: SetupCache,
    /// The image the eval named, when `[images]` mapped it (`crate::image_map`).
    pub(crate) image_mapped_from: Option<MappedFrom>,
    /// Services started beside the sandbox (reeval-sandbox's `service.rs`).
    pub(crate) services: Vec<Service>,
    /// The sandbox's mounts: volumes shared by name with its services, host paths.
    pub(crate) mounts: Vec<Mount>,
    /// Values the run's sinks replace as a secret's ([`Environment::redact`]).
    pub(crate) redact: Vec<crate::secrets::Redacted>,
}

impl Default for Environment {
    fn default() -> Self {
        Self::new()
    }
}

impl Environment {
    /// An environment with the defaults: the harness's image (or `reeval/base`),
    /// an empty workspace, 4 GiB of memory, 2 CPUs, 1024 processes.
    pub fn new() -> Self {
        Self {
            image: None,
            env: Vec::new(),
            secrets: Vec::new(),
            workspace: None,
            workspace_dir: WorkspaceDir::Default,
            files: Vec::new(),
            rules: None,
            setup: Vec::new(),
            context_summary: false,
            limits: Limits::default(),
            skills: Vec::new(),
            skills_in_sandbox: Vec::new(),
            mcp: Vec::new(),
            mcp_where_taken: Vec::new(),
            allow_egress: Vec::new(),
            any_egress: false,
            allow_internal: Vec::new(),
            setup_network: None,
            check_network: None,
            brokers: Vec::new(),
            setup_cache: Default::default(),
            image_mapped_from: None,
            services: Vec::new(),
            mounts: Vec::new(),
            redact: Vec::new(),
        }
    }

    /// The image.
    pub fn image(mut self, image: ImageSpec) -> Self {
        self.image = Some(image);
        self
    }

    /// An environment variable (on top of `CI=1 TERM=dumb NO_COLOR=1`).
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// A secret read from the host environment; the sandbox sees a placeholder.
    pub fn secret(mut self, name: impl Into<String>) -> Self {
        self.secrets.push(SecretSpec { name: name.into(), checks_only: false });
        self
    }

    /// A value no record, log, report or message of the run shows: every
    /// sink replaces it as it does a secret's. For a value the eval resolves
    /// itself that may be a credential and that the sandbox must get as it
    /// is (a Harbor task's `${VAR}` read from the host), where
    /// [`Environment::secret`]'s placeholder cannot stand in for it.
    pub fn redact(mut self, value: impl Into<String>) -> Self {
        self.redact.push(crate::secrets::Redacted::new(value));
        self
    }

    /// A secret only `exec` checks see, with its real value.
    pub fn secret_for_checks(mut self, name: impl Into<String>) -> Self {
        self.secrets.push(SecretSpec { name: name.into(), checks_only: true });
        self
    }

    /// The workspace's source.
    pub fn workspace(mut self, workspace: Workspace) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// Where the workspace lives in the sandbox: `/workspace` unless set;
    /// `.workspace_dir("/app")`, or `.workspace_dir(WorkspaceDir::ImageWorkdir)`
    /// for the image's own `WORKDIR`. The agent starts there and owns it.
    pub fn workspace_dir(mut self, dir: impl Into<WorkspaceDir>) -> Self {
        self.workspace_dir = dir.into();
        self
    }

    /// A file written byte for byte (mode 0644); relative paths are in the workspace.
    pub fn file(self, path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.file_with_mode(path, bytes, 0o644)
    }

    /// A file with a mode (`0o755` for scripts).
    pub fn file_with_mode(
        mut self,
        path: impl Into<String>,
        bytes: impl Into<Vec<u8>>,
        mode: u32,
    ) -> Self {
        self.files.push(FileToWrite::new(path, bytes, mode));
        self
    }

    /// Rules for the agent, written to the harness's rules file.
    pub fn rules(mut self, text: impl Into<String>) -> Self {
        self.rules = Some(text.into());
        self
    }

    /// A setup step with the default timeout (5 minutes).
    pub fn setup(self, command: impl Into<String>) -> Self {
        self.setup_with_timeout(command, DEFAULT_SETUP_TIMEOUT)
    }

    /// Whether the sandbox prepared by the workspace, files and setup steps
    /// is cached as an image for later attempts with the same inputs:
    /// `setup_cache(false)` turns it off, `SetupCache::IncludingSecrets`
    /// caches even a setup that could receive a secret value.
    pub fn setup_cache(mut self, cache: impl Into<SetupCache>) -> Self {
        self.setup_cache = cache.into();
        self
    }

    /// A setup step with its own timeout.
    pub fn setup_with_timeout(mut self, command: impl Into<String>, timeout: Duration) -> Self {
        self.setup.push(SetupStep { command: command.into(), timeout });
        self
    }

    /// Writes `CONTEXT.md` listing what the attempt was given and appends it to the first prompt.
    pub fn context_summary(mut self, yes: bool) -> Self {
        self.context_summary = yes;
        self
    }

    /// A skill directory (with a `SKILL.md`), placed where the harness reads skills.
    pub fn skill(mut self, dir: impl Into<PathBuf>) -> Self {
        self.skills.push(dir.into());
        self
    }

    /// A directory in the sandbox (its image's, or one setup made) holding
    /// skill folders, each copied where the harness reads skills when its
    /// session starts, as the agent user's (Harbor's `[environment].skills_dir`).
    /// A missing directory gives no skills; a harness whose agent takes no
    /// skills leaves it out.
    pub fn skills_in_sandbox(mut self, dir: impl Into<String>) -> Self {
        self.skills_in_sandbox.push(dir.into());
        self
    }

    /// An MCP server, configured in the harness's format. A harness whose
    /// agent has no MCP support refuses the attempt (a config outcome).
    pub fn mcp(mut self, server: McpServer) -> Self {
        self.mcp.push(server);
        self
    }

    /// An MCP server for a harness whose agent takes MCP servers, left out
    /// by one whose agent has none (a Harbor task's, whose agents ignore
    /// what they cannot take).
    pub fn mcp_where_taken(mut self, server: McpServer) -> Self {
        self.mcp_where_taken.push(server);
        self
    }

    /// Lets the agent (and setup) reach `host` through the egress gateway:
    /// an exact name or `*.example.com` (subdomains only), optionally `:port`.
    /// The harness's own API hosts are always allowed.
    pub fn allow_egress(mut self, host: impl Into<String>) -> Self {
        self.allow_egress.push(host.into());
        self
    }

    /// Lets the agent (and setup) reach any public host through the egress
    /// gateway, every request recorded (private and reserved addresses only
    /// where [`Environment::allow_internal`] opens them, never the host's own):
    /// what a Harbor task's `network_mode = "public"` asks.
    pub fn allow_any_egress(mut self, yes: bool) -> Self {
        self.any_egress = yes;
        self
    }

    /// Lets the hosts this sandbox may reach (in every phase) resolve to a
    /// private or reserved address the gateway would otherwise refuse: a
    /// host (`mirror.corp`, `*.internal`) or an address range (`10.0.0.0/8`,
    /// `203.0.113.80`) for a team's own model server, mirror or package
    /// proxy. It opens no host by itself (the allowlist still decides), and
    /// this host's own addresses, the engine's bridge, link-local and cloud
    /// metadata addresses stay closed whatever it names (see the book's
    /// Egress page). Each request it lets through is recorded as such. The
    /// run's own (`--allow-internal`) is added to it.
    pub fn allow_internal(mut self, host_or_range: impl Into<String>) -> Self {
        self.allow_internal.push(host_or_range.into());
        self
    }

    /// What setup steps may reach instead of the agent's allowlist
    /// (`Egress::allow(["pypi.org", "files.pythonhosted.org"])`, or `Egress::Any`),
    /// so installs can run while turns stay confined.
    pub fn setup_network(mut self, egress: Egress) -> Self {
        self.setup_network = Some(egress);
        self
    }

    /// What `exec` checks may reach (by default nothing).
    pub fn check_network(mut self, egress: Egress) -> Self {
        self.check_network = Some(egress);
        self
    }

    /// Binds the secret `name` (declared with [`Environment::secret`] or
    /// [`Environment::secret_for_checks`]) to a host and header: the gateway
    /// swaps its real value in for the placeholder there and nowhere else.
    /// A checks-only secret is swapped only while a check runs.
    pub fn broker(mut self, name: impl Into<String>, broker: Broker) -> Self {
        self.brokers.push((name.into(), broker));
        self
    }

    /// A service started beside the sandbox, in its network namespace,
    /// reachable from it by the service's name (a database, a web server);
    /// it reaches nothing the sandbox does not. Engines that cannot run services
    /// (Kubernetes) refuse the eval in preflight.
    pub fn service(mut self, service: Service) -> Self {
        self.services.push(service);
        self
    }

    /// A mount in the sandbox: a volume made for it and shared by name with
    /// its services that mount it too (a sidecar's log, read-only here:
    /// `Mount::volume("logs", "/var/log/app").read_only()`), or a path of
    /// this host (`Mount::host`; writable, through a copy made for the
    /// sandbox). Volumes are made per sandbox, labelled with the run and
    /// removed with the sandbox. Engines that cannot mount (Kubernetes), or
    /// a host path on an engine elsewhere, refuse the eval in preflight.
    pub fn mount(mut self, mount: Mount) -> Self {
        self.mounts.push(mount);
        self
    }

    /// Every mount of the sandbox and of its services.
    pub(crate) fn all_mounts(&self) -> Vec<Mount> {
        self.mounts.iter().chain(self.services.iter().flat_map(|s| &s.mounts)).cloned().collect()
    }

    /// Whether this environment asks for a way out of the sandbox.
    pub(crate) fn wants_egress(&self) -> bool {
        !self.allow_egress.is_empty()
            || self.any_egress
            || self.setup_network.is_some()
            || self.check_network.is_some()
            || !self.brokers.is_empty()
    }

    /// Memory limit in bytes.
    pub fn memory(mut self, bytes: i64) -> Self {
        self.limits.memory_bytes = bytes;
        self
    }

    /// CPU limit (fractions allowed).
    pub fn cpus(mut self, cpus: f64) -> Self {
        self.limits.nano_cpus = (cpus * 1e9) as i64;
        self
    }

    /// Process limit.
    pub fn pids(mut self, pids: i64) -> Self {
        self.limits.pids = pids;
        self
    }

    /// What is wrong with this environment, found without starting anything.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for FileToWrite { path, .. } in &self.files {
            if path.is_empty() || path.split('/').any(|c| c == "..") {
                out.push(format!("file path `{path}` must be non-empty and must not use `..`"));
            }
        }
        if let WorkspaceDir::At(path) = &self.workspace_dir
            && (!path.starts_with('/')
                || path.trim_end_matches('/').is_empty()
                || path.split('/').any(|c| c == ".."))
        {
            out.push(format!(
                "workspace_dir `{path}` must be an absolute path other than `/`, without `..`"
            ));
        }
        for dir in &self.skills {
            if !dir.join("SKILL.md").is_file() {
                out.push(format!("skill directory {} has no SKILL.md", dir.display()));
            }
        }
        if let Some(ImageSpec::Dockerfile(path) | ImageSpec::DockerfileText { path, .. }) =
            &self.image
            && !path.is_file()
        {
            out.push(format!("Dockerfile {} does not exist", path.display()));
        }
        if let Some(Workspace::Dir { path, .. }) = &self.workspace
            && !path.is_dir()
        {
            out.push(format!("workspace directory {} does not exist", path.display()));
        }
        for (name, egress) in [
            ("allow_egress", Some(Egress::Allow(self.allow_egress.clone()))),
            ("setup_network", self.setup_network.clone()),
            ("check_network", self.check_network.clone()),
        ] {
            if let Some(Err(e)) = egress.map(|e| e.to_gateway(&[])) {
                out.push(format!("{name}: {e}"));
            }
        }
        for entry in &self.allow_internal {
            if let Err(e) = crate::egress::check_internal(entry) {
                out.push(format!("allow_internal: {e}"));
            }
        }
        for (name, broker) in &self.brokers {
            if !self.secrets.iter().any(|s| &s.name == name) {
                out.push(format!("broker for {name}: declare the secret with .secret(\"{name}\") or .secret_for_checks(\"{name}\") first"));
            }
            if let Err(e) = broker.binding(
                name,
                &crate::secrets::placeholder(name),
                String::from("check").into(),
            ) {
                out.push(format!("broker for {name}: {e}"));
            }
        }
        out.extend(crate::sandbox::service::problems(&self.services));
        out.extend(crate::sandbox::mount::problems("the sandbox", &self.mounts));
        if self.limits.memory_bytes < 6 << 20 {
            out.push(format!(
                "memory limit {} bytes is below Docker's minimum of 6 MiB",
                self.limits.memory_bytes
            ));
        }
        out
    }

    /// Whether anything is written into the workspace before the snapshot.
    pub(crate) fn prepares_workspace(&self) -> bool {
        self.workspace.is_some()
            || !self.files.is_empty()
            || self.rules.is_some()
            || !self.setup.is_empty()
            || self.context_summary
    }
}

/// Reading an environment back: what an environment function built, for the
/// tests of that function (the builder methods above take the nouns).
impl Environment {
    /// The image, when one is set (else the harness's, or `reeval/base`).
    pub fn image_spec(&self) -> Option<&ImageSpec> {
        self.image.as_ref()
    }

    /// The variables every command sees, in the order given.
    pub fn variables(&self) -> &[(String, String)] {
        &self.env
    }

    /// Where the workspace lives.
    pub fn workspace_location(&self) -> &WorkspaceDir {
        &self.workspace_dir
    }

    /// The setup steps, in order.
    pub fn setup_steps(&self) -> &[SetupStep] {
        &self.setup
    }

    /// Whether the prepared sandbox may be cached.
    pub fn setup_cache_policy(&self) -> &SetupCache {
        &self.setup_cache
    }

    /// The sandbox's memory, CPU and process limits.
    pub fn resource_limits(&self) -> &Limits {
        &self.limits
    }

    /// The services started beside the sandbox.
    pub fn services(&self) -> &[Service] {
        &self.services
    }

    /// The sandbox's own mounts (its services' are theirs).
    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// The values given to [`Environment::redact`].
    pub fn redacted_values(&self) -> impl Iterator<Item = &str> {
        self.redact.iter().map(crate::secrets::Redacted::value)
    }

    /// The directories in the sandbox whose skill folders go where the
    /// harness reads skills ([`Environment::skills_in_sandbox`]).
    pub fn skill_dirs_in_sandbox(&self) -> &[String] {
        &self.skills_in_sandbox
    }

    /// The MCP servers every harness must take, and those given where taken.
    pub fn mcp_servers(&self) -> (&[McpServer], &[McpServer]) {
        (&self.mcp, &self.mcp_where_taken)
    }

    /// What the agent (and the setup, unless it has its own) may reach:
    /// any public host, these hosts, or nothing.
    pub fn agent_egress(&self) -> Egress {
        match (self.any_egress, self.allow_egress.as_slice()) {
            (true, _) => Egress::Any,
            (false, []) => Egress::None,
            (false, hosts) => Egress::Allow(hosts.to_vec()),
        }
    }

    /// What checks may reach (`None`: nothing).
    pub fn check_egress(&self) -> Option<&Egress> {
        self.check_network.as_ref()
    }
}

/// What `[images]` mapped in an environment's image (`crate::image_map`):
/// the record's `imageMappedFrom`. Here, below the map that makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MappedFrom {
    /// The name the eval gave (`Image::from`, an install's base, a Harbor task's `docker_image`).
    Name(String),
    /// The names a Dockerfile's `FROM`s (or `COPY --from`s) gave, in the file's order.
    Dockerfile(Vec<String>),
}

impl MappedFrom {
    /// The record's `imageMappedFrom`: the name, or the Dockerfile's names `, `-separated.
    pub(crate) fn record(&self) -> String {
        match self {
            MappedFrom::Name(name) => name.clone(),
            MappedFrom::Dockerfile(names) => names.join(", "),
        }
    }

    /// What the image phase's detail says of it.
    pub(crate) fn detail(&self) -> String {
        match self {
            MappedFrom::Name(name) => format!("the eval named {name}; [images] maps it"),
            MappedFrom::Dockerfile(names) => {
                format!("its Dockerfile names {}; [images] maps them", names.join(", "))
            }
        }
    }
}
