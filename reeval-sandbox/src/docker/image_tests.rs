//! image.rs's tests.

use super::*;

#[test]
fn build_output_loses_its_colours() {
    let coloured = "\u{1b}[1;31merror:\u{1b}[0m no such package \u{1b}[2K\r";
    assert_eq!(plain(coloured), "error: no such package ");
}

fn tree(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reeval-image-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn names(tar: &[u8]) -> Vec<String> {
    let mut archive = tar::Archive::new(tar);
    archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect()
}

#[test]
fn a_build_context_honours_dockerignore() {
    let dir = tree(
        "dockerignore",
        &[
            ("Dockerfile", "FROM scratch\n"),
            (
                ".dockerignore",
                "# comment\nDockerfile\n*.log\n!keep.log\nsecrets/\n**/node_modules\nbuild/cache\n/docs/*.md\n!docs/README.md\n.git\n",
            ),
            ("app.py", ""),
            ("debug.log", ""),
            ("keep.log", ""),
            ("sub/deep.log", ""),
            ("secrets/key", ""),
            ("web/node_modules/x/index.js", ""),
            ("node_modules/y.js", ""),
            ("build/cache/blob", ""),
            ("build/out/bin", ""),
            ("docs/guide.md", ""),
            ("docs/README.md", ""),
            ("docs/api/deep.md", ""),
            (".git/HEAD", ""),
            (".env.example", ""),
        ],
    );
    let got = names(&context_tar(&dir, "Dockerfile", None).unwrap());
    assert_eq!(
        got,
        vec![
            ".dockerignore",
            ".env.example",
            "Dockerfile",
            "app.py",
            "build/out/bin",
            "docs/README.md",
            "docs/api/deep.md",
            "keep.log",
            "sub/deep.log",
        ],
        "an ignored file, a `!` re-include, nested dir patterns; `*.log` is anchored at the root as in Docker; the Dockerfile is always sent"
    );
}

#[test]
fn an_exception_reaches_into_an_excluded_directory() {
    let dir = tree(
        "exception",
        &[
            (".dockerignore", "vendor\n!vendor/keep\n"),
            ("vendor/keep", ""),
            ("vendor/drop", ""),
            ("Dockerfile", ""),
        ],
    );
    assert_eq!(
        names(&context_tar(&dir, "Dockerfile", None).unwrap()),
        vec![".dockerignore", "Dockerfile", "vendor/keep"]
    );
}

#[test]
fn fixtures_keep_everything_and_symlinks_stay_links() {
    let dir = tree(
        "fixture",
        &[
            (".dockerignore", "*\n"),
            (".hidden/file", "h"),
            (".gitignore", "*\n"),
            ("a/b.txt", "b"),
            ("a.txt", "a"),
        ],
    );
    std::os::unix::fs::symlink("a", dir.join("link-to-a")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", dir.join("dangling")).unwrap();
    let tar = dir_tar(&dir).unwrap();
    assert_eq!(
        names(&tar),
        vec![
            ".dockerignore",
            ".gitignore",
            ".hidden/file",
            "a/b.txt",
            "a.txt",
            "dangling",
            "link-to-a"
        ]
    );
    let mut archive = tar::Archive::new(&tar[..]);
    for entry in archive.entries().unwrap() {
        let entry = entry.unwrap();
        assert_eq!(entry.header().mtime().unwrap(), 0);
        if entry.path().unwrap().starts_with("link-to-a") {
            assert!(entry.header().entry_type().is_symlink());
            assert_eq!(entry.link_name().unwrap().unwrap().to_str(), Some("a"));
        }
    }
    assert_eq!(dir_tar(&dir).unwrap(), tar, "deterministic");
    assert_eq!(files_under(&dir).unwrap().len(), 7);
    assert!(dir_tar(&dir.join("a.txt")).is_err(), "a file is not a directory");
    assert!(dir_tar(&dir.join("nonexistent")).is_err());
}

#[test]
fn a_bad_dockerignore_pattern_names_the_file_and_line() {
    let dir = tree("bad", &[(".dockerignore", "ok\nunclosed{a,b\n"), ("Dockerfile", "")]);
    let Err(e) = context_tar(&dir, "Dockerfile", None) else {
        panic!("a pattern that does not compile is an error")
    };
    let e = e.to_string();
    assert!(e.contains(".dockerignore: line 2"), "{e}");
}

#[test]
fn digest_depends_on_every_part() {
    assert_eq!(digest_tag(&[b"a", b"b"]), digest_tag(&[b"a", b"b"]));
    assert_ne!(digest_tag(&[b"a", b"b"]), digest_tag(&[b"ab", b""]));
    assert!(digest_tag(&[b"x"]).starts_with("reeval/img:"));
}
