//! Every option of a run, declared once: its flag, its environment variable,
//! its `reeval.toml` key, the kind of value it takes, its default and its
//! help. The flag parser ([`super::args`]), the variables' reading
//! (`vars.rs`), `reeval.toml`'s schema ([`super::file`](mod@super::file)), `--help` and
//! the tables of docs/options.md ([`super::render`]) all read this table, so
//! a new option is one entry here plus the field it fills.

use super::args::{Args, Given, UsageError};

/// What sets an option's field of [`Args`] from its flag (and the flag's value, if it takes one).
pub(crate) type SetFlag = fn(&mut Args, Given) -> Result<(), UsageError>;

/// Where `--help` lists an option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// libtest's flags, so `cargo test` and cargo-nextest can drive a suite.
    Libtest,
    /// libtest's flags that are accepted and change nothing.
    Accepted,
    /// reeval's own flags.
    Reeval,
    /// Settings with no flag: a variable, a `reeval.toml` key, or both.
    NoFlag,
}

/// The kind of value an option takes: how its variable reads, what its
/// `reeval.toml` key must hold, and how the documentation writes both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// On or off: a flag without a value, a yes/no word in the environment.
    YesNo,
    /// A whole number of at least 1.
    Count,
    /// A whole number, 0 included.
    Whole,
    /// A rate between 0 and 1.
    Rate,
    /// A duration like `10m` or `90s`.
    Duration,
    /// A path.
    Path,
    /// A word or a name.
    Text,
    /// A comma-separated list (in `reeval.toml`, a list of the given things).
    List(&'static str),
    /// One spec or a list of them (in `reeval.toml`): the thing, and an example.
    OneOrList(&'static str, &'static str),
    /// Bytes, or a whole number of `KiB`, `MiB` or `GiB`.
    Bytes,
    /// One of these words.
    Word(&'static [&'static str]),
    /// A table of `reeval.toml`, written as shown (`[prices.<model>]`).
    Table(&'static str),
    /// Whether the variable is set at all.
    Presence,
}

impl Kind {
    /// `` `docker` or `kubernetes` ``.
    pub fn words(self) -> String {
        match self {
            Kind::Word(words) => {
                let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
                match quoted.split_last() {
                    Some((last, [])) => last.clone(),
                    Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
                    None => String::new(),
                }
            }
            _ => String::new(),
        }
    }
}

/// One option of a run.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// What it sets, as the documentation names it.
    pub name: &'static str,
    /// Where `--help` lists it.
    pub group: Group,
    /// Its long flag, without the dashes.
    pub long: Option<&'static str>,
    /// Its short flag.
    pub short: Option<char>,
    /// What its flag takes (`N`, `SPEC`); `None`: a switch.
    pub value: Option<&'static str>,
    /// Its environment variable.
    pub env: Option<&'static str>,
    /// How the variable's precedence differs, for the documentation (`, when the file names none`).
    pub env_note: &'static str,
    /// Its top-level key in `reeval.toml`.
    pub key: Option<&'static str>,
    /// The kind of value it takes.
    pub kind: Kind,
    /// Its default, in the documentation's words.
    pub default: &'static str,
    /// What it does, in `--help` and the documentation.
    pub help: &'static str,
    /// More for the documentation's table of flags (a link, a caveat).
    pub more: &'static str,
    /// What its flag sets.
    pub(crate) set: Option<SetFlag>,
}

impl Opt {
    const fn new(name: &'static str, group: Group) -> Opt {
        Opt {
            name,
            group,
            long: None,
            short: None,
            value: None,
            env: None,
            env_note: "",
            key: None,
            kind: Kind::Text,
            default: "",
            help: "",
            more: "",
            set: None,
        }
    }
    const fn long(self, long: &'static str, set: SetFlag) -> Opt {
        Opt { long: Some(long), set: Some(set), ..self }
    }
    const fn short(self, short: char, set: SetFlag) -> Opt {
        Opt { short: Some(short), set: Some(set), ..self }
    }
    const fn takes(self, value: &'static str) -> Opt {
        Opt { value: Some(value), ..self }
    }
    const fn env(self, env: &'static str) -> Opt {
        Opt { env: Some(env), ..self }
    }
    const fn env_note(self, env_note: &'static str) -> Opt {
        Opt { env_note, ..self }
    }
    const fn key(self, key: &'static str) -> Opt {
        Opt { key: Some(key), ..self }
    }
    const fn kind(self, kind: Kind) -> Opt {
        Opt { kind, ..self }
    }
    const fn defaults_to(self, default: &'static str) -> Opt {
        Opt { default, ..self }
    }
    const fn help(self, help: &'static str) -> Opt {
        Opt { help, ..self }
    }
    const fn more(self, more: &'static str) -> Opt {
        Opt { more, ..self }
    }

    /// The variable, for an option that has one.
    pub(crate) fn var(&self) -> &'static str {
        self.env.unwrap_or_else(|| panic!("the option `{}` has no variable", self.name))
    }

    /// The key, for an option that has one.
    pub(crate) fn file_key(&self) -> &'static str {
        self.key.unwrap_or_else(|| panic!("the option `{}` has no reeval.toml key", self.name))
    }

    /// `--trials`, or `-Z` for a flag with only a short form.
    pub fn flag_name(&self) -> Option<String> {
        match (self.long, self.short) {
            (Some(long), _) => Some(format!("--{long}")),
            (None, Some(short)) => Some(format!("-{short}")),
            (None, None) => None,
        }
    }
}

use Group::{Accepted, Libtest, NoFlag, Reeval};

/// Sets a switch's field.
macro_rules! switch {
    ($field:ident) => {
        |a, _| {
            a.$field = true;
            Ok(())
        }
    };
}

/// Reads (and checks) a flag's value and drops it: libtest flags reeval accepts.
const IGNORE_VALUE: SetFlag = |_, v| v.text().map(drop);
const IGNORE: SetFlag = |_, _| Ok(());

pub(crate) const LIST: Opt = Opt::new("list", Libtest)
    .long("list", switch!(list))
    .help("list evals instead of running them (no Docker, no network)");
pub(crate) const FORMAT: Opt = Opt::new("output format", Libtest)
    .long("format", |a, v| {
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
    })
    .takes("pretty|terse|json")
    .help("output format; json: libtest's JSON event stream (with --list: terse)")
    .more("(see [Records and outputs][records])");
pub(crate) const EXACT: Opt =
    Opt::new("exact", Libtest).long("exact", switch!(exact)).help("filters match names exactly");
pub(crate) const SKIP: Opt = Opt::new("skip", Libtest)
    .long("skip", |a, v| {
        a.skip.push(v.text()?);
        Ok(())
    })
    .takes("FILTER")
    .help("skip evals whose name contains FILTER (repeatable)");
pub(crate) const IGNORED: Opt = Opt::new("ignored", Libtest)
    .long("ignored", switch!(ignored))
    .help("run only evals marked ignore");
pub(crate) const INCLUDE_IGNORED: Opt = Opt::new("include ignored", Libtest)
    .long("include-ignored", switch!(include_ignored))
    .help("run ignored evals too");
pub(crate) const TEST_THREADS: Opt = Opt::new("test threads", Libtest)
    .long("test-threads", |a, v| {
        a.test_threads = Some(v.number()?);
        Ok(())
    })
    .takes("N")
    .env("RUST_TEST_THREADS")
    .key("concurrency")
    .kind(Kind::Count)
    .defaults_to("the cores")
    .help("attempts run at once")
    .more("(default: the machine's cores, `std::thread::available_parallelism`)");
pub(crate) const BENCH: Opt = Opt::new("bench", Libtest)
    .long("bench", switch!(bench))
    .help("runs nothing (evals are not benchmarks)");

pub(crate) const VERBOSE: Opt = Opt::new("verbose", Reeval)
    .short('v', switch!(verbose))
    .long("verbose", switch!(verbose))
    .env("REEVAL_VERBOSE")
    .kind(Kind::YesNo)
    .defaults_to("off")
    .help("print every phase of every attempt")
    .more("and `turn N started: \"<first 60 chars>\"`, one line each");
pub(crate) const HARNESS: Opt = Opt::new("harnesses", Reeval)
    .long("harness", |a, v| {
        a.harness.extend(v.text()?.split(',').map(str::to_string));
        Ok(())
    })
    .takes("SPEC")
    .env("REEVAL_HARNESS")
    .key("harness")
    .kind(Kind::OneOrList("harness spec", "shell"))
    .defaults_to("the evals' own")
    .help("run every eval with this harness, repeatable");
pub(crate) const TRIALS: Opt = Opt::new("trials", Reeval)
    .long("trials", |a, v| {
        a.trials = Some(v.number()?);
        Ok(())
    })
    .takes("N")
    .env("REEVAL_TRIALS")
    .key("trials")
    .kind(Kind::Count)
    .defaults_to("the evals' own")
    .help("trials per eval × harness");
pub(crate) const TIMEOUT: Opt = Opt::new("timeout", Reeval)
    .long("timeout", |a, v| {
        a.timeout = Some(v.duration()?);
        Ok(())
    })
    .takes("DURATION")
    .env("REEVAL_TIMEOUT")
    .key("timeout")
    .kind(Kind::Duration)
    .defaults_to("the evals' own")
    .help("budget per attempt, e.g. 10m, 90s");
pub(crate) const RECORD_DIR: Opt = Opt::new("record dir", Reeval)
    .long("record-dir", |a, v| {
        a.record_dir = Some(v.path());
        Ok(())
    })
    .takes("DIR")
    .env("REEVAL_RECORD_DIR")
    .key("record_dir")
    .kind(Kind::Path)
    .defaults_to("`$CARGO_TARGET_DIR/reeval/runs`, else `target/reeval/runs`")
    .help("where runs are recorded");
pub(crate) const TAGS: Opt = Opt::new("tags", Reeval)
    .long("tag", |a, v| {
        a.tags.extend(v.list()?);
        Ok(())
    })
    .takes("NAME")
    .env("REEVAL_TAGS")
    .kind(Kind::List("tags"))
    .defaults_to("every eval")
    .help("only evals with this tag, repeatable");
pub(crate) const MIN_PASS_RATE: Opt = Opt::new("min pass rate", Reeval)
    .long("min-pass-rate", |a, v| {
        let flag = v.flag.clone();
        let rate: f64 = v.number()?;
        if !(0.0..=1.0).contains(&rate) {
            return Err(UsageError(format!("{flag} expects a rate between 0 and 1, got {rate}")));
        }
        a.min_pass_rate = Some(rate);
        Ok(())
    })
    .takes("R")
    .env("REEVAL_MIN_PASS_RATE")
    .key("min_pass_rate")
    .kind(Kind::Rate)
    .defaults_to("the evals' own, else every trial must pass")
    .help("a cell passes at this pass rate (0..1), replacing the evals' own");
pub(crate) const RERUN_FAILED: Opt =
    Opt::new("rerun failed", Reeval).long("rerun-failed", switch!(rerun_failed)).help(
        "only the cells that failed or had infra errors in the last run of this suite binary \
         under the record dir",
    );
pub(crate) const RESUME: Opt = Opt::new("resume", Reeval)
    .long("resume", |a, v| {
        a.resume = Some(v.text()?);
        Ok(())
    })
    .takes("RUN_ID")
    .help("complete an interrupted run of this suite binary: recorded attempts are kept")
    .more("; the rest run, and the summary covers both");
pub(crate) const ALLOW_EMPTY: Opt = Opt::new("a run that selects no eval succeeds", Reeval)
    .long("allow-empty", switch!(allow_empty))
    .env("REEVAL_ALLOW_EMPTY")
    .kind(Kind::YesNo)
    .defaults_to("off: exit 2")
    .help("a run that selects no eval exits 0 (else 2, saying which filter, tag or rerun selected nothing)")
    .more("; set the twin where `cargo test <filter>` passes a filter to every test binary");
pub(crate) const JUNIT: Opt = Opt::new("JUnit file", Reeval)
    .long("junit", |a, v| {
        a.junit = Some(v.path());
        Ok(())
    })
    .takes("PATH")
    .env("REEVAL_JUNIT")
    .kind(Kind::Path)
    .defaults_to("none")
    .help("write JUnit XML, one testcase per attempt");
pub(crate) const STREAM: Opt = Opt::new("stream agent events", Reeval)
    .long("stream", switch!(stream))
    .env("REEVAL_STREAM")
    .kind(Kind::YesNo)
    .defaults_to("off")
    .help("print the agent's events as they arrive")
    .more("(tool calls, edits, messages)");
pub(crate) const SETUP_CACHE: Opt = Opt::new("setup cache", Reeval)
    .long("no-setup-cache", switch!(no_setup_cache))
    .env("REEVAL_SETUP_CACHE")
    .kind(Kind::YesNo)
    .defaults_to("on")
    .help("prepare every sandbox afresh")
    .more("(see [the setup cache][setup-cache])");
pub(crate) const PRESTART: Opt = Opt::new("start ahead", Reeval)
    .long("prestart", |a, v| {
        a.prestart = Some(v.number()?);
        Ok(())
    })
    .takes("N")
    .env("REEVAL_PRESTART")
    .key("prestart")
    .kind(Kind::Whole)
    .defaults_to("0")
    .help("create up to N containers ahead of their slot");
pub(crate) const COMPARE: Opt = Opt::new("comparison", Reeval)
    .long("compare", |a, v| {
        a.compare = v.list()?;
        Ok(())
    })
    .takes("A,B")
    .env("REEVAL_COMPARE")
    .kind(Kind::List("arms"))
    .defaults_to("none (see [Compare][compare])")
    .help(
        "compare two arms (`control` and a `#[reeval::variant]`), paired by eval and trial, and \
         give a verdict",
    )
    .more("(see [Compare, regrade, replay, oracle][compare])");
pub(crate) const VS: Opt = Opt::new("versus", Reeval)
    .long("vs", |a, v| {
        a.vs = Some(v.text()?);
        Ok(())
    })
    .takes("SPEC")
    .help("with `--harness A`: compare harness A with this one");
pub(crate) const VARIANT: Opt = Opt::new("variant", Reeval)
    .long("variant", |a, v| {
        a.variant = Some(v.text()?);
        Ok(())
    })
    .takes("NAME")
    .env("REEVAL_VARIANT")
    .defaults_to("none")
    .help("run every eval with this variant (a `#[reeval::variant]`)");
pub(crate) const REGRADE: Opt = Opt::new("regrade", Reeval)
    .long("regrade", |a, v| {
        a.regrade = Some(v.text()?);
        Ok(())
    })
    .takes("RUN")
    .help(
        "re-run checks and judge on RUN's recorded attempts, no agent: each send is answered \
         from the record (harness replay:RUN)",
    );

pub(crate) const ALLOW_INTERNAL: Opt = Opt::new("internal addresses", Reeval)
    .long("allow-internal", |a, v| {
        a.allow_internal.extend(v.list()?);
        Ok(())
    })
    .takes("HOST|RANGE")
    .env("REEVAL_ALLOW_INTERNAL")
    .key("allow_internal")
    .kind(Kind::List("hosts or address ranges"))
    .defaults_to("none: private and reserved addresses are refused")
    .help(
        "let allowed hosts resolve to these private or reserved addresses: a host (`*.corp`) \
         or a range (`10.0.0.0/8`), repeatable; the host's own, bridge and metadata addresses \
         stay closed",
    )
    .more("(see [Egress][egress])");
pub(crate) const UPSTREAM_PROXY: Opt = Opt::new("upstream proxy", Reeval)
    .long("upstream-proxy", |a, v| {
        a.upstream_proxy = Some(v.text()?);
        Ok(())
    })
    .takes("URL")
    .env("REEVAL_UPSTREAM_PROXY")
    .key("upstream_proxy")
    .defaults_to("the runner's `HTTPS_PROXY`/`HTTP_PROXY` and `NO_PROXY`")
    .help("the http:// proxy the egress gateway reaches upstreams through; `none`: directly")
    .more("(see [Egress][egress])");

pub(crate) const PARTITION: Opt = Opt::new("partition", Reeval)
    .long("partition", |a, v| {
        let flag = v.flag.clone();
        let spec = v.text()?;
        a.partition = Some(spec.parse().map_err(|e| UsageError(format!("{flag} {e}")))?);
        Ok(())
    })
    .takes("KIND:K/N")
    .env("REEVAL_PARTITION")
    .defaults_to("the whole run")
    .help(
        "run part K of N of the cells (eval × harness), as cargo-nextest spells it: hash:K/N by \
         a stable hash of each cell's name, count:K/N dealt in turn",
    )
    .more("(see [Split runs][split-runs])");

pub(crate) const RETRIES: Opt = Opt::new("infra retries", Reeval)
    .long("retries", |a, v| {
        a.retries = Some(v.number()?);
        Ok(())
    })
    .takes("N")
    .env("REEVAL_RETRIES")
    .key("retries")
    .kind(Kind::Whole)
    .defaults_to("2")
    .help("retries of an infra error, each with a fresh sandbox");
pub(crate) const SETUP_CACHE_MAX: Opt = Opt::new("setup cache's size cap", NoFlag)
    .env("REEVAL_SETUP_CACHE_MAX")
    .kind(Kind::Bytes)
    .defaults_to("20 GiB")
    .help("past it, the least recently used cached setups are removed");
pub(crate) const SLOW_AFTER: Opt = Opt::new("slow-attempt notice", NoFlag)
    .env("REEVAL_SLOW_AFTER")
    .kind(Kind::Duration)
    .defaults_to("60s, repeated")
    .help("when a running attempt is announced, and again after each period");
pub(crate) const PRICES: Opt = Opt::new("prices", NoFlag)
    .key("prices")
    .kind(Kind::Table("[prices.<model>]"))
    .defaults_to("built-in list prices")
    .help("US dollars per million tokens, per model");
pub(crate) const IMAGES: Opt = Opt::new("image names", NoFlag)
    .key("images")
    .kind(Kind::Table("[images]"))
    .defaults_to("none: every image by the name the eval gives")
    .help(
        "maps an image an eval names (`Image::from`, an install image's base, a Harbor task's \
         `docker_image`) to another, `\"ubuntu:24.04\" = \"registry.internal/ubuntu:24.04\"`",
    );
pub(crate) const VARIANTS: Opt = Opt::new("declared variants", NoFlag)
    .key("variants")
    .kind(Kind::Table("[variants.NAME]"))
    .defaults_to("none: only the suite's `#[reeval::variant]`s")
    .help(
        "variants for `--compare` and `--variant` beside the suite's own: `files`, `skills`, \
         `rules` and `env` added to every eval's environment (see Compare)",
    );
pub(crate) const JUDGE: Opt = Opt::new("judge", NoFlag)
    .env("REEVAL_JUDGE")
    .env_note(", when the file names none")
    .key("judge")
    .defaults_to("none")
    .help("the judge model of evals that name none");
pub(crate) const ENV_FILE: Opt = Opt::new("env files", Reeval)
    .long("env-file", |a, v| {
        a.env_file = Some(v.path());
        Ok(())
    })
    .takes("PATH")
    .env("REEVAL_ENV_FILE")
    .env_note(", after the file's")
    .key("env_file")
    .kind(Kind::Path)
    .defaults_to("none")
    .help("a dotenv file of secrets and credentials for preflight, read for names the host does not set");
pub(crate) const CONFIG: Opt = Opt::new("config file", NoFlag)
    .env("REEVAL_CONFIG")
    .kind(Kind::Path)
    .defaults_to("`./reeval.toml` if present")
    .help("the suite's config file");
pub(crate) const BACKEND: Opt = Opt::new("backend", NoFlag)
    .env("REEVAL_BACKEND")
    .key("backend")
    .kind(Kind::Word(&["docker", "kubernetes"]))
    .defaults_to("docker")
    .help("which engine runs sandboxes");
pub(crate) const KUBERNETES: Opt = Opt::new("Kubernetes settings", NoFlag)
    .key("kubernetes")
    .kind(Kind::Table("[kubernetes]"))
    .defaults_to("see [Kubernetes][kubernetes]")
    .help("how the Kubernetes backend places and shapes the attempts' pods");
pub(crate) const KUBE_NAMESPACE: Opt = Opt::new("Kubernetes namespace", NoFlag)
    .env("REEVAL_KUBE_NAMESPACE")
    .key("namespace")
    .defaults_to("the kubeconfig's")
    .help("the namespace of the attempts' pods");
pub(crate) const ENGINES: Opt = Opt::new("engines", NoFlag)
    .env("REEVAL_ENGINES")
    .key("engines")
    .kind(Kind::List("engine addresses"))
    .defaults_to("the engine of `DOCKER_HOST` (see [Engines][engines])")
    .help("engines to spread attempts over (`URL` or `URL=SLOTS`)");
pub(crate) const CACHE_DIR: Opt = Opt::new("git cache", NoFlag)
    .env("REEVAL_CACHE_DIR")
    .kind(Kind::Path)
    .defaults_to("`<temp>/reeval-cache`")
    .help("where git workspaces are cached");
pub(crate) const RUN_ID: Opt = Opt::new("run id", NoFlag)
    .env("NEXTEST_RUN_ID")
    .defaults_to("`<utc time>-<pid>-<nonce>`")
    .help("the run's id; nextest's, so its processes share a run");
pub(crate) const UNDER_NEXTEST: Opt = Opt::new("under nextest", NoFlag)
    .env("NEXTEST")
    .kind(Kind::Presence)
    .defaults_to("no")
    .help("cargo-nextest runs this process (one eval per process)");
pub(crate) const GATEWAY_BIN: Opt = Opt::new("gateway binary", NoFlag)
    .env("REEVAL_GATEWAY_BIN")
    .kind(Kind::Path)
    .defaults_to("beside the suite's binary, else on `PATH` (see [Engines][engines])")
    .help("the egress gateway's binary");

pub(crate) const NOCAPTURE: Opt = Opt::new("nocapture", Libtest)
    .long("nocapture", switch!(nocapture))
    .env("RUST_TEST_NOCAPTURE")
    .kind(Kind::Presence)
    .defaults_to("no")
    .help("show the evals' own output (println!) as it is printed, not only under a failure and in the record");
pub(crate) const NO_CAPTURE: Opt =
    Opt::new("no capture", Libtest).long("no-capture", switch!(nocapture)).help("as --nocapture");

/// libtest's flags that reeval accepts and ignores.
const ACCEPTED: [Opt; 6] = [
    Opt::new("show output", Accepted).long("show-output", IGNORE),
    Opt::new("test", Accepted).long("test", IGNORE),
    Opt::new("quiet", Accepted).short('q', switch!(quiet)).long("quiet", switch!(quiet)),
    Opt::new("color", Accepted).long("color", IGNORE_VALUE).takes("WHEN"),
    Opt::new("logfile", Accepted).long("logfile", IGNORE_VALUE).takes("PATH"),
    Opt::new("unstable", Accepted).short('Z', IGNORE_VALUE).takes("FLAG"),
];

/// Every option, in the order `--help` and the documentation list them.
pub const OPTIONS: &[Opt] = &[
    LIST,
    FORMAT,
    EXACT,
    SKIP,
    IGNORED,
    INCLUDE_IGNORED,
    TEST_THREADS,
    BENCH,
    NOCAPTURE,
    NO_CAPTURE,
    ACCEPTED[0],
    ACCEPTED[1],
    ACCEPTED[2],
    ACCEPTED[3],
    ACCEPTED[4],
    ACCEPTED[5],
    VERBOSE,
    HARNESS,
    TRIALS,
    TIMEOUT,
    RECORD_DIR,
    TAGS,
    MIN_PASS_RATE,
    RERUN_FAILED,
    RESUME,
    ALLOW_EMPTY,
    JUNIT,
    STREAM,
    SETUP_CACHE,
    PRESTART,
    COMPARE,
    VS,
    VARIANT,
    REGRADE,
    PARTITION,
    ALLOW_INTERNAL,
    UPSTREAM_PROXY,
    RETRIES,
    ENV_FILE,
    SETUP_CACHE_MAX,
    SLOW_AFTER,
    PRICES,
    IMAGES,
    VARIANTS,
    JUDGE,
    CONFIG,
    BACKEND,
    KUBERNETES,
    KUBE_NAMESPACE,
    ENGINES,
    CACHE_DIR,
    RUN_ID,
    UNDER_NEXTEST,
    GATEWAY_BIN,
];

/// The option whose flag is `--long`.
pub(crate) fn by_long(long: &str) -> Option<&'static Opt> {
    OPTIONS.iter().find(|o| o.long == Some(long))
}

/// The option whose flag is `-short`.
pub(crate) fn by_short(short: char) -> Option<&'static Opt> {
    OPTIONS.iter().find(|o| o.short == Some(short))
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
        for o in OPTIONS {
            let names = [
                o.long.map(|l| format!("--{l}")),
                o.short.map(|s| format!("-{s}")),
                o.env.map(str::to_string),
                o.key.map(|k| format!("key {k}")),
            ];
            for name in names.into_iter().flatten() {
                assert!(seen.insert(name.clone()), "{name} is declared twice");
            }
            assert!(o.set.is_some() == (o.long.is_some() || o.short.is_some()), "{}", o.name);
            assert!(o.group != NoFlag || o.set.is_none(), "{}", o.name);
        }
    }
}
