//! Live appends: validate against the log (nothing changes), commit, and
//! take the texts of live events when a native path needs them.

use super::{header_seq, EventMeta, Log, Prepared};
use crate::error::{CoreError, CoreResult};
use crate::event::{legacy_of, Kind};
use crate::surface::{Candidate, SurfaceFields, SurfaceOp};
use serde::Deserialize;
use serde_json::Value;

/// The meta of an event text the JS side wrote (`{"type":..,"seq":..,
/// "time":..,"data":..,"sourceEventSeqs"?:..,"surfaceOp"?:..}`), read from
/// its ends without parsing the payload; `None` when the text is not in that
/// shape (then it is parsed).
fn live_meta(line: &str) -> Option<EventMeta> {
    let rest = line.strip_prefix("{\"type\":\"")?;
    let quote = rest.find('"')?;
    let ty = &rest[..quote];
    if ty.contains('\\') {
        return None;
    }
    let rest = rest[quote..].strip_prefix("\",\"seq\":")?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(",\"time\":")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let time: u64 = rest[..digits].parse().ok()?;
    if !rest[digits..].starts_with(",\"data\":") {
        return None;
    }
    let kind = Kind::of(ty);
    let op = if !kind.is_surface_eligible() {
        None
    } else if line.ends_with(",\"surfaceOp\":\"append\"}") {
        Some(SurfaceOp::Append)
    } else {
        // The envelope's surfaceOp is the text's last field.
        let at = line.rfind(",\"surfaceOp\":{")?;
        let op: Value = serde_json::from_str(line.get(at + 13..line.len() - 1)?).ok()?;
        Some(SurfaceOp::Replace {
            start: op.get("start").and_then(crate::json::as_seq)?,
            end: op.get("end").and_then(crate::json::as_seq)?,
        })
    };
    Some(EventMeta { kind, time, op })
}

/// The texts of live events, one per line, each followed by a newline
/// (what `JSON.stringify` of each of a session's pending events writes: it
/// never writes a raw newline), each with its meta; refused whole when one
/// of them is not an event.
pub fn live_records(lines: &str) -> CoreResult<Vec<(EventMeta, &str)>> {
    if !lines.is_empty() && !lines.ends_with('\n') {
        return Err(CoreError::InvalidArgument(
            "event texts must each end with a newline".into(),
        ));
    }
    lines
        .split_terminator('\n')
        .map(|text| {
            let meta = match live_meta(text) {
                Some(meta) => meta,
                None => parsed_meta(text)?,
            };
            Ok((meta, text))
        })
        .collect()
}

/// The meta of any event text, parsed.
fn parsed_meta(line: &str) -> CoreResult<EventMeta> {
    #[derive(Deserialize)]
    struct Lite<'a> {
        #[serde(rename = "type", borrow)]
        ty: std::borrow::Cow<'a, str>,
        time: f64,
        #[serde(rename = "surfaceOp")]
        surface_op: Option<Value>,
    }
    let lite: Lite = serde_json::from_str(line)
        .map_err(|e| CoreError::InvalidArgument(format!("event text is not an event: {e}")))?;
    let op = match lite.surface_op {
        None => None,
        Some(Value::String(_)) => Some(SurfaceOp::Append),
        Some(v) => Some(SurfaceOp::Replace {
            start: v.get("start").and_then(crate::json::as_seq).unwrap_or(0),
            end: v.get("end").and_then(crate::json::as_seq).unwrap_or(0),
        }),
    };
    Ok(EventMeta {
        kind: Kind::of(&lite.ty),
        time: lite.time.max(0.0) as u64,
        op,
    })
}

impl Log {
    /// Validate a live append (SPEC 4 steps 2, 5, 6). `surface_meta` is the
    /// JSON of `{surfaceOp?, sourceEventSeqs?}`; `data` the payload text when
    /// the binding has it (always for `request/header`).
    pub fn prepare(
        &self,
        ty: &str,
        seq: u64,
        surface_meta: Option<&str>,
        data: Option<&str>,
    ) -> CoreResult<Prepared> {
        if seq < self.metas.len() as u64 {
            return Err(CoreError::InvalidArgument(format!(
                "append seq {seq} is behind the native log ({})",
                self.metas.len()
            )));
        }
        let kind = Kind::of(ty);
        if let Some(legacy) = legacy_of(kind, data) {
            return Err(CoreError::LegacyVocabulary(
                legacy.uses_message(&format!("session event \"{ty}\"")),
            ));
        }
        let meta: SurfaceFields = match surface_meta {
            Some(m) => serde_json::from_str(m).map_err(|_| {
                CoreError::NotLossless(format!(
                    "session event \"{ty}\" carries non-JSON-serializable surface metadata"
                ))
            })?,
            None => SurfaceFields::default(),
        };
        let plan = self.surface.plan(&Candidate {
            ty,
            kind,
            seq,
            surface_op: meta.surface_op.as_ref(),
            source_event_seqs: meta.source_event_seqs.as_ref(),
        })?;
        let header = header_seq(kind, seq);
        Ok(Prepared { plan, header })
    }

    /// Commit a prepared append. The caller guarantees nothing was committed
    /// since `prepare`.
    pub fn commit_prepared(&mut self, p: Prepared) {
        self.apply(&p.plan, p.header);
    }

    /// Hand over live events `len()..` as their texts, one per line (see
    /// `live_records`). Their surface effects were applied when they were
    /// appended; this records texts and metas.
    pub fn attach_texts(&mut self, lines: &str) -> CoreResult<()> {
        let records = live_records(lines)?;
        self.texts.reserve(records.len());
        self.metas.reserve(records.len());
        for (meta, text) in records {
            self.record(meta, text);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_meta_reads_the_ends_of_js_written_texts() {
        let m = live_meta(r#"{"type":"turn/start","seq":0,"time":17,"data":{"turn":1}}"#).unwrap();
        assert_eq!((m.kind, m.time, m.op), (Kind::TurnStart, 17, None));
        let m = live_meta(r#"{"type":"user/message","seq":1,"time":2,"data":{"x":{"surfaceOp":{"op":"replace","start":9,"end":9}}},"surfaceOp":"append"}"#).unwrap();
        assert_eq!(m.op, Some(SurfaceOp::Append));
        let m = live_meta(r#"{"type":"user/message","seq":5,"time":2,"data":{},"sourceEventSeqs":[1,2],"surfaceOp":{"op":"replace","start":1,"end":2}}"#).unwrap();
        assert_eq!(m.op, Some(SurfaceOp::Replace { start: 1, end: 2 }));
        // Another key order is parsed instead.
        assert!(live_meta(r#"{"seq":0,"type":"turn/start","time":1,"data":{}}"#).is_none());
        let m = parsed_meta(r#"{"seq":0,"type":"turn/start","time":1,"data":{}}"#).unwrap();
        assert_eq!(m.kind, Kind::TurnStart);
    }
}
