//! What the use cases report to whoever measures them (the metrics of the HTTP layer), without
//! knowing how it is measured.

use crate::model::{DeploymentAction, RequestStatus};

pub trait Observer: Send + Sync {
    /// A deployment request ended: its action, how it ended, and how long it ran (from its
    /// start, or from its creation when it never started).
    fn deployment_finished(&self, action: DeploymentAction, status: RequestStatus, seconds: f64);
    /// A webhook delivery attempt ended: `outcome` is `delivered`, `retrying` or `failed`.
    fn webhook_attempt(&self, outcome: &'static str);
    /// The router's routes were read afresh (its table's age starts again).
    fn routes_read(&self) {}
}

/// Reports to no one.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {
    fn deployment_finished(&self, _: DeploymentAction, _: RequestStatus, _: f64) {}
    fn webhook_attempt(&self, _: &'static str) {}
}
