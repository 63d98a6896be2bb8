//! dsh-session-native: the event-sourced session log of TypeScript agent
//! loops, natively. Domain modules know nothing of napi; `binding` converts.
//! Modules are private: the addon's exports are the napi ones, so the
//! compiler reports whatever nothing uses.

// napi-derive registers the exports only outside test builds, so there
// every export (and what only exports use) looks unused; `cargo clippy`
// without `--all-targets` is the dead-code check.
#![cfg_attr(test, allow(dead_code))]

mod error;
mod event;
mod executor;
mod invariants;
mod json;
mod log;
mod repair;
mod scan;
mod session_header;
mod store;
mod surface;
mod vocab;

mod binding;
