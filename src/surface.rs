//! The surface fold (SPEC 5): which event seqs produce model messages, in
//! order. One state per session, advanced one event at a time by a plan that
//! is validated first and applied only on commit, so a rejected event changes
//! nothing.

use crate::error::{Code, CoreError, CoreResult};
use crate::event::{EventText, Kind};
use crate::json::{canonical_eq_text, seq_of_text};
use crate::scan::{array_items, key_is, member, object_members, string_is, string_value};
use crate::vocab::{Vocabulary, V0};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A validated `surfaceOp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    Append,
    Replace { start: u64, end: u64 },
}

/// What committing event `seq` does to the surface: its op (`None`: the
/// event does not touch it) and, for a replace, the nodes it shadows (as
/// `foldSurface` reports them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub seq: u64,
    pub op: Option<SurfaceOp>,
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
    slot_of: HashMap<u64, usize, BuildHasherDefault<SeqHasher>>,
    dead: usize,
    generation: u64,
    /// `[startIdx, endIdx]` of the last replacement (what JS splices).
    last_replace: (usize, usize),
}

/// A removed node's slot.
const DEAD: u64 = u64::MAX;

/// Prefix counts over 0/1 entries (a Fenwick tree) that can grow.
#[derive(Debug, Clone, Default)]
struct Fenwick {
    tree: Vec<u32>,
}

impl Fenwick {
    /// A tree over `n` entries, all 1: node `i` sums the lowest set bit of
    /// `i` entries.
    fn ones(n: usize) -> Fenwick {
        let tree = (1..=n).map(|i| (i & i.wrapping_neg()) as u32).collect();
        Fenwick { tree }
    }

    /// Append an entry of 1.
    fn push_one(&mut self) {
        let i = self.tree.len() + 1;
        // Node `i` sums entries `low..i` (0-based): the new 1 and those before it.
        let low = i - (i & i.wrapping_neg());
        let sum = 1 + self.prefix(i - 1) - self.prefix(low);
        self.tree.push(sum as u32);
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
struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A refusal of the surface rules.
fn refuse<T>(message: impl Into<String>) -> CoreResult<T> {
    Err(CoreError::new(Code::Surface, message))
}

/// The op of event `c`: its `surfaceOp` and `sourceEventSeqs` are raw JSON
/// texts (`None` when absent; a present `null` is `Some("null")`, and the
/// rules reject it).
fn parse_op(c: &EventText, vocab: &Vocabulary) -> CoreResult<Option<SurfaceOp>> {
    let ty = &c.ty;
    if !vocab.is_surface(c.kind) {
        let carried = match (c.surface_op, c.source_event_seqs) {
            (None, None) => return Ok(None),
            (Some(_), _) => "surfaceOp",
            (None, Some(_)) => "sourceEventSeqs",
        };
        return refuse(format!(
            "session event \"{ty}\" is not surface-eligible and cannot carry {carried}"
        ));
    }
    let Some(op) = c.surface_op else {
        return refuse(format!(
            "session event \"{ty}\" is surface-eligible and requires a surfaceOp marker"
        ));
    };
    if string_is(op, "append") {
        return Ok(Some(SurfaceOp::Append));
    }
    let Some(members) = object_members(op) else {
        return refuse(format!(
            "session event \"{ty}\" carries an invalid surfaceOp"
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
        _ => refuse(format!(
            "session event \"{ty}\" carries an invalid replace surfaceOp"
        )),
    }
}

fn check_sources(c: &EventText, shadowed: &[u64]) -> CoreResult<()> {
    // Sorted: duplicates are neighbours and membership is a binary search.
    let mut sources = Vec::new();
    if let Some(raw) = c.source_event_seqs {
        let Some(items) = array_items(raw) else {
            return refuse(format!(
                "sourceEventSeqs on event at seq {} must be an array when present",
                c.seq
            ));
        };
        if items.is_empty() && c.kind != Kind::AssistantMessage {
            return refuse("sourceEventSeqs must not be empty except on assistant/message");
        }
        let Some(seqs) = items
            .into_iter()
            .map(seq_of_text)
            .collect::<Option<Vec<_>>>()
        else {
            return refuse(format!(
                "session event \"{}\" sourceEventSeqs must densely contain non-negative safe integers",
                c.ty
            ));
        };
        sources = seqs;
        let not_earlier = sources.iter().find(|&&s| s >= c.seq).copied();
        sources.sort_unstable();
        if sources.windows(2).any(|w| w[0] == w[1]) {
            return refuse("sourceEventSeqs must not contain duplicates");
        }
        if let Some(s) = not_earlier {
            return refuse(format!(
                "sourceEventSeqs must reference earlier events: {s} >= current seq {}",
                c.seq
            ));
        }
    }
    let missing: Vec<String> = shadowed
        .iter()
        .filter(|s| sources.binary_search(s).is_err())
        .map(u64::to_string)
        .collect();
    if !missing.is_empty() {
        return refuse(format!(
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
            missing.join(", ")
        ));
    }
    Ok(())
}

impl Surface {
    /// Model-visible seqs, in order.
    pub fn nodes(&self) -> Vec<u64> {
        self.slots.iter().copied().filter(|&s| s != DEAD).collect()
    }

    /// How many replacements have been committed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// `[startIdx, endIdx]` of the last committed replacement.
    pub fn last_replace(&self) -> (usize, usize) {
        self.last_replace
    }

    /// Validate one event against the current state without changing it.
    pub fn plan(&self, c: &EventText) -> CoreResult<Plan> {
        self.plan_in(c, &V0)
    }

    /// `plan` under `vocab` (which types are surface-eligible).
    pub fn plan_in(&self, c: &EventText, vocab: &Vocabulary) -> CoreResult<Plan> {
        let plan = self.plan_op(c.seq, parse_op(c, vocab)?)?;
        // An event with no op has no sources either (`parse_op`).
        check_sources(c, &plan.shadowed)?;
        Ok(plan)
    }

    /// The plan of event `seq`'s `op`, its sources unchecked (`plan` checks
    /// them; a fork replays ops a valid log holds).
    pub fn plan_op(&self, seq: u64, op: Option<SurfaceOp>) -> CoreResult<Plan> {
        let Some(SurfaceOp::Replace { start, end }) = op else {
            let shadowed = Vec::new();
            return Ok(Plan { seq, op, shadowed });
        };
        let slot = |s: u64, which: &str| match self.slot_of.get(&s) {
            Some(&slot) => Ok(slot),
            None => refuse(format!(
                "surface replace: {which} seq {s} not found in surface"
            )),
        };
        let (first, last) = (slot(start, "start")?, slot(end, "end")?);
        if first > last {
            // Where each end is on the surface: the live slots before it.
            let (start_idx, end_idx) = (self.live.prefix(first), self.live.prefix(last));
            return refuse(format!(
                "surface replace: start seq {start} (index {start_idx}) is after end seq {end} (index {end_idx})"
            ));
        }
        let shadowed = self.slots[first..=last]
            .iter()
            .copied()
            .filter(|&s| s != DEAD)
            .collect();
        Ok(Plan { seq, op, shadowed })
    }

    /// Apply a plan made against the current state; returns it when it
    /// committed a replacement.
    pub fn apply(&mut self, plan: Plan) -> Option<Plan> {
        match plan.op? {
            SurfaceOp::Append => {
                self.slot_of.insert(plan.seq, self.slots.len());
                self.slots.push(plan.seq);
                self.live.push_one();
                return None;
            }
            SurfaceOp::Replace { .. } => {}
        }
        // A plan is made against this state: the shadowed nodes are live.
        let mut slots = plan.shadowed.iter().filter_map(|s| self.slot_of.remove(s));
        let first = slots.next()?;
        let at = self.live.prefix(first);
        self.last_replace = (at, at + plan.shadowed.len() - 1);
        for slot in slots {
            self.slots[slot] = DEAD;
            self.live.clear(slot);
            self.dead += 1;
        }
        // The new node takes the first shadowed node's slot.
        self.slots[first] = plan.seq;
        self.slot_of.insert(plan.seq, first);
        self.generation += 1;
        // Drop the dead slots once they outnumber the live ones.
        if self.dead > self.slot_of.len().max(64) {
            self.slots.retain(|&s| s != DEAD);
            self.live = Fenwick::ones(self.slots.len());
            for (slot, &seq) in self.slots.iter().enumerate() {
                self.slot_of.insert(seq, slot);
            }
            self.dead = 0;
        }
        Some(plan)
    }
}

/// `data` with `message.content` masked to `[{...content[0], content: null}]`
/// (PUB 6), as JSON text; `None` when `data` or its message is no object.
fn masked(data: &str) -> Option<String> {
    let mut out = String::from("{");
    let push_key = |out: &mut String, k: &str| {
        if out.len() > 1 {
            out.push(',');
        }
        out.push('"');
        out.push_str(k);
        out.push_str("\":");
    };
    for (k, v) in object_members(data)? {
        push_key(&mut out, k);
        if !key_is(k, "message") {
            out.push_str(v);
            continue;
        }
        let mut message = String::from("{");
        for (mk, mv) in object_members(v)? {
            push_key(&mut message, mk);
            if !key_is(mk, "content") {
                message.push_str(mv);
                continue;
            }
            let first = array_items(mv).and_then(|items| items.first().copied());
            let mut block = String::from("{");
            for (bk, bv) in first.and_then(object_members).unwrap_or_default() {
                if !key_is(bk, "content") {
                    push_key(&mut block, bk);
                    block.push_str(bv);
                }
            }
            push_key(&mut block, "content");
            block.push_str("null}");
            message.push('[');
            message.push_str(&block);
            message.push(']');
        }
        message.push('}');
        out.push_str(&message);
    }
    out.push('}');
    Some(out)
}

/// The `tool/result` replacement rule (PUB 6), its one home: a replace by
/// a `tool/result` rewrites exactly one node, a `tool/result`, and changes
/// only its result's inner `content`. `data` is the replacing event's
/// payload; `target(seq)` the payload of node `seq` when it is a
/// `tool/result` (`None`: another type).
pub fn tool_result_rewrite(
    plan: &Plan,
    data: &str,
    target: impl FnOnce(u64) -> CoreResult<Option<String>>,
) -> CoreResult<()> {
    if !matches!(plan.op, Some(SurfaceOp::Replace { .. })) {
        return Ok(());
    }
    let [node] = plan.shadowed[..] else {
        return refuse("tool/result surface replacement must rewrite exactly one current node");
    };
    let Some(original) = target(node)? else {
        return refuse("tool/result surface replacement must target a current tool/result");
    };
    match (masked(&original), masked(data)) {
        (Some(a), Some(b)) if canonical_eq_text(&a, &b) => Ok(()),
        _ => refuse("tool/result surface replacement may change only content"),
    }
}

/// `foldSurface(events)`, over the JSON array JS serialized of the caller's
/// `{type, seq, surfaceOp?, sourceEventSeqs?}`: the surface and the plan of
/// every replacement.
pub fn fold(events: &str, vocab: &Vocabulary) -> CoreResult<(Vec<u64>, Vec<Plan>)> {
    let rows = array_items(events)
        .and_then(|items| {
            items
                .into_iter()
                .map(object_members)
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| {
            CoreError::new(
                Code::InvalidArgument,
                "foldSurface: events are not JSON objects",
            )
        })?;
    let mut surface = Surface::default();
    let mut replacements = Vec::new();
    for (index, members) in rows.iter().enumerate() {
        let expected = index as u64;
        let seq = member(members, "seq").and_then(seq_of_text);
        if seq != Some(expected) {
            let shown = seq.map_or("(not a seq)".into(), |s| s.to_string());
            return Err(CoreError::new(
                Code::NotContiguous,
                format!("session event seq {shown} is not contiguous; expected {expected}"),
            ));
        }
        let ty = member(members, "type")
            .and_then(string_value)
            .unwrap_or_default();
        let kind = Kind::of(&ty);
        let plan = surface.plan_in(
            &EventText {
                kind,
                ty: ty.into(),
                seq: expected,
                // The fold reads neither.
                time: 0,
                data: "null",
                surface_op: member(members, "surfaceOp"),
                source_event_seqs: member(members, "sourceEventSeqs"),
            },
            vocab,
        )?;
        if vocab.checks_rewrite(kind) {
            let data = member(members, "data").unwrap_or("null");
            tool_result_rewrite(&plan, data, |seq| {
                let Some(row) = rows.get(seq as usize) else {
                    return Ok(None);
                };
                let is_result = member(row, "type").is_some_and(|t| string_is(t, "tool/result"));
                Ok(is_result.then(|| member(row, "data").unwrap_or("null").to_string()))
            })?;
        }
        replacements.extend(surface.apply(plan));
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
        s.apply(s.plan(&event(ty, seq, op.as_deref(), src.as_deref()))?);
        Ok(())
    }

    fn event<'a>(
        ty: &'a str,
        seq: u64,
        op: Option<&'a str>,
        src: Option<&'a str>,
    ) -> EventText<'a> {
        EventText {
            ty: ty.into(),
            kind: Kind::of(ty),
            seq,
            time: 0,
            data: "null",
            surface_op: op,
            source_event_seqs: src,
        }
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
            let mut s = Surface::default();
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
                        .plan(&event("user/message", seq, Some(&op), Some(&src)))
                        .unwrap();
                    let replaced = s.apply(plan).map(|r| r.shadowed);
                    assert_eq!(replaced, Some(shadowed));
                    assert_eq!(s.last_replace(), (i, j));
                    model.splice(i..=j, [seq]);
                }
                assert_eq!(s.slot_of.len(), model.len());
            }
            assert_eq!(s.nodes(), model);
            for (i, &n) in model.iter().enumerate() {
                assert_eq!(s.slot_of.get(&n).map(|&slot| s.live.prefix(slot)), Some(i));
            }
        }
    }

    #[test]
    fn single_node_trims_cost_the_same_on_a_long_surface() {
        // 40k trims on a 40k-node surface: each is O(log n), so this stays
        // well under a second even unoptimised (it was quadratic).
        let mut s = Surface::default();
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
        let mut s = Surface::default();
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
        let mut s = Surface::default();
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
        let mut s = Surface::default();
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
        let err = |events: &str| fold(events, &V0).err().map(|e| e.to_string());
        assert_eq!(err(r#"[{"type":"x","seq":0},{"type":"x","seq":1}]"#), None);
        assert_eq!(
            err(r#"[{"type":"x","seq":0},{"type":"x","seq":2}]"#).unwrap_or_default(),
            "session event seq 2 is not contiguous; expected 1"
        );
        assert_eq!(
            err(r#"[{"type":"x","seq":0},1]"#).unwrap_or_default(),
            "foldSurface: events are not JSON objects"
        );
    }
}
