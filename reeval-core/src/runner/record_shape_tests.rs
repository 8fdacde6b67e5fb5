//! The shape of what a run writes as JSON (every record, the summary, the
//! trajectories), held to `record_shape.txt`: each file's keys and the types of
//! their values, with times, ids and paths normalised away by keeping only
//! types. A key added, removed or renamed fails here; a deliberate change is
//! re-blessed with `REEVAL_BLESS=1` (and the diff reviewed).

use crate::settings::Settings;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::attempt::tests::{Script, scripted};
use crate::environment::Environment;
use crate::eval::Eval;
use crate::harness::HarnessRegistry;
use crate::matchers::expect;
use crate::runner::{RunConfig, Runner};

const SHAPE: &str = "src/runner/record_shape.txt";

/// A small suite with every kind of record: a pass with a turn that changed
/// a file, a failed check, an eval that cannot run (no phase at all).
fn suite() -> Vec<Eval> {
    let changes = Eval::new("changes", |c| {
        Box::pin(async move {
            let turn = c.send("write hello.txt hi").await?;
            expect(turn.diff.paths().join(",")).to_equal("hello.txt")?;
            expect(c.exec("true").await?).to_succeed()
        })
    })
    .environment(|| Environment::new().file("a.txt", "a").setup("true"))
    .harness("script")
    .trials(2);
    let fails = Eval::new("fails", |c| {
        Box::pin(async move { expect(c.exec("exit 1").await?).to_succeed() })
    })
    .harness("script");
    let broken =
        Eval::cannot_run("broken", "failed to parse the eval on purpose").harness("script");
    vec![changes, fails, broken]
}

/// Every type a value at `path` had, per path (arrays as `[]`, their elements merged).
fn shape_of(value: &Value, path: String, out: &mut BTreeMap<String, BTreeSet<&'static str>>) {
    let kind = match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(items) => {
            for item in items {
                shape_of(item, format!("{path}[]"), out);
            }
            "array"
        }
        Value::Object(map) => {
            for (key, v) in map {
                shape_of(v, format!("{path}.{key}"), out);
            }
            "object"
        }
    };
    out.entry(path).or_default().insert(kind);
}

/// Every JSON file under `dir`, by its path under it.
fn json_files(dir: &Path, under: &str, out: &mut BTreeMap<String, Value>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = format!("{under}{}", e.file_name().to_string_lossy());
        if e.path().is_dir() {
            json_files(&e.path(), &format!("{name}/"), out);
        } else if name.ends_with(".json") {
            let text = std::fs::read_to_string(e.path()).unwrap();
            out.insert(name, serde_json::from_str(&text).expect("the file is JSON"));
        }
    }
}

/// The shape of a run directory's JSON files, one `file path: types` line each.
fn shape(run_dir: &Path) -> String {
    let mut files = BTreeMap::new();
    json_files(run_dir, "", &mut files);
    let mut text = String::new();
    for (name, value) in files {
        let mut paths = BTreeMap::new();
        shape_of(&value, String::new(), &mut paths);
        for (path, kinds) in paths {
            let kinds: Vec<&str> = kinds.into_iter().collect();
            text.push_str(&format!(
                "{name} {}: {}\n",
                if path.is_empty() { "." } else { &path },
                kinds.join("|")
            ));
        }
    }
    text
}

#[tokio::test]
async fn the_record_json_keeps_its_shape() {
    let dir = std::env::temp_dir().join(format!(
        "reeval-shape-{}-{}",
        std::process::id(),
        crate::runner::new_run_id()
    ));
    let config = RunConfig::from(Settings {
        record_dir: dir.clone(),
        run_id: "shape".into(),
        infra_retries: 0,
        test_threads: 1,
        // One summary.json, as a run outside nextest writes it.
        under_nextest: false,
        ..Settings::default()
    });
    let mut harnesses = HarnessRegistry::new();
    harnesses.register("script", |_| Box::new(Script));
    let runner = Runner::new(config, harnesses).with_backend(Arc::new(scripted()));
    let report = runner.run(suite()).await.expect("preflight");
    let got = shape(&report.run_dir);
    let _ = std::fs::remove_dir_all(&dir);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SHAPE);
    if std::env::var("REEVAL_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got != want {
        let diff: Vec<String> = diff_lines(&want, &got);
        panic!(
            "the run's JSON changed shape against {SHAPE} (- there, + now):\n{}\n(run with REEVAL_BLESS=1 to rewrite it, and review the diff)",
            diff.join("\n")
        );
    }
}

/// The lines only in `want` (`- `) and only in `got` (`+ `).
fn diff_lines(want: &str, got: &str) -> Vec<String> {
    let (w, g): (BTreeSet<&str>, BTreeSet<&str>) = (want.lines().collect(), got.lines().collect());
    w.difference(&g)
        .map(|l| format!("- {l}"))
        .chain(g.difference(&w).map(|l| format!("+ {l}")))
        .collect()
}
