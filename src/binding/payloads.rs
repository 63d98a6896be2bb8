//! Payloads crossing to JS (`log/lift.rs`): `BatchOut`, a batch as JS gets
//! it, and the lifting bound JS may give.

use crate::log::{PayloadBatch, Step, LIFT_MIN};
use crate::scan::Units;
use napi::bindgen_prelude::{Object, ToNapiValue, TypeName, Uint32Array};
use napi::{Env, JsValue, Result};

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
            match hole.units {
                Units::Latin1(bytes) => flat.set(k + 2, env.create_string_latin1(bytes)?)?,
                Units::Utf16(units) => flat.set(k + 2, env.create_string_utf16(units)?)?,
            }
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
