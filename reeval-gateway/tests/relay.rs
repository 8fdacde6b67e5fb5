//! The embedded `reeval-relay`, run on the host: serve (TCP → unix socket,
//! both ways, half-close), verify (closed and open ports) and start.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use reeval_gateway::relay::{RELAY_BINARY, RelayReport, SANDBOX_PROXY_ADDR, start_argv};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("reeval-relay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn relay_exe(dir: &Path) -> PathBuf {
    let path = dir.join("reeval-relay");
    std::fs::write(&path, RELAY_BINARY).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A unix socket server that reads until EOF (so the client's half-close
/// must come through), then answers `got: <what it read>` and closes.
fn half_close_server(path: &Path) -> thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            thread::spawn(move || {
                let mut got = Vec::new();
                stream.read_to_end(&mut got).unwrap();
                stream.write_all(b"got: ").unwrap();
                stream.write_all(&got).unwrap();
            });
        }
    })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_listening(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(addr).is_err() {
        assert!(Instant::now() < deadline, "the relay never listened on {addr}");
        thread::sleep(Duration::from_millis(10));
    }
}

fn through(addr: &str, payload: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(payload).unwrap();
    tcp.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    tcp.read_to_end(&mut out).unwrap();
    out
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_relay_is_static_and_small() {
    assert!(RELAY_BINARY.starts_with(b"\x7fELF"));
    // No PT_INTERP program header: no dynamic loader, so it runs in any image.
    let b = RELAY_BINARY;
    let u16_at = |o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(b[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    assert!(phnum > 0);
    for i in 0..phnum {
        let p_type = u32::from_le_bytes(b[phoff + i * phentsize..][..4].try_into().unwrap());
        assert_ne!(p_type, 3, "the relay has an interpreter (PT_INTERP): it is not static");
    }
    assert!(RELAY_BINARY.len() < 2 * 1024 * 1024, "the relay is {} bytes", RELAY_BINARY.len());
}

#[test]
fn serve_relays_both_ways_with_half_close() {
    let dir = TempDir::new("serve");
    let exe = relay_exe(&dir.0);
    let socket = dir.0.join("gateway.sock");
    let _server = half_close_server(&socket);
    let listen = format!("127.0.0.1:{}", free_port());
    let _relay = Killed(
        Command::new(&exe)
            .args(["serve", "--listen", &listen, "--socket"])
            .arg(&socket)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_listening(&listen);
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let out = through(&listen, &big);
    assert_eq!(&out[..5], b"got: ");
    assert!(out[5..] == big[..], "the payload came back changed ({} bytes)", out.len() - 5);
    // Connections are independent.
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let listen = listen.clone();
            thread::spawn(move || through(&listen, format!("conn {i}").as_bytes()))
        })
        .collect();
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.join().unwrap(), format!("got: conn {i}").into_bytes());
    }
}

#[test]
fn verify_reports_closed_and_open_ports() {
    let dir = TempDir::new("verify");
    let exe = relay_exe(&dir.0);
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let open_addr = open.local_addr().unwrap().to_string();
    let closed_addr = format!("127.0.0.1:{}", free_port());
    let out = Command::new(&exe)
        .args(["verify", "--tcp", &format!("{closed_addr},{open_addr},not-an-addr"), "--dns"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let report: RelayReport = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report.tcp.len(), 3);
    assert_eq!(
        (report.tcp[0].addr.as_str(), report.tcp[0].connected),
        (closed_addr.as_str(), false)
    );
    assert!(report.tcp[0].error.is_some());
    assert_eq!((report.tcp[1].addr.as_str(), report.tcp[1].connected), (open_addr.as_str(), true));
    assert!(!report.tcp[2].connected);
    // Whether the host's DNS answers depends on the machine; that the probe ran does not.
    let dns = report.dns.as_ref().expect("--dns reports");
    assert!(dns.servers.iter().any(|s| s == "1.1.1.1:53"));
    assert!(!report.isolated(), "an open port is not isolation");
}

#[test]
fn start_verifies_then_serves_in_the_background() {
    let dir = TempDir::new("start");
    let exe = relay_exe(&dir.0);
    let socket = dir.0.join("gateway.sock");
    let _server = half_close_server(&socket);
    let listen = format!("127.0.0.1:{}", free_port());
    let closed = format!("127.0.0.1:{}", free_port());
    let started = Instant::now();
    let out = Command::new(&exe)
        .args(["start", "--listen", &listen, "--socket"])
        .arg(&socket)
        .args(["--tcp", &closed])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    let report: RelayReport = serde_json::from_str(&stdout).unwrap();
    let pid = report.pid.expect("start reports the relay's pid");
    let _kill = KillPid(pid);
    assert_eq!(report.listening, Some(true));
    assert!(report.isolated());
    assert!(report.socket.as_ref().is_some_and(|s| s.connected), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // `start` has exited; its background relay still serves.
    assert_eq!(through(&listen, b"after start"), b"got: after start");
    // The runner's argv for the same exec.
    let argv = start_argv(&["172.17.0.1:2375".parse().unwrap()], true);
    assert_eq!(
        argv[1..],
        [
            "start",
            "--listen",
            SANDBOX_PROXY_ADDR,
            "--socket",
            "/run/reeval/gateway.sock",
            "--tcp",
            "172.17.0.1:2375",
            "--dns"
        ]
    );
}

struct KillPid(u32);

impl Drop for KillPid {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.to_string()).status();
    }
}

/// `supervise`, as a sandbox's main process: it verifies, installs the CA,
/// serves, and reports to the gateway through the socket; the first report
/// is the one kept. Killing `serve` leaves the supervisor (the sandbox) alive.
// Multi-threaded: the test talks to the gateway with blocking std I/O.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn supervise_reports_to_the_gateway_and_outlives_its_relay() {
    let dir = TempDir::new("supervise");
    let exe = relay_exe(&dir.0);
    let gateway = reeval_gateway::Gateway::new(reeval_gateway::GatewayOptions::default()).unwrap();
    let attempt = gateway.attempt(reeval_gateway::Policy::deny_all(), Vec::new()).unwrap();
    let socket = dir.0.join("gateway.sock");
    let _serving = attempt.bind_unix(&socket).unwrap();
    let ca = dir.0.join("ca.pem");
    std::fs::write(&ca, gateway.ca_pem()).unwrap();
    let (ca_to, bundle) = (dir.0.join("store/reeval.crt"), dir.0.join("certs/bundle.crt"));
    std::fs::create_dir_all(dir.0.join("certs")).unwrap();
    std::fs::write(&bundle, "-----SYSTEM ROOTS-----\n").unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let closed = format!("127.0.0.1:{}", free_port());
    let mut supervisor = Command::new(&exe)
        .args([
            "supervise",
            "--listen",
            &listen,
            "--socket",
            socket.to_str().unwrap(),
            "--tcp",
            &closed,
        ])
        .args([
            "--ca",
            ca.to_str().unwrap(),
            "--ca-to",
            ca_to.to_str().unwrap(),
            "--ca-bundle",
            bundle.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let report = attempt.isolation(Duration::from_secs(10)).await.expect("a report");
    assert!(report.isolated() && report.listening == Some(true), "{report:?}");
    assert_eq!(report.tcp.len(), 1);
    assert_eq!(report.ca.as_ref().map(|c| c.installed), Some(true), "{report:?}");
    assert_eq!(std::fs::read_to_string(&ca_to).unwrap(), gateway.ca_pem());
    let bundle_text = std::fs::read_to_string(&bundle).unwrap();
    assert!(
        bundle_text.starts_with("-----SYSTEM ROOTS-----")
            && bundle_text.contains(gateway.ca_pem().trim())
    );

    // A second report (anything that runs later in the sandbox) is refused.
    let forged = r#"{"tcp":[],"listening":true}"#;
    let mut s = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    write!(s, "POST /_reeval/isolation HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{forged}", forged.len()).unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 409"), "{answer}");

    // Killing the relay (`serve`) loses the way out; the supervisor lives on.
    let pid = report.pid.expect("serve's pid");
    assert!(Command::new("kill").arg(pid.to_string()).status().unwrap().success());
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(&listen).is_ok() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(20));
    }
    assert!(TcpStream::connect(&listen).is_err(), "the relay still listens");
    thread::sleep(Duration::from_millis(200));
    assert!(supervisor.try_wait().unwrap().is_none(), "the supervisor ended with its relay");
    supervisor.kill().unwrap();
    supervisor.wait().unwrap();
}

/// `supervise --session`: the session's program gets the supervisor's own
/// stdin and stdout (the sandbox's, which the engine's attach reaches), and
/// where it cannot start, the first line on stdin is answered
/// `reeval-session-failed`, so nobody waits for a session that is not there.
#[test]
fn supervise_starts_the_session_on_its_stdio_or_says_it_could_not() {
    let dir = TempDir::new("session");
    let exe = relay_exe(&dir.0);
    let supervise = |session: &[&str]| {
        let socket = dir.0.join("none.sock");
        let listen = format!("127.0.0.1:{}", free_port());
        // Its own process group: `serve`, its child, is killed with it (see `stop`).
        Command::new(&exe)
            .args(["supervise", "--listen", &listen, "--socket", socket.to_str().unwrap()])
            .arg("--session")
            .args(session)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap()
    };
    // The supervisor and every process it started (a `serve` left running would hold
    // whatever this test process holds open, the test lock of scripts/test.sh among them).
    let stop = |mut child: Child| {
        let group = format!("-{}", child.id());
        assert!(Command::new("kill").args(["-KILL", "--", &group]).status().unwrap().success());
        child.wait().unwrap();
    };
    let first_line = |child: &mut Child, asked: &str| {
        child.stdin.as_mut().unwrap().write_all(asked.as_bytes()).unwrap();
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        let out = child.stdout.as_mut().unwrap();
        while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
            line.push(byte[0]);
        }
        String::from_utf8(line).unwrap()
    };
    let mut child =
        supervise(&["sh", "-c", "read l; echo \"session heard $l\"; echo ' and more' >&2"]);
    assert_eq!(first_line(&mut child, "hello\n"), "session heard hello");
    // The session's end is not the supervisor's.
    thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "the supervisor lives on");
    stop(child);

    let mut child = supervise(&["/nonexistent/reeval-session"]);
    assert_eq!(first_line(&mut child, "hello\n"), "reeval-session-failed");
    stop(child);
    // `--session` with nothing after it is a usage error.
    let out = Command::new(&exe).args(["supervise", "--session"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--session needs a program"));
}
