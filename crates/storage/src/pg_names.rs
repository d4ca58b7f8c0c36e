//! What PostgreSQL instances of one installation agree on by name: the channel they tell each
//! other of changes on, and the advisory locks (any fixed number is a lock's key).

/// The channel on which instances tell each other of changes (`domain::changes`).
pub(crate) const CHANGES_CHANNEL: &str = "capstan_changes";

/// Takes the sequencer's advisory lock until the transaction ends.
pub(crate) const EVENT_LOG_LOCK: &str = "SELECT pg_advisory_xact_lock(7320411)";

/// Takes the lock under which Docker daemons are claimed, until the transaction ends.
pub(crate) const DOCKER_DAEMONS_LOCK: &str = "SELECT pg_advisory_xact_lock(7320412)";
