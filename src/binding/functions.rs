//! Free functions of the public API that need the core's rules.

use super::throw;
use crate::error::CoreError;
use crate::event::{is_surface_eligible_type, Kind};
use crate::repair::{closers, ScanEvent};
use crate::surface::{fold, FoldEvent, SurfaceFields};
use napi::Env;
use napi::Result;
use napi_derive::napi;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

#[napi(js_name = "isSurfaceEligibleType")]
pub fn is_surface_eligible_type_js(ty: String) -> bool {
    is_surface_eligible_type(&ty)
}

#[derive(Deserialize)]
struct FoldRow {
    #[serde(rename = "type")]
    ty: Value,
    seq: Value,
    #[serde(flatten)]
    fields: SurfaceFields,
}

/// `foldSurface` over `[{type, seq, surfaceOp?, sourceEventSeqs?}]` as JSON.
#[napi(js_name = "foldSurfaceJson")]
pub fn fold_surface_json(env: Env, rows: String) -> Result<String> {
    let rows: Vec<FoldRow> = serde_json::from_str(&rows).map_err(|e| {
        throw(
            &env,
            CoreError::InvalidArgument(format!("foldSurface: {e}")),
        )
    })?;
    let events: Vec<FoldEvent> = rows
        .into_iter()
        .map(|r| FoldEvent {
            ty: r.ty.as_str().unwrap_or_default().to_string(),
            seq: crate::json::as_seq(&r.seq),
            fields: r.fields,
        })
        .collect();
    let (nodes, replacements) = fold(&events).map_err(|e| throw(&env, e))?;
    let replacements: Vec<Value> = replacements
        .into_iter()
        .map(|r| json!({"seq": r.seq, "start": r.start, "end": r.end, "shadowedSeqs": r.shadowed}))
        .collect();
    Ok(json!({"nodes": nodes, "replacements": replacements}).to_string())
}

#[derive(Deserialize)]
struct ScanRow<'a> {
    #[serde(rename = "type")]
    ty: Option<Value>,
    seq: Option<Value>,
    time: Option<Value>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

/// `interruptedTurnClosers` over events given as one JSON array.
#[napi(js_name = "interruptedTurnClosersJson")]
pub fn interrupted_turn_closers_json(env: Env, events: String) -> Result<String> {
    let rows: Vec<ScanRow> = serde_json::from_str(&events).map_err(|e| {
        throw(
            &env,
            CoreError::InvalidArgument(format!("interruptedTurnClosers: {e}")),
        )
    })?;
    let scan = rows.iter().map(|r| ScanEvent {
        kind: Kind::of(r.ty.as_ref().and_then(Value::as_str).unwrap_or_default()),
        seq: r.seq.as_ref().and_then(Value::as_u64).unwrap_or(0),
        time: r.time.as_ref().and_then(Value::as_u64).unwrap_or(0),
        data: r.data.map(|d| d.get()).unwrap_or("null"),
    });
    Ok(format!("[{}]", closers(scan).join(",")))
}

/// Reject legacy request-header vocabulary on append (SPEC 7).
#[napi(js_name = "checkLegacy")]
pub fn check_legacy(env: Env, ty: String, data: String) -> Result<()> {
    match crate::event::legacy_of(Kind::of(&ty), Some(&data)) {
        Some(legacy) => Err(throw(
            &env,
            CoreError::LegacyVocabulary(legacy.uses_message(&format!("session event \"{ty}\""))),
        )),
        None => Ok(()),
    }
}
