//! The crash-repair load of SPEC 11, over the records of a stored log (JSONL
//! lines or SQLite rows). A record that cannot be read, or whose seq breaks
//! contiguity, is a torn tail when nothing after it is a readable `turn/end`
//! (drop it and everything after it) and corruption otherwise. The kept
//! events must pass every seed rule; the section-8 closers then balance the
//! log.

use crate::error::{Code, CoreError, CoreResult};
use crate::log::Log;
use crate::scan::{read_event_line, string_is, string_lossy};
use crate::session_header::SessionHeader;

/// How messages name a record's position: `line N` in a JSONL file (the
/// header is line 0), `row N` in the events table (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Line,
    Row,
}

impl Place {
    fn name(self) -> &'static str {
        match self {
            Place::Line => "line",
            Place::Row => "row",
        }
    }
}

/// A repaired log: the kept events followed by the closers.
#[derive(Debug)]
pub struct Repaired {
    pub log: Log,
    /// How many stored records were kept (the rest was a torn tail).
    pub preserved: usize,
    /// Whether records were dropped.
    pub torn: bool,
}

impl Repaired {
    /// The closers' texts, to append to the storage.
    pub fn closers(&self) -> CoreResult<Vec<String>> {
        (self.preserved..self.log.len())
            .map(|i| self.log.text(i).map(|t| t.to_string()))
            .collect()
    }

    /// Whether storage must change to match this log.
    pub fn needs_write(&self) -> bool {
        self.torn || self.log.len() > self.preserved
    }
}

/// What a record is, for the slow path, as the one reader of event lines
/// (`scan`) reads it: readable is what that reader can parse, with the same
/// limits, so the torn-tail decision and the load agree on every record.
struct Probe<'a> {
    readable: bool,
    turn_end: bool,
    /// The raw text of its `seq` field.
    seq: Option<&'a str>,
}

fn probe(record: Option<&str>) -> Probe<'_> {
    match record.map(read_event_line) {
        Some(Ok((fields, _lossless))) => Probe {
            readable: true,
            turn_end: fields.ty.is_some_and(|t| string_is(t, "turn/end")),
            seq: fields.seq,
        },
        _ => Probe {
            readable: false,
            turn_end: false,
            seq: None,
        },
    }
}

fn unparsable(place: Place, index: usize) -> CoreError {
    CoreError::new(
        Code::CorruptLog,
        format!(
            "corrupt session log: unparsable committed event at {} {}",
            place.name(),
            index + 1
        ),
    )
}

fn gap(place: Place, index: usize, got: Option<&str>) -> CoreError {
    CoreError::new(
        Code::CorruptLog,
        format!(
            "corrupt session log: seq gap in committed region at {} {} (expected {index}, got {})",
            place.name(),
            index + 1,
            shown(got)
        ),
    )
}

/// A raw field text as JavaScript's `${value}` shows it (objects and
/// arrays as written).
fn shown(raw: Option<&str>) -> String {
    let Some(raw) = raw.map(str::trim) else {
        return "undefined".into();
    };
    if let Some(s) = string_lossy(raw) {
        return s;
    }
    match raw.parse::<f64>() {
        Ok(n) if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) => n.to_string(),
        _ => raw.to_string(),
    }
}

fn seq_of(text: &str) -> Option<&str> {
    read_event_line(text)
        .ok()
        .and_then(|(fields, _)| fields.seq)
}

/// Whether the record at `index` or one after it is a readable `turn/end`.
fn turn_end_from(records: &[Option<&str>], index: usize) -> bool {
    records.iter().skip(index).any(|r| probe(*r).turn_end)
}

fn check_identity(id: &str, header: &SessionHeader) -> CoreResult<()> {
    if header.id() != id {
        return Err(CoreError::new(
            Code::CorruptLog,
            format!(
                "stored session identity mismatch: requested {}, header contains {}",
                crate::json::quote(id),
                crate::json::quote(header.id())
            ),
        ));
    }
    Ok(())
}

/// Finish the load of a log whose every stored record was read and accepted
/// (the backends' fast path, `Log::from_jsonl`): only the closers remain.
pub fn complete(id: &str, log: Log) -> CoreResult<Repaired> {
    check_identity(id, log.header())?;
    let n = log.len();
    finish(log, n, n)
}

/// Repair-load the records of session `id` stored under `header`.
/// `records[i]` is the text of event record `i`, or `None` when it cannot be
/// read as text (a final line without its newline, invalid UTF-8, a row
/// whose columns do not form an event).
pub fn repair(
    id: &str,
    header: SessionHeader,
    records: &[Option<&str>],
    place: Place,
) -> CoreResult<Repaired> {
    check_identity(id, &header)?;
    // Fast path: accept events in order; the first defect decides.
    let mut log = Log::new(header.clone());
    let mut cut = records.len();
    for (index, record) in records.iter().enumerate() {
        let defect = match record {
            None => Some(None),
            Some(text) => match log.accept_text(text, index) {
                Ok(()) => None,
                Err(None) => Some(None),
                Err(Some(e)) if e.kind() == Code::NotContiguous => Some(Some(seq_of(text))),
                // A rule broken by a readable event: the exact report order
                // (corruption, then legacy vocabulary, then the rest) needs
                // every record classified first.
                Err(Some(_)) => return slow_repair(id, header, records, place),
            },
        };
        if let Some(seq) = defect {
            if turn_end_from(records, index) {
                return Err(match seq {
                    None => unparsable(place, index),
                    Some(got) => gap(place, index, got),
                });
            }
            cut = index;
            break;
        }
    }
    finish(log, cut, records.len())
}

/// Classify every record, then report as the reference does: corruption in
/// the committed region, then legacy vocabulary among the kept events, then
/// the first kept event that breaks a seed rule.
fn slow_repair(
    id: &str,
    header: SessionHeader,
    records: &[Option<&str>],
    place: Place,
) -> CoreResult<Repaired> {
    let probes: Vec<Probe> = records.iter().map(|r| probe(*r)).collect();
    let last_turn_end = probes.iter().rposition(|p| p.readable && p.turn_end);
    let committed = |i: usize| last_turn_end.is_some_and(|l| i <= l);
    let mut cut = records.len();
    for (index, p) in probes.iter().enumerate() {
        let contiguous = p
            .seq
            .and_then(crate::json::seq_of_text)
            .is_some_and(|s| s == index as u64);
        if !p.readable || !contiguous {
            if committed(index) {
                return Err(if p.readable {
                    gap(place, index, p.seq)
                } else {
                    unparsable(place, index)
                });
            }
            cut = index;
            break;
        }
    }
    for (index, record) in records.iter().take(cut).enumerate() {
        if let Some((legacy, _)) = record.and_then(super::legacy_in) {
            return Err(CoreError::new(
                Code::LegacyVocabulary,
                legacy.load_message(id, index as u64),
            ));
        }
    }
    let mut log = Log::new(header);
    for (index, record) in records.iter().take(cut).enumerate() {
        let text = record.unwrap_or_default();
        log.accept_text(text, index).map_err(|e| {
            let reason = e.map_or_else(|| "unparsable".to_string(), |e| e.to_string());
            CoreError::new(
                Code::CorruptLog,
                format!(
                    "corrupt session log: invalid event at {} {}: {reason}",
                    place.name(),
                    index + 1
                ),
            )
        })?;
    }
    finish(log, cut, records.len())
}

/// Append the closers to the kept events.
fn finish(mut log: Log, preserved: usize, total: usize) -> CoreResult<Repaired> {
    for text in log.closers()? {
        let index = log.len();
        log.accept_text(&text, index).map_err(|e| {
            CoreError::new(
                Code::CorruptLog,
                format!(
                    "corrupt session log: cannot close the interrupted turn: {}",
                    e.map_or_else(|| "unparsable closer".to_string(), |e| e.to_string())
                ),
            )
        })?;
    }
    Ok(Repaired {
        log,
        preserved,
        torn: preserved < total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(id: &str) -> SessionHeader {
        SessionHeader::minimal(id, 1.0)
    }

    const TURN: [&str; 2] = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#,
        r#"{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];

    fn msg(r: CoreResult<Repaired>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn a_torn_tail_after_the_last_turn_end_is_dropped() {
        let r = repair(
            "s",
            header("s"),
            &[Some(TURN[0]), Some(TURN[1]), None],
            Place::Line,
        )
        .unwrap();
        assert_eq!((r.preserved, r.torn, r.log.len()), (2, true, 2));
        let next = r#"{"type":"turn/start","seq":2,"time":3,"data":{"turn":2,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#;
        let r = repair(
            "s",
            header("s"),
            &[Some(TURN[0]), Some(TURN[1]), Some(next)],
            Place::Line,
        )
        .unwrap();
        assert_eq!((r.preserved, r.torn, r.log.len()), (3, false, 4));
        assert!(r.closers().unwrap()[0].contains("\"interrupted\""));
    }

    #[test]
    fn the_same_defect_before_a_turn_end_is_corruption() {
        assert_eq!(
            msg(repair(
                "s",
                header("s"),
                &[Some("{oops"), Some(TURN[1])],
                Place::Row
            )),
            "corrupt session log: unparsable committed event at row 1"
        );
        let gap = TURN[1].replace("\"seq\":1", "\"seq\":2");
        let r = repair("s", header("s"), &[Some(TURN[0]), Some(&gap)], Place::Line);
        assert_eq!(
            msg(r),
            "corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)"
        );
    }

    #[test]
    fn corruption_is_reported_before_legacy_and_rule_violations() {
        let legacy = r#"{"type":"request/header-delta","seq":1,"time":1,"data":{}}"#;
        let end = r#"{"type":"turn/end","seq":3,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;
        assert_eq!(
            msg(repair(
                "s",
                header("s"),
                &[Some(TURN[0]), Some(legacy), None, Some(end)],
                Place::Line
            )),
            "corrupt session log: unparsable committed event at line 3"
        );
        let ok_end = end.replace("\"seq\":3", "\"seq\":2");
        assert_eq!(
            msg(repair(
                "s",
                header("s"),
                &[Some(TURN[0]), Some(legacy), Some(&ok_end)],
                Place::Line
            )),
            "session \"s\" contains unsupported legacy request/header-delta event at seq 1"
        );
        let no_op = r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[],"source":{"kind":"user"}}}"#;
        assert_eq!(
            msg(repair("s", header("s"), &[Some(TURN[0]), Some(no_op), Some(&ok_end)], Place::Line)),
            "corrupt session log: invalid event at line 2: invalid seed event at index 1: session event \"user/message\" is surface-eligible and requires a surfaceOp marker"
        );
    }

    #[test]
    fn the_torn_tail_decision_reads_records_as_the_load_does() {
        // A final turn/end that JSON.parse reads (the last of duplicate keys
        // wins) commits the record before it: corruption, not a torn tail
        // to truncate.
        let end = r#"{"type":"turn/end","type":"turn/end","seq":2,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;
        assert_eq!(
            msg(repair(
                "s",
                header("s"),
                &[Some(TURN[0]), None, Some(end)],
                Place::Line
            )),
            "corrupt session log: unparsable committed event at line 2"
        );
        // So does one holding a number beyond f64 or a lone surrogate.
        for odd in [r#""x":1e400"#, r#""x":"\ud800""#] {
            let end = TURN[1].replace(r#""turn":1"#, &format!(r#""turn":1,{odd}"#));
            let end = end.replace(r#""seq":1"#, r#""seq":2"#);
            assert_eq!(
                msg(repair(
                    "s",
                    header("s"),
                    &[Some(TURN[0]), None, Some(&end)],
                    Place::Line
                )),
                "corrupt session log: unparsable committed event at line 2",
                "{odd}"
            );
        }
        // A turn/end whose payload nests as deep as a payload may is read
        // like any other: nothing is cut, nothing is closed.
        let deep = format!(
            "{}1{}",
            "[".repeat(crate::scan::MAX_NESTING - 2),
            "]".repeat(crate::scan::MAX_NESTING - 2)
        );
        let end = TURN[1].replace(
            r#"{"kind":"completed"}"#,
            &format!(r#"{{"kind":"completed","detail":{deep}}}"#),
        );
        let r = repair("s", header("s"), &[Some(TURN[0]), Some(&end)], Place::Line).unwrap();
        assert_eq!((r.preserved, r.torn, r.log.len()), (2, false, 2));
        // Deeper than that: refused, never truncated.
        let deeper = end.replace("[1]", "[[1]]");
        assert!(msg(repair(
            "s",
            header("s"),
            &[Some(TURN[0]), Some(&deeper)],
            Place::Line
        ))
        .contains("not losslessly JSON-serializable"));
    }

    #[test]
    fn a_header_for_another_id_is_rejected() {
        assert_eq!(
            msg(repair("a", header("b"), &[], Place::Line)),
            "stored session identity mismatch: requested \"a\", header contains \"b\""
        );
    }
}
