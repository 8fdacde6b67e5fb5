//! Decides, for the integration tests, whether this machine has a Docker
//! engine. Without one (and without `REEVAL_REQUIRE_DOCKER=1`), the tests that
//! need it are compiled as `#[ignore]`d with the reason, so libtest reports
//! them as ignored instead of counting a test that ran nothing as passed.

use std::path::Path;

fn main() {
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
