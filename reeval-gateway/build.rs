//! Builds `reeval-relay` (relay/main.rs, std only) as a static, stripped
//! executable for the host target, so the library can embed it and copy it
//! into sandboxes that have no toolchain.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=relay/main.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out_dir =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    let out = out_dir.join("reeval-relay");
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let source = manifest_dir.join("relay").join("main.rs");
    // glibc links statically here because the relay does no DNS/NSS lookups (it only parses IP:PORT).
    let output = Command::new(&rustc)
        .args(["--edition", "2021", "--crate-name", "reeval_relay", "--crate-type", "bin"])
        .args([
            "-C",
            "opt-level=s",
            "-C",
            "panic=abort",
            "-C",
            "target-feature=+crt-static",
            "-C",
            "strip=symbols",
            "-C",
            "codegen-units=1",
        ])
        .arg(&source)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("failed to run {rustc} to build reeval-relay: {e}"));
    if !output.status.success() {
        panic!(
            "failed to build reeval-relay with {rustc}:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
