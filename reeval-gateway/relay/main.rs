//! reeval-relay: the in-sandbox half of the egress gateway. std only, built
//! static by reeval-gateway's build script and copied into each sandbox.
//!
//!   reeval-relay serve  --listen 127.0.0.1:3128 --socket /run/reeval/gateway.sock
//!   (`--socket tcp:IP:PORT` instead: a gateway container on the sandbox's network)
//!   reeval-relay verify [--tcp ADDR[,ADDR...]] [--dns] [--socket PATH]
//!   reeval-relay start  --listen ADDR --socket PATH [--tcp ...] [--dns]
//!   reeval-relay supervise --listen ADDR --socket PATH [--tcp ...] [--dns]
//!                          [--ca FILE --ca-to PATH --ca-bundle PATH]
//!                          [--session PROGRAM ARG...]
//!
//! `serve` forwards every TCP connection on the listen address to the unix
//! socket. `verify` proves isolation: each TCP target should fail to connect
//! and no DNS server should answer. `start` verifies, starts `serve` in the
//! background and waits for it to listen, so one exec does both. verify and
//! start print one JSON line.
//!
//! `supervise` is the sandbox's main process: it verifies isolation,
//! installs the per-run CA when asked (as its own file and appended to the
//! system bundle), starts `serve` as a child, sends its report to the
//! gateway through the socket (`POST /_reeval/isolation`), and then lives as
//! long as the sandbox. If `serve` dies (an agent killed it), the sandbox
//! only loses its way out. With `--session` (the rest of the arguments), it
//! first starts that program as a child with the sandbox's own stdin, stdout
//! and stderr, which only the engine's attach reaches: the runner's first
//! session waits there, started without an exec (reeval-core's
//! `diff/prepared.rs`). Its end does not end the sandbox.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const TCP_TIMEOUT: Duration = Duration::from_millis(500);
const DNS_TIMEOUT: Duration = Duration::from_secs(1);
const START_WAIT: Duration = Duration::from_secs(2);
const DNS_NAME: &str = "example.com";
const PUBLIC_RESOLVERS: [&str; 2] = ["1.1.1.1:53", "8.8.8.8:53"];

#[derive(Default)]
struct Args {
    listen: Option<String>,
    socket: Option<String>,
    tcp: Vec<String>,
    dns: bool,
    ca: Option<String>,
    ca_to: Option<String>,
    ca_bundle: Option<String>,
    session: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--listen" => out.listen = Some(value("--listen")?),
            "--socket" => out.socket = Some(value("--socket")?),
            "--tcp" => out.tcp.extend(value("--tcp")?.split(',').filter(|s| !s.is_empty()).map(str::to_owned)),
            "--dns" => out.dns = true,
            "--ca" => out.ca = Some(value("--ca")?),
            "--ca-to" => out.ca_to = Some(value("--ca-to")?),
            "--ca-bundle" => out.ca_bundle = Some(value("--ca-bundle")?),
            "--session" => {
                out.session = it.by_ref().cloned().collect();
                if out.session.is_empty() {
                    return Err("--session needs a program".to_owned());
                }
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let usage = "usage: reeval-relay serve --listen ADDR --socket PATH | verify [--tcp ADDR,...] [--dns] [--socket PATH] | start --listen ADDR --socket PATH [--tcp ADDR,...] [--dns]";
    let Some(mode) = argv.get(1) else {
        eprintln!("{usage}");
        return ExitCode::from(2);
    };
    let args = match parse(&argv[2..]) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("reeval-relay: {e}\n{usage}");
            return ExitCode::from(2);
        }
    };
    match mode.as_str() {
        "serve" => match (&args.listen, &args.socket) {
            (Some(listen), Some(socket)) => match serve(listen, socket) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("reeval-relay: failed to serve on {listen}: {e}");
                    ExitCode::FAILURE
                }
            },
            _ => {
                eprintln!("reeval-relay: serve needs --listen and --socket\n{usage}");
                ExitCode::from(2)
            }
        },
        "verify" => {
            println!("{{{}}}", verify(&args));
            ExitCode::SUCCESS
        }
        "start" => start(&args),
        "supervise" => supervise(&args),
        _ => {
            eprintln!("{usage}");
            ExitCode::from(2)
        }
    }
}

fn serve(listen: &str, socket: &str) -> io::Result<()> {
    let addr: SocketAddr = listen.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "--listen must be IP:PORT"))?;
    let listener = TcpListener::bind(addr)?;
    for stream in listener.incoming() {
        let Ok(tcp) = stream else { continue };
        let socket = socket.to_owned();
        thread::spawn(move || relay(tcp, &socket));
    }
    Ok(())
}

/// One connection: TCP from the agent to the gateway's unix socket, both
/// ways, each direction half-closed when its source ends.
fn relay(tcp: TcpStream, socket: &str) {
    let _ = tcp.set_nodelay(true);
    let Ok(unix) = Upstream::connect(socket) else { return };
    let (Ok(tcp_up), Ok(unix_up)) = (tcp.try_clone(), unix.try_clone()) else { return };
    let up = thread::spawn(move || copy_then_close(tcp_up, unix_up, |u: &Upstream| u.shutdown_write()));
    copy_then_close(unix, tcp, |t: &TcpStream| t.shutdown(Shutdown::Write));
    let _ = up.join();
}

fn copy_then_close<R: Read, W: Write>(mut from: R, mut to: W, close: impl Fn(&W) -> io::Result<()>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = close(&to);
}

/// The body of the JSON object verify prints (without braces).
fn verify(args: &Args) -> String {
    let mut out = String::from("\"tcp\":[");
    for (i, target) in args.tcp.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let result = match target.parse::<SocketAddr>() {
            // Only IP:PORT: a name would need NSS, which a static binary must not use.
            Err(_) => Err("not an IP:PORT address".to_owned()),
            Ok(addr) => TcpStream::connect_timeout(&addr, TCP_TIMEOUT).map(drop).map_err(|e| e.to_string()),
        };
        match result {
            Ok(()) => out.push_str(&format!("{{\"addr\":{},\"connected\":true}}", json(target))),
            Err(e) => out.push_str(&format!("{{\"addr\":{},\"connected\":false,\"error\":{}}}", json(target), json(&e))),
        }
    }
    out.push(']');
    if args.dns {
        out.push_str(",\"dns\":");
        out.push_str(&dns_probe());
    }
    if let Some(socket) = &args.socket {
        match Upstream::connect(socket) {
            Ok(_) => out.push_str(&format!(",\"socket\":{{\"path\":{},\"connected\":true}}", json(socket))),
            Err(e) => out.push_str(&format!(",\"socket\":{{\"path\":{},\"connected\":false,\"error\":{}}}", json(socket), json(&e.to_string()))),
        }
    }
    out
}

/// Sends one A query for example.com to every nameserver in
/// /etc/resolv.conf and to two public resolvers; reports whether any
/// answered within a second.
fn dns_probe() -> String {
    let mut servers: Vec<String> = std::fs::read_to_string("/etc/resolv.conf")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .map(|ns| ns.trim())
        .filter_map(|ns| ns.split('%').next())
        .filter_map(|ns| ns.parse::<std::net::IpAddr>().ok())
        .map(|ip| SocketAddr::new(ip, 53).to_string())
        .collect();
    servers.extend(PUBLIC_RESOLVERS.iter().map(|s| s.to_string()));
    let id: u16 = (std::process::id() as u16) ^ 0x5eed;
    let query = dns_query(id, DNS_NAME);
    let mut errors = Vec::new();
    let mut sockets = Vec::new();
    for server in &servers {
        let Ok(addr) = server.parse::<SocketAddr>() else { continue };
        let bind = if addr.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
        match UdpSocket::bind(bind).and_then(|s| s.connect(addr).map(|_| s)).and_then(|s| s.send(&query).map(|_| s)) {
            Ok(s) => sockets.push(s),
            Err(e) => errors.push(format!("{server}: {e}")),
        }
    }
    let deadline = Instant::now() + DNS_TIMEOUT;
    let mut answered_by = None;
    'wait: while Instant::now() < deadline && !sockets.is_empty() {
        for (i, s) in sockets.iter().enumerate() {
            let _ = s.set_read_timeout(Some(Duration::from_millis(20)));
            let mut buf = [0u8; 512];
            if let Ok(n) = s.recv(&mut buf) {
                if n >= 2 && u16::from_be_bytes([buf[0], buf[1]]) == id {
                    answered_by = s.peer_addr().ok().map(|a| a.to_string()).or(Some(format!("socket {i}")));
                    break 'wait;
                }
            }
        }
    }
    let list = servers.iter().map(|s| json(s)).collect::<Vec<_>>().join(",");
    let errs = errors.iter().map(|s| json(s)).collect::<Vec<_>>().join(",");
    match answered_by {
        Some(by) => format!("{{\"answered\":true,\"by\":{},\"servers\":[{list}],\"errors\":[{errs}]}}", json(&by)),
        None => format!("{{\"answered\":false,\"servers\":[{list}],\"errors\":[{errs}]}}"),
    }
}

/// A standard recursive query for the A record of `name`.
fn dns_query(id: u16, name: &str) -> Vec<u8> {
    let mut q = Vec::with_capacity(32);
    q.extend_from_slice(&id.to_be_bytes());
    q.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

fn start(args: &Args) -> ExitCode {
    let (Some(listen), Some(socket)) = (&args.listen, &args.socket) else {
        eprintln!("reeval-relay: start needs --listen and --socket");
        return ExitCode::from(2);
    };
    let Ok(addr) = listen.parse::<SocketAddr>() else {
        eprintln!("reeval-relay: --listen must be IP:PORT");
        return ExitCode::from(2);
    };
    // Verify first, while nothing of ours listens, so a TCP target can never be our own relay.
    let verify_args = Args { listen: None, socket: Some(socket.clone()), tcp: args.tcp.clone(), dns: args.dns, ..Args::default() };
    let report = verify(&verify_args);
    let spawned = Command::new("/proc/self/exe")
        // Named as itself, so `ps` and `pgrep reeval-relay` find it.
        .arg0("reeval-relay")
        .args(["serve", "--listen", listen, "--socket", socket])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    let (listening, pid) = match spawned {
        Err(e) => {
            println!("{{{report},\"listening\":false,\"error\":{}}}", json(&format!("failed to start serve: {e}")));
            return ExitCode::FAILURE;
        }
        Ok(mut child) => {
            let pid = child.id();
            let deadline = Instant::now() + START_WAIT;
            loop {
                if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                    break (true, pid);
                }
                if let Ok(Some(status)) = child.try_wait() {
                    println!("{{{report},\"listening\":false,\"error\":{}}}", json(&format!("serve exited: {status}")));
                    return ExitCode::FAILURE;
                }
                if Instant::now() >= deadline {
                    break (false, pid);
                }
                thread::sleep(Duration::from_millis(10));
            }
        }
    };
    println!("{{{report},\"listening\":{listening},\"pid\":{pid}}}");
    if listening { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// The sandbox's main process: verify, install the CA, start `serve`, report, then stay.
fn supervise(args: &Args) -> ExitCode {
    let (Some(listen), Some(socket)) = (&args.listen, &args.socket) else {
        eprintln!("reeval-relay: supervise needs --listen and --socket");
        return ExitCode::from(2);
    };
    let Ok(addr) = listen.parse::<SocketAddr>() else {
        eprintln!("reeval-relay: --listen must be IP:PORT");
        return ExitCode::from(2);
    };
    if !args.session.is_empty() {
        start_session(&args.session);
    }
    // Verify first, while nothing of ours listens, so a TCP target can never be our own relay.
    let verify_args = Args { socket: Some(socket.clone()), tcp: args.tcp.clone(), dns: args.dns, ..Args::default() };
    let mut report = verify(&verify_args);
    if let (Some(from), Some(to), Some(bundle)) = (&args.ca, &args.ca_to, &args.ca_bundle) {
        report.push_str(&format!(",\"ca\":{}", install_ca(from, to, bundle)));
    }
    let serve = Command::new("/proc/self/exe")
        // Named as itself, so `ps` and `pgrep reeval-relay` find it.
        .arg0("reeval-relay")
        .args(["serve", "--listen", listen, "--socket", socket])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match serve {
        Ok(child) => child,
        Err(e) => {
            report.push_str(&format!(",\"listening\":false,\"error\":{}", json(&format!("failed to start serve: {e}"))));
            post_report(socket, &format!("{{{report}}}"));
            return stay();
        }
    };
    let deadline = Instant::now() + START_WAIT;
    let listening = loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            break true;
        }
        if matches!(child.try_wait(), Ok(Some(_))) || Instant::now() >= deadline {
            break false;
        }
        thread::sleep(Duration::from_millis(2));
    };
    report.push_str(&format!(",\"listening\":{listening},\"pid\":{}", child.id()));
    post_report(socket, &format!("{{{report}}}"));
    // Reap `serve` when it ends; the sandbox goes on without a way out.
    let _ = child.wait();
    stay()
}

/// Starts the session's program with the sandbox's stdio and reaps it when
/// it ends. Where it cannot start (an image without it), the first line
/// written to the sandbox's stdin is answered `reeval-session-failed` on its
/// stdout, so the runner does not wait for a session that is not there (it
/// then runs its work in an exec, which tells the cause).
fn start_session(argv: &[String]) {
    match Command::new(&argv[0]).args(&argv[1..]).spawn() {
        Ok(mut child) => {
            thread::spawn(move || child.wait());
        }
        Err(e) => {
            eprintln!("reeval-relay: failed to start the session {}: {e}", argv[0]);
            thread::spawn(|| {
                let mut byte = [0u8; 1];
                while matches!(io::stdin().read(&mut byte), Ok(1)) && byte[0] != b'\n' {}
                let _ = io::stdout().write_all(b"reeval-session-failed\n");
            });
        }
    }
}

/// Lives until the sandbox is destroyed.
fn stay() -> ExitCode {
    loop {
        thread::sleep(Duration::from_secs(3600));
    }
}

/// Writes the CA at `from` to `to` and appends it to the system bundle; a JSON object saying how it went.
fn install_ca(from: &str, to: &str, bundle: &str) -> String {
    let installed = (|| -> io::Result<()> {
        let pem = std::fs::read(from)?;
        if let Some(dir) = std::path::Path::new(to).parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(to, &pem)?;
        if let Some(dir) = std::path::Path::new(bundle).parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(bundle)?;
        f.write_all(b"\n")?;
        f.write_all(&pem)
    })();
    match installed {
        Ok(()) => "{\"installed\":true}".to_owned(),
        Err(e) => format!("{{\"installed\":false,\"error\":{}}}", json(&e.to_string())),
    }
}

/// Sends the report to the gateway: one HTTP/1.1 request over the socket.
fn post_report(socket: &str, body: &str) {
    let Ok(mut s) = Upstream::connect(socket) else { return };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let request = format!(
        "POST /_reeval/isolation HTTP/1.1\r\nhost: reeval-gateway\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(request.as_bytes()).is_ok() {
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
    }
}

/// The gateway's end: a unix socket (the gateway on this host) or, as
/// `tcp:IP:PORT`, a gateway container on the sandbox's network (remote engines).
enum Upstream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Upstream {
    fn connect(spec: &str) -> io::Result<Self> {
        match spec.strip_prefix("tcp:") {
            Some(addr) => {
                let addr: SocketAddr = addr.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "tcp: needs IP:PORT"))?;
                let s = TcpStream::connect_timeout(&addr, TCP_TIMEOUT)?;
                let _ = s.set_nodelay(true);
                Ok(Upstream::Tcp(s))
            }
            None => UnixStream::connect(spec).map(Upstream::Unix),
        }
    }

    fn try_clone(&self) -> io::Result<Self> {
        match self {
            Upstream::Unix(s) => s.try_clone().map(Upstream::Unix),
            Upstream::Tcp(s) => s.try_clone().map(Upstream::Tcp),
        }
    }

    fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Upstream::Unix(s) => s.shutdown(Shutdown::Write),
            Upstream::Tcp(s) => s.shutdown(Shutdown::Write),
        }
    }

    fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Upstream::Unix(s) => s.set_read_timeout(d),
            Upstream::Tcp(s) => s.set_read_timeout(d),
        }
    }
}

impl Read for Upstream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Upstream::Unix(s) => s.read(buf),
            Upstream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Upstream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Upstream::Unix(s) => s.write(buf),
            Upstream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Upstream::Unix(s) => s.flush(),
            Upstream::Tcp(s) => s.flush(),
        }
    }
}

fn json(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
