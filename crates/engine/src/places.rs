//! The places the clusters name, as the dispatcher keeps them: attached when first needed (and
//! again when what reaches one ended), pinged every [`LOOK`] so one that stops or starts
//! answering is noticed, and forgotten when no cluster names them any more.

use domain::engine::{EngineError, Place, Target};
use domain::ids::ClusterId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// How often every attached place is pinged.
const LOOK: Duration = Duration::from_secs(5);
/// How long a place may take to answer a ping.
pub(crate) const ANSWER: Duration = Duration::from_secs(5);

/// A place to call: the installation's own (its adapter's) or one a cluster names.
pub(crate) enum Reached<'a> {
    Own(&'a dyn Place),
    Named(Arc<dyn Place>),
}

impl<'a> std::ops::Deref for Reached<'a> {
    type Target = dyn Place + 'a;

    fn deref(&self) -> &Self::Target {
        match self {
            Reached::Own(place) => *place,
            Reached::Named(place) => place.as_ref(),
        }
    }
}

/// A place asked in a call made of every place at once: how a message names it, and the
/// cluster that names it (none: an adapter's own).
pub(crate) struct Asked<'a> {
    pub(crate) name: String,
    pub(crate) cluster: Option<ClusterId>,
    pub(crate) place: Reached<'a>,
}

struct Attached {
    target: Target,
    place: Arc<dyn Place>,
    answers: bool,
}

#[derive(Default)]
pub(crate) struct Places {
    held: Mutex<HashMap<ClusterId, Attached>>,
    /// Bumped whenever the places that answer change: the merged streams end, and the caller
    /// asks for them again, over the places that answer then.
    changed: watch::Sender<u64>,
    looking: OnceLock<()>,
}

impl Places {
    fn held(&self) -> MutexGuard<'_, HashMap<ClusterId, Attached>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The place attached for `target` while what reaches it holds.
    pub(crate) fn kept(&self, target: &Target) -> Option<Arc<dyn Place>> {
        self.held()
            .get(&target.cluster_id())
            .filter(|a| a.target == *target && a.place.holds())
            .map(|a| a.place.clone())
    }

    /// Keeps `place` for `target`, unless another call attached it meanwhile: that one stays
    /// (a caller may be using it) and is answered.
    pub(crate) fn keep(self: &Arc<Self>, target: &Target, place: Arc<dyn Place>) -> Arc<dyn Place> {
        let mut held = self.held();
        if let Some(a) = held.get(&target.cluster_id()) {
            if a.target == *target && a.place.holds() {
                return a.place.clone();
            }
        }
        held.insert(
            target.cluster_id(),
            Attached {
                target: target.clone(),
                place: place.clone(),
                answers: true,
            },
        );
        drop(held);
        self.looking.get_or_init(|| {
            tokio::spawn(look(Arc::downgrade(self)));
        });
        self.tell_changed();
        place
    }

    /// Forgets the places no target of `named` names as it did; whether any went.
    pub(crate) fn forget_all_but(&self, named: &[Target]) -> bool {
        let by_cluster: HashMap<ClusterId, &Target> =
            named.iter().map(|t| (t.cluster_id(), t)).collect();
        let mut held = self.held();
        let before = held.len();
        held.retain(|id, a| by_cluster.get(id).is_some_and(|t| **t == a.target));
        held.len() != before
    }

    /// Whether the place of `target` answered when last pinged; `None`: not attached.
    pub(crate) fn answered(&self, target: &Target) -> Option<bool> {
        self.held()
            .get(&target.cluster_id())
            .filter(|a| a.target == *target)
            .map(|a| a.answers)
    }

    /// Every attached place that answered when last pinged.
    pub(crate) fn answering(&self) -> Vec<Asked<'static>> {
        self.held()
            .values()
            .filter(|a| a.answers)
            .map(|a| Asked {
                name: a.target.named(),
                cluster: Some(a.target.cluster_id()),
                place: Reached::Named(a.place.clone()),
            })
            .collect()
    }

    pub(crate) fn tell_changed(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// Resolves once the places that answer change after this call.
    pub(crate) fn next_change(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut changed = self.changed.subscribe();
        changed.mark_unchanged();
        async move {
            let _ = changed.changed().await;
        }
    }
}

/// What `place` answers to `call` within [`ANSWER`]; why not, naming `target`: a call not
/// answered in time may be answered if made again.
pub(crate) async fn answer_of<T>(
    target: &Target,
    call: impl std::future::Future<Output = Result<T, EngineError>>,
) -> Result<T, EngineError> {
    let silent = format!("{} does not answer", target.named());
    match tokio::time::timeout(ANSWER, call).await {
        Ok(answer) => answer.map_err(|why| why.context(&silent)),
        Err(_) => Err(EngineError::transient(format!(
            "{silent} within {}s",
            ANSWER.as_secs()
        ))),
    }
}

/// Pings every attached place in turn, marking whether it answers; a change is told to the
/// merged streams. Ends with the dispatcher.
async fn look(places: Weak<Places>) {
    loop {
        tokio::time::sleep(LOOK).await;
        let Some(places) = places.upgrade() else {
            return;
        };
        let attached: Vec<(ClusterId, Arc<dyn Place>, bool)> = places
            .held()
            .iter()
            .map(|(id, a)| (*id, a.place.clone(), a.answers))
            .collect();
        let mut flipped = false;
        for (id, place, answered) in attached {
            let answers = matches!(tokio::time::timeout(ANSWER, place.ping()).await, Ok(Ok(())));
            if answers != answered {
                flipped = true;
                if let Some(a) = places.held().get_mut(&id) {
                    a.answers = answers;
                    tracing::warn!(cluster = %id, place = %a.target.named(), answers, "a cluster's place's answer changed");
                }
            }
        }
        if flipped {
            places.tell_changed();
        }
    }
}
