//! What committed units changed, for the background tasks that act on it. Each task waits for a
//! change of its kind instead of asking the store again and again: an idle server leaves its
//! database alone. The store rings [`Changes`] once a unit that changed something commits (and,
//! on PostgreSQL, when another instance says it did); a task makes its listener *before* it
//! reads the store, so a change committed after that read is never missed.

use tokio::sync::Notify;

/// A kind of change some task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// A deployment request (or a cluster's) may be claimed: one was queued, or one ended and
    /// the next of its environment may start.
    Queue,
    /// Events were written that the sequencer has to give positions.
    Events,
    /// Events were given positions: streams have something to send.
    Sequenced,
    /// Webhook deliveries were planned.
    Deliveries,
    /// A deployment rule changed, or the clock was moved: the scheduler's next hour may too.
    Rules,
    /// An engine reported what runs of a service: live status readers have news.
    Running,
    /// Deployment log lines were kept: live deployment log readers have news.
    Logs,
    /// Lines of services' output were kept: live output readers have news.
    Output,
}

impl Change {
    pub const ALL: [Change; 8] = [
        Change::Queue,
        Change::Events,
        Change::Sequenced,
        Change::Deliveries,
        Change::Rules,
        Change::Running,
        Change::Logs,
        Change::Output,
    ];

    fn bit(self) -> u8 {
        1 << self as u8
    }

    /// Whether tasks of other instances must hear of it. The instance that wrote a change
    /// runs every task itself; only the queue (whichever instance has a free worker takes a
    /// request), positions, running states and log lines (each instance serves its own
    /// streams and live sockets) concern the others.
    pub fn crosses_instances(self) -> bool {
        matches!(
            self,
            Change::Queue | Change::Sequenced | Change::Running | Change::Logs | Change::Output
        )
    }

    /// Its name between instances.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Queue => "queue",
            Change::Events => "events",
            Change::Sequenced => "sequenced",
            Change::Deliveries => "deliveries",
            Change::Rules => "rules",
            Change::Running => "running",
            Change::Logs => "logs",
            Change::Output => "output",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// Some kinds of change: what one unit made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeSet(u8);

impl ChangeSet {
    pub const ALL: ChangeSet = ChangeSet(0b1111_1111);

    pub fn insert(&mut self, change: Change) {
        self.0 |= change.bit();
    }

    pub fn contains(self, change: Change) -> bool {
        self.0 & change.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn iter(self) -> impl Iterator<Item = Change> {
        Change::ALL.into_iter().filter(move |c| self.contains(*c))
    }

    /// The part other instances must hear of.
    pub fn crossing(self) -> ChangeSet {
        self.iter().filter(|c| c.crosses_instances()).collect()
    }

    /// The names, comma-separated (a PostgreSQL notification's payload).
    pub fn names(self) -> String {
        self.iter()
            .map(Change::as_str)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// From [`ChangeSet::names`]; names it does not know are left out.
    pub fn from_names(names: &str) -> ChangeSet {
        names.split(',').filter_map(Change::parse).collect()
    }
}

impl FromIterator<Change> for ChangeSet {
    fn from_iter<I: IntoIterator<Item = Change>>(changes: I) -> Self {
        let mut set = ChangeSet::default();
        for change in changes {
            set.insert(change);
        }
        set
    }
}

impl From<Change> for ChangeSet {
    fn from(change: Change) -> Self {
        ChangeSet(change.bit())
    }
}

/// A listener of one kind of change: completes at the first ring after it was made, polled or
/// not yet (tokio's `Notified` is woken by `notify_waiters` from its making on).
pub type Rung<'a> = tokio::sync::futures::Notified<'a>;

/// One bell per kind of change.
#[derive(Default)]
pub struct Changes {
    bells: [Notify; Change::ALL.len()],
}

impl Changes {
    /// Wakes every task listening for one of `set`.
    pub fn ring(&self, set: ChangeSet) {
        for change in set.iter() {
            self.bells[change as usize].notify_waiters();
        }
    }

    /// Completes at the first ring of `change` after this call (make it before reading the
    /// store, await it after).
    pub fn listen(&self, change: Change) -> Rung<'_> {
        self.bells[change as usize].notified()
    }
}

/// One bell on its own: what a manual clock rings when moved.
#[derive(Default)]
pub struct Signal(Notify);

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Signal")
    }
}

impl Signal {
    pub fn ring(&self) {
        self.0.notify_waiters();
    }

    /// Completes at the first ring after this call.
    pub fn listen(&self) -> Rung<'_> {
        self.0.notified()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_listener_hears_a_ring_made_after_it_was_made_even_before_it_waits() {
        let changes = Changes::default();
        let rung = changes.listen(Change::Queue);
        // Rung between the listener's making and its awaiting (the store read in between).
        changes.ring(Change::Queue.into());
        tokio::time::timeout(Duration::from_secs(5), rung)
            .await
            .expect("heard");
    }

    #[tokio::test]
    async fn a_listener_hears_only_its_own_kind_and_nothing_rung_before_it() {
        let changes = Changes::default();
        changes.ring(Change::Queue.into());
        let queue = changes.listen(Change::Queue);
        changes.ring(ChangeSet::from(Change::Events));
        let waited = tokio::time::timeout(Duration::from_millis(50), queue).await;
        assert!(waited.is_err(), "woken by another kind or an earlier ring");
    }

    #[tokio::test]
    async fn every_waiting_listener_is_woken_and_dropped_ones_are_forgotten() {
        let changes = std::sync::Arc::new(Changes::default());
        for _ in 0..3 {
            drop(changes.listen(Change::Sequenced));
        }
        // Each waits (polled once, on a task of its own) before the ring.
        let (waiting, mut waited) = tokio::sync::mpsc::unbounded_channel();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let changes = changes.clone();
                let waiting = waiting.clone();
                tokio::spawn(async move {
                    let rung = changes.listen(Change::Sequenced);
                    tokio::pin!(rung);
                    rung.as_mut().enable();
                    waiting.send(()).ok();
                    rung.await
                })
            })
            .collect();
        for _ in 0..3 {
            waited.recv().await.expect("a waiter");
        }
        changes.ring(ChangeSet::ALL);
        for w in waiters {
            tokio::time::timeout(Duration::from_secs(5), w)
                .await
                .expect("woken")
                .expect("ran");
        }
    }

    #[test]
    fn a_set_travels_between_instances_by_its_names() {
        let mut set = ChangeSet::default();
        set.insert(Change::Queue);
        set.insert(Change::Events);
        assert_eq!(set.names(), "queue,events");
        assert_eq!(ChangeSet::from_names("queue,events,unknown"), set);
        assert_eq!(set.crossing(), ChangeSet::from(Change::Queue));
        assert!(ChangeSet::default().is_empty());
        assert_eq!(ChangeSet::ALL.iter().count(), Change::ALL.len());
    }
}
