//! Every option of a run, declared once, in one row each: its field, its
//! flag, its environment variable, its `reeval.toml` key, the kind of value
//! it takes, its default and its help (the row's grammar: `generate.rs`).
//! From this list come the flag parser (`parse.rs`), the variables' and
//! `reeval.toml`'s reading (`value.rs`), the fields of [`Args`], [`Layer`]
//! and [`Settings`] with their merge, `--help` and the tables of
//! docs/options.md ([`super::render`]). A new option is one row here (and,
//! for a new type of value, its `Value` impl in `value.rs`).
//!
//! The options merged by hand (mod.rs: the judge, the env files, the
//! comparison, the partition, the backend, prices, images and variants)
//! have their `Settings` fields and defaults in `by_hand` below.

use std::path::PathBuf;
use std::time::Duration;

use super::generate::{options, setting_default, setting_type};
use super::given::{Given, UsageError};
pub use super::opt::{Group, Kind, Opt};
use Group::{Accepted, Libtest, NoFlag, Reeval};

/// Reads (and checks) a flag's value and drops it: libtest flags reeval accepts.
const IGNORE_VALUE: SetFlag = |_, v| v.text().map(drop);
const IGNORE: SetFlag = |_, _| Ok(());

/// `--format`: libtest's output format.
const FORMAT_SET: SetFlag = |a, v| {
    let format = v.text()?;
    a.json = format == "json";
    a.terse = match format.as_str() {
        "terse" | "json" => true,
        "pretty" => false,
        other => {
            return Err(UsageError(format!(
                "unknown format `{other}`; expected pretty, terse or json"
            )));
        }
    };
    Ok(())
};

options! {
    defaults(env);
    by_hand {
        /// The suite-wide judge of evals that name none: `reeval.toml`'s `judge`, else `REEVAL_JUDGE`.
        pub judge: Option<String> = None,
        /// `reeval.toml`'s `env_file`: secrets and credentials for preflight.
        pub env_file: Option<PathBuf> = None,
        /// `--env-file`, else `REEVAL_ENV_FILE`: read for names that neither the host nor `env_file` sets.
        pub fallback_env_file: Option<PathBuf> = super::vars::Vars(env).path(&ENV_FILE),
        /// Where git workspaces are cached.
        pub cache_dir: PathBuf = super::vars::cache_dir_or_default(super::vars::Vars(env).path(&CACHE_DIR)),
        /// The run id (`NEXTEST_RUN_ID` under nextest, so its processes share a run).
        pub run_id: String = super::vars::run_id_or_new(super::vars::Vars(env).get(&RUN_ID)),
        /// Whether cargo-nextest runs this process (one eval per process).
        pub under_nextest: bool = env(UNDER_NEXTEST.var()).is_some(),
        /// Which backend runs the sandboxes, with its settings (`backend`,
        /// `engines`, `[kubernetes]`, `namespace`; `REEVAL_BACKEND`, …).
        pub backend: crate::sandbox::BackendConfig = Default::default(),
        /// Image names mapped to others (`[images]` in `reeval.toml`).
        pub images: crate::image_map::ImageMap = Default::default(),
        /// Variants declared in `reeval.toml` (`[variants.NAME]`), their paths resolved.
        pub variants: std::collections::BTreeMap<String, super::DeclaredVariant> = Default::default(),
        /// The config file that was read, if any.
        pub config_file: Option<PathBuf> = None,
        /// Prices per model.
        pub prices: crate::prices::PriceTable = Default::default(),
        /// The two arms of a comparison (`--compare`, `REEVAL_COMPARE`, or `--harness a --vs b`).
        pub compare: Option<super::Comparing> = None,
        /// The part of a partitioned run (`--partition`, `REEVAL_PARTITION`): only its cells run.
        pub partition: Option<super::Partition> = None,
    }

    /// List instead of run.
    LIST [list: bool] => Opt::new("list", Libtest)
        .long("list")
        .help("list evals instead of running them (no Docker, no network)");
    /// `--format terse` (or `json`, which lists like terse).
    FORMAT [terse: bool] => Opt::new("output format", Libtest)
        .long("format")
        .takes("pretty|terse|json")
        .help("output format; json: libtest's JSON event stream (with --list: terse)")
        .more("(see [Records and outputs][records])"),
        sets FORMAT_SET;
    /// Match filters exactly.
    EXACT [exact: bool] => Opt::new("exact", Libtest).long("exact").help("filters match names exactly");
    /// Substrings to skip.
    SKIP [skip: Vec<String>] => Opt::new("skip", Libtest)
        .long("skip")
        .takes("FILTER")
        .help("skip evals whose name contains FILTER (repeatable)");
    /// Only ignored evals.
    IGNORED [ignored: bool] => Opt::new("ignored", Libtest)
        .long("ignored")
        .help("run only evals marked ignore");
    /// Ignored evals too.
    INCLUDE_IGNORED [include_ignored: bool] => Opt::new("include ignored", Libtest)
        .long("include-ignored")
        .help("run ignored evals too");
    /// Attempts at once.
    TEST_THREADS test_threads: usize =
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2)
        => Opt::new("test threads", Libtest)
        .long("test-threads")
        .takes("N")
        .env("RUST_TEST_THREADS")
        .key("concurrency")
        .kind(Kind::Count)
        .defaults_to("the cores")
        .help("attempts run at once")
        .more("(default: the machine's cores, `std::thread::available_parallelism`)");
    /// `--bench`: run nothing (evals are not benchmarks).
    BENCH [bench: bool] => Opt::new("bench", Libtest)
        .long("bench")
        .help("runs nothing (evals are not benchmarks)");
    /// `--nocapture`: show the evals' own output as it is printed (it is kept in the records either way).
    NOCAPTURE [nocapture: bool] => Opt::new("nocapture", Libtest)
        .long("nocapture")
        .env("RUST_TEST_NOCAPTURE")
        .kind(Kind::Presence)
        .defaults_to("no")
        .help("show the evals' own output (println!) as it is printed, not only under a failure and in the record");
    /// `--no-capture`: as `--nocapture`.
    NO_CAPTURE => Opt::new("no capture", Libtest).long("no-capture").help("as --nocapture"),
        sets |a, _| {
            a.nocapture = true;
            Ok(())
        };
    /// libtest's `--show-output`, accepted.
    SHOW_OUTPUT => Opt::new("show output", Accepted).long("show-output"), sets IGNORE;
    /// libtest's `--test`, accepted.
    TEST => Opt::new("test", Accepted).long("test"), sets IGNORE;
    /// Less output.
    QUIET [quiet: bool] => Opt::new("quiet", Accepted).short('q').long("quiet");
    /// libtest's `--color`, accepted.
    COLOR => Opt::new("color", Accepted).long("color").takes("WHEN"), sets IGNORE_VALUE;
    /// libtest's `--logfile`, accepted.
    LOGFILE => Opt::new("logfile", Accepted).long("logfile").takes("PATH"), sets IGNORE_VALUE;
    /// libtest's `-Z`, accepted.
    UNSTABLE => Opt::new("unstable", Accepted).short('Z').takes("FLAG"), sets IGNORE_VALUE;

    /// Print every phase.
    VERBOSE verbose: bool = false => Opt::new("verbose", Reeval)
        .short('v')
        .long("verbose")
        .env("REEVAL_VERBOSE")
        .kind(Kind::YesNo)
        .defaults_to("off")
        .help("print every phase of every attempt")
        .more("and `turn N started: \"<first 60 chars>\"`, one line each");
    /// Harnesses replacing every eval's own (empty: the evals' own).
    HARNESS harnesses: Vec<String> = Vec::new() => Opt::new("harnesses", Reeval)
        .long("harness")
        .takes("SPEC")
        .env("REEVAL_HARNESS")
        .key("harness")
        .kind(Kind::OneOrList("harness spec", "shell"))
        .defaults_to("the evals' own")
        .help("run every eval with this harness, repeatable");
    /// Trials replacing every eval's own.
    TRIALS trials: u32 => Opt::new("trials", Reeval)
        .long("trials")
        .takes("N")
        .env("REEVAL_TRIALS")
        .key("trials")
        .kind(Kind::Count)
        .defaults_to("the evals' own")
        .help("trials per eval × harness");
    /// Budget replacing every eval's own.
    TIMEOUT timeout: Duration => Opt::new("timeout", Reeval)
        .long("timeout")
        .takes("DURATION")
        .env("REEVAL_TIMEOUT")
        .key("timeout")
        .kind(Kind::Duration)
        .defaults_to("the evals' own")
        .help("budget per attempt, e.g. 10m, 90s");
    /// Runs are recorded under `<record_dir>/<run_id>/`.
    RECORD_DIR record_dir: PathBuf = super::vars::default_record_dir_from(env)
        => Opt::new("record dir", Reeval)
        .long("record-dir")
        .takes("DIR")
        .env("REEVAL_RECORD_DIR")
        .key("record_dir")
        .kind(Kind::Path)
        .defaults_to("`$CARGO_TARGET_DIR/reeval/runs`, else `target/reeval/runs`")
        .help("where runs are recorded");
    /// Only evals with one of these tags.
    TAGS tags: Vec<String> = Vec::new() => Opt::new("tags", Reeval)
        .long("tag")
        .takes("NAME")
        .env("REEVAL_TAGS")
        .kind(Kind::List("tags"))
        .defaults_to("every eval")
        .help("only evals with this tag, repeatable");
    /// The pass rate at which a cell passes, replacing the evals' own.
    MIN_PASS_RATE min_pass_rate: f64 => Opt::new("min pass rate", Reeval)
        .long("min-pass-rate")
        .takes("R")
        .env("REEVAL_MIN_PASS_RATE")
        .key("min_pass_rate")
        .kind(Kind::Rate)
        .defaults_to("the evals' own, else every trial must pass")
        .help("a cell passes at this pass rate (0..1), replacing the evals' own");
    /// `--rerun-failed`: only the cells that failed or had infra errors in the last run.
    RERUN_FAILED [rerun_failed: bool] => Opt::new("rerun failed", Reeval).long("rerun-failed").help(
        "only the cells that failed or had infra errors in the last run of this suite binary \
         under the record dir",
    );
    /// `--resume RUN_ID`: complete that run, keeping the attempts it recorded.
    RESUME [resume: Option<String>] => Opt::new("resume", Reeval)
        .long("resume")
        .takes("RUN_ID")
        .help("complete an interrupted run of this suite binary: recorded attempts are kept")
        .more("; the rest run, and the summary covers both");
    /// A run that selects no eval exits 0 (else 2, saying why nothing was selected).
    ALLOW_EMPTY allow_empty: bool = false => Opt::new("a run that selects no eval succeeds", Reeval)
        .long("allow-empty")
        .env("REEVAL_ALLOW_EMPTY")
        .kind(Kind::YesNo)
        .defaults_to("off: exit 2")
        .help("a run that selects no eval exits 0 (else 2, saying which filter, tag or rerun selected nothing)")
        .more("; set the twin where `cargo test <filter>` passes a filter to every test binary");
    /// Where to write JUnit XML.
    JUNIT junit: PathBuf => Opt::new("JUnit file", Reeval)
        .long("junit")
        .takes("PATH")
        .env("REEVAL_JUNIT")
        .kind(Kind::Path)
        .defaults_to("none")
        .help("write JUnit XML, one testcase per attempt");
    /// Print the agent's events as they arrive.
    STREAM stream: bool = false => Opt::new("stream agent events", Reeval)
        .long("stream")
        .env("REEVAL_STREAM")
        .kind(Kind::YesNo)
        .defaults_to("off")
        .help("print the agent's events as they arrive")
        .more("(tool calls, edits, messages)");
    /// Whether prepared sandboxes are cached (see `crate::setup_cache`).
    SETUP_CACHE setup_cache: bool = true => Opt::new("setup cache", Reeval)
        .long("no-setup-cache")
        .env("REEVAL_SETUP_CACHE")
        .kind(Kind::YesNo)
        .defaults_to("on")
        .help("prepare every sandbox afresh")
        .more("(see [the setup cache][setup-cache])"),
        sets |a, _| {
            a.set.setup_cache = Some(false);
            Ok(())
        };
    /// Containers created ahead of their slot: fresh, never reused.
    PRESTART prestart: usize = 0 => Opt::new("start ahead", Reeval)
        .long("prestart")
        .takes("N")
        .env("REEVAL_PRESTART")
        .key("prestart")
        .kind(Kind::Whole)
        .defaults_to("0")
        .help("create up to N containers ahead of their slot (with their gateway, and their snapshot where the start writes nothing before it; the records say `started ahead of its slot`, `taken ahead of its slot`)");
    /// `--compare control,with_skill`: the two arms of a comparison (merged by hand: [`Settings::compare`]).
    COMPARE (compare: Vec<String>) => Opt::new("comparison", Reeval)
        .long("compare")
        .takes("A,B")
        .env("REEVAL_COMPARE")
        .kind(Kind::List("arms"))
        .defaults_to("none (see [Compare][compare])")
        .help(
            "compare two arms (`control` and a `#[reeval::variant]`), paired by eval and trial, and \
             give a verdict",
        )
        .more("(see [Compare, regrade, replay, oracle][compare])"),
        // The last `--compare` names the arms (a list that does not add up).
        sets |a, v| {
            a.set.compare = Some(v.list()?);
            Ok(())
        };
    /// `--vs b`: compare the harness of `--harness a` with `b`.
    VS [vs: Option<String>] => Opt::new("versus", Reeval)
        .long("vs")
        .takes("SPEC")
        .help("with `--harness A`: compare harness A with this one");
    /// A variant every eval runs with (`--variant`, `REEVAL_VARIANT`).
    VARIANT variant: String => Opt::new("variant", Reeval)
        .long("variant")
        .takes("NAME")
        .env("REEVAL_VARIANT")
        .defaults_to("none")
        .help("run every eval with this variant (a `#[reeval::variant]`)");
    /// `--regrade RUN`: re-run the checks and judge of RUN's attempts against their recorded work.
    REGRADE [regrade: Option<String>] => Opt::new("regrade", Reeval)
        .long("regrade")
        .takes("RUN")
        .help(
            "re-run checks and judge on RUN's recorded attempts, no agent: each send is answered \
             from the record (harness replay:RUN)",
        );
    /// `--partition hash:K/N` or `count:K/N`: only this part's cells run (merged by hand: [`Settings::partition`]).
    PARTITION (partition: super::Partition) => Opt::new("partition", Reeval)
        .long("partition")
        .takes("KIND:K/N")
        .env("REEVAL_PARTITION")
        .defaults_to("the whole run")
        .help(
            "run part K of N of the cells (eval × harness), as cargo-nextest spells it: hash:K/N by \
             a stable hash of each cell's name, count:K/N dealt in turn",
        )
        .more("(see [Split runs][split-runs])");
    /// Private or reserved addresses every eval's allowed hosts may resolve to.
    ALLOW_INTERNAL allow_internal: Vec<String> = Vec::new() => Opt::new("internal addresses", Reeval)
        .long("allow-internal")
        .takes("HOST|RANGE")
        .env("REEVAL_ALLOW_INTERNAL")
        .key("allow_internal")
        .kind(Kind::List("hosts or address ranges"))
        .checks(crate::egress::check_internal)
        .defaults_to("none: private and reserved addresses are refused")
        .help(
            "let allowed hosts resolve to these private or reserved addresses: a host (`*.corp`) \
             or a range (`10.0.0.0/8`), repeatable; the host's own, bridge and metadata addresses \
             stay closed",
        )
        .more("(see [Egress][egress])");
    /// How the egress gateway reaches its upstreams (default: the runner's proxy variables).
    UPSTREAM_PROXY upstream_proxy: crate::egress::UpstreamProxySetting = Default::default()
        => Opt::new("upstream proxy", Reeval)
        .long("upstream-proxy")
        .takes("URL")
        .env("REEVAL_UPSTREAM_PROXY")
        .key("upstream_proxy")
        .defaults_to("the runner's `HTTPS_PROXY`/`HTTP_PROXY` and `NO_PROXY`")
        .help("the http:// proxy the egress gateway reaches upstreams through; `none`: directly")
        .more("(see [Egress][egress])");
    /// Retries of an infra error, each with a fresh sandbox.
    RETRIES infra_retries: u32 = 2 => Opt::new("infra retries", Reeval)
        .long("retries")
        .takes("N")
        .env("REEVAL_RETRIES")
        .key("retries")
        .kind(Kind::Whole)
        .defaults_to("2")
        .help("retries of an infra error, each with a fresh sandbox");
    /// A dotenv file of secrets and credentials (merged by hand: [`Settings::env_file`] and [`Settings::fallback_env_file`]).
    ENV_FILE (env_file: PathBuf) => Opt::new("env files", Reeval)
        .long("env-file")
        .takes("PATH")
        .env("REEVAL_ENV_FILE")
        .env_note(", after the file's")
        .key("env_file")
        .kind(Kind::Path)
        .defaults_to("none")
        .help("a dotenv file of secrets and credentials for preflight, read for names the host does not set");
    /// The setup cache's size cap in bytes: past it, the least recently used cached setups are removed.
    SETUP_CACHE_MAX setup_cache_max_bytes: u64 = crate::setup_cache::DEFAULT_MAX_BYTES
        => Opt::new("setup cache's size cap", NoFlag)
        .env("REEVAL_SETUP_CACHE_MAX")
        .kind(Kind::Bytes)
        .defaults_to("20 GiB")
        .help("past it, the least recently used cached setups are removed");
    /// After how long a running attempt is announced (and again after each further period).
    SLOW_AFTER slow_after: Duration = Duration::from_secs(60) => Opt::new("slow-attempt notice", NoFlag)
        .env("REEVAL_SLOW_AFTER")
        .kind(Kind::Duration)
        .defaults_to("60s, repeated")
        .help("when a running attempt is announced, and again after each period");
    /// Prices per model (read by hand: a table).
    PRICES => Opt::new("prices", NoFlag)
        .key("prices")
        .kind(Kind::Table("[prices.<model>]"))
        .defaults_to("built-in list prices")
        .help("US dollars per million tokens, per model");
    /// Image names mapped to others (read by hand: a table).
    IMAGES => Opt::new("image names", NoFlag)
        .key("images")
        .kind(Kind::Table("[images]"))
        .defaults_to("none: every image by the name the eval gives")
        .help(
            "maps an image an eval names (`Image::from`, an install image's base, a Harbor task's \
             `docker_image`) to another, `\"ubuntu:24.04\" = \"registry.internal/ubuntu:24.04\"`",
        );
    /// Variants declared in `reeval.toml` (read by hand: a table).
    VARIANTS => Opt::new("declared variants", NoFlag)
        .key("variants")
        .kind(Kind::Table("[variants.NAME]"))
        .defaults_to("none: only the suite's `#[reeval::variant]`s")
        .help(
            "variants for `--compare` and `--variant` beside the suite's own: `files`, `skills`, \
             `rules` and `env` added to every eval's environment (see Compare)",
        );
    /// The judge model of evals that name none (merged by hand: the file first).
    JUDGE (judge: String) => Opt::new("judge", NoFlag)
        .env("REEVAL_JUDGE")
        .env_note(", when the file names none")
        .key("judge")
        .checks(|spec| crate::llm::chat::key_env(spec.trim()).map(drop))
        .defaults_to("none")
        .help("the judge model of evals that name none");
    /// The suite's config file (read by hand: it is where the file's layer comes from).
    CONFIG => Opt::new("config file", NoFlag)
        .env("REEVAL_CONFIG")
        .kind(Kind::Path)
        .defaults_to("`./reeval.toml` if present")
        .help("the suite's config file");
    /// Which backend runs sandboxes (merged by hand into [`Settings::backend`]).
    BACKEND (backend: String) => Opt::new("backend", NoFlag)
        .env("REEVAL_BACKEND")
        .key("backend")
        .kind(Kind::Word(crate::sandbox::BackendConfig::NAMES))
        .defaults_to("docker")
        .help("which engine runs sandboxes");
    /// The Kubernetes backend's settings (merged by hand into [`Settings::backend`]).
    KUBERNETES (kubernetes: super::value::Table<crate::sandbox::KubernetesConfig>) => Opt::new("Kubernetes settings", NoFlag)
        .key("kubernetes")
        .kind(Kind::Table("[kubernetes]"))
        .defaults_to("see [Kubernetes][kubernetes]")
        .help("how the Kubernetes backend places and shapes the attempts' pods");
    /// The namespace of the attempts' pods (merged by hand into [`Settings::backend`]).
    KUBE_NAMESPACE (namespace: String) => Opt::new("Kubernetes namespace", NoFlag)
        .env("REEVAL_KUBE_NAMESPACE")
        .key("namespace")
        .defaults_to("the kubeconfig's")
        .help("the namespace of the attempts' pods");
    /// Engines to spread attempts over (merged by hand into [`Settings::backend`]).
    ENGINES (engines: Vec<String>) => Opt::new("engines", NoFlag)
        .env("REEVAL_ENGINES")
        .key("engines")
        .kind(Kind::List("engine addresses"))
        .checks(|entry| crate::sandbox::docker::EngineSpec::parse(entry).map(drop))
        .defaults_to("the engine of `DOCKER_HOST` (see [Engines][engines])")
        .help("engines to spread attempts over (`URL` or `URL=SLOTS`)");
    /// Where git workspaces are cached (read by hand: [`Settings::cache_dir`]).
    CACHE_DIR => Opt::new("git cache", NoFlag)
        .env("REEVAL_CACHE_DIR")
        .kind(Kind::Path)
        .defaults_to("`<temp>/reeval-cache`")
        .help("where git workspaces are cached");
    /// The run's id (read by hand: [`Settings::run_id`]).
    RUN_ID => Opt::new("run id", NoFlag)
        .env("NEXTEST_RUN_ID")
        .defaults_to("`<utc time>-<pid>-<nonce>`")
        .help("the run's id; nextest's, so its processes share a run");
    /// Whether cargo-nextest runs this process (read by hand: [`Settings::under_nextest`]).
    UNDER_NEXTEST => Opt::new("under nextest", NoFlag)
        .env("NEXTEST")
        .kind(Kind::Presence)
        .defaults_to("no")
        .help("cargo-nextest runs this process (one eval per process)");
    /// The egress gateway's binary (read where the gateway starts).
    GATEWAY_BIN => Opt::new("gateway binary", NoFlag)
        .env("REEVAL_GATEWAY_BIN")
        .kind(Kind::Path)
        .defaults_to("beside the suite's binary, else on `PATH` (see [Engines][engines])")
        .help("the egress gateway's binary");
}

/// The option whose `reeval.toml` key is `key`.
pub(crate) fn by_key(key: &str) -> Option<&'static Opt> {
    OPTIONS.iter().find(|o| o.key == Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_variables_and_keys_are_each_declared_once() {
        let mut seen = std::collections::BTreeSet::new();
        for (o, set) in OPTIONS.iter().zip(SETTERS) {
            let names = [
                o.long.map(|l| format!("--{l}")),
                o.short.map(|s| format!("-{s}")),
                o.env.map(str::to_string),
                o.key.map(|k| format!("key {k}")),
            ];
            for name in names.into_iter().flatten() {
                assert!(seen.insert(name.clone()), "{name} is declared twice");
            }
            // Every flag sets something; a setting without a flag may have a setter no flag reaches.
            assert!(!o.has_flag() || set.is_some(), "{}", o.name);
            assert!(o.group != NoFlag || !o.has_flag(), "{}", o.name);
        }
    }
}
