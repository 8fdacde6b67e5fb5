//! Two things the integration tests need decided at build time:
//!
//! - whether this machine has a Docker engine. Without one (and without
//!   `REEVAL_REQUIRE_DOCKER=1`), the tests that need it are compiled as
//!   `#[ignore]`d with the reason (`cfg(reeval_no_docker)`), so libtest reports
//!   them as ignored instead of counting a test that ran nothing as passed;
//! - the README's first eval, written verbatim to
//!   `$OUT_DIR/readme_first_eval.rs`, so `tests/real_clis.rs` compiles and runs
//!   it exactly as the README shows it (without a README, a packaged crate,
//!   the file is empty).

use std::path::Path;

fn main() {
    docker_engine();
    readme_first_eval();
}

fn docker_engine() {
    println!("cargo::rustc-check-cfg=cfg(reeval_no_docker)");
    println!("cargo::rerun-if-env-changed=REEVAL_REQUIRE_DOCKER");
    // The engine's socket; another path names where a machine keeps it (or,
    // pointed at nothing, shows what a machine without Docker reports).
    // DOCKER_HOST is not read: the tests point it at the extra engines, and a
    // change would rebuild every test binary.
    println!("cargo::rerun-if-env-changed=REEVAL_DOCKER_SOCKET");
    let socket = std::env::var("REEVAL_DOCKER_SOCKET")
        .unwrap_or_else(|_| "/var/run/docker.sock".to_string());
    println!("cargo::rerun-if-changed={socket}");
    let required = std::env::var("REEVAL_REQUIRE_DOCKER").is_ok_and(|v| v == "1");
    if !required && !Path::new(&socket).exists() {
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
