//! The deployment engine side of Capstan: the dispatcher over the engine adapters the server
//! registers by target kind, the simulated engine (the stand-in's adapter), and the pool of
//! background workers that drive the queue through them.

mod dispatch;
mod offered;
mod places;
mod pool;
mod simulated;

pub use dispatch::Engines;
pub use pool::{PoolSettings, WorkerPool, FALLBACK};
pub use simulated::{SimulatedEngine, FAILURE_MARKER};
