//! `examples/own_agent.rs`: a user's own `Harness`, registered with
//! `reeval::register_harness!`, runs as an eval suite in a real sandbox.

mod common;

use std::process::Command;

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
