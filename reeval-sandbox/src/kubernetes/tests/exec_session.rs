//! Exec over the websocket as a v1.20 server speaks it: both streams and the
//! exit code from the status, bounded capture, stdin in chunks with the
//! environment at its head (never in the request), the prologue, files in
//! and out as tar, and a connection that breaks.

use super::*;

#[tokio::test]
async fn exec_gives_both_streams_and_the_exit_code_from_the_status() {
    let api = FakeApi::start(cluster(|_| Session {
        stdout: b"out\n".to_vec(),
        stderr: b"err\n".to_vec(),
        status: exited(3),
    }))
    .await;
    let sandbox = sandbox(&api).await;
    let cmd = Command::new("sh")
        .arg("-c")
        .arg("echo out; echo err >&2; exit 3")
        .workdir("/workspace")
        .user("1000:1000");
    let env = [("CI".to_string(), "1".to_string())];
    let out = sandbox.exec(ExecRequest::plain(&cmd, &env)).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str(), out.stderr.as_str()), (3, "out\n", "err\n"));
    // The prologue carries what the exec API cannot: directory, environment (on stdin), no stdin, user.
    let exec = api.seen().into_iter().find(|s| s.target.contains("/exec?")).unwrap();
    assert!(exec.target.contains("container=sandbox"), "{}", exec.target);
    assert!(
        exec.protocols.starts_with("v5.channel.k8s.io"),
        "v5 is offered first: {}",
        exec.protocols
    );
    assert_eq!(exec.argv[..2], ["/bin/sh", "-c"]);
    assert_eq!(
        exec.argv[4..],
        [
            "/workspace",
            "14", // `export 'CI=1'` and a newline
            "",
            "1000:1000", // the prologue switches to it (see `image_user.rs`)
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3"
        ]
    );

    let ok = FakeApi::start(cluster(|_| Session {
        stdout: b"fine".to_vec(),
        stderr: vec![],
        status: exited(0),
    }))
    .await;
    let out = sandbox_exec(&ok, Command::new("true")).await.unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (0, "fine"));
}

async fn sandbox_exec(
    api: &FakeApi,
    cmd: Command,
) -> Result<crate::exec::ExecOutput, SandboxError> {
    sandbox(api).await.exec(ExecRequest::plain(&cmd, &[])).await
}

#[tokio::test]
async fn capture_is_bounded_and_the_total_is_counted() {
    let big = 3 * CAPTURE_LIMIT;
    let api = FakeApi::start(cluster(move |_| Session {
        stdout: vec![b'a'; big],
        stderr: vec![b'b'; big],
        status: exited(0),
    }))
    .await;
    let out = sandbox_exec(&api, Command::new("yes")).await.unwrap();
    assert_eq!(out.stdout_bytes, big as u64);
    assert_eq!(out.stderr_bytes, big as u64);
    assert!(out.stdout.len() < CAPTURE_LIMIT + 100, "{}", out.stdout.len());
    assert!(out.stderr.contains("bytes omitted"));
}

#[tokio::test]
async fn a_socket_closed_without_a_status_is_an_infra_error() {
    let api = FakeApi::start(cluster(|_| Session {
        stdout: b"partial".to_vec(),
        stderr: vec![],
        status: None,
    }))
    .await;
    let e = sandbox_exec(&api, Command::new("make")).await.unwrap_err();
    assert!(e.to_string().contains("closed without a status"), "{e}");
    // An engine's error: reeval-core's `outcome::classify` takes it as infra (its tests).
    assert!(matches!(e, SandboxError::Engine { .. }), "{e:?}");
}

#[tokio::test]
async fn stdin_is_length_delimited_and_sent_in_chunks_without_a_close() {
    let api = FakeApi::start(cluster(|r| Session {
        stdout: format!("{}", r.stdin.len()).into_bytes(),
        stderr: vec![],
        status: exited(0),
    }))
    .await;
    let input = vec![7u8; 3 * super::exec::STDIN_CHUNK + 5];
    let out = sandbox_exec(&api, Command::new("wc").arg("-c").stdin(input.clone())).await.unwrap();
    assert_eq!(out.stdout, input.len().to_string());
    let exec = api.seen().into_iter().find(|s| s.target.contains("/exec?")).unwrap();
    assert_eq!(exec.argv[6], input.len().to_string());
    assert!(exec.target.contains("stdin=true"));
    assert_eq!(exec.stdin, input);
}

#[tokio::test]
async fn the_environment_goes_on_stdin_and_never_into_the_request() {
    let api =
        FakeApi::start(cluster(|_| Session { stdout: vec![], stderr: vec![], status: exited(0) }))
            .await;
    let secret = "s3cr3t-'value' with $(rm -rf /) and\nnewline";
    let env = [("API_TOKEN".to_string(), secret.to_string())];
    let cmd = Command::new("cat").stdin(b"payload".to_vec());
    sandbox(&api).await.exec(ExecRequest::plain(&cmd, &env)).await.unwrap();
    let exec = api.seen().into_iter().find(|s| s.target.contains("/exec?")).unwrap();
    // Not in the URL (the API server's logs), not in any argv (`/proc/*/cmdline`).
    assert!(!exec.target.contains("s3cr3t"), "{}", exec.target);
    assert!(exec.argv.iter().all(|a| !a.contains("s3cr3t") && !a.contains("API_TOKEN")));
    // On stdin, single-quoted for the prologue's `eval`, ahead of the command's own stdin.
    let block = String::from_utf8(exec.env_block.clone()).unwrap();
    assert_eq!(block, format!("export 'API_TOKEN={}'\n", secret.replace('\'', r"'\''")));
    assert_eq!(exec.argv[5], block.len().to_string());
    assert_eq!(exec.stdin, b"payload");
    // A name a shell cannot export is refused before anything is sent, its value unnamed.
    let bad = [("NOT-A-NAME".to_string(), "hidden".to_string())];
    let e = sandbox(&api).await.exec(ExecRequest::plain(&cmd, &bad)).await.unwrap_err();
    assert!(e.to_string().contains("NOT-A-NAME") && !e.to_string().contains("hidden"), "{e}");
}

/// The prologue as the pod's `sh` runs it: the block is read, `eval`ed and
/// exported, the command gets the rest of stdin, and no value is in any argv.
#[test]
fn the_prologue_exports_the_block_and_passes_the_rest_of_stdin() {
    let secret = "it's \"q\" $(touch /tmp/pwned) `x`\nline2";
    let spec = super::exec::ExecSpec {
        argv: vec![
            "sh".into(),
            "-c".into(),
            "printf '%s|' \"$TOKEN\"; cat; cat /proc/$$/cmdline | tr '\\0' ' '".into(),
        ],
        env: vec![("TOKEN".into(), secret.into())],
        stdin: super::exec::Stdin::Bytes(b"rest"),
        ..Default::default()
    };
    let argv = spec.full_argv().unwrap();
    let mut input = spec.env_block().unwrap();
    input.extend_from_slice(b"rest");
    let mut child = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(&input).unwrap();
    let out = child.wait_with_output().unwrap();
    let out = String::from_utf8(out.stdout).unwrap();
    assert!(out.starts_with(&format!("{secret}|rest")), "{out}");
    assert!(!out[secret.len()..].contains("line2"), "a value in a cmdline: {out}");
    assert!(!std::path::Path::new("/tmp/pwned").exists());
}

#[tokio::test]
async fn files_go_in_and_out_as_tar_over_exec() {
    let file =
        archive::tar_of(&[crate::FileToWrite::new("greet.py", b"def greet(): pass\n", 0o644)])
            .unwrap();
    let sent = file.clone();
    let api = FakeApi::start(cluster(move |r| {
        let script = r.argv.join(" ");
        if script.contains("tar -x") {
            Session {
                stdout: vec![],
                stderr: vec![],
                status: exited(if r.stdin == sent { 0 } else { 1 }),
            }
        } else if r.argv.last().map(String::as_str) == Some("missing") {
            Session { stdout: vec![], stderr: vec![], status: exited(44) }
        } else {
            Session { stdout: sent.to_vec(), stderr: vec![], status: exited(0) }
        }
    }))
    .await;
    let sandbox = sandbox(&api).await;
    sandbox.upload("/workspace", file.clone()).await.unwrap();
    let down = sandbox.download("/workspace/greet.py", 1 << 20).await.unwrap();
    assert_eq!(archive::single_file(&down, "greet.py").unwrap(), b"def greet(): pass\n");
    // The first upload waits until the pod works (its probe): files may go in before start.
    let execs: Vec<Seen> = api.seen().into_iter().filter(|s| s.target.contains("/exec?")).collect();
    assert!(is_probe(&execs[0]), "{:?}", execs[0].argv);
    let execs = &execs[1..];
    assert_eq!(execs[0].argv[4], "/workspace", "unpacked in the directory");
    // As root (no user to switch to), so that tar keeps the archive's owners.
    assert_eq!(execs[0].argv[7..], ["", "tar", "-x", "-f", "-", "--no-overwrite-dir"]);
    assert_eq!(execs[1].argv[4], "/workspace", "packed from the parent");
    assert_eq!(execs[1].argv.last().unwrap(), "greet.py");
    // Over the limit: an archive error, not a truncated archive.
    let e = sandbox.download("/workspace/greet.py", 10).await.unwrap_err();
    assert!(matches!(e, SandboxError::Archive { .. }), "{e}");
    let e = sandbox.download("/workspace/missing", 1 << 20).await.unwrap_err();
    assert!(matches!(e, SandboxError::NotFound { .. }), "{e}");
}

#[tokio::test]
async fn an_exec_whose_connection_breaks_is_an_infra_error_not_a_wait() {
    let api = FakeApi::start(cluster(|r| {
        if is_probe(r) {
            return Session { stdout: vec![], stderr: vec![], status: exited(0) };
        }
        Session { stdout: b"partial".to_vec(), stderr: vec![], status: Some(broken()) }
    }))
    .await;
    let sandbox = sandbox(&api).await;
    sandbox.start().await.unwrap();
    let cmd = Command::new("sh").arg("-c").arg("echo partial; sleep 60");
    let run = sandbox.exec(ExecRequest::plain(&cmd, &[]));
    let e = tokio::time::timeout(std::time::Duration::from_secs(10), run)
        .await
        .expect("it ends: kube-rs leaves the pipes of a broken connection open")
        .unwrap_err();
    assert!(e.to_string().contains("closed without a status"), "{e}");
}
