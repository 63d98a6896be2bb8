//! The development checks of SPEC 9: turn and step nesting over a log. A
//! `Trace` is the committed state; `validate` reads one candidate event and
//! returns the `Transition` it would make without touching the trace, and
//! `apply` commits it, so a rejected append leaves the trace as it was.
//! Events are read by the one scanner (`scan`), with its nesting limit.
//! Messages follow the TypeScript reference word for word (values printed
//! as a JavaScript template string prints them).

use crate::error::{Code, CoreError, CoreResult};
use crate::event::not_lossless;
use crate::scan::TextDefect;
use crate::scan::{
    array_items, member, object_members, scan_event, string_is, string_lossy, string_units, Fields,
};
use std::borrow::Cow;
use std::collections::HashSet;

/// A payload field as JavaScript sees it after `JSON.parse`, borrowed from
/// the event text: what the checks compare, key calls by, and print.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value<'a> {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    /// The raw literal, quotes included; decoded only to print or key it.
    String(&'a str),
    /// The raw text: an array is only ever printed.
    Array(&'a str),
    Object,
}

impl<'a> Value<'a> {
    /// A value text the scanner accepted; `None` (an absent field) is `undefined`.
    fn of(raw: Option<&'a str>) -> Value<'a> {
        let Some(raw) = raw.map(str::trim) else {
            return Value::Undefined;
        };
        match raw.as_bytes().first() {
            Some(b'n') => Value::Null,
            Some(b't') => Value::Bool(true),
            Some(b'f') => Value::Bool(false),
            Some(b'"') => Value::String(raw),
            Some(b'[') => Value::Array(raw),
            Some(b'{') => Value::Object,
            _ => raw.parse().map_or(Value::Undefined, Value::Number),
        }
    }

    /// The open turn or step (`null` when none is open).
    fn open(n: Option<f64>) -> Value<'static> {
        n.map_or(Value::Null, Value::Number)
    }

    /// `value === open` for the open turn or step.
    fn is(self, open: Option<f64>) -> bool {
        match (self, open) {
            (Value::Null, None) => true,
            (Value::Number(x), Some(y)) => x == y,
            _ => false,
        }
    }

    /// `${value}` in a JavaScript template string.
    fn show(self) -> String {
        match self {
            Value::Undefined => "undefined".into(),
            Value::Null => "null".into(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => js_number(n),
            Value::String(raw) => text(raw).into_owned(),
            Value::Array(raw) => join(raw),
            Value::Object => "[object Object]".into(),
        }
    }
}

/// A string literal's text; a lone surrogate, which Rust text cannot hold,
/// as U+FFFD.
fn text(raw: &str) -> Cow<'_, str> {
    match raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) if !inner.contains('\\') => Cow::Borrowed(inner),
        _ => Cow::Owned(string_lossy(raw).unwrap_or_default()),
    }
}

/// `${array}`: its elements joined by commas all the way down, `null` as
/// the empty string; without recursion, so any depth the scanner reads.
fn join(raw: &str) -> String {
    let mut out = String::new();
    // The arrays being printed, innermost last: elements left, and whether
    // one was printed (a comma goes before the next).
    let mut open = vec![(array_items(raw).unwrap_or_default().into_iter(), false)];
    while let Some((items, started)) = open.last_mut() {
        let Some(item) = items.next() else {
            open.pop();
            continue;
        };
        if *started {
            out.push(',');
        }
        *started = true;
        match Value::of(Some(item)) {
            Value::Array(inner) => {
                open.push((array_items(inner).unwrap_or_default().into_iter(), false));
            }
            Value::Null => {}
            v => out.push_str(&v.show()),
        }
    }
    out
}

/// A call id as a key of the pending calls, equal where JavaScript's `Set`
/// finds one by the other: `"1"` and `1` apart, `1` and `1.0` the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum CallKey {
    Undefined,
    Null,
    Bool(bool),
    Number(u64),
    String(Vec<u16>),
}

impl CallKey {
    /// `None` for an object or an array: a new object in every event, never
    /// found in the set.
    fn of(v: Value) -> Option<CallKey> {
        Some(match v {
            Value::Undefined => CallKey::Undefined,
            Value::Null => CallKey::Null,
            Value::Bool(b) => CallKey::Bool(b),
            Value::Number(n) => CallKey::Number(n.to_bits()),
            Value::String(raw) => CallKey::String(string_units(raw)?),
            Value::Array(_) | Value::Object => return None,
        })
    }
}

/// The committed state of the checks over the events seen so far.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The last seq seen (`-1` before the first event).
    last_seq: f64,
    /// The open turn (`None`: `null`, between turns).
    open_turn: Option<f64>,
    /// The open step (`None`: `null`, between steps).
    open_step: Option<f64>,
    next_turn: f64,
    next_step: f64,
    /// Call ids of `tool/call`s in the open step awaiting their result.
    pending_calls: HashSet<CallKey>,
    /// Events committed.
    len: usize,
}

/// How one event changes the pending calls.
#[derive(Debug, Clone, PartialEq)]
enum Calls {
    Keep,
    Add(CallKey),
    Delete(CallKey),
    Clear,
}

/// What one validated event does to a `Trace`.
#[derive(Debug, Clone)]
pub struct Transition {
    last_seq: f64,
    open_turn: Option<f64>,
    open_step: Option<f64>,
    next_turn: f64,
    next_step: f64,
    calls: Calls,
}

/// The payload fields the checks read.
struct Payload<'a> {
    turn: Value<'a>,
    step: Value<'a>,
    call_id: Value<'a>,
    is_error: Value<'a>,
    /// The raw text of `error`, read only for a `tool/result`.
    error: Option<&'a str>,
}

impl<'a> Payload<'a> {
    /// The payload's top-level fields, the last of a repeated key as
    /// `JSON.parse` keeps it; a payload that is not an object has none.
    fn read(f: &Fields<'a>) -> Payload<'a> {
        // The scanner splits the payloads of a few types already; not those
        // of an envelope that repeats a key (they may be an earlier `data`'s).
        let split;
        let fields = if !f.foreign_key && f.ignorable.is_none() && !f.data_fields.is_empty() {
            &f.data_fields
        } else {
            split = f.data.and_then(object_members).unwrap_or_default();
            &split
        };
        let get = |name: &str| Value::of(member(fields, name));
        Payload {
            turn: get("turn"),
            step: get("step"),
            call_id: get("callId"),
            is_error: get("isError"),
            error: member(fields, "error"),
        }
    }

    /// A synthetic interrupted result: `isError === true && error.code === 'interrupted'`.
    fn interrupted(&self) -> bool {
        self.is_error == Value::Bool(true)
            && self
                .error
                .and_then(object_members)
                .and_then(|error| member(&error, "code"))
                .is_some_and(|code| string_is(code, "interrupted"))
    }
}

fn violation(message: String) -> CoreError {
    CoreError::new(Code::Invariant, format!("invariant violated: {message}"))
}

/// A number as JavaScript prints it.
fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i64)
    } else {
        n.to_string()
    }
}

impl Default for Trace {
    fn default() -> Self {
        Trace::new()
    }
}

impl Trace {
    /// The state before any event.
    pub fn new() -> Trace {
        Trace {
            last_seq: -1.0,
            open_turn: None,
            open_step: None,
            next_turn: 1.0,
            next_step: 1.0,
            pending_calls: HashSet::new(),
            len: 0,
        }
    }

    /// How many events were committed.
    pub fn len(&self) -> usize {
        self.len
    }

    fn require_open_step(&self, kind: &str, p: &Payload) -> CoreResult<()> {
        if !p.turn.is(self.open_turn) || !p.step.is(self.open_step) {
            return Err(violation(format!(
                "{kind} names turn {}/step {} but open is turn {}/step {}",
                p.turn.show(),
                p.step.show(),
                Value::open(self.open_turn).show(),
                Value::open(self.open_step).show()
            )));
        }
        Ok(())
    }

    /// Check one candidate event (its JSON text) against the committed
    /// state; the trace is not changed. An event the scanner refuses as not
    /// lossless (nested deeper than `scan::MAX_NESTING`) is refused as a
    /// seed event at its index is.
    pub fn validate(&self, event: &str) -> CoreResult<Transition> {
        let f = match scan_event(event) {
            Ok(f) if f.is_object => f,
            Err(TextDefect::NotLossless) => return Err(not_lossless(self.len)),
            _ => {
                return Err(CoreError::new(
                    Code::InvalidArgument,
                    format!(
                        "invariant check: event at index {} is not a JSON object",
                        self.len
                    ),
                ))
            }
        };
        let seq = Value::of(f.seq);
        let last_seq = match seq {
            Value::Number(s) if s > self.last_seq => s,
            _ => {
                return Err(violation(format!(
                    "seq must strictly increase: saw {} after {}",
                    seq.show(),
                    js_number(self.last_seq)
                )))
            }
        };
        let ty = Value::of(f.ty);
        let name = match ty {
            Value::String(raw) => text(raw),
            _ => Cow::Borrowed(""),
        };
        let p = Payload::read(&f);
        let mut t = Transition {
            last_seq,
            open_turn: self.open_turn,
            open_step: self.open_step,
            next_turn: self.next_turn,
            next_step: self.next_step,
            calls: Calls::Keep,
        };
        match &*name {
            "turn/start" => {
                if self.open_turn.is_some() {
                    return Err(violation(format!(
                        "turn/start {} while turn {} is still open",
                        p.turn.show(),
                        Value::open(self.open_turn).show()
                    )));
                }
                if p.turn != Value::Number(self.next_turn) {
                    return Err(violation(format!(
                        "turn/start expected turn {}, got {}",
                        js_number(self.next_turn),
                        p.turn.show()
                    )));
                }
                t.open_turn = Some(self.next_turn);
                t.next_step = 1.0;
            }
            "turn/end" => {
                if !p.turn.is(self.open_turn) {
                    return Err(violation(format!(
                        "turn/end {} does not match open turn {}",
                        p.turn.show(),
                        Value::open(self.open_turn).show()
                    )));
                }
                if self.open_step.is_some() {
                    return Err(violation(format!(
                        "turn/end {} while step {} is still open",
                        p.turn.show(),
                        Value::open(self.open_step).show()
                    )));
                }
                t.open_turn = None;
                t.next_turn += 1.0;
            }
            "step/start" => {
                if !p.turn.is(self.open_turn) {
                    return Err(violation(format!(
                        "step/start in turn {} but open turn is {}",
                        p.turn.show(),
                        Value::open(self.open_turn).show()
                    )));
                }
                if self.open_step.is_some() {
                    return Err(violation(format!(
                        "step/start {} while step {} is still open",
                        p.step.show(),
                        Value::open(self.open_step).show()
                    )));
                }
                if p.step != Value::Number(self.next_step) {
                    return Err(violation(format!(
                        "step/start expected step {} in turn {}, got {}",
                        js_number(self.next_step),
                        p.turn.show(),
                        p.step.show()
                    )));
                }
                t.open_step = Some(self.next_step);
            }
            "step/end" => {
                self.require_open_step("step/end", &p)?;
                t.open_step = None;
                t.next_step += 1.0;
                t.calls = Calls::Clear;
            }
            kind @ ("assistant/chunk" | "assistant/message") => {
                self.require_open_step(kind, &p)?;
            }
            "tool/call" => {
                self.require_open_step("tool/call", &p)?;
                t.calls = CallKey::of(p.call_id).map_or(Calls::Keep, Calls::Add);
            }
            "tool/result" => {
                self.require_open_step("tool/result", &p)?;
                let key = CallKey::of(p.call_id);
                let pending = key.as_ref().is_some_and(|k| self.pending_calls.contains(k));
                if !pending && !p.interrupted() {
                    return Err(violation(format!(
                        "tool/result for {} with no prior tool/call in this step",
                        p.call_id.show()
                    )));
                }
                t.calls = key.map_or(Calls::Keep, Calls::Delete);
            }
            other => {
                if self.open_turn.is_none() {
                    let name = match ty {
                        Value::String(_) => other.to_string(),
                        ty => ty.show(),
                    };
                    return Err(violation(format!(
                        "{name} appended outside any open turn (every event must be turn-enclosed)"
                    )));
                }
            }
        }
        Ok(t)
    }

    /// Commit a transition `validate` returned for the next event.
    pub fn apply(&mut self, t: Transition) {
        self.last_seq = t.last_seq;
        self.open_turn = t.open_turn;
        self.open_step = t.open_step;
        self.next_turn = t.next_turn;
        self.next_step = t.next_step;
        match t.calls {
            Calls::Keep => {}
            Calls::Add(k) => {
                self.pending_calls.insert(k);
            }
            Calls::Delete(k) => {
                self.pending_calls.remove(&k);
            }
            Calls::Clear => self.pending_calls.clear(),
        }
        self.len += 1;
    }

    /// Validate and commit each event of a JSON array in order; the first
    /// violation stops (the events before it stay committed).
    pub fn extend_json(&mut self, events_json: &str) -> CoreResult<()> {
        let items = array_items(events_json).ok_or_else(|| {
            CoreError::new(
                Code::InvalidArgument,
                "invariant check: events must be a JSON array",
            )
        })?;
        self.extend(items)
    }

    /// Validate and commit event texts in order (a stored log).
    pub fn extend<'a>(&mut self, texts: impl IntoIterator<Item = &'a str>) -> CoreResult<()> {
        for text in texts {
            let t = self.validate(text)?;
            self.apply(t);
        }
        Ok(())
    }
}

/// `checkSessionInvariants(events)`: the first violation over a whole log.
pub fn check_log_json(events_json: &str) -> CoreResult<()> {
    Trace::new().extend_json(events_json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: &str = r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}"#;

    fn ev(seq: u64, ty: &str, data: &str) -> String {
        format!(r#"{{"type":"{ty}","seq":{seq},"time":0,"data":{data}}}"#)
    }

    /// The first violation over `events`, or "" for a valid log.
    fn first(events: &[String]) -> String {
        let mut trace = Trace::new();
        trace
            .extend(events.iter().map(String::as_str))
            .err()
            .map(|e| {
                assert_eq!(e.code(), "INVARIANT");
                e.to_string()
            })
            .unwrap_or_default()
    }

    fn turn(seq: u64, step: u64) -> Vec<String> {
        vec![
            ev(seq, "step/start", &format!(r#"{{"turn":1,"step":{step}}}"#)),
            ev(
                seq + 1,
                "tool/call",
                &format!(r#"{{"turn":1,"step":{step},"callId":"c{step}"}}"#),
            ),
            ev(
                seq + 2,
                "tool/result",
                &format!(r#"{{"turn":1,"step":{step},"callId":"c{step}","isError":false}}"#),
            ),
            ev(
                seq + 3,
                "step/end",
                &format!(r#"{{"turn":1,"step":{step}}}"#),
            ),
        ]
    }

    #[test]
    fn a_balanced_log_passes() {
        let mut log = vec![START.to_string()];
        log.extend(turn(1, 1));
        log.extend(turn(5, 2));
        log.push(ev(
            9,
            "turn/end",
            r#"{"turn":1,"reason":{"kind":"completed"}}"#,
        ));
        log.push(ev(10, "turn/start", r#"{"turn":2}"#));
        assert_eq!(first(&log), "");
    }

    #[test]
    fn turns_must_not_overlap_nor_skip() {
        let log = vec![START.to_string(), ev(1, "turn/start", r#"{"turn":2}"#)];
        assert_eq!(
            first(&log),
            "invariant violated: turn/start 2 while turn 1 is still open"
        );
        let log = vec![ev(0, "turn/start", r#"{"turn":2}"#)];
        assert_eq!(
            first(&log),
            "invariant violated: turn/start expected turn 1, got 2"
        );
        let log = vec![START.to_string(), ev(1, "turn/end", r#"{"turn":5}"#)];
        assert_eq!(
            first(&log),
            "invariant violated: turn/end 5 does not match open turn 1"
        );
    }

    #[test]
    fn steps_nest_in_the_open_turn() {
        let mut log = vec![START.to_string()];
        log.extend(turn(1, 1));
        log.push(ev(5, "step/start", r#"{"turn":1,"step":3}"#));
        assert_eq!(
            first(&log),
            "invariant violated: step/start expected step 2 in turn 1, got 3"
        );
        let log = vec![
            START.to_string(),
            ev(1, "step/start", r#"{"turn":2,"step":1}"#),
        ];
        assert_eq!(
            first(&log),
            "invariant violated: step/start in turn 2 but open turn is 1"
        );
        let log = vec![
            START.to_string(),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            ev(2, "step/start", r#"{"turn":1,"step":2}"#),
        ];
        assert_eq!(
            first(&log),
            "invariant violated: step/start 2 while step 1 is still open"
        );
        let log = vec![
            START.to_string(),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            ev(2, "turn/end", r#"{"turn":1}"#),
        ];
        assert_eq!(
            first(&log),
            "invariant violated: turn/end 1 while step 1 is still open"
        );
        let log = vec![
            START.to_string(),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            ev(2, "step/end", r#"{"turn":1,"step":2}"#),
        ];
        assert_eq!(
            first(&log),
            "invariant violated: step/end names turn 1/step 2 but open is turn 1/step 1"
        );
    }

    #[test]
    fn step_events_name_the_open_step() {
        let log = vec![
            START.to_string(),
            ev(1, "assistant/chunk", r#"{"turn":1,"step":1}"#),
        ];
        assert_eq!(
            first(&log),
            "invariant violated: assistant/chunk names turn 1/step 1 but open is turn 1/step null"
        );
        let log = vec![ev(0, "tool/result", r#"{"step":1}"#)];
        assert_eq!(
            first(&log),
            "invariant violated: tool/result names turn undefined/step 1 but open is turn null/step null"
        );
    }

    #[test]
    fn a_result_needs_a_call_in_the_same_step_unless_interrupted() {
        let mut log = vec![START.to_string()];
        log.extend(turn(1, 1));
        log.push(ev(5, "step/start", r#"{"turn":1,"step":2}"#));
        log.push(ev(
            6,
            "tool/result",
            r#"{"turn":1,"step":2,"callId":"c1","isError":false}"#,
        ));
        assert_eq!(
            first(&log),
            "invariant violated: tool/result for c1 with no prior tool/call in this step"
        );
        log.pop();
        log.push(ev(
            6,
            "tool/result",
            r#"{"turn":1,"step":2,"callId":"c9","isError":true,"error":{"name":"InterruptedError","code":"interrupted"}}"#,
        ));
        assert_eq!(first(&log), "");
    }

    #[test]
    fn every_other_event_is_turn_enclosed() {
        let log = vec![ev(0, "todo/write", r#"{"todos":[]}"#)];
        assert_eq!(
            first(&log),
            "invariant violated: todo/write appended outside any open turn (every event must be turn-enclosed)"
        );
        let log = vec![START.to_string(), ev(1, "plugin/x", "[1]")];
        assert_eq!(first(&log), "");
    }

    #[test]
    fn seqs_strictly_increase() {
        let log = vec![START.to_string(), ev(0, "user/message", "{}")];
        assert_eq!(
            first(&log),
            "invariant violated: seq must strictly increase: saw 0 after 0"
        );
        let log = vec![r#"{"type":"turn/start","data":{"turn":1}}"#.to_string()];
        assert_eq!(
            first(&log),
            "invariant violated: seq must strictly increase: saw undefined after -1"
        );
    }

    #[test]
    fn validate_never_changes_the_trace() {
        let mut trace = Trace::new();
        let t = trace.validate(START).unwrap();
        assert!(trace.validate(&ev(1, "user/message", "{}")).is_err());
        trace.apply(t);
        assert_eq!(trace.len(), 1);
        assert!(trace
            .validate(&ev(1, "turn/start", r#"{"turn":2}"#))
            .is_err());
        assert!(trace.validate(&ev(1, "user/message", "{}")).is_ok());
    }

    #[test]
    fn a_repeated_payload_key_reads_as_json_parse_does() {
        let log = vec![
            r#"{"type":"turn/start","seq":0,"time":0,"data":{"turn":7,"turn":1}}"#.to_string(),
        ];
        assert_eq!(first(&log), "");
    }

    /// `${value}` for a JSON value text.
    fn show(raw: &str) -> String {
        Value::of(Some(raw)).show()
    }

    #[test]
    fn values_print_as_javascript_prints_them() {
        assert_eq!(show("1.5"), "1.5");
        assert_eq!(show(r#"[1,null,"a"]"#), "1,,a");
        assert_eq!(show(r#"{"a":1}"#), "[object Object]");
        assert_eq!(js_number(-1.0), "-1");
        // Arrays join all the way down; strings print decoded.
        assert_eq!(
            show(r#"[[1,[2,null]],[],{"b":[]},true]"#),
            "1,2,,,[object Object],true"
        );
        assert_eq!(show(r#"[[],[]]"#), ",");
        assert_eq!(show(r#""c\u0031\ud800""#), "c1\u{fffd}");
    }

    /// `levels` arrays around `1`: `[[1]]` for 2.
    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn a_payload_nested_as_deep_as_the_scanner_reads_is_read() {
        // The payload object is one level, its `turn` the other 999.
        let deep = ev(0, "turn/start", &format!(r#"{{"turn":{}}}"#, nested(999)));
        assert_eq!(
            first(&[deep]),
            "invariant violated: turn/start expected turn 1, got 1"
        );
        let log = vec![
            START.to_string(),
            ev(1, "step/start", r#"{"turn":1,"step":1}"#),
            ev(
                2,
                "tool/call",
                &format!(
                    r#"{{"turn":1,"step":1,"callId":"c","arguments":{}}}"#,
                    nested(999)
                ),
            ),
            ev(3, "tool/result", r#"{"turn":1,"step":1,"callId":"c"}"#),
        ];
        assert_eq!(first(&log), "");
    }

    #[test]
    fn a_payload_nested_deeper_is_refused_as_not_lossless() {
        let deeper = ev(1, "plugin/x", &nested(crate::scan::MAX_NESTING + 1));
        let mut trace = Trace::new();
        let err = trace
            .extend([START, deeper.as_str()])
            .expect_err("nested too deep");
        assert_eq!(err.code(), "NOT_LOSSLESS_JSON");
        assert_eq!(
            err.to_string(),
            "seed event at index 1 is not losslessly JSON-serializable"
        );
        assert_eq!(trace.len(), 1);
        let err = check_log_json(&format!("[{START},{deeper}]")).expect_err("nested too deep");
        assert_eq!(
            err.to_string(),
            "seed event at index 1 is not losslessly JSON-serializable"
        );
    }

    #[test]
    fn a_repeated_envelope_key_reads_as_json_parse_does() {
        let log = vec![
            r#"{"type":"todo/write","seq":5,"type":"turn/start","seq":0,"time":0,"data":{"turn":2},"data":{"turn":1}}"#.to_string(),
            // An escaped spelling of a key is that key.
            r#"{"type":"step/start","seq":1,"time":0,"data":{"turn":1,"step":2,"st\u0065p":1}}"#.to_string(),
            // Envelope keys the checks do not read are ignored.
            r#"{"type":"step/end","seq":2,"time":0,"data":{"turn":1,"step":1},"extra":1}"#.to_string(),
        ];
        assert_eq!(first(&log), "");
    }

    #[test]
    fn call_ids_match_as_a_javascript_set_finds_them() {
        let result_for = |call: &str, result: &str| {
            first(&[
                START.to_string(),
                ev(1, "step/start", r#"{"turn":1,"step":1}"#),
                ev(
                    2,
                    "tool/call",
                    &format!(r#"{{"turn":1,"step":1,"callId":{call}}}"#),
                ),
                ev(
                    3,
                    "tool/result",
                    &format!(r#"{{"turn":1,"step":1,"callId":{result}}}"#),
                ),
            ])
        };
        assert_eq!(
            result_for(r#""1""#, "1"),
            "invariant violated: tool/result for 1 with no prior tool/call in this step"
        );
        assert_eq!(
            result_for("1", r#""1""#),
            "invariant violated: tool/result for 1 with no prior tool/call in this step"
        );
        assert_eq!(result_for(r#""c1""#, r#""c\u0031""#), "");
        assert_eq!(result_for(r#""\ud800""#, r#""\uD800""#), "");
        assert_eq!(result_for("1", "1.0"), "");
        assert_eq!(result_for("null", "null"), "");
        // An object is a new object in every event: never found.
        assert_eq!(
            result_for(r#"{"a":1}"#, r#"{"a":1}"#),
            "invariant violated: tool/result for [object Object] with no prior tool/call in this step"
        );
    }

    #[test]
    fn events_that_are_not_objects_are_refused() {
        let err = Trace::new().validate("[1]").expect_err("an array");
        assert_eq!(err.code(), "INVALID_ARGUMENT");
        assert_eq!(
            err.to_string(),
            "invariant check: event at index 0 is not a JSON object"
        );
        assert!(Trace::new().validate("{").is_err());
        let err = check_log_json("{}").expect_err("not an array");
        assert_eq!(
            err.to_string(),
            "invariant check: events must be a JSON array"
        );
        assert_eq!(check_log_json(" [ ] "), Ok(()));
    }
}
