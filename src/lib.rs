//! dsh-session-native: the event-sourced session log of TypeScript agent
//! loops, natively. Domain modules know nothing of napi; `binding` converts.

pub mod error;
pub mod event;
pub mod invariants;
pub mod json;
pub mod log;
pub mod priority;
pub mod repair;
pub mod scan;
pub mod session_header;
pub mod store;
pub mod surface;

pub mod binding;
