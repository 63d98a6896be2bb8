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
        call(&env, || {
            let mut trace = Trace::new();
            trace.extend_json(&json)?;
            Ok(InvariantTrace {
                trace,
                staged: None,
            })
        })
    }

    /// Validate the next event (its JSON text) and stage it; throws a violation.
    #[napi]
    pub fn check(&mut self, env: Env, event_json: String) -> Result<()> {
        call(&env, || {
            self.staged = None;
            self.staged = Some(self.trace.validate(&event_json)?);
            Ok(())
        })
    }

    /// Apply the staged event (its append committed).
    #[napi]
    pub fn commit(&mut self, env: Env) -> Result<()> {
        call(&env, || {
            if let Some(t) = self.staged.take() {
                self.trace.apply(t);
            }
            Ok(())
        })
    }

    /// Drop the staged event (its append was rejected).
    #[napi]
    pub fn discard(&mut self, env: Env) -> Result<()> {
        call(&env, || {
            self.staged = None;
            Ok(())
        })
    }

    /// Validate and commit a JSON array of events in order, up to the first
    /// violation (thrown); `length` then says how many were accepted.
    #[napi]
    pub fn extend(&mut self, env: Env, events_json: String) -> Result<()> {
        call(&env, || {
            self.staged = None;
            self.trace.extend_json(&events_json)
        })
    }

    /// How many events the trace has accepted.
    #[napi(getter)]
    pub fn length(&self, env: Env) -> Result<u32> {
        call(&env, || Ok(self.trace.len() as u32))
    }
}
