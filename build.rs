//! Writes the README's first eval, verbatim, to `$OUT_DIR/readme_first_eval.rs`,
//! so `tests/real_clis.rs` compiles and runs it exactly as the README shows it.
//! Nothing else reads it; without a README (a packaged crate) the file is empty.

fn main() {
    println!("cargo:rerun-if-changed=README.md");
    let readme = std::fs::read_to_string("README.md").unwrap_or_default();
    // The first ```rust block after the "## A first eval" heading.
    let code = readme
        .split_once("\n## A first eval\n")
        .and_then(|(_, rest)| rest.split_once("\n```rust"))
        .and_then(|(_, rest)| rest.split_once('\n'))
        .and_then(|(_, block)| block.split_once("\n```\n"))
        .map(|(code, _)| format!("{code}\n"))
        .unwrap_or_default();
    let out = std::path::Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("readme_first_eval.rs");
    std::fs::write(out, code).expect("write the README's first eval");
}
