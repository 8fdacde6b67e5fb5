//! Builds `reeval-diff` (diff-helper/main.rs, std only) as a static,
//! stripped executable for the host target, so the library can embed it and
//! copy it into sandboxes that have no toolchain (see `diff::helper`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    for file in ["main.rs", "listing.rs", "run.rs", "run_request.rs", "walk.rs"] {
        println!("cargo:rerun-if-changed=diff-helper/{file}");
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out_dir =
        PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts"));
    let manifest_dir =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let source = manifest_dir.join("diff-helper").join("main.rs");
    // glibc links statically: the helper does no DNS/NSS lookups.
    let output = Command::new(&rustc)
        .args(["--edition", "2024", "--crate-name", "reeval_diff", "--crate-type", "bin"])
        .args(["-C", "opt-level=3", "-C", "panic=abort", "-C", "target-feature=+crt-static"])
        .args(["-C", "strip=symbols", "-C", "codegen-units=1"])
        .arg(&source)
        .arg("-o")
        .arg(out_dir.join("reeval-diff"))
        .output()
        .unwrap_or_else(|e| panic!("failed to run {rustc} to build reeval-diff: {e}"));
    if !output.status.success() {
        panic!(
            "failed to build reeval-diff with {rustc}:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
