//! A separate verifier environment (`[verifier] environment_mode =
//! "separate"`, `[verifier.environment]`, `tests/Dockerfile`,
//! `tests/docker-compose.yaml`), as Harbor 0.26 resolves one
//! (`models/task/verifier_mode.py`) and runs it (`trial/trial.py`,
//! `_run_separate_verifier`): after the agent, a second sandbox of the
//! attempt (`Ctx::start_sandbox`) that the agent never touched; the
//! declared artifacts and `/logs/artifacts` copied across to their paths;
//! the verifier run there, under its own network policy; the reward read
//! from it; the sandbox removed.
//!
//! Which environment, in Harbor's order:
//! 1. `[verifier.environment].docker_image`: that image, holding `/tests`
//!    itself (nothing copied in);
//! 2. `tests/Dockerfile` (and `tests/docker-compose.yaml` beside it): built
//!    with `tests/` as its context, holding `/tests` itself;
//! 3. otherwise a fresh copy of the task's environment (`environment/`: its
//!    image and compose services), `tests/` copied in as in shared mode.
//!
//! Its settings (limits, `env`, `workdir`, network) are
//! `[verifier.environment]`'s, or a copy of `[environment]`'s when it is
//! not given. The verifier's network: `[verifier].network_mode` when set,
//! else that environment's.

use std::path::Path;

use super::compose::{self, Compose};
use super::error::HarborError;
use super::task::{
    EnvironmentConfig, NetworkMode, StepConfig, TaskConfig, VerifierMode, phase_over, resolve_env,
};
use reeval_core::egress::Egress;
use reeval_core::environment::{Environment, Image, ImageSpec, WorkspaceDir};

/// The name of the verifier's sandbox in the record.
pub const SANDBOX: &str = "verifier";

/// A task's separate verifier environment, resolved when the task is read.
#[derive(Debug, Clone)]
pub struct SeparateVerifier {
    /// The verifier sandbox's environment: image, limits, env, services,
    /// mounts, network, and a setup step making `/logs/verifier` and `/logs/artifacts`.
    pub environment: Environment,
    /// Whether its image holds `/tests` (`tests/Dockerfile`, a `docker_image`
    /// of its own): `tests/` is then not copied in. The verifier runs in its
    /// sandbox's workspace: the environment's `workdir`, else its image's WORKDIR.
    pub bundled_tests: bool,
}

/// The separate verifier of the task (`step` `None`) or of one of its steps,
/// or `None` when that verifier shares the agent's sandbox. `image` and
/// `environment_compose` are the task's own.
///
/// A step's, as Harbor's `resolve_verifier_environment_definition`: its
/// mode is the step's own, else the task's; its settings are the step's
/// `[steps.verifier.environment]`, else `[verifier.environment]`, else a copy
/// of `[environment]`; its image is the first of the step's (its
/// `docker_image`, else `steps/<name>/tests/Dockerfile`), the task's (the
/// same, under `tests/`), else the task's environment.
///
/// # Errors
/// [`HarborError`] naming the task for what it asks that reeval cannot give,
/// a compose file that does not parse, or an unset `${VAR}`.
pub(super) fn read(
    task: &str,
    dir: &Path,
    config: &TaskConfig,
    step: Option<&StepConfig>,
    lookup: &dyn Fn(&str) -> Option<String>,
    image: &ImageSpec,
    environment_compose: &Compose,
) -> Result<Option<SeparateVerifier>, HarborError> {
    let mode = match step {
        Some(step) => config.step_verifier_mode(step),
        None => config.verifier_mode(),
    };
    if mode != VerifierMode::Separate {
        return Ok(None);
    }
    let unsupported =
        |what: &str| HarborError::Unsupported { task: task.to_string(), what: what.to_string() };
    let step_own = step.and_then(|s| s.verifier.environment.as_deref());
    let task_own = config.verifier.environment.as_deref();
    let (settings, table) = match (step, step_own, task_own) {
        (Some(s), Some(own), _) => (own.clone(), format!("steps.{}.verifier.environment", s.name)),
        (_, _, Some(own)) => (own.clone(), "verifier.environment".to_string()),
        (_, _, None) => (config.environment.clone(), "environment".to_string()),
    };
    refuse_unsupported(task, &settings, &table)?;
    let read_file = |path: &Path| {
        std::fs::read_to_string(path).map_err(|e| HarborError::Read {
            task: task.to_string(),
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    };
    // Harbor's candidates, the step's before the task's.
    let mut candidates = Vec::new();
    if let Some(step) = step {
        candidates.push((step_own, dir.join("steps").join(&step.name).join("tests")));
    }
    candidates.push((task_own, dir.join("tests")));
    let mut own_image = None;
    for (environment, tests) in candidates {
        if let Some(reference) = environment.and_then(|e| e.docker_image.clone()) {
            own_image = Some((Image::from(reference), Compose::default()));
            break;
        }
        if tests.join("Dockerfile").is_file() {
            let compose_file = tests.join("docker-compose.yaml");
            let compose = match compose_file.is_file() {
                true => compose::read(task, &tests, &read_file(&compose_file)?, lookup)?,
                false => Compose::default(),
            };
            own_image = Some((Image::dockerfile(tests.join("Dockerfile")), compose));
            break;
        }
        if tests.join("docker-compose.yaml").is_file() {
            return Err(unsupported(
                "a verifier environment from tests/docker-compose.yaml without tests/Dockerfile",
            ));
        }
    }
    let bundled_tests = own_image.is_some();
    let (image, compose) =
        own_image.unwrap_or_else(|| (image.clone(), environment_compose.clone()));
    let workspace = match settings.workdir.as_deref().map(|w| w.trim_end_matches('/')) {
        Some("") => WorkspaceDir::Default,
        Some(w) => WorkspaceDir::At(w.to_string()),
        None => WorkspaceDir::ImageWorkdir,
    };
    let mut env = Environment::new().image(image).workspace_dir(workspace);
    for (k, v) in &compose.main_env {
        env = env.env(k.clone(), v.clone());
    }
    for service in &compose.services {
        env = env.service(service.clone());
    }
    for mount in &compose.main_mounts {
        env = env.mount(mount.clone());
    }
    for (k, v) in resolve_env(task, &table, &settings.env, lookup)? {
        env = env.env(k, v);
    }
    if let Some(cpus) = settings.cpus {
        env = env.cpus(cpus);
    }
    if let Some(mb) = settings.memory_mb {
        env = env.memory((mb as i64) << 20);
    }
    let dirs = "/logs/verifier /logs/artifacts";
    env = env.setup(format!("mkdir -p {dirs} && chmod 777 {dirs}")).setup_cache(false);
    // The verifier's network: the step's, else the task's `[verifier]`, else its environment's.
    let step_verifier = step.map(|s| &s.verifier).filter(|v| v.network_mode.is_some());
    let verifier = step_verifier.unwrap_or(&config.verifier);
    let policy =
        phase_over(verifier.network_mode, &verifier.allowed_hosts, settings.baseline_network());
    env = match policy.mode {
        NetworkMode::Public => env.check_network(Egress::Any),
        NetworkMode::Allowlist => env.check_network(Egress::allow(policy.hosts)),
        NetworkMode::NoNetwork => env,
    };
    Ok(Some(SeparateVerifier { environment: env, bundled_tests }))
}

/// What an environment's settings ask that cannot be had here: another OS,
/// GPUs, TPUs (that task alone is refused).
pub(super) fn refuse_unsupported(
    task: &str,
    settings: &EnvironmentConfig,
    table: &str,
) -> Result<(), HarborError> {
    let unsupported = |what: String| HarborError::Unsupported { task: task.to_string(), what };
    if settings.os.as_deref().is_some_and(|os| !os.eq_ignore_ascii_case("linux")) {
        return Err(unsupported(format!("a task for an OS other than linux ([{table}].os)")));
    }
    if settings.gpus.is_some_and(|g| g > 0) {
        return Err(unsupported(format!("a task that asks for GPUs ([{table}].gpus)")));
    }
    if settings.tpu.is_some() {
        return Err(unsupported(format!("a task that asks for a TPU ([{table}].tpu)")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task_dir(toml: &str, tests_dockerfile: bool) -> std::path::PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("reeval-sepv-{}-{n}", std::process::id()));
        std::fs::create_dir_all(dir.join("tests")).unwrap();
        std::fs::write(dir.join("task.toml"), toml).unwrap();
        if tests_dockerfile {
            std::fs::write(dir.join("tests/Dockerfile"), "FROM v\nWORKDIR /check\n").unwrap();
        }
        dir
    }

    fn resolve(
        toml: &str,
        tests_dockerfile: bool,
    ) -> Result<Option<SeparateVerifier>, HarborError> {
        let dir = task_dir(toml, tests_dockerfile);
        let config = TaskConfig::parse("org/t", toml).unwrap();
        let image = Image::from("task-image");
        let got = read("org/t", &dir, &config, None, &|_| None, &image, &Compose::default());
        let _ = std::fs::remove_dir_all(&dir);
        got
    }

    #[test]
    fn a_steps_verifier_resolves_as_harbors() {
        let toml = "[verifier]\nenvironment_mode = \"separate\"\n\
            [[steps]]\nname = \"mine\"\n[steps.verifier]\nenvironment_mode = \"shared\"\n\
            [[steps]]\nname = \"inherits\"\n\
            [[steps]]\nname = \"own\"\n[steps.verifier]\nnetwork_mode = \"no-network\"\n\
            [steps.verifier.environment]\ncpus = 2\n";
        let dir = task_dir(toml, false);
        std::fs::create_dir_all(dir.join("steps/own/tests")).unwrap();
        std::fs::write(dir.join("steps/own/tests/Dockerfile"), "FROM v\n").unwrap();
        let config = TaskConfig::parse("org/t", toml).unwrap();
        let image = Image::from("task-image");
        let steps = config.steps.clone().unwrap();
        let of = |i: usize| {
            read("org/t", &dir, &config, Some(&steps[i]), &|_| None, &image, &Compose::default())
                .unwrap()
        };
        let (mine, inherits, own) = (of(0), of(1), of(2));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(mine.is_none(), "the step's own `shared` wins over the task's");
        let inherits = inherits.expect("the task's `separate`");
        assert_eq!(inherits.environment.image_spec(), Some(&Image::from("task-image")));
        assert!(!inherits.bundled_tests);
        let own = own.expect("an environment of its own implies separate");
        assert!(
            matches!(own.environment.image_spec(), Some(ImageSpec::Dockerfile(p)) if p.ends_with("steps/own/tests/Dockerfile"))
        );
        assert!(own.bundled_tests);
        assert_eq!(own.environment.resource_limits().nano_cpus, 2_000_000_000);
        assert_eq!(own.environment.check_egress(), None, "the step's verifier network");
        // A step's `shared` with an environment is refused, named, as the task's is.
        let e = TaskConfig::parse(
            "org/t",
            "[[steps]]\nname = \"s\"\n[steps.verifier]\nenvironment_mode = \"shared\"\n[steps.verifier.environment]\ncpus = 1",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("[steps.s.verifier].environment_mode"), "{e}");
    }

    #[test]
    fn the_verifier_environment_resolves_as_harbors() {
        assert!(resolve("", false).unwrap().is_none(), "shared by default");
        // A copy of the task's environment: its image, tests copied in, its network.
        let v = resolve(
            "[verifier]\nenvironment_mode = \"separate\"\n[environment]\ncpus = 1\nnetwork_mode = \"no-network\"\nenv = { A = \"b\" }",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(v.environment.image_spec(), Some(&Image::from("task-image")));
        assert!(!v.bundled_tests);
        assert_eq!(v.environment.resource_limits().nano_cpus, 1_000_000_000);
        assert!(v.environment.variables().contains(&("A".into(), "b".into())));
        assert_eq!(v.environment.check_egress(), None, "no way out");
        // tests/Dockerfile: built from tests/, holding /tests, its WORKDIR.
        let v = resolve("[verifier]\nenvironment_mode = \"separate\"", true).unwrap().unwrap();
        assert!(
            matches!(v.environment.image_spec(), Some(ImageSpec::Dockerfile(p)) if p.ends_with("tests/Dockerfile"))
        );
        assert!(v.bundled_tests);
        assert_eq!(*v.environment.workspace_location(), WorkspaceDir::ImageWorkdir, "its WORKDIR");
        assert_eq!(v.environment.check_egress(), Some(&Egress::Any), "public by default");
        // [verifier.environment] implies separate; its image and settings win.
        let v = resolve(
            "[verifier]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n[verifier.environment]\ndocker_image = \"grader:1\"\nworkdir = \"/g\"\nmemory = \"1G\"",
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(v.environment.image_spec(), Some(&Image::from("grader:1")));
        assert_eq!(v.environment.resource_limits().memory_bytes, 1 << 30);
        assert_eq!(*v.environment.workspace_location(), WorkspaceDir::At("/g".into()));
        assert_eq!(v.environment.check_egress(), Some(&Egress::allow(["pypi.org"])));
        // What cannot be had here is that task's refusal, named.
        let e = resolve("[verifier.environment]\ngpus = 1", false).unwrap_err().to_string();
        assert!(e.contains("org/t") && e.contains("[verifier.environment].gpus"), "{e}");
        let e = TaskConfig::parse(
            "org/t",
            "[verifier]\nenvironment_mode = \"shared\"\n[verifier.environment]\ncpus = 1",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("incompatible"), "{e}");
    }
}
