//! `examples/own_agent.rs`: a user's own `Harness`, registered with
//! `reeval::register_harness!`, runs as an eval suite in a real sandbox.

mod common;

use std::process::Command;

#[cfg_attr(
    reeval_no_docker,
    ignore = "no Docker engine here (set REEVAL_REQUIRE_DOCKER=1 to fail instead)"
)]
#[tokio::test]
async fn the_own_agent_example_passes_its_eval() {
    require_docker!();
    let record_dir = common::temp_dir("own-agent");
    let out = Command::new(common::example_bin("own_agent"))
        .env_remove("NEXTEST_RUN_ID")
        .env_remove("NEXTEST")
        .arg("--record-dir")
        .arg(&record_dir)
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("writes_a_tested_greet_module [scripted-agent]: 1/1 passed"),
        "{stdout}"
    );

    let run =
        std::fs::read_dir(&record_dir).unwrap().flatten().next().expect("a run directory").path();
    let record: serde_json::Value =
        std::fs::read(run.join("writes_a_tested_greet_module.scripted-agent.t1.try1.json"))
            .map(|b| serde_json::from_slice(&b).unwrap())
            .expect("the record");
    assert_eq!(record["outcome"], "pass");
    let calls: Vec<&str> = record["turns"][0]["toolCalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["write_file", "write_file", "bash"]);
}

/// The README tells a user to copy `examples/own_agent.rs` into a crate of
/// their own (`tests/evals.rs`, `harness = false`) depending on reeval alone:
/// it must compile there as it is, with nothing reeval does not give it.
#[test]
fn the_own_agent_example_compiles_in_a_crate_of_its_own() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let krate = common::temp_dir("user-crate");
    std::fs::create_dir_all(krate.join("tests")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            r#"[package]
name = "user-evals"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dev-dependencies]
reeval = {{ path = {:?} }}

[[test]]
name = "evals"
harness = false
"#,
            repo.display().to_string()
        ),
    )
    .unwrap();
    std::fs::copy(repo.join("examples/own_agent.rs"), krate.join("tests/evals.rs")).unwrap();
    // The versions this repository is built with, already on this machine: no registry needed.
    std::fs::copy(repo.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();
    std::fs::copy(repo.join("rust-toolchain.toml"), krate.join("rust-toolchain.toml")).unwrap();
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["check", "--tests", "--offline", "--quiet"])
        .current_dir(&krate)
        // Its own target directory, kept between runs (the first one checks every dependency).
        .env("CARGO_TARGET_DIR", repo.join("target/user-crate"))
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let _ = std::fs::remove_dir_all(&krate);
}
