//! `Ctx::serve`: a port inside the sandbox made reachable from the host on
//! loopback. The sandbox has no network, so each host connection is relayed
//! through the engine by an exec in the sandbox (as `kubectl port-forward`
//! does), which needs `python3` in the image.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::ctx::Ctx;
use crate::error::{Error, Result};
use crate::exec::Command;
use crate::sandbox::SandboxHandle;

/// How long `serve` waits for the port to accept connections.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects to 127.0.0.1:<port> and copies stdin to the socket and the socket
/// to stdout, half-closing each way at end of stream.
const RELAY: &str = r#"
import os, socket, sys, threading
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def up():
    while True:
        b = os.read(0, 65536)
        if not b:
            break
        s.sendall(b)
    try: s.shutdown(socket.SHUT_WR)
    except OSError: pass
threading.Thread(target=up, daemon=True).start()
while True:
    b = s.recv(65536)
    if not b:
        break
    os.write(1, b)
"#;

/// Waits until something accepts connections on the port.
const PROBE: &str = r#"
import socket, sys, time
deadline = time.time() + float(sys.argv[2])
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.time() > deadline:
            sys.exit(3)
        time.sleep(0.05)
"#;

/// A port forward that lives until teardown.
#[derive(Debug)]
pub(crate) struct Forward {
    pub(crate) port: u16,
    pub(crate) url: String,
    pub(crate) task: JoinHandle<()>,
}

impl Ctx {
    /// Makes `port` inside the sandbox reachable from the host on 127.0.0.1 and
    /// returns its URL (`http://127.0.0.1:<host port>`) once it accepts connections.
    /// Serving the same port twice returns the same URL.
    ///
    /// # Errors
    /// An `assertion` failure when nothing accepts connections on the port within
    /// 30 seconds (the agent did not start the service); an infra error when
    /// the forward cannot be set up.
    ///
    /// # Cancel safety
    /// Safe: a forward set up before cancellation is closed at teardown.
    pub async fn serve(&mut self, port: u16) -> Result<String> {
        self.serve_with(port, READY_TIMEOUT).await
    }

    /// [`Ctx::serve`] with its own wait for the port to accept connections.
    ///
    /// # Errors
    /// As [`Ctx::serve`], after `ready_within`.
    ///
    /// # Cancel safety
    /// As [`Ctx::serve`].
    pub async fn serve_with(&mut self, port: u16, ready_within: Duration) -> Result<String> {
        if let Some(f) = self.forwards.iter().find(|f| f.port == port) {
            return Ok(f.url.clone());
        }
        let handle = self.sandbox().await?;
        let began = Instant::now();
        let probe = Command::new("python3").arg("-c").arg(PROBE).arg(port.to_string()).arg(format!("{:.3}", ready_within.as_secs_f64()));
        let ready = self.within_budget(async { Ok(handle.exec(probe).await?) }).await?;
        if ready.exit_code == 127 {
            return Err(Error::infra(format!("serve port {port}"), "the image has no python3, which the port relay needs"));
        }
        if !ready.success() {
            return Err(Error::other(format!(
                "failed to serve port {port}: nothing accepted connections on it inside the sandbox within {:.1}s",
                ready_within.as_secs_f64()
            )));
        }
        let listener =
            TcpListener::bind(("127.0.0.1", 0)).await.map_err(|e| Error::infra(format!("serve port {port}"), format!("cannot listen on loopback: {e}")))?;
        let addr = listener.local_addr().map_err(|e| Error::infra(format!("serve port {port}"), e))?;
        let url = format!("http://127.0.0.1:{}", addr.port());
        let task = tokio::spawn(accept_loop(listener, handle, port));
        self.log.phase(crate::phase::Phase::Serve, began, format!("port {port} at {url}"));
        self.forwards.push(Forward { port, url: url.clone(), task });
        Ok(url)
    }
}

async fn accept_loop(listener: TcpListener, handle: SandboxHandle, port: u16) {
    while let Ok((socket, _)) = listener.accept().await {
        let handle = handle.clone();
        tokio::spawn(async move {
            let argv = vec!["python3".into(), "-c".into(), RELAY.into(), port.to_string()];
            let Ok(crate::sandbox::ExecStream { mut input, mut output }) = handle.sandbox().open_stream(argv).await else { return };
            let (mut read, mut write) = socket.into_split();
            let up = async {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match read.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            if input.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = input.shutdown().await;
            };
            let down = async {
                while let Some(Ok(chunk)) = output.next().await {
                    if write.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
                let _ = write.shutdown().await;
            };
            tokio::join!(up, down);
        });
    }
}
