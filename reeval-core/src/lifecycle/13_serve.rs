//! The serve phase: a port inside the sandbox made reachable from the host on
//! loopback. The sandbox has no network, so each host connection is relayed
//! through the engine by an exec in the sandbox (as `kubectl port-forward`
//! does), which needs `python3` in the image.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::error::{Error, Result};
use crate::exec::Command;
use crate::sandbox::SandboxHandle;

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

/// Waits until something accepts connections on `port` inside the sandbox,
/// then forwards a loopback port of the host to it.
pub(crate) async fn forward(
    handle: &SandboxHandle,
    port: u16,
    ready_within: Duration,
) -> Result<Forward> {
    let probe = Command::new("python3")
        .arg("-c")
        .arg(PROBE)
        .arg(port.to_string())
        .arg(format!("{:.3}", ready_within.as_secs_f64()));
    let ready = handle.exec(probe).await?;
    if ready.exit_code == 127 {
        return Err(Error::infra(
            format!("serve port {port}"),
            "the image has no python3, which the port relay needs",
        ));
    }
    if !ready.success() {
        return Err(Error::assertion(format!(
            "failed to serve port {port}: nothing accepted connections on it inside the sandbox within {:.1}s",
            ready_within.as_secs_f64()
        )));
    }
    let listener = TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| Error::infra_from(format!("serve port {port}: listen on loopback"), e))?;
    let addr =
        listener.local_addr().map_err(|e| Error::infra_from(format!("serve port {port}"), e))?;
    let url = format!("http://127.0.0.1:{}", addr.port());
    let task = tokio::spawn(accept_loop(listener, handle.clone(), port));
    Ok(Forward { port, url, task })
}

async fn accept_loop(listener: TcpListener, handle: SandboxHandle, port: u16) {
    while let Ok((socket, _)) = listener.accept().await {
        let handle = handle.clone();
        tokio::spawn(async move {
            // The engine's own port forwarding where it has one (Kubernetes).
            if let Ok(Some(mut forwarded)) = handle.sandbox().connect_port(port).await {
                let mut socket = socket;
                let _ = tokio::io::copy_bidirectional(&mut socket, &mut forwarded).await;
                return;
            }
            let argv = vec!["python3".into(), "-c".into(), RELAY.into(), port.to_string()];
            let Ok(crate::sandbox::ExecStream { mut input, mut output }) =
                handle.sandbox().open_stream(argv).await
            else {
                return;
            };
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
