use super::*;

#[test]
fn deprecated_keys_are_mapped_and_unknown_keys_ignored() {
    let c = TaskConfig::parse(
        "t",
        r#"
        version = "1.0"
        unknown_top = 3
        [task]
        name = "org/hello"
        keywords = ["a", "b"]
        other = "x"
        [environment]
        memory = "2G"
        allow_internet = false
        cpus = 1
        [verifier]
        env = { K = "v" }
        "#,
    )
    .unwrap();
    assert_eq!(c.schema_version.as_deref(), Some("1.0"));
    assert_eq!(c.environment.memory_mb, Some(2048));
    assert_eq!(c.environment.cpus, Some(1.0));
    assert_eq!(c.baseline_network().mode, NetworkMode::NoNetwork);
    assert_eq!(c.verifier.timeout_sec, 600.0);
    assert_eq!(c.task.unwrap().keywords, ["a", "b"]);
}

#[test]
fn allow_internet_yields_to_network_mode() {
    let c = TaskConfig::parse(
        "t",
        "[environment]\nallow_internet = false\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]",
    )
    .unwrap();
    assert_eq!(c.baseline_network().mode, NetworkMode::Allowlist);
    assert_eq!(c.baseline_network().hosts, ["pypi.org"]);
}

#[test]
fn conflicting_memory_is_an_error_naming_the_task() {
    let e = TaskConfig::parse("org/x", "[environment]\nmemory = \"1G\"\nmemory_mb = 5")
        .unwrap_err()
        .to_string();
    assert!(e.contains("org/x") && e.contains("conflicting"), "{e}");
}

#[test]
fn templates_resolve_from_the_lookup() {
    let env = BTreeMap::from([
        ("A".to_string(), "${HOST_A}".to_string()),
        ("B".to_string(), "${NOPE:-fallback}".to_string()),
        ("C".to_string(), "literal ${NOT} a template".to_string()),
        ("D".to_string(), "${EMPTY:-x}".to_string()),
    ]);
    let lookup = |v: &str| match v {
        "HOST_A" => Some("a".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    };
    let got = resolve_env("t", "verifier", &env, lookup).unwrap();
    assert_eq!(
        got,
        [
            ("A".into(), "a".into()),
            ("B".into(), "fallback".into()),
            ("C".into(), "literal ${NOT} a template".into()),
            ("D".into(), String::new()),
        ]
    );
    let missing = BTreeMap::from([("K".to_string(), "${MISSING_VAR}".to_string())]);
    let e = resolve_env("org/x", "solution", &missing, |_| None).unwrap_err().to_string();
    assert!(
        e.starts_with("failed to resolve") && e.contains("org/x") && e.contains("MISSING_VAR"),
        "{e}"
    );
}

#[test]
fn steps_parse_and_their_rewards_combine_as_harbor_combines_them() {
    let c = TaskConfig::parse(
        "t",
        "multi_step_reward_strategy = \"final\"\n[[steps]]\nname = \"one\"\nmin_reward = 0.5\n\
         [[steps]]\nname = \"two\"\nmin_reward = { a = 1.0 }\n[steps.verifier]\nenv = { K = \"v\" }\n",
    )
    .unwrap();
    let steps = c.steps.unwrap();
    assert_eq!(steps[0].min_reward, Some(MinReward::Reward(0.5)));
    assert_eq!(steps[1].verifier.timeout_sec, 600.0, "Harbor's default, not the task's");
    assert_eq!(c.multi_step_reward_strategy, Some(RewardStrategy::Final));
    let r = |pairs: &[(&str, f64)]| -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    };
    let steps = [Some(r(&[("reward", 1.0), ("x", 1.0)])), None, Some(r(&[("reward", 0.0)]))];
    assert_eq!(RewardStrategy::Mean.combine(&steps), Some(r(&[("reward", 0.5), ("x", 0.5)])));
    assert_eq!(RewardStrategy::Final.combine(&steps), Some(r(&[("reward", 0.0)])));
    assert_eq!(RewardStrategy::Final.combine(&steps[..2]), None);
    assert_eq!(RewardStrategy::Mean.combine(&[None]), None);
    assert_eq!(MinReward::Reward(0.5).failure(Some(&r(&[("reward", 0.5)]))), None);
    assert!(MinReward::Keys(r(&[("a", 1.0)])).failure(Some(&r(&[]))).is_some());
    assert!(MinReward::Reward(0.0).failure(None).unwrap().contains("-inf"));
}

#[test]
fn sizes_parse_as_harbor_parses_them() {
    assert_eq!(size_to_mb("1.5G").unwrap(), 1536);
    assert_eq!(size_to_mb(" 512m ").unwrap(), 512);
    assert!(size_to_mb("12").is_err());
}
