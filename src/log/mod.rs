//! The session log held natively: every event's JSON text plus the little
//! each rule needs (kind, time, surface op), the surface state, and the
//! header fold (which event is the latest `request/header`). Every event
//! read (a seed, a JSONL log, a store's load) passes through `accept_read`,
//! and a live append through `prepare`: both plan with the one surface fold;
//! a fork replays the ops kept. By concept:
//!
//! - `texts`: the blocks that hold event texts (never moved once written,
//!   compressed once full);
//! - `metas`: the little kept per event besides its text, in columns;
//! - `read`: reading a seed or a whole JSONL log (two threads for long ones);
//! - `resume`: a JSONL log read while it is handed over (`Session.fromJsonl`);
//! - `live`: live appends (validate, commit);
//! - `project`: what the log gives out (event texts, JSONL, closers).
//!
//! A log whose vocabulary does not keep texts (`Vocabulary::keeps_texts`:
//! the published line's, whose events are the JS session's objects) keeps
//! no event text, only the payloads its rules read later
//! (`Vocabulary::kept_payloads`, seeded and live in one map); every method
//! that gives texts out refuses it with `INVALID_ARGUMENT` (`given_texts`).

mod live;
mod metas;
mod project;
mod read;
mod resume;
mod texts;

pub use project::{payloads, write_jsonl};
pub(crate) use read::ArrivingPiece;
pub use resume::JsonlReading;
pub(crate) use resume::{read_arriving, too_roomy, Cutter, PIECE_BYTES};
pub use texts::{Text, Texts, COMPRESS_MIN_BYTES};

use crate::error::{Code, CoreError, CoreResult};
use crate::event::{read_event_in, EventText, Kind, ReadError};
use crate::session_header::SessionHeader;
use crate::surface::{tool_result_rewrite, Plan, Surface, SurfaceOp};
use crate::vocab::{ForkRule, Vocabulary, V0};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whose fork a boundary is checked for: `Session.fork` (a boundary that
/// is not a `turn/end` is `INVALID_BOUNDARY`) or the Cordis service's
/// (SPEC 12.6: `OPEN_TURN`, naming the event's type).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ForkOf {
    Session,
    Service,
}

/// The fork boundary rule, its one home: how many events (`0..=len`) a
/// fork of session `id` of `len` events takes at `boundary` (`None`: the
/// last event; a number and how JS's `String` spells it, NaN for a value
/// that is no number). `last` is the last event's seq, the same way (a
/// session's own is its index; a source the Cordis service holds may have
/// others); `at` is the seq of event `boundary` when that is an index of one,
/// `at_type` its type, `None` for a `turn/end`.
#[allow(clippy::too_many_arguments)]
pub fn fork_end(
    id: &str,
    boundary: Option<(f64, String)>,
    len: u64,
    fork_of: ForkOf,
    last: (f64, String),
    at: f64,
    at_type: Option<String>,
    rule: ForkRule,
    open_turn: Option<String>,
) -> CoreResult<u64> {
    let invalid = |message: String| CoreError::new(Code::InvalidBoundary, message);
    let (b, shown) = match boundary {
        None if len == 0 => return Ok(0),
        None => last.clone(),
        Some(b) => b,
    };
    if !(b >= 0.0 && b.fract() == 0.0 && b <= 9_007_199_254_740_991.0) {
        return Err(invalid(format!(
            "fork boundary for session \"{id}\" must be a non-negative safe integer, got {shown}"
        )));
    }
    let b = b as u64;
    if b >= len {
        let last = if len == 0 { "none" } else { &last.1 };
        return Err(invalid(format!(
            "fork boundary {b} does not exist in session \"{id}\" (last seq: {last})"
        )));
    }
    if at != b as f64 {
        return Err(invalid(format!(
            "fork boundary {b} does not match a contiguous event seq in session \"{id}\""
        )));
    }
    // PUB 12.5: `open_turn` is the `data.turn` of the last `turn/start`
    // at or before the boundary when no `turn/end` follows it (as JS's
    // `String` spells it).
    if rule == ForkRule::NotInsideOpenTurn {
        return match open_turn {
            None => Ok(b + 1),
            Some(n) => Err(CoreError::new(
                Code::OpenTurn,
                format!("fork boundary {b} in session \"{id}\" ends inside open turn {n}"),
            )),
        };
    }
    match (at_type, fork_of) {
        (None, _) => Ok(b + 1),
        (Some(_), ForkOf::Session) => Err(invalid(format!(
            "fork boundary {b} in session \"{id}\" is not a turn/end"
        ))),
        (Some(ty), ForkOf::Service) => Err(CoreError::new(
            Code::OpenTurn,
            format!("fork boundary {b} in session \"{id}\" must be turn/end, got {ty}"),
        )),
    }
}

/// What the log keeps per event besides its text.
#[derive(Debug, Clone, Copy)]
pub struct EventMeta {
    pub kind: Kind,
    pub time: i64,
    pub op: Option<SurfaceOp>,
}

/// A validated, not yet committed live append.
#[derive(Debug)]
pub struct Prepared {
    plan: Plan,
    kind: Kind,
    /// A live `tool/result`'s payload the log keeps (PUB 6's rule reads it).
    kept: Option<String>,
}

impl Prepared {
    /// The surface effect (0: untouched, 1: appended, 2: replaced), plus 4
    /// (JS's `EFFECT_HEADER`) when the event moves the header fold.
    pub fn effect(&self) -> u32 {
        let surface = match self.plan.op {
            None => 0,
            Some(SurfaceOp::Append) => 1,
            Some(SurfaceOp::Replace { .. }) => 2,
        };
        match self.kind {
            Kind::RequestHeader => surface | 4,
            _ => surface,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Log {
    pub(crate) header: SessionHeader,
    pub(crate) metas: metas::Metas,
    /// Texts of events `0..len()`: the events the log was given as text (a
    /// seed, a read, a fork's copy). They never change once the log is
    /// built, so a store's flush reads them off the main thread through a
    /// clone of the `Arc`. Live appends after them are the JS session's
    /// objects; the log holds only their surface and header effects.
    pub(crate) texts: Arc<Texts>,
    pub(crate) surface: Surface,
    /// Seq of the latest `request/header` (the header fold; JS builds the
    /// canonical header).
    pub(crate) request_header: Option<u64>,
    /// The vocabulary whose rules this log keeps.
    pub(crate) vocab: &'static Vocabulary,
    /// Payloads of the surface events of the vocabulary's `kept_payloads`
    /// kinds that have no text here (live ones; seeded ones too when the
    /// log keeps no texts): what its `tool/result` replacement rule reads.
    pub(crate) kept_payloads: BTreeMap<u64, String>,
}

impl Log {
    pub fn new(header: SessionHeader) -> Log {
        Log::with_vocabulary(header, &V0)
    }

    pub fn with_vocabulary(header: SessionHeader, vocab: &'static Vocabulary) -> Log {
        Log {
            vocab,
            kept_payloads: BTreeMap::new(),
            header,
            metas: metas::Metas::default(),
            texts: Arc::default(),
            surface: Surface::default(),
            request_header: None,
        }
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    pub fn set_header(&mut self, header: SessionHeader) {
        self.header = header;
    }

    pub fn len(&self) -> usize {
        self.metas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }

    pub fn texts_len(&self) -> usize {
        self.texts.len()
    }

    pub fn surface(&self) -> &Surface {
        &self.surface
    }

    pub fn text(&self, seq: usize) -> CoreResult<Text<'_>> {
        self.given_texts("text")?.get(seq)
    }

    /// The texts, for `what` (a method that gives them out); a log whose
    /// vocabulary keeps none refuses it rather than give out none.
    pub(crate) fn given_texts(&self, what: &str) -> CoreResult<&Arc<Texts>> {
        match self.vocab.keeps_texts {
            true => Ok(&self.texts),
            false => Err(CoreError::new(
                Code::InvalidArgument,
                format!(
                    "{what}: a {} session's native log keeps no event texts (its events are the JS session's)",
                    self.vocab.name
                ),
            )),
        }
    }

    /// The texts, to change them: only while the log is being built (a
    /// shared `Arc` would be copied).
    pub(crate) fn texts_mut(&mut self) -> &mut Texts {
        Arc::make_mut(&mut self.texts)
    }

    /// The texts, shared (a store's flush reads them on its own thread).
    pub fn shared_texts(&self) -> CoreResult<Arc<Texts>> {
        self.given_texts("flushSource").cloned()
    }

    /// Start compressing the texts that wait for it, on a helper thread,
    /// once they hold `min_bytes`, and take what an earlier start finished
    /// (see `Texts::compress`: never waits). Nothing happens while a flush
    /// shares the texts; a later call takes it up.
    pub fn compress_texts(&mut self, min_bytes: usize) {
        if self.texts.idle {
            return;
        }
        if let Some(texts) = Arc::get_mut(&mut self.texts) {
            texts.compress(min_bytes);
        }
    }

    /// Compress each block of texts as it fills up, in the calling thread
    /// (a seed on its helper thread), instead of waiting for `compress_texts`.
    pub fn compress_as_filled(&mut self, on: bool) {
        self.texts_mut().compress_on_seal = on;
    }

    /// At least the bytes texts `from..to` take with a newline after each
    /// (what lies between them counts too), without visiting each text.
    pub fn texts_bytes(&self, from: usize, to: usize) -> usize {
        self.texts.span_bytes(from, to) + to.saturating_sub(from)
    }

    /// Seq of the latest `request/header`, if any.
    pub fn request_header_seq(&self) -> Option<u64> {
        self.request_header
    }

    /// The payload of event `seq` when it is a `tool/result` (`None`:
    /// another type), from its text or, without one, as kept.
    pub(crate) fn result_data(&self, seq: u64) -> CoreResult<Option<String>> {
        if (seq as usize) < self.texts.len() {
            return match self.metas.get(seq as usize) {
                Some(m) if m.kind == Kind::ToolResult => Ok(Some(
                    project::data_of(&self.texts, seq as usize)?.to_string(),
                )),
                _ => Ok(None),
            };
        }
        Ok(self.kept_payloads.get(&seq).cloned())
    }

    /// Commit an event's validated surface plan and header fold step.
    fn apply(&mut self, plan: Plan, kind: Kind) {
        if kind == Kind::RequestHeader {
            self.request_header = Some(plan.seq);
        }
        self.surface.apply(plan);
    }

    /// Check one already-read event against every seed rule that needs the
    /// log (contiguity, surface transition) and commit it, with the seed
    /// messages for `index`; the caller then keeps its text.
    fn accept_read(
        &mut self,
        read: Result<EventText<'_>, ReadError>,
        index: usize,
    ) -> Result<(), Option<CoreError>> {
        let e = match read {
            Ok(e) => e,
            Err(ReadError::Unparsable) => return Err(None),
            Err(ReadError::Invalid(err)) => return Err(Some(err)),
        };
        if e.seq != index as u64 {
            return Err(Some(CoreError::new(Code::NotContiguous, format!(
                "seed event at index {index} has seq {} (expected {index}); seed must be contiguous from 0",
                e.seq
            ))));
        }
        let plan = self
            .surface
            .plan_in(&e, self.vocab)
            .and_then(|plan| {
                if self.vocab.checks_rewrite(e.kind) {
                    tool_result_rewrite(&plan, e.data, |seq| self.result_data(seq))?;
                }
                Ok(plan)
            })
            .map_err(|err| {
                Some(err.map_message(|m| format!("invalid seed event at index {index}: {m}")))
            })?;
        // Without its text, the payload a rule reads later is kept here.
        if !self.vocab.keeps_texts && plan.op.is_some() && self.vocab.keeps_payload(e.kind) {
            self.kept_payloads.insert(e.seq, e.data.to_string());
        }
        self.metas.push(EventMeta {
            kind: e.kind,
            time: e.time,
            op: plan.op,
        });
        self.apply(plan, e.kind);
        Ok(())
    }

    /// Accept one event from its JSON text (seed, store load): every seed
    /// rule, with the seed messages for `index`. `Err(None)`: unparsable.
    pub(crate) fn accept_text(
        &mut self,
        text: &str,
        index: usize,
    ) -> Result<(), Option<CoreError>> {
        self.accept_read(read_event_in(text, index, self.vocab), index)?;
        if self.vocab.keeps_texts {
            self.texts_mut().push(text);
        }
        Ok(())
    }

    /// The surface of events `0..end` alone (live appends after the texts,
    /// and anything past `end`, left out).
    pub fn surface_at(&self, end: usize) -> CoreResult<Surface> {
        Ok(self.replayed(end, self.header.clone())?.surface)
    }

    /// A log under `header` with the surface and header fold of events
    /// `0..end`, replayed from the ops kept here (no text is read).
    fn replayed(&self, end: usize, header: SessionHeader) -> CoreResult<Log> {
        let mut log = Log::with_vocabulary(header, self.vocab);
        for i in self.metas.effects(end) {
            let meta = self.metas.get(i).ok_or_else(|| {
                CoreError::new(Code::Internal, format!("no facts kept for event {i}"))
            })?;
            let plan = log.surface.plan_op(i as u64, meta.op)?;
            log.apply(plan, meta.kind);
        }
        Ok(log)
    }

    /// A new log under `child` holding this log's events `0..end` (at most
    /// `len()`): their texts (shared, when all of them), kinds and times, and
    /// the surface and header fold replayed. The caller checked the boundary
    /// (`Session.fork`); a live session then replays its own appends after
    /// `end` into the child. A log that keeps no texts gives none to its
    /// child (its vocabulary's), only its kept payloads.
    pub fn fork_prefix(&self, end: usize, child: SessionHeader) -> CoreResult<Log> {
        let end = end.min(self.len());
        Ok(Log {
            metas: self.metas.prefix(end),
            texts: if end == self.texts.len() {
                self.texts.clone()
            } else {
                Arc::new(self.texts.prefix(end)?)
            },
            // A live session replays its appends after `end`: their
            // payloads come along, as the parent kept them (and, with no
            // texts, those of the prefix).
            kept_payloads: self.kept_payloads.clone(),
            ..self.replayed(end, child)?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fork_boundary_rule_names_each_refusal_as_both_forks_do() {
        // Events 0..4: turn/start, user/message, turn/end, turn/start.
        let types = ["turn/start", "user/message", "turn/end", "turn/start"];
        // What JS reads for a fork of the first `len` events, whose seq at
        // index `i` is `seq(i)`.
        let rule = |b: Option<(f64, String)>, len: u64, of: ForkOf, seq: fn(u64) -> u64| {
            let last = match len {
                0 => (f64::NAN, "undefined".to_string()),
                _ => (seq(len - 1) as f64, seq(len - 1).to_string()),
            };
            let i = b.as_ref().map_or(len.wrapping_sub(1), |b| b.0 as u64);
            let (at, at_type) = match b.as_ref().map_or(len > 0, |b| b.0 >= 0.0 && i < len) {
                true => (
                    seq(i) as f64,
                    Some(types[i as usize]).filter(|&t| t != "turn/end"),
                ),
                false => (f64::NAN, None),
            };
            fork_end(
                "s",
                b,
                len,
                of,
                last,
                at,
                at_type.map(str::to_string),
                ForkRule::BoundaryIsTurnEnd,
                None,
            )
            .map_err(|e| (e.code(), e.message().to_string()))
        };
        let end = |b: Option<(f64, &str)>, len: u64, of: ForkOf| {
            rule(b.map(|(b, s)| (b, s.to_string())), len, of, |i| i)
        };
        assert_eq!(end(Some((2.0, "2")), 4, ForkOf::Session), Ok(3));
        assert_eq!(end(None, 3, ForkOf::Session), Ok(3));
        assert_eq!(end(None, 0, ForkOf::Service), Ok(0));
        for (b, shown) in [
            (-1.0, "-1"),
            (1.5, "1.5"),
            (f64::NAN, "null"),
            (2f64.powi(53), "9007199254740992"),
        ] {
            for of in [ForkOf::Session, ForkOf::Service] {
                assert_eq!(
                    end(Some((b, shown)), 4, of),
                    Err(("INVALID_BOUNDARY", format!("fork boundary for session \"s\" must be a non-negative safe integer, got {shown}")))
                );
            }
        }
        assert_eq!(
            end(Some((4.0, "4")), 4, ForkOf::Session),
            Err((
                "INVALID_BOUNDARY",
                "fork boundary 4 does not exist in session \"s\" (last seq: 3)".into()
            ))
        );
        assert_eq!(
            end(Some((0.0, "0")), 0, ForkOf::Service),
            Err((
                "INVALID_BOUNDARY",
                "fork boundary 0 does not exist in session \"s\" (last seq: none)".into()
            ))
        );
        assert_eq!(
            end(None, 4, ForkOf::Session),
            Err((
                "INVALID_BOUNDARY",
                "fork boundary 3 in session \"s\" is not a turn/end".into()
            ))
        );
        assert_eq!(
            end(Some((1.0, "1")), 4, ForkOf::Service),
            Err((
                "OPEN_TURN",
                "fork boundary 1 in session \"s\" must be turn/end, got user/message".into()
            ))
        );
        // A source whose seqs are not its indexes (one the Cordis service holds).
        let foreign = |b: Option<(f64, String)>| rule(b, 3, ForkOf::Service, |i| i + 1);
        assert_eq!(
            foreign(None),
            Err((
                "INVALID_BOUNDARY",
                "fork boundary 3 does not exist in session \"s\" (last seq: 3)".into()
            ))
        );
        assert_eq!(
            foreign(Some((1.0, "1".into()))),
            Err((
                "INVALID_BOUNDARY",
                "fork boundary 1 does not match a contiguous event seq in session \"s\"".into()
            ))
        );
    }

    #[test]
    fn events_json_leaves_out_the_data_the_caller_holds() {
        let log = Log::from_jsonl(
            concat!(
                r#"{"type":"session","version":0,"id":"h"}"#,
                "\n",
                r#"{"type":"plugin/x","seq":0,"time":1,"data":{"turn":1,"k":[1,{"data":2}]}}"#,
                "\n",
                r#"{"type":"plugin/y","seq":1,"time":2,"data":"d"}"#,
                "\n"
            )
            .as_bytes(),
        )
        .map_err(|e| e.to_string())
        .expect("the log reads");
        let all = log.events_json(0, 2, &[]).expect("texts read");
        assert_eq!(
            all,
            concat!(
                r#"[{"type":"plugin/x","seq":0,"time":1,"data":{"turn":1,"k":[1,{"data":2}]}},"#,
                r#"{"type":"plugin/y","seq":1,"time":2,"data":"d"}]"#
            )
        );
        assert_eq!(
            log.events_json(0, 2, &[0, 7]).expect("texts read"),
            all.replacen(r#"{"turn":1,"k":[1,{"data":2}]}"#, "null", 1)
        );
        assert_eq!(
            log.events_json(1, 2, &[1]).expect("texts read"),
            r#"[{"type":"plugin/y","seq":1,"time":2,"data":null}]"#
        );
    }

    /// Lines arriving as a piece each (`Log::from_arriving`).
    struct Lines(String, Vec<(usize, usize)>);

    impl read::ArrivingPiece for Lines {
        fn text(&self) -> &str {
            &self.0
        }
        fn spans(&self) -> &[(usize, usize)] {
            &self.1
        }
        fn into_text(self) -> String {
            self.0
        }
    }

    #[test]
    fn a_log_read_from_arriving_pieces_is_the_log_read_whole() {
        let header =
            SessionHeader::from_line(r#"{"type":"session","version":0,"id":"p"}"#).expect("header");
        let lines: Vec<String> = (0..4 * read::PARALLEL_MIN_LINES + 7)
            .map(|seq| {
                let ty = match seq % 3 {
                    0 => "turn/start",
                    1 => "message/user",
                    _ => "turn/end",
                };
                format!(r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{{"k":"é{seq}"}}}}"#)
            })
            .collect();
        let piece = |ls: &[String]| {
            let mut at = 0;
            let spans = ls
                .iter()
                .map(|l| {
                    let span = (at, at + l.len());
                    at += l.len() + 1;
                    span
                })
                .collect();
            Lines(ls.iter().map(|l| format!("{l}\n")).collect(), spans)
        };
        let whole =
            Log::from_jsonl(format!("{}\n{}\n", header.line(), lines.join("\n")).as_bytes())
                .expect("the whole log");
        // Pieces sent before the read or one at a time while it reads
        // (each read as it arrives, a long one on two threads).
        let read = |groups: Vec<&[String]>, paced: bool| {
            let (send, pieces) = std::sync::mpsc::channel();
            let verify = |_: &Lines, _: &str, _: usize, e: &EventText<'_>| e.ty != "message/bad";
            std::thread::scope(|scope| {
                scope.spawn(move || {
                    for g in groups {
                        send.send(piece(g)).unwrap();
                        if paced {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                        }
                    }
                });
                Log::from_arriving(header.clone(), pieces, &verify)
            })
        };
        let n = lines.len();
        for paced in [false, true] {
            for cuts in [
                vec![0, n],
                vec![0, 1, n],
                vec![0, 4096, 4097, 8000, n],
                vec![0, n - 1, n],
            ] {
                let groups: Vec<&[String]> = cuts.windows(2).map(|w| &lines[w[0]..w[1]]).collect();
                let log = read(groups, paced).expect("read");
                assert_eq!(
                    log.to_jsonl().unwrap(),
                    whole.to_jsonl().unwrap(),
                    "{cuts:?}"
                );
                assert_eq!(log.surface().nodes(), whole.surface().nodes());
            }
            // An event `verify` refuses, or one that does not read, in a later piece.
            for bad in [
                r#"{"type":"message/bad","seq":5000,"time":1,"data":{}}"#,
                "{",
            ] {
                let mut lines = lines.clone();
                lines[5000] = bad.into();
                let groups = vec![&lines[..4096], &lines[4096..]];
                assert!(read(groups, paced).is_none(), "{bad}");
            }
        }
    }

    #[test]
    fn from_jsonl_reads_logs_and_names_the_line_of_a_defect() {
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        let e0 = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;
        let e1 = r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let log = Log::from_jsonl(format!("{header}\n{e0}\n{e1}\n\n").as_bytes()).unwrap();
        assert_eq!((log.len(), log.surface().nodes()), (2, vec![1u64]));
        assert_eq!(log.to_jsonl().unwrap(), format!("{header}\n{e0}\n{e1}\n"));
        let err = Log::from_jsonl(format!("{header}\n{e0}\n\n{e1}\n").as_bytes()).unwrap_err();
        assert_eq!((err.line(), err.code()), (Some(3), "CORRUPT_LOG"));
        let err = Log::from_jsonl(format!("{header}\n{e1}\n").as_bytes()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0"
        );
        assert_eq!(err.line(), Some(2));
    }

    #[test]
    fn a_fork_at_any_event_holds_what_a_read_of_that_prefix_holds() {
        // Turns of appends, request headers, replaces of random node
        // ranges and other events (xorshift: deterministic); the fork at
        // every length has the facts, surface, header fold and last turn
        // boundary a read of the same lines gives.
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        let mut lines: Vec<String> = Vec::new();
        let mut nodes: Vec<usize> = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let msg = r#""data":{"content":[],"source":{"kind":"user"}}"#;
        while lines.len() < 400 {
            let seq = lines.len();
            let line = match next(6) {
                0 => format!(
                    r#"{{"type":"turn/start","seq":{seq},"time":{seq},"data":{{"turn":1}}}}"#
                ),
                1 => format!(
                    r#"{{"type":"turn/end","seq":{seq},"time":{seq},"data":{{"turn":1,"reason":{{"kind":"completed"}}}}}}"#
                ),
                2 => format!(
                    r#"{{"type":"request/header","seq":{seq},"time":{seq},"data":{{"header":{{"config":{{"provider":"p","model":"m{seq}"}}}},"reason":"initial"}}}}"#
                ),
                3 if !nodes.is_empty() => {
                    let i = next(nodes.len() as u64) as usize;
                    let j = i + next((nodes.len() - i) as u64) as usize;
                    let shadowed: Vec<String> =
                        nodes[i..=j].iter().map(|n| n.to_string()).collect();
                    let line = format!(
                        r#"{{"type":"user/message","seq":{seq},"time":{seq},{msg},"surfaceOp":{{"op":"replace","start":{},"end":{}}},"sourceEventSeqs":[{}]}}"#,
                        nodes[i],
                        nodes[j],
                        shadowed.join(",")
                    );
                    nodes.splice(i..=j, [seq]);
                    line
                }
                4 => {
                    nodes.push(seq);
                    format!(
                        r#"{{"type":"user/message","seq":{seq},"time":{seq},{msg},"surfaceOp":"append"}}"#
                    )
                }
                _ => format!(r#"{{"type":"plugin/x","seq":{seq},"time":{seq},"data":{{}}}}"#),
            };
            lines.push(line);
        }
        let read = |n: usize| {
            let text: String = std::iter::once(header.to_string())
                .chain(lines[..n].iter().cloned())
                .map(|l| format!("{l}\n"))
                .collect();
            Log::from_jsonl(text.as_bytes()).map_err(|e| e.to_string())
        };
        let log = read(lines.len()).expect("the log reads");
        assert_eq!(
            log.surface().nodes(),
            nodes.iter().map(|&n| n as u64).collect::<Vec<_>>()
        );
        for end in 0..=lines.len() {
            let fork = log
                .fork_prefix(end, SessionHeader::minimal("c", 1.0))
                .expect("the fork replays");
            let want = read(end).expect("the prefix reads");
            assert_eq!(fork.len(), end);
            assert_eq!(fork.surface().nodes(), want.surface().nodes(), "{end}");
            assert_eq!(
                fork.surface().generation(),
                want.surface().generation(),
                "{end}"
            );
            assert_eq!(
                fork.request_header_seq(),
                want.request_header_seq(),
                "{end}"
            );
            assert_eq!(
                fork.metas.last_boundary(),
                want.metas.last_boundary(),
                "{end}"
            );
            assert_eq!(
                fork.surface().last_replace(),
                want.surface().last_replace(),
                "{end}"
            );
            for i in 0..end {
                let (a, b) = (fork.metas.get(i), want.metas.get(i));
                assert_eq!(
                    a.map(|m| (m.kind, m.time, m.op)),
                    b.map(|m| (m.kind, m.time, m.op)),
                    "{end} {i}"
                );
            }
            assert!(fork.metas.get(end).is_none());
        }
    }

    #[test]
    fn a_fork_of_the_prefix_replays_its_surface_and_shares_its_texts() {
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        let lines = [
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
            r#"{"type":"user/message","seq":1,"time":2,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
            r#"{"type":"user/message","seq":2,"time":3,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":1,"end":1},"sourceEventSeqs":[1]}"#,
            r#"{"type":"turn/end","seq":3,"time":4,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
        ];
        let text: String = std::iter::once(header)
            .chain(lines)
            .map(|l| format!("{l}\n"))
            .collect();
        let mut log = Log::from_jsonl(text.as_bytes()).unwrap();
        // A live append after the prefix moves the parent's surface only.
        let p = log
            .prepare("user/message", 4, Some(r#"{"surfaceOp":"append"}"#), None)
            .unwrap();
        log.commit_prepared(p);
        assert_eq!(log.surface().nodes(), vec![2, 4]);
        let child = SessionHeader::minimal("c", 1.0);
        let all = log.fork_prefix(4, child.clone()).unwrap();
        assert!(Arc::ptr_eq(&all.texts, &log.texts));
        assert_eq!((all.len(), all.surface().nodes()), (4, vec![2]));
        assert_eq!(all.surface().generation(), 1);
        let two = log.fork_prefix(2, child).unwrap();
        assert_eq!((two.len(), two.surface().nodes()), (2, vec![1]));
        assert_eq!(two.text(1).unwrap().to_string(), lines[1]);
    }
}
