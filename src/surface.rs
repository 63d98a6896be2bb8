//! The surface fold (SPEC 5): which event seqs produce model messages, in
//! order. One state per session, advanced one event at a time by a plan that
//! is validated first and applied only on commit, so a rejected event changes
//! nothing.

use crate::error::{Code, CoreError, CoreResult};
use crate::event::Kind;
use crate::json::seq_of_text;
use crate::scan::{array_items, key_is, member, object_members, string_is};
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

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
///
/// The order is kept in one place, `slots`: each node's seq in surface
/// order, with `DEAD` where a replace removed a node. `live` counts live
/// slots (a Fenwick tree), so a node's position is a prefix count and a
/// replace never shifts anything: finding, splicing and checking a range
/// cost O(log n) plus the shadowed nodes, whatever the surface's size.
/// Dead slots are dropped once they outnumber the live ones (amortised
/// O(1) per removed node).
#[derive(Debug, Clone, Default)]
pub struct Surface {
    slots: Vec<u64>,
    live: Fenwick,
    slot_of: HashMap<u64, usize, SeqHash>,
    dead: usize,
    generation: u64,
}

/// A removed node's slot.
const DEAD: u64 = u64::MAX;

/// Prefix counts over 0/1 entries (a Fenwick tree) that can grow.
#[derive(Debug, Clone, Default)]
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    /// A tree over `n` entries, all 1.
    fn ones(n: usize) -> Fenwick {
        let mut tree = vec![1u32; n];
        for i in 1..=n {
            let parent = i + (i & i.wrapping_neg());
            if parent <= n {
                tree[parent - 1] += tree[i - 1];
            }
        }
        Fenwick { tree }
    }

    /// Append an entry of 1.
    fn push_one(&mut self) {
        let i = self.tree.len() + 1;
        let low = i - (i & i.wrapping_neg());
        // The new node covers entries low+1..=i: itself plus the nodes below it.
        let mut sum = 1;
        let mut j = i - 1;
        while j > low {
            sum += self.tree[j - 1];
            j -= j & j.wrapping_neg();
        }
        self.tree.push(sum);
    }

    /// Entry `at` (0-based) goes from 1 to 0.
    fn clear(&mut self, at: usize) {
        let mut i = at + 1;
        while i <= self.tree.len() {
            self.tree[i - 1] -= 1;
            i += i & i.wrapping_neg();
        }
    }

    /// The sum of entries `0..at`.
    fn prefix(&self, at: usize) -> usize {
        let mut i = at;
        let mut sum = 0usize;
        while i > 0 {
            sum += self.tree[i - 1] as usize;
            i -= i & i.wrapping_neg();
        }
        sum
    }
}

/// A multiplicative hash for seqs (small, unique integers).
#[derive(Debug, Clone, Copy, Default)]
struct SeqHash;

impl BuildHasher for SeqHash {
    type Hasher = SeqHasher;
    fn build_hasher(&self) -> SeqHasher {
        SeqHasher(0)
    }
}

#[derive(Debug, Clone, Copy)]
struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The surface-relevant part of one event: its `surfaceOp` and
/// `sourceEventSeqs` as raw JSON texts the scanner read (`None` when
/// absent; a present `null` is `Some("null")`, and the rules reject it).
pub struct Candidate<'a> {
    pub ty: &'a str,
    pub kind: Kind,
    pub seq: u64,
    pub surface_op: Option<&'a str>,
    pub source_event_seqs: Option<&'a str>,
}

impl<'a> Candidate<'a> {
    /// The candidate of an event the scanner read.
    pub fn of(e: &'a crate::event::EventText<'a>) -> Candidate<'a> {
        Candidate {
            ty: &e.ty,
            kind: e.kind,
            seq: e.seq,
            surface_op: e.surface_op,
            source_event_seqs: e.source_event_seqs,
        }
    }
}

fn parse_op(c: &Candidate) -> CoreResult<Option<SurfaceOp>> {
    let ty = c.ty;
    if !c.kind.is_surface_eligible() {
        if c.surface_op.is_some() {
            return Err(CoreError::new(
                Code::Surface,
                format!(
                    "session event \"{ty}\" is not surface-eligible and cannot carry surfaceOp"
                ),
            ));
        }
        if c.source_event_seqs.is_some() {
            return Err(CoreError::new(
                Code::Surface,
                format!(
                "session event \"{ty}\" is not surface-eligible and cannot carry sourceEventSeqs"
            ),
            ));
        }
        return Ok(None);
    }
    let Some(op) = c.surface_op else {
        return Err(CoreError::new(
            Code::Surface,
            format!("session event \"{ty}\" is surface-eligible and requires a surfaceOp marker"),
        ));
    };
    if string_is(op, "append") {
        return Ok(Some(SurfaceOp::Append));
    }
    let Some(members) = object_members(op) else {
        return Err(CoreError::new(
            Code::Surface,
            format!("session event \"{ty}\" carries an invalid surfaceOp"),
        ));
    };
    // Exactly `op`, `start` and `end` (the last of a repeated key counts,
    // as JSON.parse keeps it).
    let only_these = members
        .iter()
        .all(|&(k, _)| ["op", "start", "end"].iter().any(|name| key_is(k, name)));
    match (
        member(&members, "op"),
        member(&members, "start").and_then(seq_of_text),
        member(&members, "end").and_then(seq_of_text),
    ) {
        (Some(o), Some(start), Some(end)) if only_these && string_is(o, "replace") => {
            Ok(Some(SurfaceOp::Replace { start, end }))
        }
        _ => Err(CoreError::new(
            Code::Surface,
            format!("session event \"{ty}\" carries an invalid replace surfaceOp"),
        )),
    }
}

fn check_sources(c: &Candidate, shadowed: &[u64]) -> CoreResult<()> {
    // Sorted copy: duplicates are neighbours and membership is a binary search.
    let mut sources: Vec<u64> = Vec::new();
    if let Some(raw) = c.source_event_seqs {
        let Some(items) = array_items(raw) else {
            return Err(CoreError::new(
                Code::Surface,
                format!(
                    "sourceEventSeqs on event at seq {} must be an array when present",
                    c.seq
                ),
            ));
        };
        if items.is_empty() && c.kind != Kind::AssistantMessage {
            return Err(CoreError::new(
                Code::Surface,
                "sourceEventSeqs must not be empty except on assistant/message",
            ));
        }
        let mut not_earlier = None;
        sources.reserve(items.len());
        for item in items {
            let Some(s) = seq_of_text(item) else {
                return Err(CoreError::new(Code::Surface, format!(
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
            return Err(CoreError::new(
                Code::Surface,
                "sourceEventSeqs must not contain duplicates",
            ));
        }
        if let Some(s) = not_earlier {
            return Err(CoreError::new(
                Code::Surface,
                format!(
                    "sourceEventSeqs must reference earlier events: {s} >= current seq {}",
                    c.seq
                ),
            ));
        }
    }
    let missing: Vec<String> = shadowed
        .iter()
        .filter(|s| sources.binary_search(s).is_err())
        .map(u64::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(CoreError::new(
            Code::Surface,
            format!(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
            missing.join(", ")
        ),
        ));
    }
    Ok(())
}

impl Surface {
    pub fn new() -> Surface {
        Surface::default()
    }

    /// Model-visible seqs, in order.
    pub fn nodes(&self) -> Vec<u64> {
        self.slots.iter().copied().filter(|&s| s != DEAD).collect()
    }

    /// How many nodes the surface has.
    pub fn len(&self) -> usize {
        self.slot_of.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slot_of.is_empty()
    }

    /// The live nodes in slots `from..=to`, in order.
    fn range(&self, from: usize, to: usize) -> Vec<u64> {
        self.slots[from..=to]
            .iter()
            .copied()
            .filter(|&s| s != DEAD)
            .collect()
    }

    fn push(&mut self, seq: u64) {
        self.slot_of.insert(seq, self.slots.len());
        self.slots.push(seq);
        self.live.push_one();
    }

    /// Drop the dead slots once they outnumber the live ones.
    fn compact(&mut self) {
        if self.dead <= self.slot_of.len().max(64) {
            return;
        }
        self.slots.retain(|&s| s != DEAD);
        self.live = Fenwick::ones(self.slots.len());
        for (slot, &seq) in self.slots.iter().enumerate() {
            self.slot_of.insert(seq, slot);
        }
        self.dead = 0;
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
                    CoreError::new(
                        Code::Surface,
                        format!("surface replace: start seq {start} not found in surface"),
                    )
                })?;
                let end_idx = self.position(end).ok_or_else(|| {
                    CoreError::new(
                        Code::Surface,
                        format!("surface replace: end seq {end} not found in surface"),
                    )
                })?;
                if start_idx > end_idx {
                    return Err(CoreError::new(Code::Surface, format!(
                        "surface replace: start seq {start} (index {start_idx}) is after end seq {end} (index {end_idx})"
                    )));
                }
                let shadowed = self.range(self.slot_of[&start], self.slot_of[&end]);
                check_sources(c, &shadowed)?;
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
                self.push(seq);
                None
            }
            Plan::Replace {
                seq,
                start,
                end,
                start_idx,
                end_idx,
            } => {
                let (Some(&first), Some(&last)) =
                    (self.slot_of.get(&start), self.slot_of.get(&end))
                else {
                    // A plan is made against this state: both ends are nodes.
                    debug_assert!(false, "replace plan of {start_idx}..={end_idx} is stale");
                    return None;
                };
                let shadowed = self.range(first, last);
                for &s in &shadowed {
                    self.slot_of.remove(&s);
                }
                for slot in first + 1..=last {
                    if self.slots[slot] != DEAD {
                        self.slots[slot] = DEAD;
                        self.live.clear(slot);
                        self.dead += 1;
                    }
                }
                // The new node takes the first shadowed node's slot.
                self.slots[first] = seq;
                self.slot_of.insert(seq, first);
                self.generation += 1;
                self.compact();
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
                    _ => Err(CoreError::new(
                        Code::Surface,
                        format!("surface replace: range {start}..{end} not found in surface"),
                    )),
                }
            }
        }
    }

    /// Where `seq` is on the surface: the live slots before its slot.
    fn position(&self, seq: u64) -> Option<usize> {
        self.slot_of.get(&seq).map(|&slot| self.live.prefix(slot))
    }
}

/// The surface part of one event of a whole log, for `foldSurface`: its
/// type, seq, and raw `surfaceOp` / `sourceEventSeqs` texts (see `Candidate`).
pub struct FoldEvent<'a> {
    pub ty: String,
    pub seq: Option<u64>,
    pub surface_op: Option<&'a str>,
    pub source_event_seqs: Option<&'a str>,
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
            return Err(CoreError::new(
                Code::NotContiguous,
                format!("session event seq {shown} is not contiguous; expected {expected}"),
            ));
        }
        let plan = surface.plan(&Candidate {
            ty: &e.ty,
            kind: Kind::of(&e.ty),
            seq: expected,
            surface_op: e.surface_op,
            source_event_seqs: e.source_event_seqs,
        })?;
        if let Some(r) = surface.apply(&plan) {
            replacements.push(r);
        }
    }
    Ok((surface.nodes(), replacements))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn step(s: &mut Surface, ty: &str, seq: u64, op: Value, src: Option<Value>) -> CoreResult<()> {
        let op = if op.is_null() {
            None
        } else {
            Some(op.to_string())
        };
        let src = src.map(|v| v.to_string());
        let plan = s.plan(&Candidate {
            ty,
            kind: Kind::of(ty),
            seq,
            surface_op: op.as_deref(),
            source_event_seqs: src.as_deref(),
        })?;
        s.apply(&plan);
        Ok(())
    }

    fn msg(r: CoreResult<()>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn matches_a_plain_vector_over_random_appends_and_replaces() {
        // xorshift: deterministic, no dependency.
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for round in 0..40 {
            let mut s = Surface::new();
            let mut model: Vec<u64> = Vec::new();
            for seq in 0..(200 + round as u64 * 20) {
                if model.is_empty() || next(3) > 0 {
                    step(&mut s, "user/message", seq, json!("append"), None).unwrap();
                    model.push(seq);
                } else {
                    let i = next(model.len());
                    // Mostly short ranges, sometimes most of the surface.
                    let span = if next(4) == 0 {
                        model.len() - i
                    } else {
                        1 + next(3)
                    };
                    let j = (i + span - 1).min(model.len() - 1);
                    let shadowed: Vec<u64> = model[i..=j].to_vec();
                    let (start, end) = (model[i], model[j]);
                    let op = json!({"op": "replace", "start": start, "end": end}).to_string();
                    let src = json!(shadowed).to_string();
                    let plan = s
                        .plan(&Candidate {
                            ty: "user/message",
                            kind: Kind::UserMessage,
                            seq,
                            surface_op: Some(&op),
                            source_event_seqs: Some(&src),
                        })
                        .unwrap();
                    assert!(
                        matches!(plan, Plan::Replace { start_idx, end_idx, .. } if (start_idx, end_idx) == (i, j))
                    );
                    let replaced = s.apply(&plan).map(|r| r.shadowed);
                    assert_eq!(replaced, Some(shadowed));
                    model.splice(i..=j, [seq]);
                }
                assert_eq!(s.len(), model.len());
            }
            assert_eq!(s.nodes(), model);
            for (i, &n) in model.iter().enumerate() {
                assert_eq!(s.position(n), Some(i));
            }
        }
    }

    #[test]
    fn single_node_trims_cost_the_same_on_a_long_surface() {
        // 40k trims on a 40k-node surface: each is O(log n), so this stays
        // well under a second even unoptimised (it was quadratic).
        let mut s = Surface::new();
        let n = 40_000u64;
        for seq in 0..n {
            step(&mut s, "user/message", seq, json!("append"), None).unwrap();
        }
        for k in 0..n {
            let seq = n + k;
            let target = k; // each original node in turn
            step(
                &mut s,
                "tool/result",
                seq,
                json!({"op": "replace", "start": target, "end": target}),
                Some(json!([target])),
            )
            .unwrap();
        }
        assert_eq!(s.nodes(), (n..2 * n).collect::<Vec<_>>());
        assert_eq!(s.generation(), n);
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
