//! Every test that needs Docker is compiled as ignored where there is no
//! Docker engine (build.rs sets `cfg(reeval_no_docker)`), so that libtest
//! reports it as ignored rather than as a pass that ran nothing. This test
//! reads the test sources and names each Docker test missing the attribute.

use std::path::Path;

const ATTR: &str = "cfg_attr(reeval_no_docker, ignore";

/// `text` without whitespace, so a wrapped attribute reads as one.
fn squeezed(text: &str) -> String {
    text.split_whitespace().collect()
}

fn is_test_attr(line: &str) -> bool {
    let line = line.trim();
    line.starts_with("#[tokio::test") || line == "#[test]"
}

/// The tests in `text` that call `require_docker!`/`docker_ready()` without the attribute.
fn unmarked(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut missing = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if !is_test_attr(line) {
            continue;
        }
        let mut first_attr = at;
        // Up to the item before: attributes may wrap over several lines.
        while first_attr > 0 && {
            let above = lines[first_attr - 1].trim();
            !above.is_empty() && !above.ends_with('}') && !above.ends_with(';')
        } {
            first_attr -= 1;
        }
        let Some(fn_at) = (at..lines.len()).find(|&i| lines[i].contains("fn ")) else { continue };
        let indent = lines[fn_at].len() - lines[fn_at].trim_start().len();
        let close = format!("{}}}", " ".repeat(indent));
        let end = (fn_at + 1..lines.len()).find(|&i| lines[i] == close).unwrap_or(lines.len());
        let body = lines[fn_at..end].join("\n");
        let attrs = lines[first_attr..fn_at].join("\n");
        let uses_docker = body.contains("require_docker!") || body.contains("docker_ready()");
        if uses_docker && !squeezed(&attrs).contains(&squeezed(ATTR)) {
            missing.push(lines[fn_at].trim().to_string());
        }
    }
    missing
}

#[test]
fn every_docker_test_is_ignored_without_docker() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut missing = Vec::new();
    let mut marked = 0;
    // The test files and their modules one directory down (tests/<suite>/*.rs).
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap().flatten() {
        let path = entry.path();
        match std::fs::read_dir(&path) {
            Ok(sub) => paths.extend(sub.flatten().map(|e| e.path())),
            Err(_) => paths.push(path),
        }
    }
    for path in paths {
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("honest_skips.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        marked += squeezed(&text).matches(&squeezed(ATTR)).count();
        for f in unmarked(&text) {
            missing.push(format!("{}: {f}", path.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "tests that need Docker without #[cfg_attr(reeval_no_docker, ignore = \"…\")]:\n{}",
        missing.join("\n")
    );
    assert!(marked > 100, "the scan found only {marked} marked tests: is it reading tests/?");
}

#[test]
fn the_scan_finds_an_unmarked_docker_test() {
    let text = concat!("#[tokio::test]\nasync fn a() {\n    require_", "docker!();\n}\n");
    assert_eq!(unmarked(text), vec!["async fn a() {".to_string()]);
    let marked = format!("#[{ATTR} = \"x\")]\n{text}");
    assert!(unmarked(&marked).is_empty());
}
