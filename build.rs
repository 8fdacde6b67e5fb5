//! Two things the integration tests need decided at build time:
//!
//! - what this machine can run them on. Without a Docker engine (and without
//!   `REEVAL_REQUIRE_DOCKER=1`), the tests that need it are compiled as
//!   `#[ignore]`d with the reason (`cfg(reeval_no_docker)`), so libtest reports
//!   them as ignored instead of counting a test that ran nothing as passed.
//!   The same holds for the extra engines of `scripts/engines.sh`
//!   (`cfg(reeval_no_engines)`, `REEVAL_REQUIRE_ENGINES=1` to fail instead),
//!   the test cluster of `scripts/kube.sh` (`cfg(reeval_no_kube)`,
//!   `REEVAL_REQUIRE_KUBE=1`) and cargo-nextest (`cfg(reeval_no_nextest)`,
//!   `REEVAL_REQUIRE_DOCKER=1`). A tool installed after the first build is
//!   seen after `touch build.rs` (`PATH` is not watched: a change would
//!   rebuild every test binary);
//! - the README's first eval, written verbatim to
//!   `$OUT_DIR/readme_first_eval.rs`, so `tests/real_clis.rs` compiles and runs
//!   it exactly as the README shows it (without a README, a packaged crate,
//!   the file is empty).

use std::path::Path;

fn main() {
    docker_engine();
    extra_engines();
    tools();
    readme_first_eval();
}

/// Whether `REEVAL_REQUIRE_<what>=1` is set.
fn required(what: &str) -> bool {
    println!("cargo::rerun-if-env-changed=REEVAL_REQUIRE_{what}");
    std::env::var(format!("REEVAL_REQUIRE_{what}")).is_ok_and(|v| v == "1")
}

/// Whether the variable is set and not empty. The scripts give it a fixed
/// value (fixed ports and paths), so a run with the engines up rebuilds the
/// tests once, not every time.
fn set(var: &str) -> bool {
    println!("cargo::rerun-if-env-changed={var}");
    std::env::var(var).is_ok_and(|v| !v.is_empty())
}

/// The second dockerd (and its TLS, SSH and Podman twins) and the Kubernetes
/// test cluster, which `scripts/test.sh` starts and names in these variables.
fn extra_engines() {
    println!("cargo::rustc-check-cfg=cfg(reeval_no_engines)");
    println!("cargo::rustc-check-cfg=cfg(reeval_no_kube)");
    if !set("REEVAL_TEST_ENGINE2") && !required("ENGINES") {
        println!("cargo::rustc-cfg=reeval_no_engines");
    }
    if !set("REEVAL_TEST_KUBECONFIG") && !required("KUBE") {
        println!("cargo::rustc-cfg=reeval_no_kube");
    }
}

/// Programs some tests drive, looked up on `PATH`.
fn tools() {
    println!("cargo::rustc-check-cfg=cfg(reeval_no_nextest)");
    if !on_path("cargo-nextest") && !required("DOCKER") {
        println!("cargo::rustc-cfg=reeval_no_nextest");
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

fn docker_engine() {
    println!("cargo::rustc-check-cfg=cfg(reeval_no_docker)");
    // The engine's socket; another path names where a machine keeps it (or,
    // pointed at nothing, shows what a machine without Docker reports).
    // DOCKER_HOST is not read: the tests point it at the extra engines, and a
    // change would rebuild every test binary.
    println!("cargo::rerun-if-env-changed=REEVAL_DOCKER_SOCKET");
    let socket = std::env::var("REEVAL_DOCKER_SOCKET")
        .unwrap_or_else(|_| "/var/run/docker.sock".to_string());
    println!("cargo::rerun-if-changed={socket}");
    if !required("DOCKER") && !Path::new(&socket).exists() {
        println!("cargo::rustc-cfg=reeval_no_docker");
    }
}

fn readme_first_eval() {
    println!("cargo::rerun-if-changed=README.md");
    let readme = std::fs::read_to_string("README.md").unwrap_or_default();
    // The first ```rust block after the "## A first eval" heading.
    let code = readme
        .split_once("\n## A first eval\n")
        .and_then(|(_, rest)| rest.split_once("\n```rust"))
        .and_then(|(_, rest)| rest.split_once('\n'))
        .and_then(|(_, block)| block.split_once("\n```\n"))
        .map(|(code, _)| format!("{code}\n"))
        .unwrap_or_default();
    let out = Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("readme_first_eval.rs");
    std::fs::write(out, code).expect("write the README's first eval");
}
