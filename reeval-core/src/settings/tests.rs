//! The settings' tests: precedence, the variables' words, env files and config files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::env_files::failing_line;
use super::*;

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| vars.iter().find(|(name, _)| *name == k).map(|(_, v)| v.to_string())
}

fn args(argv: &[&str]) -> Args {
    Args::parse(argv.iter().copied()).unwrap().unwrap()
}

/// Loads with no `reeval.toml` in play unless `REEVAL_CONFIG` names one.
fn load(argv: &[&str], vars: &[(&str, &str)]) -> Result<Settings, SettingsError> {
    Settings::load_with_default_config(
        &args(argv),
        &env(vars),
        Path::new("/nonexistent/reeval.toml"),
    )
}

fn config_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reeval-settings-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(FILE_NAME);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn environment_twins_apply_when_no_flag_is_given() {
    let s = load(
        &[],
        &[
            ("REEVAL_VERBOSE", "1"),
            ("REEVAL_HARNESS", "shell,other"),
            ("REEVAL_TRIALS", "3"),
            ("REEVAL_TIMEOUT", "90s"),
            ("REEVAL_RECORD_DIR", "/runs"),
            ("RUST_TEST_THREADS", "5"),
            ("NEXTEST_RUN_ID", "nextest-run"),
            ("NEXTEST", "1"),
            ("REEVAL_CACHE_DIR", "/cache"),
        ],
    )
    .unwrap();
    assert!(s.verbose);
    assert_eq!(s.harnesses, vec!["shell", "other"]);
    assert_eq!((s.trials, s.timeout, s.test_threads), (Some(3), Some(Duration::from_secs(90)), 5));
    assert_eq!(s.record_dir, PathBuf::from("/runs"));
    assert_eq!((s.run_id.as_str(), s.under_nextest), ("nextest-run", true));
    assert_eq!(s.cache_dir, PathBuf::from("/cache"));
    let c = s.run_config();
    assert_eq!(
        (
            c.settings.run_id.as_str(),
            c.settings.test_threads,
            c.settings.trials,
            c.settings.under_nextest,
            c.print
        ),
        ("nextest-run", 5, Some(3), true, false)
    );
}

/// The Kubernetes settings of the backend chosen, if it is Kubernetes.
fn kubernetes(s: &Settings) -> Option<KubernetesConfig> {
    match &s.backend {
        BackendConfig::Kubernetes(k) => Some(k.as_ref().clone()),
        _ => None,
    }
}

#[test]
fn the_backend_is_chosen_by_the_variable_over_the_file() {
    assert_eq!(kubernetes(&load(&[], &[]).unwrap()), None);
    let s =
        load(&[], &[("REEVAL_BACKEND", "kubernetes"), ("REEVAL_KUBE_NAMESPACE", "evals")]).unwrap();
    assert_eq!(kubernetes(&s).and_then(|k| k.namespace), Some("evals".into()));
    assert_eq!(kubernetes(&s.run_config().settings), kubernetes(&s));
    let e = load(&[], &[("REEVAL_BACKEND", "k8s")]).unwrap_err().to_string();
    assert!(e.contains("REEVAL_BACKEND") && e.contains("`docker` or `kubernetes`"), "{e}");

    let path = config_file(
        "kube",
        "backend = \"kubernetes\"\nnamespace = \"from-file\"\n[kubernetes]\nruntime_class = \"gvisor\"\nnode_selector = { pool = \"evals\" }\n",
    );
    let config = path.to_str().unwrap();
    let k = kubernetes(&load(&[], &[("REEVAL_CONFIG", config)]).unwrap()).expect("kubernetes");
    assert_eq!(k.namespace.as_deref(), Some("from-file"));
    assert_eq!(k.runtime_class.as_deref(), Some("gvisor"));
    assert_eq!(k.node_selector.get("pool").map(String::as_str), Some("evals"));
    // The variable wins: Docker after all.
    let s = load(&[], &[("REEVAL_CONFIG", config), ("REEVAL_BACKEND", "docker")]).unwrap();
    assert_eq!(kubernetes(&s), None);
    let bad = config_file("kube-typo", "[kubernetes]\nruntime_klass = \"x\"\n");
    let e = load(&[], &[("REEVAL_CONFIG", bad.to_str().unwrap())]).unwrap_err().to_string();
    assert!(e.contains("runtime_klass"), "{e}");
}

#[test]
fn flags_win_over_the_environment_and_the_file() {
    let path = config_file("flags", "record_dir = \"from-file\"\n");
    let config = path.to_str().unwrap();
    let vars = [
        ("REEVAL_CONFIG", config),
        ("REEVAL_TRIALS", "3"),
        ("REEVAL_HARNESS", "env"),
        ("REEVAL_RECORD_DIR", "/env"),
        ("RUST_TEST_THREADS", "5"),
    ];
    let s = load(
        &["--trials", "2", "--harness", "flag", "--record-dir", "/flag", "--test-threads", "1"],
        &vars,
    )
    .unwrap();
    assert_eq!(
        (s.trials, s.harnesses, s.record_dir, s.test_threads),
        (Some(2), vec!["flag".to_string()], PathBuf::from("/flag"), 1)
    );
    // The environment wins over the file; the file over the default.
    assert_eq!(load(&[], &vars).unwrap().record_dir, PathBuf::from("/env"));
    assert_eq!(
        load(&[], &[("REEVAL_CONFIG", config)]).unwrap().record_dir,
        path.parent().unwrap().join("from-file")
    );
    assert_eq!(
        load(&[], &[("CARGO_TARGET_DIR", "/t")]).unwrap().record_dir,
        PathBuf::from("/t/reeval/runs")
    );
    assert_eq!(load(&[], &[]).unwrap().config_file, None);
}

#[test]
fn compare_reads_arms_from_the_flag_or_the_environment_and_vs_pairs_harnesses() {
    let s = load(&["--compare", "control,with_skill"], &[]).unwrap();
    assert_eq!(s.compare, Some(Comparing::Variants("control".into(), "with_skill".into())));
    let s = load(&[], &[("REEVAL_COMPARE", "control, b")]).unwrap();
    assert_eq!(s.compare, Some(Comparing::Variants("control".into(), "b".into())));
    let s = load(&["--harness", "codex", "--vs", "claude-code"], &[]).unwrap();
    assert_eq!(s.compare, Some(Comparing::Harnesses("codex".into(), "claude-code".into())));
    assert_eq!(s.harnesses, ["codex", "claude-code"]);
    for bad in [
        &["--compare", "a,b,c"][..],
        &["--vs", "b"],
        &["--harness", "a", "--vs", "b", "--compare", "c,d"],
        &["--compare", "control,b", "--variant", "b"],
    ] {
        assert!(matches!(load(bad, &[]), Err(SettingsError::Usage(_))), "{bad:?}");
    }
    // Variant names resolve among the suite's, and an unknown one is named.
    let known = [crate::compare::Variant::new("with_skill", |env| env)];
    let s = load(&["--compare", "control,with_skil"], &[]).unwrap();
    let e = s.arms(&known).unwrap_err();
    assert!(e.contains("`with_skil`") && e.contains("control, with_skill"), "{e}");
    let s = load(&["--compare", "control,with_skill"], &[]).unwrap();
    let (arms, _) = s.arms(&known).unwrap();
    assert_eq!(arms.unwrap().names(), ["control".to_string(), "with_skill".to_string()]);
}

#[test]
fn verbose_reads_the_usual_words() {
    // `yes` used to be silently off.
    for (word, on) in [
        ("1", true),
        ("true", true),
        ("yes", true),
        ("YES", true),
        ("On", true),
        ("0", false),
        ("false", false),
        ("no", false),
        ("OFF", false),
        ("", false),
    ] {
        assert_eq!(
            load(&[], &[("REEVAL_VERBOSE", word)]).unwrap().verbose,
            on,
            "REEVAL_VERBOSE={word}"
        );
    }
    // The flag wins over a falsy variable.
    assert!(load(&["-v"], &[("REEVAL_VERBOSE", "0")]).unwrap().verbose);
}

#[test]
fn the_setup_caches_cap_reads_bytes_or_a_unit() {
    let cap =
        |v: &str| load(&[], &[("REEVAL_SETUP_CACHE_MAX", v)]).map(|s| s.setup_cache_max_bytes);
    assert_eq!(load(&[], &[]).unwrap().setup_cache_max_bytes, 20 << 30);
    assert_eq!(cap("1048576").unwrap(), 1 << 20);
    assert_eq!(cap("500 MiB").unwrap(), 500 << 20);
    assert_eq!(cap("2GiB").unwrap(), 2 << 30);
    let e = cap("lots").unwrap_err().to_string();
    assert!(e.contains("REEVAL_SETUP_CACHE_MAX") && e.contains("lots"), "{e}");
}

#[test]
fn a_variable_that_does_not_read_is_an_error_naming_it() {
    let e = load(&[], &[("REEVAL_VERBOSE", "maybe")]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to read REEVAL_VERBOSE=`maybe`: expected 1/0, true/false, yes/no or on/off"
    );
    // Even when the flag would override it.
    assert!(load(&["-v"], &[("REEVAL_VERBOSE", "maybe")]).is_err());
    for (name, value) in [
        ("REEVAL_TRIALS", "three"),
        ("REEVAL_TRIALS", "0"),
        ("RUST_TEST_THREADS", "0"),
        ("REEVAL_TIMEOUT", "soon"),
        ("REEVAL_JUDGE", "nope"),
    ] {
        let e = load(&[], &[(name, value)]).unwrap_err().to_string();
        assert!(e.starts_with(&format!("failed to read {name}=`{value}`: ")), "{e}");
    }
}

#[test]
fn the_judge_comes_from_the_file_else_the_environment() {
    let s = load(&[], &[("REEVAL_JUDGE", "openai:gpt-4.1")]).unwrap();
    assert_eq!(s.judge.as_deref(), Some("openai:gpt-4.1"));
    assert_eq!(s.run_config().settings.judge.as_deref(), Some("openai:gpt-4.1"));
    let path = config_file("judge", "judge = \"anthropic:claude-sonnet-4-5\"\n");
    let s =
        load(&[], &[("REEVAL_JUDGE", "openai:gpt-4.1"), ("REEVAL_CONFIG", path.to_str().unwrap())])
            .unwrap();
    assert_eq!(s.judge.as_deref(), Some("anthropic:claude-sonnet-4-5"));
}

#[test]
fn images_come_from_the_file_into_the_run() {
    assert!(load(&[], &[]).unwrap().run_config().settings.images.is_empty());
    let path =
        config_file("images", "[images]\n\"ubuntu:24.04\" = \"registry.internal/ubuntu:24.04\"\n");
    let s = load(&[], &[("REEVAL_CONFIG", path.to_str().unwrap())]).unwrap();
    let images = s.run_config().settings.images;
    assert_eq!(images.map("ubuntu:24.04").as_deref(), Some("registry.internal/ubuntu:24.04"));
    let bad = config_file("bad-images", "[images]\n\"ubuntu\" = \"no good\"\n");
    let e = load(&[], &[("REEVAL_CONFIG", bad.to_str().unwrap())]).unwrap_err().to_string();
    assert!(
        e.contains("[images]: the image `ubuntu` maps to `no good` is not an image name"),
        "{e}"
    );
}

#[test]
fn variants_declared_in_the_file_change_the_environment_and_bad_ones_are_named() {
    let path = config_file(
        "variants",
        "[variants.with_notes]\nfiles = { \"NOTES.md\" = \"notes.md\" }\nskills = [\"greet\"]\n\
         rules = \"Run the tests.\"\nenv = { FEATURE = \"1\" }\n",
    );
    let dir = path.parent().unwrap();
    std::fs::write(dir.join("notes.md"), "answer: 42\n").unwrap();
    std::fs::create_dir_all(dir.join("greet")).unwrap();
    std::fs::write(dir.join("greet/SKILL.md"), "# greet\n").unwrap();
    let s =
        load(&["--compare", "control,with_notes"], &[("REEVAL_CONFIG", path.to_str().unwrap())])
            .unwrap();
    let known = crate::compare::known_variants(&s).unwrap();
    let (arms, _) = s.arms(&known).unwrap();
    let crate::compare::Arms::Variants(_, with_notes) = arms.unwrap() else { panic!("variants") };
    let env = with_notes.apply_env(crate::Environment::new().rules("Be brief."));
    assert_eq!(env.files, [crate::sandbox::FileToWrite::new("NOTES.md", b"answer: 42\n", 0o644)]);
    assert_eq!(env.skills, [dir.join("greet")]);
    assert_eq!(env.rules.as_deref(), Some("Be brief.\n\nRun the tests."), "after the eval's own");
    assert_eq!(env.env, [("FEATURE".to_string(), "1".to_string())]);

    // What stops the run before anything starts, each naming the variant.
    for (name, text, says) in [
        (
            "v-missing",
            "[variants.a]\nfiles = { \"X\" = \"nope.md\" }\n",
            "[variants.a]: failed to find",
        ),
        ("v-skill", "[variants.b]\nskills = [\".\"]\n", "it needs a SKILL.md"),
        ("v-control", "[variants.control]\nrules = \"x\"\n", "the arm without a change"),
        ("v-name", "[variants.\"a b\"]\nrules = \"x\"\n", "letters, digits"),
        ("v-key", "[variants.c]\nfile = { }\n", "unknown field `file`"),
    ] {
        let bad = config_file(name, text);
        let e = load(&[], &[("REEVAL_CONFIG", bad.to_str().unwrap())]).unwrap_err().to_string();
        assert!(e.contains(says), "{name}: {e}");
    }
}

#[test]
fn env_files_come_from_the_file_then_the_environment() {
    let path = config_file("envfile", "env_file = \"keys.env\"\n");
    let s =
        load(&[], &[("REEVAL_ENV_FILE", "/other.env"), ("REEVAL_CONFIG", path.to_str().unwrap())])
            .unwrap();
    assert_eq!(s.env_file, Some(path.parent().unwrap().join("keys.env")));
    assert_eq!(s.fallback_env_file, Some(PathBuf::from("/other.env")));
    let c = s.run_config();
    assert_eq!(
        (c.settings.env_file, c.settings.fallback_env_file),
        (s.env_file, s.fallback_env_file)
    );
}

#[test]
fn env_file_and_retries_flags_win_over_their_variables() {
    let s = load(
        &["--env-file", "/flag.env", "--retries", "0"],
        &[("REEVAL_ENV_FILE", "/other.env"), ("REEVAL_RETRIES", "5")],
    )
    .unwrap();
    assert_eq!(s.fallback_env_file, Some(PathBuf::from("/flag.env")));
    assert_eq!(s.infra_retries, 0);
    let s = load(&[], &[("REEVAL_RETRIES", "5")]).unwrap();
    assert_eq!(s.infra_retries, 5);
}

fn env_file(name: &str, text: &str) -> PathBuf {
    let path = config_file(name, "").with_file_name(format!("{name}.env"));
    std::fs::write(&path, text).unwrap();
    path
}

fn no_host(_: &str) -> Option<String> {
    None
}

#[test]
fn env_files_are_read_with_dotenv_syntax_and_in_order() {
    let first = env_file(
        "first",
        "# keys\nexport A=from-first\nB=\"two words\"\nC='${NOT_EXPANDED}'\nD=\nA=first-again\n",
    );
    let fallback = env_file("fallback", "A=from-fallback\nE=only-in-fallback\n");
    let s = SecretLookup::load(Some(&first), Some(&fallback)).unwrap().with_host(no_host);
    assert_eq!(
        s.get("A").as_deref(),
        Some("first-again"),
        "the configured file wins; within it the last value"
    );
    assert_eq!(s.get("B").as_deref(), Some("two words"));
    assert_eq!(s.get("C").as_deref(), Some("${NOT_EXPANDED}"));
    assert_eq!(s.get("D"), None, "empty counts as unset");
    assert_eq!(s.get("E").as_deref(), Some("only-in-fallback"));
    // The host environment wins over every file.
    let s = s.with_host(|k| (k == "A").then(|| "from-host".to_string()));
    assert_eq!(s.get("A").as_deref(), Some("from-host"));
    assert!(!format!("{s:?}").contains("first-again"), "debug output holds no value");
}

#[test]
fn a_missing_env_file_is_an_error_naming_it() {
    let e = SecretLookup::load(None, Some(Path::new("/nonexistent/keys.env"))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "failed to read the env file /nonexistent/keys.env (--env-file or REEVAL_ENV_FILE): it does not exist"
    );
    let e = SecretLookup::load(Some(Path::new("/nonexistent/suite.env")), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("/nonexistent/suite.env (env_file)"), "{e}");
}

#[test]
fn a_malformed_line_is_an_error_naming_file_and_line_but_not_the_value() {
    let path = env_file("malformed", "GOOD=1\n\nAPI_KEY=sk-secret value\n");
    let e = SecretLookup::load(Some(&path), None).unwrap_err().to_string();
    assert!(
        e.contains(&path.display().to_string()) && e.contains("line 3 (`API_KEY`) does not parse"),
        "{e}"
    );
    assert!(!e.contains("sk-secret"), "the value stays out of the message: {e}");
    assert_eq!(failing_line("A=1\nB='open\nC=2\n"), Some(2), "a quote left open");
    assert_eq!(failing_line("A=\"multi\nline\"\nB=x y\n"), Some(3), "after a value over two lines");
    assert_eq!(failing_line("# only = a comment\nA=1\n"), None);
}

#[test]
fn a_missing_or_malformed_config_file_is_an_error_naming_it() {
    let e = load(&[], &[("REEVAL_CONFIG", "/nonexistent/suite.toml")]).unwrap_err().to_string();
    assert!(e.starts_with("failed to read the suite config /nonexistent/suite.toml"), "{e}");
    let path = config_file("malformed", "judge = \"openai:gpt-4.1\"\nrecord_dir = 3\n");
    let e = load(&[], &[("REEVAL_CONFIG", path.to_str().unwrap())]).unwrap_err().to_string();
    assert!(
        e.contains(&path.display().to_string())
            && e.contains("line 2")
            && e.contains("`record_dir`"),
        "{e}"
    );
}

#[test]
fn internal_addresses_and_the_upstream_proxy_come_from_flag_variable_or_file() {
    use crate::egress::UpstreamProxySetting;
    let file = config_file(
        "network",
        "allow_internal = [\"10.0.0.0/8\", \"*.corp\"]\nupstream_proxy = \"http://proxy.corp:3128\"\n",
    );
    let file_var = [("REEVAL_CONFIG", file.to_str().unwrap())];
    let s = load(&[], &file_var).unwrap();
    assert_eq!(s.allow_internal, ["10.0.0.0/8", "*.corp"]);
    assert_eq!(s.upstream_proxy, UpstreamProxySetting::Url("http://proxy.corp:3128".into()));
    let c = s.run_config();
    assert_eq!(c.egress.allow_internal, ["10.0.0.0/8", "*.corp"]);
    let s = load(
        &[],
        &[
            file_var[0],
            ("REEVAL_ALLOW_INTERNAL", "203.0.113.80"),
            ("REEVAL_UPSTREAM_PROXY", "none"),
        ],
    )
    .unwrap();
    assert_eq!(
        (s.allow_internal.as_slice(), &s.upstream_proxy),
        (&["203.0.113.80".to_string()][..], &UpstreamProxySetting::Direct)
    );
    let s =
        load(&["--allow-internal", "mirror.corp,fd12::/48", "--upstream-proxy", "none"], &file_var)
            .unwrap();
    assert_eq!(s.allow_internal, ["mirror.corp", "fd12::/48"]);
    // Without any: the runner's own proxy variables, and nothing opened.
    let s = load(&[], &[]).unwrap();
    assert_eq!(
        (s.allow_internal.len(), &s.upstream_proxy),
        (0, &UpstreamProxySetting::Environment)
    );

    let e = load(&[], &[("REEVAL_ALLOW_INTERNAL", "mirror.corp:443")]).unwrap_err().to_string();
    assert!(e.starts_with("failed to read REEVAL_ALLOW_INTERNAL=`mirror.corp:443`"), "{e}");
    let e = load(&["--upstream-proxy", "socks5://p:1080"], &[]).unwrap_err().to_string();
    assert!(e.contains("--upstream-proxy") && e.contains("only http://"), "{e}");
    let bad = config_file("badnetwork", "allow_internal = [\"10.0.0.0/33\"]\n");
    let e = load(&[], &[("REEVAL_CONFIG", bad.to_str().unwrap())]).unwrap_err().to_string();
    assert!(e.contains("key `allow_internal`") && e.contains("10.0.0.0/33"), "{e}");
}

#[test]
fn one_row_gives_a_setting_its_flag_variable_key_and_default() {
    // `prestart` is spelled once, in its row of the table: each source reaches the same field.
    let file = config_file("prestart", "prestart = 3\n");
    let file_var = ("REEVAL_CONFIG", file.to_str().unwrap());
    assert_eq!(load(&[], &[]).unwrap().prestart, 0, "the default");
    assert_eq!(load(&[], &[file_var]).unwrap().prestart, 3, "reeval.toml");
    assert_eq!(load(&[], &[file_var, ("REEVAL_PRESTART", "2")]).unwrap().prestart, 2);
    let s = load(&["--prestart", "1"], &[file_var, ("REEVAL_PRESTART", "2")]).unwrap();
    assert_eq!(s.prestart, 1, "the flag over the variable and the file");
    assert_eq!(s.run_config().settings.prestart, 1, "and into the run's config");
    let e = load(&[], &[("REEVAL_PRESTART", "-1")]).unwrap_err().to_string();
    assert_eq!(e, "failed to read REEVAL_PRESTART=`-1`: expected a whole number");
    let bad = config_file("prestart-bad", "prestart = \"3\"\n");
    let e = load(&[], &[("REEVAL_CONFIG", bad.to_str().unwrap())]).unwrap_err().to_string();
    assert!(e.ends_with("line 1: `prestart` must be a whole number, got the string \"3\""), "{e}");
}
