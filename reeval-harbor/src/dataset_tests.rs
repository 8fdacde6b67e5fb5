//! Finding tasks: local datasets with Harbor's filters, and registry datasets
//! fetched with git from local repositories at pinned commits.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::registry::Registry;

/// A fresh directory under the temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reeval-dataset-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn task(dir: &Path, greeting: &str) {
    std::fs::create_dir_all(dir.join("environment")).unwrap();
    std::fs::write(dir.join("task.toml"), "").unwrap();
    std::fs::write(dir.join("instruction.md"), greeting).unwrap();
    std::fs::write(dir.join("environment/Dockerfile"), "FROM reeval/base:latest\n").unwrap();
}

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository with `tasks/hello` at two commits (saying `v1`, then `v2`)
/// and `tasks/bye` from the second; returns (repo, first commit, second).
fn repository(root: &Path) -> (PathBuf, String, String) {
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet"]);
    task(&repo.join("tasks/hello"), "v1");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "one"]);
    let first = git(&repo, &["rev-parse", "HEAD"]);
    task(&repo.join("tasks/hello"), "v2");
    task(&repo.join("tasks/bye"), "bye");
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "two"]);
    let second = git(&repo, &["rev-parse", "HEAD"]);
    (repo, first, second)
}

fn registry(root: &Path, repo: &Path, first: &str, second: &str) -> Registry {
    let url = repo.display();
    let text = format!(
        r#"[
  {{"name": "bench", "version": "1.0", "description": "", "tasks": [
    {{"name": "org/hello", "git_url": "{url}", "git_commit_id": "{first}", "path": "tasks/hello"}}]}},
  {{"name": "bench", "version": "1.1", "description": "", "tasks": [
    {{"name": "org/hello", "git_url": "{url}", "git_commit_id": "{second}", "path": "tasks/hello"}},
    {{"name": "org/bye", "git_url": "{url}", "git_commit_id": "{second}", "path": "tasks/bye"}},
    {{"name": "org/ghost", "git_url": "{url}", "git_commit_id": "{ghost}", "path": "tasks/hello"}},
    {{"name": "org/nowhere", "git_url": "{url}", "git_commit_id": "{second}", "path": "tasks/nowhere"}},
    {{"name": "org/local", "path": "local-task"}}]}}
]"#,
        ghost = "0123456789abcdef0123456789abcdef01234567",
    );
    std::fs::write(root.join("registry.json"), text).unwrap();
    task(&root.join("local-task"), "local");
    Registry::read(root).unwrap()
}

fn instruction(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("instruction.md")).unwrap()
}

#[test]
fn registry_datasets_are_fetched_at_their_commits_and_reused_offline() {
    let root = scratch("registry");
    let (repo, first, second) = repository(&root);
    let registry = registry(&root, &repo, &first, &second);
    let cache = TaskCache::new(root.join("cache"));
    let source = |version: Option<&str>| Source::Registry {
        registry: registry.clone(),
        name: "bench".into(),
        version: version.map(str::to_string),
    };

    // `bench@1.0`: hello at the first commit.
    let old = find(&source(Some("1.0")), &Selection::default(), &cache).unwrap();
    assert_eq!((old.source.as_deref(), old.version.as_deref()), (Some("bench"), Some("1.0")));
    let hello = old.tasks[0].dir.clone().unwrap();
    assert_eq!(instruction(&hello), "v1");
    assert_eq!(
        hello.file_name().unwrap(),
        "hello",
        "named as Harbor names it: the path's last part"
    );

    // `bench` alone: 1.1, hello at the second commit; a wrong commit and a
    // missing path are those tasks' own errors; a local path is found beside the registry.
    let new = find(&source(None), &Selection::default(), &cache).unwrap();
    assert_eq!(new.version.as_deref(), Some("1.1"));
    let names: Vec<&str> = new.tasks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["hello", "bye", "hello", "nowhere", "local-task"]);
    assert_eq!(instruction(new.tasks[0].dir.as_ref().unwrap()), "v2");
    assert_eq!(instruction(new.tasks[1].dir.as_ref().unwrap()), "bye");
    let ghost = new.tasks[2].dir.clone().unwrap_err();
    assert!(matches!(ghost, DatasetError::Git { ref task, .. } if task == "org/ghost"), "{ghost}");
    assert!(ghost.to_string().contains("0123456789abcdef"), "{ghost}");
    let nowhere = new.tasks[3].dir.clone().unwrap_err().to_string();
    assert!(
        nowhere.starts_with("failed to find Harbor task org/nowhere: tasks/nowhere at commit"),
        "{nowhere}"
    );
    assert_eq!(new.tasks[3].name, "nowhere");
    let local = find(
        &source(None),
        &Selection { task: Some("org/local".into()), ..Default::default() },
        &cache,
    )
    .unwrap();
    assert_eq!(local.tasks[0].dir.as_ref().unwrap(), &root.join("local-task"));
    assert_eq!(local.tasks[0].id, TaskId::Local(PathBuf::from("local-task")));

    // Offline: with the repository gone, the pinned commits come from the cache.
    std::fs::remove_dir_all(&repo).unwrap();
    let again = find(&source(Some("1.0")), &Selection::default(), &cache).unwrap();
    assert_eq!(instruction(again.tasks[0].dir.as_ref().unwrap()), "v1");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn filters_apply_to_directory_names_before_anything_is_read() {
    let root = scratch("filters");
    for name in ["alpha-1", "alpha-2", "beta", "slow-x"] {
        task(&root.join(name), name);
    }
    std::fs::create_dir_all(root.join("not-a-task")).unwrap();
    let names = |s: Selection| -> Vec<String> {
        find(&Source::Path(root.clone()), &s, &TaskCache::new(root.join("cache")))
            .unwrap()
            .tasks
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert_eq!(names(Selection::default()), ["alpha-1", "alpha-2", "beta", "slow-x"]);
    let only = |include: &[&str], exclude: &[&str], n: Option<usize>| Selection {
        include: include.iter().map(|s| s.to_string()).collect(),
        exclude: exclude.iter().map(|s| s.to_string()).collect(),
        n_tasks: n,
        task: None,
    };
    assert_eq!(names(only(&["alpha-*"], &[], None)), ["alpha-1", "alpha-2"]);
    assert_eq!(names(only(&[], &["slow-*", "beta"], None)), ["alpha-1", "alpha-2"]);
    assert_eq!(names(only(&["*"], &["alpha-?"], Some(1))), ["beta"]);
    assert_eq!(names(only(&["[ab]*"], &[], Some(2))), ["alpha-1", "alpha-2"]);
    let cache = TaskCache::new(root.join("cache"));
    let e = find(&Source::Path(root.clone()), &only(&["gamma*"], &[], None), &cache).unwrap_err();
    assert!(
        e.to_string().contains("no task matched -i gamma*; there are 4 tasks, e.g. alpha-1"),
        "{e}"
    );
    let e = find(
        &Source::Path(root.clone()),
        &Selection { task: Some("bta".into()), ..Default::default() },
        &cache,
    )
    .unwrap_err();
    assert!(e.to_string().contains("did you mean `beta`?"), "{e}");
    let found = find(&Source::Path(root.join("beta")), &Selection::default(), &cache).unwrap();
    assert_eq!((found.source, found.tasks.len()), (None, 1), "one task is Harbor's `adhoc`");
    let e =
        find(&Source::Path(root.join("not-a-task")), &Selection::default(), &cache).unwrap_err();
    assert!(e.to_string().contains("is neither a task directory"), "{e}");
    let _ = std::fs::remove_dir_all(&root);
}
