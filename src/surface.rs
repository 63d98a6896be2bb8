//! The surface fold (SPEC 5): which event seqs produce model messages, in
//! order. One state per session, advanced one event at a time by a plan that
//! is validated first and applied only on commit, so a rejected event changes
//! nothing.

use crate::error::{CoreError, CoreResult};
use crate::event::Kind;
use crate::json::as_seq;
use serde_json::Value;

/// A validated `surfaceOp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    Append,
    Replace { start: u64, end: u64 },
}

/// What committing one event does to the surface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The event does not touch the surface.
    Untouched,
    /// Push `seq`.
    Append { seq: u64 },
    /// Splice `nodes[start_idx..=end_idx]` into `seq`.
    Replace {
        seq: u64,
        start: u64,
        end: u64,
        start_idx: usize,
        end_idx: usize,
    },
}

impl Plan {
    pub fn op(&self) -> Option<SurfaceOp> {
        match *self {
            Plan::Untouched => None,
            Plan::Append { .. } => Some(SurfaceOp::Append),
            Plan::Replace { start, end, .. } => Some(SurfaceOp::Replace { start, end }),
        }
    }
}

/// One committed replacement, as `foldSurface` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub seq: u64,
    pub start: u64,
    pub end: u64,
    pub shadowed: Vec<u64>,
}

/// The surface state: model-visible seqs in order and the replace count.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    nodes: Vec<u64>,
    generation: u64,
}

/// The surface-relevant part of one event.
pub struct Candidate<'a> {
    pub ty: &'a str,
    pub kind: Kind,
    pub seq: u64,
    pub surface_op: Option<&'a Value>,
    pub source_event_seqs: Option<&'a Value>,
}

fn parse_op(c: &Candidate) -> CoreResult<Option<SurfaceOp>> {
    let ty = c.ty;
    if !c.kind.is_surface_eligible() {
        if c.surface_op.is_some() {
            return Err(CoreError::Surface(format!(
                "session event \"{ty}\" is not surface-eligible and cannot carry surfaceOp"
            )));
        }
        if c.source_event_seqs.is_some() {
            return Err(CoreError::Surface(format!(
                "session event \"{ty}\" is not surface-eligible and cannot carry sourceEventSeqs"
            )));
        }
        return Ok(None);
    }
    let Some(op) = c.surface_op else {
        return Err(CoreError::Surface(format!(
            "session event \"{ty}\" is surface-eligible and requires a surfaceOp marker"
        )));
    };
    if op.as_str() == Some("append") {
        return Ok(Some(SurfaceOp::Append));
    }
    let Some(obj) = op.as_object() else {
        return Err(CoreError::Surface(format!(
            "session event \"{ty}\" carries an invalid surfaceOp"
        )));
    };
    let field = |k: &str| obj.get(k);
    match (
        field("op"),
        field("start").and_then(as_seq),
        field("end").and_then(as_seq),
    ) {
        (Some(Value::String(o)), Some(start), Some(end)) if o == "replace" && obj.len() == 3 => {
            Ok(Some(SurfaceOp::Replace { start, end }))
        }
        _ => Err(CoreError::Surface(format!(
            "session event \"{ty}\" carries an invalid replace surfaceOp"
        ))),
    }
}

fn check_sources(c: &Candidate, shadowed: &[u64]) -> CoreResult<()> {
    // Sorted copy: duplicates are neighbours and membership is a binary search.
    let mut sources: Vec<u64> = Vec::new();
    if let Some(raw) = c.source_event_seqs {
        let Some(items) = raw.as_array() else {
            return Err(CoreError::Surface(format!(
                "sourceEventSeqs on event at seq {} must be an array when present",
                c.seq
            )));
        };
        if items.is_empty() && c.kind != Kind::AssistantMessage {
            return Err(CoreError::Surface(
                "sourceEventSeqs must not be empty except on assistant/message".into(),
            ));
        }
        let mut not_earlier = None;
        sources.reserve(items.len());
        for item in items {
            let Some(s) = as_seq(item) else {
                return Err(CoreError::Surface(format!(
                    "session event \"{}\" sourceEventSeqs must densely contain non-negative safe integers",
                    c.ty
                )));
            };
            sources.push(s);
            if not_earlier.is_none() && s >= c.seq {
                not_earlier = Some(s);
            }
        }
        sources.sort_unstable();
        if sources.windows(2).any(|w| w[0] == w[1]) {
            return Err(CoreError::Surface(
                "sourceEventSeqs must not contain duplicates".into(),
            ));
        }
        if let Some(s) = not_earlier {
            return Err(CoreError::Surface(format!(
                "sourceEventSeqs must reference earlier events: {s} >= current seq {}",
                c.seq
            )));
        }
    }
    let missing: Vec<String> = shadowed
        .iter()
        .filter(|s| sources.binary_search(s).is_err())
        .map(u64::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(CoreError::Surface(format!(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
            missing.join(", ")
        )));
    }
    Ok(())
}

impl Surface {
    pub fn new() -> Surface {
        Surface::default()
    }

    /// Model-visible seqs, in order.
    pub fn nodes(&self) -> &[u64] {
        &self.nodes
    }

    /// How many replacements have been committed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Validate one event against the current state without changing it.
    pub fn plan(&self, c: &Candidate) -> CoreResult<Plan> {
        match parse_op(c)? {
            None => Ok(Plan::Untouched),
            Some(SurfaceOp::Append) => {
                check_sources(c, &[])?;
                Ok(Plan::Append { seq: c.seq })
            }
            Some(SurfaceOp::Replace { start, end }) => {
                let start_idx = self.position(start).ok_or_else(|| {
                    CoreError::Surface(format!(
                        "surface replace: start seq {start} not found in surface"
                    ))
                })?;
                let end_idx = self.position(end).ok_or_else(|| {
                    CoreError::Surface(format!(
                        "surface replace: end seq {end} not found in surface"
                    ))
                })?;
                if start_idx > end_idx {
                    return Err(CoreError::Surface(format!(
                        "surface replace: start seq {start} (index {start_idx}) is after end seq {end} (index {end_idx})"
                    )));
                }
                check_sources(c, &self.nodes[start_idx..=end_idx])?;
                Ok(Plan::Replace {
                    seq: c.seq,
                    start,
                    end,
                    start_idx,
                    end_idx,
                })
            }
        }
    }

    /// Apply a plan made against the current state; returns the replacement
    /// it committed, if any.
    pub fn apply(&mut self, plan: &Plan) -> Option<Replacement> {
        match *plan {
            Plan::Untouched => None,
            Plan::Append { seq } => {
                self.nodes.push(seq);
                None
            }
            Plan::Replace {
                seq,
                start,
                end,
                start_idx,
                end_idx,
            } => {
                let shadowed: Vec<u64> = self.nodes.splice(start_idx..=end_idx, [seq]).collect();
                self.generation += 1;
                Some(Replacement {
                    seq,
                    start,
                    end,
                    shadowed,
                })
            }
        }
    }

    /// The plan of an already validated op (a fork copying a valid log).
    pub fn replay_plan(&self, seq: u64, op: Option<SurfaceOp>) -> CoreResult<Plan> {
        match op {
            None => Ok(Plan::Untouched),
            Some(SurfaceOp::Append) => Ok(Plan::Append { seq }),
            Some(SurfaceOp::Replace { start, end }) => {
                match (self.position(start), self.position(end)) {
                    (Some(start_idx), Some(end_idx)) if start_idx <= end_idx => Ok(Plan::Replace {
                        seq,
                        start,
                        end,
                        start_idx,
                        end_idx,
                    }),
                    _ => Err(CoreError::Surface(format!(
                        "surface replace: range {start}..{end} not found in surface"
                    ))),
                }
            }
        }
    }

    /// Where `seq` is on the surface.
    fn position(&self, seq: u64) -> Option<usize> {
        self.nodes.iter().position(|&n| n == seq)
    }
}

/// The surface part of one event of a whole log, for `foldSurface`.
pub struct FoldEvent {
    pub ty: String,
    pub seq: Option<u64>,
    pub surface_op: Option<Value>,
    pub source_event_seqs: Option<Value>,
}

/// `foldSurface(events)`: the surface and every replacement over a whole log.
pub fn fold(events: &[FoldEvent]) -> CoreResult<(Vec<u64>, Vec<Replacement>)> {
    let mut surface = Surface::new();
    let mut replacements = Vec::new();
    for (index, e) in events.iter().enumerate() {
        let expected = index as u64;
        if e.seq != Some(expected) {
            let shown = e
                .seq
                .map(|s| s.to_string())
                .unwrap_or_else(|| "(not a seq)".into());
            return Err(CoreError::NotContiguous(format!(
                "session event seq {shown} is not contiguous; expected {expected}"
            )));
        }
        let plan = surface.plan(&Candidate {
            ty: &e.ty,
            kind: Kind::of(&e.ty),
            seq: expected,
            surface_op: e.surface_op.as_ref(),
            source_event_seqs: e.source_event_seqs.as_ref(),
        })?;
        if let Some(r) = surface.apply(&plan) {
            replacements.push(r);
        }
    }
    Ok((surface.nodes, replacements))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(s: &mut Surface, ty: &str, seq: u64, op: Value, src: Option<Value>) -> CoreResult<()> {
        let op = if op.is_null() { None } else { Some(op) };
        let plan = s.plan(&Candidate {
            ty,
            kind: Kind::of(ty),
            seq,
            surface_op: op.as_ref(),
            source_event_seqs: src.as_ref(),
        })?;
        s.apply(&plan);
        Ok(())
    }

    fn msg(r: CoreResult<()>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn append_then_replace_splices_and_bumps_generation() {
        let mut s = Surface::new();
        for seq in 0..4 {
            step(&mut s, "user/message", seq, json!("append"), None).unwrap();
        }
        step(
            &mut s,
            "user/message",
            4,
            json!({"op":"replace","start":1,"end":2}),
            Some(json!([1, 2])),
        )
        .unwrap();
        assert_eq!(s.nodes(), &[0, 4, 3]);
        assert_eq!(s.generation(), 1);
    }

    #[test]
    fn rejected_events_leave_the_state_unchanged() {
        let mut s = Surface::new();
        step(&mut s, "user/message", 0, json!("append"), None).unwrap();
        step(&mut s, "user/message", 1, json!("append"), None).unwrap();
        let r = step(
            &mut s,
            "user/message",
            2,
            json!({"op":"replace","start":0,"end":1}),
            Some(json!([0])),
        );
        assert_eq!(
            msg(r),
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing 1"
        );
        let r = step(
            &mut s,
            "user/message",
            2,
            json!({"op":"replace","start":1,"end":0}),
            Some(json!([0, 1])),
        );
        assert_eq!(
            msg(r),
            "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)"
        );
        assert_eq!(s.nodes(), &[0, 1]);
        assert_eq!(s.generation(), 0);
    }

    #[test]
    fn marker_rules() {
        let mut s = Surface::new();
        assert_eq!(
            msg(step(&mut s, "turn/start", 0, json!("append"), None)),
            "session event \"turn/start\" is not surface-eligible and cannot carry surfaceOp"
        );
        assert_eq!(
            msg(step(&mut s, "turn/start", 0, Value::Null, Some(json!([])))),
            "session event \"turn/start\" is not surface-eligible and cannot carry sourceEventSeqs"
        );
        assert_eq!(
            msg(step(&mut s, "tool/result", 0, Value::Null, None)),
            "session event \"tool/result\" is surface-eligible and requires a surfaceOp marker"
        );
        assert_eq!(
            msg(step(&mut s, "tool/result", 0, json!("prepend"), None)),
            "session event \"tool/result\" carries an invalid surfaceOp"
        );
        assert_eq!(
            msg(step(
                &mut s,
                "tool/result",
                0,
                json!({"op":"replace","start":0,"end":0,"x":1}),
                None
            )),
            "session event \"tool/result\" carries an invalid replace surfaceOp"
        );
        assert_eq!(
            msg(step(
                &mut s,
                "tool/result",
                3,
                json!("append"),
                Some(json!([3]))
            )),
            "sourceEventSeqs must reference earlier events: 3 >= current seq 3"
        );
        assert_eq!(
            msg(step(
                &mut s,
                "tool/result",
                3,
                json!("append"),
                Some(json!([1, 1]))
            )),
            "sourceEventSeqs must not contain duplicates"
        );
        assert_eq!(
            msg(step(
                &mut s,
                "tool/result",
                3,
                json!("append"),
                Some(json!([]))
            )),
            "sourceEventSeqs must not be empty except on assistant/message"
        );
        assert!(step(
            &mut s,
            "assistant/message",
            3,
            json!("append"),
            Some(json!([]))
        )
        .is_ok());
        assert_eq!(
            msg(step(&mut s, "tool/result", 4, json!("append"), Some(json!([-1])))),
            "session event \"tool/result\" sourceEventSeqs must densely contain non-negative safe integers"
        );
        assert_eq!(
            msg(step(
                &mut s,
                "tool/result",
                4,
                json!("append"),
                Some(json!({}))
            )),
            "sourceEventSeqs on event at seq 4 must be an array when present"
        );
    }

    #[test]
    fn fold_checks_contiguity() {
        let e = |seq| FoldEvent {
            ty: "x".into(),
            seq: Some(seq),
            surface_op: None,
            source_event_seqs: None,
        };
        assert!(fold(&[e(0), e(1)]).is_ok());
        assert_eq!(
            fold(&[e(0), e(2)])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default(),
            "session event seq 2 is not contiguous; expected 1"
        );
    }
}
