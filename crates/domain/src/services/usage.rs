//! What a service's running replicas consume (the live API's metrics): read from its engine
//! only while someone watches, and once per service however many watch. The first watcher
//! starts a reader that reads every [`USAGE_PERIOD`]; it stops once the last one leaves.

use super::Capstan;
use crate::auth::{Action, Principal};
use crate::engine::ReplicaUsage;
use crate::error::{DomainError, DomainResult};
use crate::ids::ServiceId;
use crate::model::{RunState, Service};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::watch;

/// How many services a scrape reads at once.
const READ_AT_ONCE: usize = 8;

/// How often a watched service's replicas are read.
pub const USAGE_PERIOD: Duration = Duration::from_secs(3);

/// One reading of a service's running replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageSample {
    pub at: OffsetDateTime,
    pub replicas: Vec<ReplicaUsage>,
    /// Why this reading found nothing, when it could not read (the host does not answer).
    pub failure: Option<String>,
}

type Latest = watch::Sender<Option<Arc<UsageSample>>>;

/// The readers running now, one per watched service.
#[derive(Default)]
pub(crate) struct UsageReaders {
    running: Mutex<HashMap<ServiceId, Weak<Latest>>>,
}

/// A watcher's hold on a service's readings: the reader runs while one is held.
pub struct UsageWatch {
    latest: watch::Receiver<Option<Arc<UsageSample>>>,
    _held: Arc<Latest>,
}

impl UsageWatch {
    /// The latest reading, marked seen.
    pub fn latest(&mut self) -> Option<Arc<UsageSample>> {
        self.latest.borrow_and_update().clone()
    }

    /// Waits for a reading not seen yet (forever, should the reader be gone).
    pub fn next_reading(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut latest = self.latest.clone();
        async move {
            if latest.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Capstan {
    /// Watches what the running replicas of `service` (of any kind) consume, as `p` may read
    /// it.
    pub async fn watch_usage(&self, p: &Principal, service: ServiceId) -> DomainResult<UsageWatch> {
        {
            let mut unit = self.reading().await?;
            self.load::<Service>(&mut *unit, p, service, Action::Read)
                .await?;
        }
        let mut running = self
            .usage_readers
            .running
            .lock()
            .map_err(|_| DomainError::Internal("the usage readers were lost".into()))?;
        if let Some(held) = running.get(&service).and_then(Weak::upgrade) {
            return Ok(UsageWatch {
                latest: held.subscribe(),
                _held: held,
            });
        }
        let (sender, latest) = watch::channel(None);
        let held = Arc::new(sender);
        running.insert(service, Arc::downgrade(&held));
        let reader = Arc::downgrade(&held);
        let capstan = self.clone();
        tokio::spawn(async move { capstan.read_usage(service, reader).await });
        Ok(UsageWatch {
            latest,
            _held: held,
        })
    }

    /// Reads `service`'s replicas every [`USAGE_PERIOD`] while anyone watches.
    async fn read_usage(&self, service: ServiceId, watched: Weak<Latest>) {
        loop {
            let reading = self.usage_now(service).await;
            let Some(latest) = watched.upgrade() else {
                break;
            };
            let sample = match reading {
                Ok(replicas) => UsageSample {
                    at: self.now(),
                    replicas,
                    failure: None,
                },
                Err(why) => UsageSample {
                    at: self.now(),
                    replicas: Vec::new(),
                    failure: Some(why.to_string()),
                },
            };
            latest.send_replace(Some(Arc::new(sample)));
            drop(latest);
            tokio::time::sleep(USAGE_PERIOD).await;
            if watched.strong_count() == 0 {
                break;
            }
        }
        if let Ok(mut running) = self.usage_readers.running.lock() {
            if running.get(&service).is_some_and(|w| w.strong_count() == 0) {
                running.remove(&service);
            }
        }
    }

    /// What the replicas of every service that runs consume now (a Prometheus scrape of
    /// `CAPSTAN_METRICS_REPLICAS`), at most [`READ_AT_ONCE`] services read at once: each
    /// service with its readings; one that cannot be read is left out.
    pub async fn usage_of_running(&self) -> DomainResult<Vec<(Service, Vec<ReplicaUsage>)>> {
        use futures_util::StreamExt;
        let states = self.reading().await?.all_running_states().await?;
        let running = states.into_iter().filter(|s| {
            s.replicas
                .iter()
                .any(|r| matches!(r.state, RunState::Running | RunState::Warning))
        });
        let read: Vec<_> = futures_util::stream::iter(running)
            .map(|s| self.service_usage(s.service_id))
            .buffer_unordered(READ_AT_ONCE)
            .collect()
            .await;
        Ok(read.into_iter().filter_map(Result::ok).collect())
    }

    /// What `service`'s replicas consume now, read where its environment's cluster runs it.
    async fn usage_now(&self, service: ServiceId) -> DomainResult<Vec<ReplicaUsage>> {
        Ok(self.service_usage(service).await?.1)
    }

    async fn service_usage(
        &self,
        service: ServiceId,
    ) -> DomainResult<(Service, Vec<ReplicaUsage>)> {
        let (service, target, replicas) =
            self.reach_replicas(None, service, "tells no usage").await?;
        let usage = replicas
            .usage(&target, &service)
            .await
            .map_err(|e| DomainError::state(e.to_string()))?;
        Ok((service, usage))
    }
}
