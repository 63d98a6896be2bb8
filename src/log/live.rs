//! Live appends: validate against the log (nothing changes), then commit.
//! The event itself stays with the JS session; the log keeps its surface
//! and header effects.

use super::{header_seq, Log, Prepared};
use crate::error::{CoreError, CoreResult};
use crate::event::{legacy_of, Kind};
use crate::surface::{Candidate, SurfaceFields};

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
}
