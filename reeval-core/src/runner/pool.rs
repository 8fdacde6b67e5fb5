//! A pool of engines: attempts spread over the engines the run's
//! [`BackendConfig`] connects (several Docker-API engines with
//! `REEVAL_ENGINES=ssh://a,tcp://b:2376=4,unix:///var/run/docker.sock`, or
//! `engines = [...]` in `reeval.toml`), each with its slots. An attempt goes
//! to the engine with the most free slots. An engine that stops answering is
//! drained: its attempts fail as infra errors, are retried on the others, and
//! it gets no new work. With no pool configured, the run's one backend is a
//! pool of one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::sandbox::{Backend, BackendConfig, SandboxError};

/// An engine of the pool.
#[derive(Debug)]
pub(crate) struct Engine {
    /// Where it is, as the record names it.
    pub(crate) name: String,
    pub(crate) backend: Arc<dyn Backend>,
    slots: Arc<Semaphore>,
    drained: AtomicBool,
}

impl Engine {
    fn free(&self) -> usize {
        self.slots.available_permits()
    }
}

/// The engines of a run.
#[derive(Debug)]
pub(crate) struct Pool {
    engines: Vec<Arc<Engine>>,
    /// Signalled when a slot is given back or an engine drained.
    changed: Arc<Notify>,
}

/// A slot on an engine: the engine gets it back (and waiters are woken) when it is dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) engine: Arc<Engine>,
    _permit: OwnedSemaphorePermit,
    changed: Arc<Notify>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.changed.notify_waiters();
    }
}

impl Pool {
    /// Connects to the engines of `config`; an engine without slots of its
    /// own never limits more than the run's threads do.
    ///
    /// # Errors
    /// One message per engine that cannot be used or does not answer.
    ///
    /// # Cancel safety
    /// Safe.
    pub(crate) async fn connect(config: &BackendConfig) -> Result<Self, Vec<String>> {
        let engines = config
            .connect()
            .await?
            .into_iter()
            .map(|c| {
                Arc::new(Engine {
                    name: c.name,
                    backend: c.backend,
                    slots: Arc::new(Semaphore::new(c.slots.unwrap_or(Semaphore::MAX_PERMITS))),
                    drained: AtomicBool::new(false),
                })
            })
            .collect();
        Ok(Self { engines, changed: Arc::new(Notify::new()) })
    }

    /// Every engine, drained ones included (for sweeps).
    pub(crate) fn engines(&self) -> impl Iterator<Item = &Arc<Engine>> {
        self.engines.iter()
    }

    /// The backend of the pool's one engine; `None` for a pool of several.
    pub(crate) fn only_engine(&self) -> Option<Arc<dyn crate::sandbox::Backend>> {
        match self.engines.as_slice() {
            [one] => Some(one.backend.clone()),
            _ => None,
        }
    }

    /// A slot on the engine with the most free slots, waiting for one.
    ///
    /// # Errors
    /// When every engine of the pool is drained.
    pub(crate) async fn acquire(&self) -> Result<Slot, SandboxError> {
        loop {
            // Registered before looking, so a slot given back in between is not missed.
            let changed = self.changed.notified();
            let live: Vec<&Arc<Engine>> =
                self.engines.iter().filter(|e| !e.drained.load(Ordering::SeqCst)).collect();
            if live.is_empty() {
                return Err(SandboxError::EngineUnreachable {
                    engine: "any engine of the pool".into(),
                    message: "every engine of the pool stopped answering".into(),
                });
            }
            if let Some(engine) = live.into_iter().filter(|e| e.free() > 0).max_by_key(|e| e.free())
                && let Ok(permit) = engine.slots.clone().try_acquire_owned()
            {
                return Ok(Slot {
                    engine: engine.clone(),
                    _permit: permit,
                    changed: self.changed.clone(),
                });
            }
            changed.await;
        }
    }

    /// After an infra error on `engine`: if it no longer answers, it gets no more work.
    /// Whether it was drained.
    pub(crate) async fn check(&self, engine: &Engine) -> bool {
        if self.engines.len() < 2 || engine.drained.load(Ordering::SeqCst) {
            return engine.drained.load(Ordering::SeqCst);
        }
        let answers =
            tokio::time::timeout(std::time::Duration::from_secs(5), engine.backend.ping()).await;
        let gone = !matches!(answers, Ok(Ok(_)));
        if gone {
            engine.drained.store(true, Ordering::SeqCst);
            crate::report::say(&format!(
                "reeval: engine {} stopped answering; its attempts are retried on the others\n",
                engine.name
            ));
            self.changed.notify_waiters();
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::docker::EngineSpec;
    use crate::sandbox::fake::FakeBackend;

    #[test]
    fn engine_lists_parse() {
        let specs =
            EngineSpec::parse_list("ssh://a, tcp://b:2376=4,unix:///var/run/docker.sock").unwrap();
        assert_eq!(specs[0], EngineSpec { host: "ssh://a".into(), slots: None });
        assert_eq!(specs[1], EngineSpec { host: "tcp://b:2376".into(), slots: Some(4) });
        assert_eq!(specs[2].host, "unix:///var/run/docker.sock");
        assert!(EngineSpec::parse("tcp://b=0").unwrap_err().contains("positive"));
    }

    fn pool(slots: &[usize]) -> Pool {
        let engines = slots
            .iter()
            .enumerate()
            .map(|(i, n)| {
                Arc::new(Engine {
                    name: format!("e{i}"),
                    backend: Arc::new(FakeBackend::new()),
                    slots: Arc::new(Semaphore::new(*n)),
                    drained: AtomicBool::new(false),
                })
            })
            .collect();
        Pool { engines, changed: Arc::new(Notify::new()) }
    }

    #[tokio::test]
    async fn attempts_go_where_most_slots_are_free_and_wait_when_none_is() {
        let p = pool(&[1, 2]);
        let a = p.acquire().await.unwrap();
        assert_eq!(a.engine.name, "e1", "two free beat one");
        let b = p.acquire().await.unwrap();
        let c = p.acquire().await.unwrap();
        let mut names = vec![b.engine.name.clone(), c.engine.name.clone()];
        names.sort();
        assert_eq!(names, ["e0", "e1"]);
        // Full: the next waits until a slot is given back.
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), p.acquire()).await;
        assert!(waiting.is_err());
        drop(b);
        let d = tokio::time::timeout(std::time::Duration::from_secs(1), p.acquire())
            .await
            .expect("woken")
            .unwrap();
        assert!(["e0", "e1"].contains(&d.engine.name.as_str()));
        drop((a, c, d));
    }

    #[tokio::test]
    async fn a_drained_engine_gets_no_more_work() {
        let p = pool(&[4, 1]);
        p.engines[0].drained.store(true, Ordering::SeqCst);
        for _ in 0..3 {
            let s = p.acquire().await.unwrap();
            assert_eq!(s.engine.name, "e1");
        }
        p.engines[1].drained.store(true, Ordering::SeqCst);
        assert!(p.acquire().await.is_err());
    }
}
