//! The development checks (SPEC 9) for JS: over a whole log, and event by
//! event for a live session (`crate::invariants::Trace`).

use super::call;
use crate::invariants::{Trace, Transition};
use napi::{Env, Result};
use napi_derive::napi;

/// `checkSessionInvariants(events)` over the events as one JSON array.
#[napi(js_name = "checkSessionInvariantsJson")]
pub fn check_session_invariants_json(env: Env, events_json: String) -> Result<()> {
    call(&env, || crate::invariants::check_log_json(&events_json))
}

/// The SPEC 9 checks of one live session: `check` validates the next event
/// and stages its transition, `commit` applies it once the append committed.
#[napi]
pub struct InvariantTrace {
    trace: Trace,
    staged: Option<Transition>,
}

#[napi]
impl InvariantTrace {
    /// A trace over a seed (a JSON array of events); throws the first violation.
    #[napi(factory, js_name = "fromEventsJson")]
    pub fn from_events_json(env: Env, json: String) -> Result<InvariantTrace> {
        let mut trace = Trace::new();
        call(&env, || trace.extend_json(&json))?;
        Ok(InvariantTrace {
            trace,
            staged: None,
        })
    }

    /// Validate the next event (its JSON text) and stage it; throws a violation.
    #[napi]
    pub fn check(&mut self, env: Env, event_json: String) -> Result<()> {
        self.staged = None;
        let t = call(&env, || self.trace.validate(&event_json))?;
        self.staged = Some(t);
        Ok(())
    }

    /// Apply the staged event (its append committed).
    #[napi]
    pub fn commit(&mut self) {
        if let Some(t) = self.staged.take() {
            self.trace.apply(t);
        }
    }

    /// Drop the staged event (its append was rejected).
    #[napi]
    pub fn discard(&mut self) {
        self.staged = None;
    }

    /// Validate and commit a JSON array of events in order, up to the first
    /// violation (thrown); `length` then says how many were accepted.
    #[napi]
    pub fn extend(&mut self, env: Env, events_json: String) -> Result<()> {
        self.staged = None;
        call(&env, || self.trace.extend_json(&events_json))
    }

    /// How many events the trace has accepted.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        self.trace.len() as u32
    }
}
