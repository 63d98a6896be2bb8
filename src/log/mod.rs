//! The session log held natively: every event's JSON text plus the little
//! each rule needs (kind, time, surface op), the surface state, and the
//! header fold (which event is the latest `request/header`). Seeding, JSONL
//! resume, live appends and forks all pass through `accept_read`, so the
//! rules are checked in one place. By concept:
//!
//! - `texts`: the blocks that hold event texts (never moved once written,
//!   compressed once full);
//! - `metas`: the little kept per event besides its text, in columns;
//! - `read`: reading a seed or a whole JSONL log (two threads for long ones);
//! - `resume`: a JSONL log read while it is handed over, handing surface
//!   payloads back as they are folded (`Session.fromJsonl`);
//! - `live`: live appends (validate, commit) and the hand-over of their texts;
//! - `project`: what the log gives out (event texts, JSONL, closers).
//!
//! Thread priorities for helper threads are in `crate::priority`.

mod live;
mod metas;
mod project;
mod read;
mod resume;
mod texts;

pub use live::live_records;
pub use read::Helper;
pub(crate) use read::Part;
pub use resume::{JsonlReading, PayloadBatch};
pub use texts::{Text, Texts};
// Helper-thread priorities moved to their own module; the stores name them here.
pub use crate::priority::at_low_priority;
pub(crate) use crate::priority::lower_priority;

use crate::error::{CoreError, CoreResult};
use crate::event::{read_event, EventText, Kind, ReadError};
use crate::session_header::SessionHeader;
use crate::surface::{Candidate, Plan, Surface, SurfaceOp};
use serde_json::Value;

/// Where an accepted event's text is: to copy in, or already in the buffer.
enum TextRef<'a> {
    Copy(&'a str),
    Span(usize, usize),
}

/// `seq` when the event is a `request/header` (the header fold's input:
/// the fold keeps the latest one's seq; JS builds the canonical header).
fn header_seq(kind: Kind, seq: u64) -> Option<u64> {
    (kind == Kind::RequestHeader).then_some(seq)
}

/// What the log keeps per event besides its text.
#[derive(Debug, Clone, Copy)]
pub struct EventMeta {
    pub kind: Kind,
    pub time: u64,
    pub op: Option<SurfaceOp>,
}

/// A validated, not yet committed live append.
#[derive(Debug)]
pub struct Prepared {
    plan: Plan,
    header: Option<u64>,
}

/// `Prepared::effect` bit: the event is the new latest `request/header`.
pub const EFFECT_HEADER: u32 = 4;

impl Prepared {
    /// The surface effect (0: untouched, 1: appended, 2: replaced), plus
    /// `EFFECT_HEADER` when the event moves the header fold.
    pub fn effect(&self) -> u32 {
        let surface = match self.plan {
            Plan::Untouched => 0,
            Plan::Append { .. } => 1,
            Plan::Replace { .. } => 2,
        };
        surface
            | if self.header.is_some() {
                EFFECT_HEADER
            } else {
                0
            }
    }
}

/// An error found while reading a log, with the 1-based line it is on.
#[derive(Debug)]
pub struct LineError {
    pub error: CoreError,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct Log {
    pub(crate) header: SessionHeader,
    pub(crate) metas: metas::Metas,
    /// Texts of events `0..len()`; live appends may leave a suffix whose
    /// text the binding has not handed over yet (it keeps those events).
    pub(crate) texts: Texts,
    pub(crate) surface: Surface,
    pub(crate) last_replace: (usize, usize),
    /// Seq of the latest `request/header` (the header fold).
    pub(crate) request_header: Option<u64>,
    /// Index of the last `turn/start` or `turn/end`.
    pub(crate) last_boundary: Option<usize>,
}

impl Log {
    pub fn new(header: SessionHeader) -> Log {
        Log {
            header,
            metas: metas::Metas::default(),
            texts: Texts::default(),
            surface: Surface::new(),
            last_replace: (0, 0),
            request_header: None,
            last_boundary: None,
        }
    }

    /// The same log under another header (the constructor checks the header
    /// after the seed).
    pub fn with_header(mut self, header: SessionHeader) -> Log {
        self.header = header;
        self
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

    pub fn meta(&self, seq: usize) -> Option<EventMeta> {
        self.metas.get(seq)
    }

    pub fn text(&self, seq: usize) -> Option<Text<'_>> {
        self.texts.get(seq)
    }

    /// Compress the texts that wait for it on a helper thread, once they
    /// hold `min_bytes`; whether nothing is left to do (see
    /// `Texts::compress`: never waits).
    pub fn compress_texts(&mut self, min_bytes: usize) -> bool {
        self.texts.compress(min_bytes)
    }

    /// Whether `compress_texts(min_bytes)` has work to do.
    pub fn texts_to_compress(&self, min_bytes: usize) -> bool {
        self.texts.has_work(min_bytes)
    }

    /// Compress each block of texts as it fills up, in the calling thread
    /// (a seed on its helper thread), instead of waiting for `compress_texts`.
    pub fn compress_as_filled(&mut self, on: bool) {
        self.texts.compress_on_seal = on;
    }

    /// Call `f` with the texts of events `from..to` in order (a missing one
    /// as `None`), each block opened once.
    pub fn visit_texts(&self, from: usize, to: usize, f: impl FnMut(usize, Option<&str>)) {
        self.texts.visit(from, to, f)
    }

    /// At least the bytes texts `from..to` take with a newline after each
    /// (what lies between them counts too), without visiting each text.
    pub fn texts_bytes(&self, from: usize, to: usize) -> usize {
        self.texts.span_bytes(from, to) + to.saturating_sub(from)
    }

    /// `[startIdx, endIdx]` of the last committed replacement.
    pub fn last_replace(&self) -> (usize, usize) {
        self.last_replace
    }

    /// Seq of the latest `request/header`, if any.
    pub fn request_header_seq(&self) -> Option<u64> {
        self.request_header
    }

    /// Apply a validated surface plan and header fold step.
    fn apply(&mut self, plan: &Plan, header: Option<u64>) {
        if let Plan::Replace {
            start_idx, end_idx, ..
        } = *plan
        {
            self.last_replace = (start_idx, end_idx);
        }
        self.surface.apply(plan);
        if header.is_some() {
            self.request_header = header;
        }
    }

    /// Record an event's text and meta (its surface effect already applied).
    fn record(&mut self, meta: EventMeta, text: &str) {
        self.note_meta(meta);
        self.texts.push(text);
    }

    /// Record an event whose text is already in the text buffer.
    fn record_span(&mut self, meta: EventMeta, start: usize, end: usize) {
        self.note_meta(meta);
        self.texts.push_span(start, end);
    }

    fn note_meta(&mut self, meta: EventMeta) {
        if matches!(meta.kind, Kind::TurnStart | Kind::TurnEnd) {
            self.last_boundary = Some(self.metas.len());
        }
        self.metas.push(meta);
    }

    /// Check one already-read event against every seed rule that needs the
    /// log (contiguity, surface transition) and commit it, with the seed
    /// messages for `index`. `text` is where the event's text lives.
    fn accept_read(
        &mut self,
        read: Result<EventText<'_>, ReadError>,
        index: usize,
        text: TextRef<'_>,
    ) -> Result<(), Option<CoreError>> {
        let e = match read {
            Ok(e) => e,
            Err(ReadError::Unparsable) => return Err(None),
            Err(ReadError::Invalid(err)) => return Err(Some(err)),
        };
        if e.seq != index as u64 {
            return Err(Some(CoreError::NotContiguous(format!(
                "seed event at index {index} has seq {} (expected {index}); seed must be contiguous from 0",
                e.seq
            ))));
        }
        let parse = |raw: Option<&str>| {
            raw.map(|r| serde_json::from_str::<Value>(r).unwrap_or(Value::Null))
        };
        let (surface_op, source_event_seqs) = (parse(e.surface_op), parse(e.source_event_seqs));
        let plan = self
            .surface
            .plan(&Candidate {
                ty: &e.ty,
                kind: e.kind,
                seq: e.seq,
                surface_op: surface_op.as_ref(),
                source_event_seqs: source_event_seqs.as_ref(),
            })
            .map_err(|err| {
                Some(err.map_message(|m| format!("invalid seed event at index {index}: {m}")))
            })?;
        let header = header_seq(e.kind, e.seq);
        let meta = EventMeta {
            kind: e.kind,
            time: e.time,
            op: plan.op(),
        };
        self.apply(&plan, header);
        match text {
            TextRef::Copy(t) => self.record(meta, t),
            TextRef::Span(start, end) => self.record_span(meta, start, end),
        }
        Ok(())
    }

    /// Accept one event from its JSON text (seed, store load): every seed
    /// rule, with the seed messages for `index`. `Err(None)`: unparsable.
    pub(crate) fn accept_text(
        &mut self,
        text: &str,
        index: usize,
    ) -> Result<(), Option<CoreError>> {
        self.accept_read(read_event(text, index), index, TextRef::Copy(text))
    }

    /// `fork(boundary?, childId)`: a new log holding events `0..=boundary`,
    /// which must end on a `turn/end`.
    pub fn fork(&self, boundary: Option<f64>, child: SessionHeader) -> CoreResult<Log> {
        let id = self.header.id();
        let end = match boundary {
            None if self.metas.is_empty() => None,
            None => Some(self.metas.len() - 1),
            Some(b) => {
                if !(b.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&b)) {
                    return Err(CoreError::InvalidBoundary(format!(
                        "fork boundary for session \"{id}\" must be a non-negative safe integer, got {b}"
                    )));
                }
                let b = b as usize;
                if b >= self.metas.len() {
                    let last = if self.metas.is_empty() {
                        "none".to_string()
                    } else {
                        (self.metas.len() - 1).to_string()
                    };
                    return Err(CoreError::InvalidBoundary(format!(
                        "fork boundary {b} does not exist in session \"{id}\" (last seq: {last})"
                    )));
                }
                Some(b)
            }
        };
        let mut log = Log::new(child);
        let Some(end) = end else {
            return Ok(log);
        };
        if self.metas.kind(end) != Some(Kind::TurnEnd) {
            return Err(CoreError::InvalidBoundary(format!(
                "fork boundary {end} in session \"{id}\" is not a turn/end"
            )));
        }
        if self.texts.len() <= end {
            return Err(CoreError::InvalidArgument(
                "fork needs the texts of every event up to the boundary".into(),
            ));
        }
        let mut replayed = Ok(());
        self.texts.visit(0, end + 1, |i, text| {
            if replayed.is_err() {
                return;
            }
            let Some(meta) = self.metas.get(i) else {
                replayed = Err(CoreError::InvalidArgument(format!("no event at seq {i}")));
                return;
            };
            replayed = log.surface.replay_plan(i as u64, meta.op).map(|plan| {
                log.apply(&plan, header_seq(meta.kind, i as u64));
                log.record(meta, text.unwrap_or("null"));
            });
        });
        replayed?;
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_read_from_two_parts_is_the_log_read_from_one() {
        let header =
            SessionHeader::from_line(r#"{"type":"session","version":0,"id":"p"}"#).expect("header");
        let lines: Vec<String> = (0..read::PARALLEL_MIN_LINES + 7)
            .map(|seq| {
                let ty = match seq % 3 {
                    0 => "turn/start",
                    1 => "message/user",
                    _ => "turn/end",
                };
                format!(r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{{"k":"é{seq}"}}}}"#)
            })
            .collect();
        let spans_of = |ls: &[String]| {
            let mut at = 0;
            ls.iter()
                .map(|l| {
                    let span = (at, at + l.len());
                    at += l.len() + 1;
                    span
                })
                .collect::<Vec<_>>()
        };
        let joined = |ls: &[String]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
        // The log of these groups of lines, one part each.
        let read = |groups: &[&[String]]| {
            let spans: Vec<_> = groups.iter().map(|g| spans_of(g)).collect();
            let parts = groups
                .iter()
                .zip(&spans)
                .map(|(g, spans)| Part {
                    text: joined(g),
                    spans,
                })
                .collect();
            Log::from_parts(header.clone(), parts, &|_, _, _, _| true)
                .map_err(|(index, _, texts)| (index, texts.len()))
        };
        let one = read(&[&lines]).expect("one part");
        for cut in [1, 4096, lines.len() - 1] {
            let (a, b) = lines.split_at(cut);
            let two = read(&[a, b]).expect("two parts");
            assert!(
                two.texts
                    .iter()
                    .map(|t| t.to_string())
                    .eq(one.texts.iter().map(|t| t.to_string())),
                "cut at {cut}"
            );
            assert_eq!(two.to_jsonl(), one.to_jsonl());
            // A bad event in the second part is named by its index in the log.
            let mut bad = b.to_vec();
            bad[0] = "{".into();
            let err = read(&[a, &bad]).err();
            assert_eq!(err, Some((cut, 2)), "cut at {cut}");
        }
    }

    #[test]
    fn from_jsonl_reads_logs_and_names_the_line_of_a_defect() {
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        let e0 = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;
        let e1 = r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let log = Log::from_jsonl(format!("{header}\n{e0}\n{e1}\n\n").as_bytes()).unwrap();
        assert_eq!((log.len(), log.surface().nodes()), (2, vec![1u64]));
        assert_eq!(log.to_jsonl(), format!("{header}\n{e0}\n{e1}\n"));
        let err = Log::from_jsonl(format!("{header}\n{e0}\n\n{e1}\n").as_bytes()).unwrap_err();
        assert_eq!((err.line, err.error.code()), (3, "CORRUPT_LOG"));
        let err = Log::from_jsonl(format!("{header}\n{e1}\n").as_bytes()).unwrap_err();
        assert_eq!(
            err.error.to_string(),
            "seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0"
        );
        assert_eq!(err.line, 2);
    }

    #[test]
    fn attached_texts_record_metas_for_live_events() {
        let mut log = Log::new(SessionHeader::minimal("s", 1.0));
        let p = log
            .prepare("user/message", 1, Some(r#"{"surfaceOp":"append"}"#), None)
            .unwrap();
        log.commit_prepared(p);
        assert!(log.attach_texts("{\"type\":\"x\"}").is_err());
        assert!(log.attach_texts("[]\n").is_err());
        assert_eq!(log.len(), 0);
        log.attach_texts(concat!(
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
            "\n",
            r#"{"type":"user/message","seq":1,"time":6,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
            "\n"
        ))
        .unwrap();
        assert_eq!(log.len(), 2);
        assert_eq!(
            log.payloads_json(&[1]),
            r#"["user/message",{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}]"#
        );
        assert_eq!(log.surface().nodes(), vec![1]);
        assert_eq!(log.meta(0).map(|m| m.time), Some(5));
    }
}
