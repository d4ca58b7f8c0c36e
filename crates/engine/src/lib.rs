//! The deployment engine side of Capstan: the simulated engine (the default adapter of the
//! domain's engine port) and the pool of background workers that drive the queue through it.

mod pool;
mod simulated;

pub use pool::{PoolSettings, WorkerPool, FALLBACK};
pub use simulated::{SimulatedEngine, FAILURE_MARKER};
