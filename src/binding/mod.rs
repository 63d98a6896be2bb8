//! The napi layer: the only code that sees napi. It converts arguments and
//! results (JSON text in, JSON text out) and every `CoreError` into a
//! JavaScript error in one place (`js_error`): a `SessionError` (the class
//! lib/errors.js defines, handed over once by binding.js through
//! `setErrorClass`) whose `code` is the stable code, with `line` when the error is about a line of a JSONL log
//! and `errno` when an OS error is behind it. Synchronous calls throw it,
//! asynchronous ones reject with it; a panic is an `INTERNAL` error.

pub mod functions;
pub mod inspect;
pub mod invariants;
pub mod session;
pub mod store;

use crate::error::{CoreError, CoreResult};
use napi::bindgen_prelude::{FnArgs, Function, FunctionRef, JsObjectValue, Object, Unknown};
use napi::{Env, JsError, JsValue, Status};
use napi_derive::napi;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The `SessionError` class of lib/errors.js, `new SessionError(message,
/// code)`: this environment's instance data (each worker thread has its own).
struct ErrorClass(FunctionRef<FnArgs<(String, &'static str)>, Unknown<'static>>);

/// Keep `class` as the class `js_error` makes its errors with; binding.js
/// calls this once, as it loads the addon.
#[napi(js_name = "setErrorClass", skip_typescript)]
pub fn set_error_class(
    env: Env,
    class: Function<FnArgs<(String, &'static str)>, Unknown<'static>>,
) -> napi::Result<()> {
    env.set_instance_data(ErrorClass(class.create_ref()?), (), |_| {})
}

/// `e` as a JavaScript error, to throw or to reject a promise with.
pub fn js_error(env: &Env, e: &CoreError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        // A NUL cannot cross into a JS string through napi's C API.
        let message = e.message().replace('\0', "\\u0000");
        let error = match env.get_instance_data::<ErrorClass>()? {
            Some(class) => class
                .0
                .borrow_back(env)?
                .new_instance((message, e.code()).into())?,
            // Before binding.js has handed the class over: a plain `Error`.
            None => {
                JsError::from(napi::Error::new(Status::GenericFailure, message)).into_unknown(*env)
            }
        };
        let mut object = Object::from_raw(env.raw(), error.raw());
        object.set_named_property("code", e.code())?;
        if let Some(line) = e.line() {
            object.set_named_property("line", line as u32)?;
        }
        if let Some(errno) = e.os_error() {
            object.set_named_property("errno", errno)?;
        }
        Ok(napi::Error::from(error))
    };
    build().unwrap_or_else(|failed| failed)
}

/// Run `f` for a synchronous napi call: its error as `js_error`, a panic
/// (a bug) as an `INTERNAL` error instead of an aborted process.
pub fn call<T>(env: &Env, f: impl FnOnce() -> CoreResult<T>) -> napi::Result<T> {
    guarded("the native call", f).map_err(|e| js_error(env, &e))
}

/// Run `f`, a conversion napi calls (a `ToNapiValue`) with the JS thread's
/// environment `raw`: a panic as an `INTERNAL` error, as in `call`.
pub fn converting<T>(
    raw: napi::sys::napi_env,
    f: impl FnOnce() -> napi::Result<T>,
) -> napi::Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let e = CoreError::panicked("the native call", &*panic);
        Err(js_error(&Env::from_raw(raw), &e))
    })
}

/// `f`'s result, or an `INTERNAL` error naming `what` when it panicked.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> CoreResult<T>) -> CoreResult<T> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(CoreError::panicked(what, &*panic)))
}
