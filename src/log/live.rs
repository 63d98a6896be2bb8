//! Live appends: validate against the log (nothing changes), then commit.
//! The event itself stays with the JS session; the log keeps its surface
//! and header effects.

use super::{Log, Prepared};
use crate::error::{Code, CoreError, CoreResult};
use crate::event::{refuse_legacy, EventText, Kind};
use crate::scan::{member, object_members};
use crate::surface::tool_result_rewrite;

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
        let len = self.len();
        if seq < len as u64 {
            let behind = format!("append seq {seq} is behind the native log ({len})");
            return Err(CoreError::new(Code::InvalidArgument, behind));
        }
        refuse_legacy(ty, data)?;
        let kind = Kind::of(ty);
        // `{surfaceOp?, sourceEventSeqs?}` as JS wrote it from its snapshot.
        let members = match surface_meta {
            Some(m) => object_members(m).ok_or_else(|| {
                CoreError::new(
                    Code::NotLossless,
                    format!(
                        "session event \"{ty}\" carries non-JSON-serializable surface metadata"
                    ),
                )
            })?,
            None => Vec::new(),
        };
        let event = EventText {
            ty: ty.into(),
            kind,
            seq,
            // The surface fold reads neither.
            time: 0,
            data: "null",
            surface_op: member(&members, "surfaceOp"),
            source_event_seqs: member(&members, "sourceEventSeqs"),
        };
        let plan = self.surface.plan_in(&event, self.vocab)?;
        // PUB 6: a `tool/result` surface event's payload is kept, and a
        // replace by one is checked against the node it rewrites. A fork's
        // replay of its parent's appends passes none: the parent's is kept.
        let mut kept = None;
        if self.vocab.keeps_payload(kind) && plan.op.is_some() {
            let data = match data {
                Some(d) => d.to_string(),
                None => self.kept_payloads.get(&seq).cloned().ok_or_else(|| {
                    CoreError::new(
                        Code::InvalidArgument,
                        format!("session event \"{ty}\" at seq {seq}: the published line's tool/result append needs its data"),
                    )
                })?,
            };
            if self.vocab.checks_rewrite(kind) {
                tool_result_rewrite(&plan, &data, |s| self.result_data(s))?;
            }
            kept = Some(data);
        }
        Ok(Prepared { plan, kind, kept })
    }

    /// Commit a prepared append. The caller guarantees nothing was committed
    /// since `prepare`.
    pub fn commit_prepared(&mut self, p: Prepared) {
        match p.kept {
            Some(data) => self.kept_payloads.insert(p.plan.seq, data),
            None => self.kept_payloads.remove(&p.plan.seq),
        };
        self.apply(p.plan, p.kind);
    }
}
