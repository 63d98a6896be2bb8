//! Free functions of the public API that need the core's rules.

use super::call;
use crate::error::{Code, CoreError};
use crate::event::{refuse_legacy, time_of_text, Kind};
use crate::json::seq_of_text;
use crate::repair::{closers_in, ScanEvent};
use crate::scan::{array_items, member, object_members, string_value};
use crate::surface::{fold, SurfaceOp};
use crate::vocab::Vocabulary;
use napi::Env;
use napi::Result;
use napi_derive::napi;

/// The vocabulary named `name` (`'v0' | 'published'`; absent: v0).
pub(crate) fn vocabulary(name: Option<&str>) -> crate::error::CoreResult<&'static Vocabulary> {
    Vocabulary::named(name).ok_or_else(|| {
        CoreError::new(
            Code::InvalidArgument,
            format!(
                "unknown vocabulary {:?} (expected \"v0\" or \"published\")",
                name.unwrap_or_default()
            ),
        )
    })
}

#[napi(js_name = "isSurfaceEligibleType")]
pub fn is_surface_eligible_type_js(
    env: Env,
    ty: String,
    #[napi(ts_arg_type = "'v0' | 'published'")] vocabulary: Option<String>,
) -> Result<bool> {
    call(&env, || {
        Ok(self::vocabulary(vocabulary.as_deref())?.is_surface_type(&ty))
    })
}

/// The published line's message-shape checks (PUB 4.2) of one event given
/// as JSON, failing with `<subject> <tail>` (`adoptSessionEvent`, PUB 14.1).
#[napi(js_name = "checkMessageShape")]
pub fn check_message_shape(env: Env, event_json: String, subject: String) -> Result<()> {
    call(&env, || {
        crate::event::check_message_shape(&event_json, &subject)
    })
}

/// `foldSurface` over `[{type, seq, surfaceOp?, sourceEventSeqs?}]` as JSON
/// (what JS serialized of the caller's events), read by the scanner.
#[napi(js_name = "foldSurfaceJson")]
pub fn fold_surface_json(
    env: Env,
    rows: String,
    #[napi(ts_arg_type = "'v0' | 'published'")] vocabulary: Option<String>,
) -> Result<String> {
    call(&env, || {
        let (nodes, replacements) = fold(&rows, self::vocabulary(vocabulary.as_deref())?)?;
        let seqs = |s: &[u64]| s.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        let replacements: Vec<String> = replacements
            .iter()
            .filter_map(|r| {
                let Some(SurfaceOp::Replace { start, end }) = r.op else {
                    return None;
                };
                let (seq, shadowed) = (r.seq, seqs(&r.shadowed));
                Some(format!(
                    r#"{{"seq":{seq},"start":{start},"end":{end},"shadowedSeqs":[{shadowed}]}}"#
                ))
            })
            .collect();
        let (nodes, replacements) = (seqs(&nodes), replacements.join(","));
        Ok(format!(
            r#"{{"nodes":[{nodes}],"replacements":[{replacements}]}}"#
        ))
    })
}

/// `interruptedTurnClosers` over events given as one JSON array (what JS
/// serialized of the caller's events), read by the scanner.
#[napi(js_name = "interruptedTurnClosersJson")]
pub fn interrupted_turn_closers_json(
    env: Env,
    events: String,
    #[napi(ts_arg_type = "'v0' | 'published'")] vocabulary: Option<String>,
) -> Result<String> {
    call(&env, || {
        let vocab = self::vocabulary(vocabulary.as_deref())?;
        let bad = || {
            CoreError::new(
                Code::InvalidArgument,
                "interruptedTurnClosers: events are not JSON objects",
            )
        };
        let rows = array_items(&events).ok_or_else(bad)?;
        let mut scan = Vec::with_capacity(rows.len());
        for row in rows {
            let members = object_members(row).ok_or_else(bad)?;
            let field = |name| member(&members, name);
            scan.push(ScanEvent {
                kind: Kind::of(&field("type").and_then(string_value).unwrap_or_default()),
                seq: field("seq").and_then(seq_of_text).unwrap_or(0),
                time: field("time")
                    .and_then(|t| time_of_text(t, vocab.negative_time))
                    .unwrap_or(0),
                data: field("data").unwrap_or("null"),
            });
        }
        Ok(format!("[{}]", closers_in(&vocab.closers, scan).join(",")))
    })
}

/// Reject legacy request-header vocabulary on append (SPEC 7).
#[napi(js_name = "checkLegacy")]
pub fn check_legacy(env: Env, ty: String, data: String) -> Result<()> {
    call(&env, || refuse_legacy(&ty, Some(&data)))
}

/// Every code a native error may carry (`Code::ALL`), for the JS side's list.
#[napi(js_name = "errorCodes")]
pub fn error_codes(env: Env) -> Result<Vec<&'static str>> {
    call(&env, || Ok(Code::ALL.iter().map(|c| c.as_str()).collect()))
}

/// A deliberate panic inside a native call, to check that it reaches JS as
/// an `INTERNAL` error and not as an aborted process (a diagnostic).
#[napi(js_name = "panicForDiagnosis", skip_typescript)]
pub fn panic_for_diagnosis(env: Env) -> Result<()> {
    call(&env, || -> crate::error::CoreResult<()> {
        panic!("a deliberate panic (panicForDiagnosis)")
    })
}
