//! helper.rs's tests.

use super::*;

/// The session started beside the install runs the helper once the install
/// moved it into place, and gives up (127) when it never comes.
#[test]
fn the_session_waits_for_the_install_then_runs_the_helper() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("reeval-wait-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let helper = dir.join("helper");
    let waiting = std::process::Command::new("sh")
        .args(["-c", WAIT_FOR_INSTALL, "sh"])
        .arg(&helper)
        .args(["served", "as", "asked"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // As the install does: written beside, made executable, moved in whole.
    let tmp = dir.join("helper.tmp");
    std::fs::write(&tmp, "#!/bin/sh\necho \"$@\"\n").unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::rename(&tmp, &helper).unwrap();
    let out = waiting.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "served as asked\n");

    // Never installed: it ends on its own (the bound shortened for the test).
    let short = WAIT_FOR_INSTALL.replace("3000", "20");
    let gone = std::process::Command::new("sh")
        .args(["-c", &short, "sh"])
        .arg(dir.join("never"))
        .status()
        .unwrap();
    assert_eq!(gone.code(), Some(127));
    let _ = std::fs::remove_dir_all(&dir);
}

fn version(kind: u8, size: u64) -> Version {
    Version { kind, mode: 0o644, size, mtime: (1, 2), ctime: (3, 4) }
}

#[test]
fn an_answer_parses_back_byte_for_byte() {
    let bytes = answer(
        &[
            (b"caf\xe9.txt", Some((version(b'f', 3), Some(b"abc")))),
            (b"huge", Some((version(b'f', 1 << 31), None))),
            (b"pipe", Some((version(b'p', 0), None))),
            (b"gone", None),
        ],
        true,
    );
    let parsed = parse(&bytes).expect("parses");
    assert!(parsed.since && parsed.stored);
    assert_eq!(
        parsed.changes,
        [
            Changed::New {
                path: b"caf\xe9.txt",
                version: version(b'f', 3),
                content: Some(b"abc"),
                not_captured: false
            },
            Changed::New {
                path: b"huge",
                version: version(b'f', 1 << 31),
                content: None,
                not_captured: true
            },
            Changed::New {
                path: b"pipe",
                version: version(b'p', 0),
                content: None,
                not_captured: false
            },
            Changed::Gone { path: b"gone" },
        ]
    );
}

#[test]
fn a_cut_or_foreign_answer_is_not_one() {
    let bytes = answer(&[(b"a", Some((version(b'f', 1), Some(b"x")))), (b"b", None)], false);
    assert!(parse(&bytes).is_some());
    for cut in 0..bytes.len() {
        assert!(parse(&bytes[..cut]).is_none(), "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(parse(&longer).is_none());
    assert!(parse(b"garbage").is_none());
    assert!(parse(b"OCI runtime exec failed: no such file").is_none());
}

#[test]
fn an_answer_naming_a_path_out_of_the_workspace_is_not_one() {
    let file = || Some((version(b'f', 1), Some(&b"x"[..])));
    for path in [&b"../up"[..], b"/etc/passwd", b"a/../../b", b"./a", b"a//b", b"", b"a\0b"] {
        assert!(parse(&answer(&[(b"ok", file()), (path, file())], false)).is_none(), "{path:?}");
        assert!(parse(&answer(&[(path, None)], true)).is_none(), "gone {path:?}");
    }
    assert!(parse(&answer(&[(b"a/..b/c..", file()), (b"caf\xe9", None)], true)).is_some());
}

#[test]
fn the_helper_is_named_by_its_content_in_roots_directory() {
    assert!(HELPER_BINARY.len() > 1000, "the build script embeds the helper");
    assert!(HELPER_BINARY.starts_with(b"\x7fELF"));
    let name = HELPER_PATH.strip_prefix("/var/lib/reeval-diff/reeval-diff-").expect("in its dir");
    assert_eq!(name.len(), 12);
}

#[tokio::test]
async fn chunks_are_read_across_reads_and_an_early_end_is_none() {
    let mut raw = Vec::new();
    for chunk in [&b"so"[..], b"x12345678", b""] {
        raw.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        raw.extend_from_slice(chunk);
    }
    let pieces: Vec<_> = raw.chunks(3).map(|c| Ok(bytes::Bytes::copy_from_slice(c))).collect();
    let stream = ExecStream {
        input: Box::pin(tokio::io::sink()),
        output: futures_util::stream::iter(pieces).boxed(),
    };
    let mut chunks = Chunks::new(stream);
    assert_eq!(chunks.next().await.as_deref(), Some(&b"so"[..]));
    assert_eq!(chunks.next().await.as_deref(), Some(&b"x12345678"[..]));
    assert_eq!(chunks.next().await.as_deref(), Some(&b""[..]));
    assert_eq!(chunks.next().await, None);
}
