//! The `capstan` server as a library: its settings, its keys, and serving them, for the
//! command and for processes that run a server inside them.

mod resolver;
pub mod secret_key;
mod serving;
pub mod settings;

pub use serving::*;
