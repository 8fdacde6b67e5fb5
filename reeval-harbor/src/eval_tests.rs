//! eval.rs's tests.

use super::*;

fn task_with(toml: &str) -> HarborTask {
    task_looking_up(toml, &|_| None)
}

fn task_looking_up(toml: &str, lookup: &dyn Fn(&str) -> Option<String>) -> HarborTask {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("reeval-harbor-net-{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("task.toml"), toml).unwrap();
    std::fs::write(dir.join("instruction.md"), "x").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM x\nWORKDIR /app\n").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "true").unwrap();
    let task = HarborTask::read(&dir, lookup).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    task
}

#[test]
fn what_the_host_gives_under_a_credentials_name_is_redacted_in_the_run() {
    let toml = "[environment]\nenv = { HOME_DIR = \"${HOME_DIR}\", API_KEY = \"literal-key\" }\n\
                [verifier]\nenv = { JUDGE = \"${OPENAI_API_KEY}\" }\n";
    let lookup = |name: &str| Some(format!("value-of-{name}"));
    let mut task = task_looking_up(toml, &lookup);
    task.agent_env = vec![
        ("GH_TOKEN".into(), "ghp-from-the-flag".into()),
        ("GIT_AUTHOR_NAME".into(), "Task Author".into()),
    ];
    let env = task.environment();
    let mut redacted: Vec<&str> = env.redacted_values().collect();
    redacted.sort();
    // Read from the host as OPENAI_API_KEY (under another name in the task),
    // a variable named as a key, and `--ae`'s token; not the home directory.
    assert_eq!(redacted, ["ghp-from-the-flag", "literal-key", "value-of-OPENAI_API_KEY"]);
}

#[test]
fn a_debug_print_names_the_variables_not_their_resolved_values() {
    let toml = "[environment]\nenv = { A = \"${HOST_A}\" }\n\
                [verifier]\nenv = { JUDGE_KEY = \"${HOST_KEY}\" }\n\
                [solution]\nenv = { S = \"${HOST_A}\" }\n";
    let lookup = |name: &str| Some(format!("sk-resolved-{name}-0123456789"));
    let task = task_looking_up(toml, &lookup);
    assert_eq!(task.verifier_env[0].1, "sk-resolved-HOST_KEY-0123456789", "resolved");
    let shown = format!("{task:?}");
    assert!(!shown.contains("sk-resolved"), "{shown}");
    assert!(shown.contains("JUDGE_KEY=…") && shown.contains("\"A=…\""), "{shown}");
}

#[test]
fn skills_dir_goes_to_the_agent_as_skills_in_the_sandbox() {
    let task = task_with("[environment]\nskills_dir = \"/opt/skills\"\n");
    assert_eq!(task.environment().skill_dirs_in_sandbox(), ["/opt/skills"]);
    let task = task_with("[environment]\ncpus = 1\n");
    assert!(task.environment().skill_dirs_in_sandbox().is_empty());
}

#[test]
fn the_workspace_is_the_workdir_given_to_the_agent_in_a_layer() {
    let task = task_with("");
    let env = task.environment();
    assert_eq!(*env.setup_cache_policy(), reeval_core::environment::SetupCache::Off);
    assert!(env.setup_steps().is_empty(), "no setup step: the log directories are a layer");
    assert_eq!(*env.workspace_location(), WorkspaceDir::ImageWorkdir);
    let Some(ImageSpec::Layered { base, steps }) = env.image_spec() else {
        panic!("the change of owner is a layer: {:?}", env.image_spec())
    };
    assert_eq!(**base, task.image);
    assert_eq!(
        steps[0],
        r#"d="$PWD"; if [ "$d" != / ]; then mkdir -p "$d" && chown -R 1000:1000 "$d"; fi"#
    );
    // A workdir the task names is the workspace, and the one given away.
    let env = task_with("[environment]\nworkdir = \"/srv/app/\"").environment();
    assert_eq!(*env.workspace_location(), WorkspaceDir::At("/srv/app".into()));
    assert!(
        matches!(env.image_spec(), Some(ImageSpec::Layered { steps, .. }) if steps[0].starts_with("d='/srv/app';")),
        "{:?}",
        env.image_spec()
    );
    assert_eq!(
        *task_with("[environment]\nworkdir = \"/\"").environment().workspace_location(),
        WorkspaceDir::Default
    );
}

#[test]
fn a_relative_workdir_is_refused_naming_the_task() {
    let dir = std::env::temp_dir().join(format!("reeval-harbor-relwd-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(
        dir.join("task.toml"),
        "[task]\nname = \"org/rel\"\n[environment]\nworkdir = \"app\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("instruction.md"), "x").unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM x\n").unwrap();
    std::fs::write(dir.join("tests/test.sh"), "true").unwrap();
    let e = HarborTask::read(&dir, &|_| None).unwrap_err().to_string();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(e.contains("org/rel") && e.contains("must be an absolute path"), "{e}");
}

#[test]
fn networks_map_onto_the_gateway() {
    // Harbor's default is public: any host for the agent, setup and verifier.
    let env = task_with("").environment();
    assert_eq!(env.agent_egress(), Egress::Any);
    assert_eq!(env.check_egress(), Some(&Egress::Any));
    let env = task_with(
        "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\", \"*.example.com\"]",
    )
    .environment();
    assert_eq!(env.agent_egress(), Egress::allow(["pypi.org", "*.example.com"]));
    assert_eq!(env.check_egress(), Some(&Egress::allow(["pypi.org", "*.example.com"])));
    let env = task_with("[environment]\nnetwork_mode = \"no-network\"").environment();
    assert_eq!((env.agent_egress(), env.check_egress()), (Egress::None, None), "no way out at all");
    // A phase's own policy wins over the environment's.
    let env = task_with(
        "[environment]\nnetwork_mode = \"no-network\"\n[verifier]\nnetwork_mode = \"public\"",
    )
    .environment();
    assert_eq!(env.agent_egress(), Egress::None);
    assert_eq!(env.check_egress(), Some(&Egress::Any));
    // An IP literal is a host; a CIDR range is no gateway pattern: refused before anything starts.
    let env = task_with(
        "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"192.0.2.1\", \"10.0.0.0/8\"]",
    )
    .environment();
    let problems = env.problems().join("\n");
    assert!(problems.contains("10.0.0.0/8") && !problems.contains("192.0.2.1"), "{problems}");
}

#[test]
fn limits_env_and_timeouts_come_from_the_task() {
    let mut task = task_with(
        "[agent]\ntimeout_sec = 10\n[verifier]\ntimeout_sec = 20\n[environment]\ncpus = 1.5\nmemory_mb = 512\nenv = { A = \"${NOPE:-d}\" }",
    );
    task.agent_timeout_multiplier = 2.0;
    assert_eq!(task.agent_timeout(), Some(Duration::from_secs(20)));
    assert_eq!(task.verifier_timeout(), Duration::from_secs(20));
    let env = task.environment();
    assert_eq!(env.resource_limits().nano_cpus, 1_500_000_000);
    assert_eq!(env.resource_limits().memory_bytes, 512 << 20);
    assert!(env.variables().contains(&("A".to_string(), "d".to_string())));
    let eval = task.into_eval();
    assert_eq!(eval.options().timeout, Duration::from_secs(20 + 20 + 120));
}

#[test]
fn the_layer_makes_the_log_directories() {
    let env = task_with("").environment();
    let Some(ImageSpec::Layered { steps, .. }) = env.image_spec() else { panic!() };
    assert_eq!(
        steps[1],
        "mkdir -p /logs/agent /logs/verifier /logs/artifacts && chmod 777 /logs/agent /logs/verifier /logs/artifacts"
    );
}
