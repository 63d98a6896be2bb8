//! The napi layer: the only code that sees napi. It converts arguments and
//! results (JSON text in, JSON text out) and maps `CoreError` to JS errors
//! whose `code` is the variant's stable code.

pub mod functions;
pub mod session;
pub mod store;
mod threads;
pub mod tools;

use crate::error::CoreError;
use napi::{Env, Status};

/// Throw `e` as a JS `Error` with `err.code` set to its stable code, and
/// return the marker that tells napi-rs the exception is already pending.
pub fn throw(env: &Env, e: CoreError) -> napi::Error {
    let message = e.to_string().replace('\0', "\\u0000");
    match env.throw_error(&message, Some(e.code())) {
        Ok(()) => napi::Error::from_status(Status::PendingException),
        Err(_) => napi::Error::new(Status::GenericFailure, message),
    }
}
