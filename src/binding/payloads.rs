//! Payloads crossing to JS (`log/lift.rs`): `BatchOut`, a batch as JS gets
//! it, and `PayloadRead`, the read of a batch on the libuv pool (a store
//! `open`'s first derive).

use super::guarded;
use crate::error::CoreError;
use crate::log::{PayloadBatch, Step, Texts};
use crate::scan::Units;
use napi::bindgen_prelude::{Object, ToNapiValue, TypeName, Uint32Array};
use napi::{Env, JsValue, Result, Task};
use std::sync::Arc;

/// `payloadsLifted`'s work: the payloads of `picks`, read from `texts`.
pub struct PayloadRead {
    texts: Arc<Texts>,
    picks: Vec<(u32, Option<&'static str>)>,
    lift_min: usize,
    failure: Option<CoreError>,
}

impl PayloadRead {
    pub fn new(
        texts: Arc<Texts>,
        picks: Vec<(u32, Option<&'static str>)>,
        lift_min: usize,
    ) -> Self {
        PayloadRead {
            texts,
            picks,
            lift_min,
            failure: None,
        }
    }
}

impl Task for PayloadRead {
    type Output = PayloadBatch;
    type JsValue = BatchOut;

    fn compute(&mut self) -> Result<PayloadBatch> {
        let (texts, picks, lift_min) = (&self.texts, &self.picks, self.lift_min);
        guarded("reading payloads", || {
            crate::log::payloads(texts, picks, lift_min)
        })
        .map_err(|e| {
            let reason = e.to_string();
            self.failure = Some(e);
            napi::Error::from_reason(reason)
        })
    }

    fn resolve(&mut self, _env: Env, output: PayloadBatch) -> Result<BatchOut> {
        Ok(BatchOut::from(output))
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> Result<BatchOut> {
        match self.failure.take() {
            Some(e) => Err(super::js_error(&env, &e)),
            None => Err(err),
        }
    }
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
