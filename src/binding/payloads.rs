//! Payloads crossing to JS (`log/lift.rs`): `BatchOut`, a batch as JS gets
//! it, and the lifting bound JS may give.

use crate::log::{PayloadBatch, Step, LIFT_MIN};
use crate::scan::Units;
use napi::bindgen_prelude::{Object, ToNapiValue, TypeName, Uint32Array, Unknown};
use napi::{check_status, sys, Env, JsValue, Result};
use std::ffi::c_void;
use std::sync::Arc;

/// The strings a batch lifts: of `lift_min` bytes or more (`LIFT_MIN` when
/// JS gives none; tests lower it).
pub fn lift_bound(lift_min: Option<u32>) -> usize {
    lift_min.map_or(LIFT_MIN, |m| m as usize)
}

/// A batch of payloads as JS gets it: `{ seqs, json, holes }`, `holes` flat
/// `[at, path, string, ...]`. Text that is ASCII (or Latin-1 units) crosses
/// as Latin-1, which V8 copies as it is instead of decoding UTF-8.
pub struct BatchOut(PayloadBatch);

impl From<PayloadBatch> for BatchOut {
    fn from(batch: PayloadBatch) -> BatchOut {
        BatchOut(batch)
    }
}

impl ToNapiValue for BatchOut {
    unsafe fn to_napi_value(raw: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        super::converting(raw, || unsafe { val.into_js(raw) })
    }
}

impl BatchOut {
    /// The batch as a JS object (see `BatchOut`).
    ///
    /// # Safety
    /// `raw` is the JS thread's environment, during a call.
    unsafe fn into_js(self, raw: napi::sys::napi_env) -> Result<napi::sys::napi_value> {
        let val = self;
        let env = Env::from_raw(raw);
        let PayloadBatch { seqs, json, holes } = val.0;
        let mut out = Object::new(&env)?;
        out.set("seqs", Uint32Array::new(seqs))?;
        if json.is_ascii() {
            out.set("json", env.create_string_latin1(json.as_bytes())?)?;
        } else {
            out.set("json", env.create_string(&json)?)?;
        }
        drop(json);
        let mut flat = env.create_array(3 * holes.len() as u32)?;
        for (k, hole) in holes.into_iter().enumerate() {
            let k = 3 * k as u32;
            flat.set(k, hole.at)?;
            let mut path = env.create_array(hole.path.len() as u32)?;
            for (j, step) in hole.path.iter().enumerate() {
                match step {
                    Step::Key(units) => path.set(j as u32, env.create_string_utf16(units)?)?,
                    Step::Index(i) => path.set(j as u32, *i)?,
                }
            }
            flat.set(k + 1, path)?;
            let string = external_string(raw, hole.units)?;
            flat.set(k + 2, Unknown::from_raw_unchecked(raw, string))?;
        }
        out.set("holes", flat)?;
        Ok(out.raw())
    }
}

impl TypeName for BatchOut {
    fn type_name() -> &'static str {
        "Object"
    }

    fn value_type() -> napi::ValueType {
        napi::ValueType::Object
    }
}

/// A JS string of `units` that views them where they are (an external
/// string): the log may keep the same units (`texts.rs::Lifted`), so the
/// text is resident once. V8 drops its share when the string is collected.
/// Where the runtime copies instead (it may, for short strings), the copy
/// is the JS string's own and the share is dropped at once.
///
/// # Safety
/// `env` is the JS thread's environment, during a call.
unsafe fn external_string(env: sys::napi_env, units: Arc<Units>) -> Result<sys::napi_value> {
    unsafe extern "C" fn release(
        _env: sys::node_api_basic_env,
        _data: *mut c_void,
        hint: *mut c_void,
    ) {
        // SAFETY: `hint` is the box made below, given to V8 once. A
        // finalizer must not unwind into V8.
        let _ =
            std::panic::catch_unwind(|| drop(unsafe { Box::from_raw(hint.cast::<Arc<Units>>()) }));
    }
    let hint = Box::into_raw(Box::new(units));
    let mut value = std::ptr::null_mut();
    let mut copied = false;
    // SAFETY: the units live in the boxed `Arc` until V8 calls `release`
    // with it (they never change); on failure V8 keeps nothing.
    let status = unsafe {
        match &**hint {
            Units::Latin1(bytes) => sys::node_api_create_external_string_latin1(
                env,
                bytes.as_ptr().cast(),
                bytes.len() as isize,
                Some(release),
                hint.cast(),
                &mut value,
                &mut copied,
            ),
            Units::Utf16(units) => sys::node_api_create_external_string_utf16(
                env,
                units.as_ptr(),
                units.len() as isize,
                Some(release),
                hint.cast(),
                &mut value,
                &mut copied,
            ),
        }
    };
    if status != sys::Status::napi_ok {
        // SAFETY: V8 did not take the box.
        drop(unsafe { Box::from_raw(hint) });
    }
    check_status!(status, "cannot make a JS string of a lifted payload string")?;
    Ok(value)
}
