//! An engine that answers slowly: a Unix-socket proxy in front of the local
//! Docker engine's socket that holds every chunk a client sends for a fixed
//! delay before passing it on (so every API call is at least that late).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The proxy; it stops when dropped.
#[derive(Debug)]
pub struct SlowEngine {
    path: PathBuf,
    calls: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl SlowEngine {
    /// Listens on a fresh socket and forwards to `/var/run/docker.sock`.
    pub async fn start(delay: Duration) -> Self {
        let path = super::temp_dir("slow-engine").join("docker.sock");
        let listener = UnixListener::bind(&path).expect("bind the proxy's socket");
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let calls = counted.clone();
                tokio::spawn(async move {
                    let Ok(engine) = UnixStream::connect("/var/run/docker.sock").await else {
                        return;
                    };
                    let (mut cr, mut cw) = client.into_split();
                    let (mut er, mut ew) = engine.into_split();
                    let up = async move {
                        let mut buf = vec![0u8; 64 * 1024];
                        loop {
                            let n = match cr.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            calls.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(delay).await;
                            if ew.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        let _ = ew.shutdown().await;
                    };
                    let down = async move {
                        let _ = tokio::io::copy(&mut er, &mut cw).await;
                        let _ = cw.shutdown().await;
                    };
                    tokio::join!(up, down);
                });
            }
        });
        Self { path, calls, task }
    }

    /// The `DOCKER_HOST` value of the proxy.
    pub fn host(&self) -> String {
        format!("unix://{}", self.path.display())
    }

    /// Chunks the clients sent (about one per API call).
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::Relaxed)
    }
}

impl Drop for SlowEngine {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}
