//! The development checks of SPEC 9: turn and step nesting over a log. A
//! `Trace` is the committed state; `validate` reads one candidate event and
//! returns the `Transition` it would make without touching the trace, and
//! `apply` commits it, so a rejected append leaves the trace as it was.
//! Messages follow the TypeScript reference word for word (values printed as
//! a JavaScript template string prints them).

use crate::error::{Code, CoreError, CoreResult};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashSet;

/// A field as JavaScript sees it: absent (`undefined`) or a JSON value.
type Field = Option<Value>;

/// The committed state of the checks over the events seen so far.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The last seq seen (`-1` before the first event).
    last_seq: f64,
    /// The open turn (`null` between turns).
    open_turn: Field,
    /// The open step (`null` between steps).
    open_step: Field,
    next_turn: f64,
    next_step: f64,
    /// Call ids of `tool/call`s in the open step awaiting their result.
    pending_calls: HashSet<String>,
    /// Events committed.
    len: usize,
}

/// How one event changes the pending calls.
#[derive(Debug, Clone, PartialEq)]
enum Calls {
    Keep,
    Add(String),
    Delete(String),
    Clear,
}

/// What one validated event does to a `Trace`.
#[derive(Debug, Clone)]
pub struct Transition {
    last_seq: f64,
    open_turn: Field,
    open_step: Field,
    next_turn: f64,
    next_step: f64,
    calls: Calls,
}

/// The envelope fields the checks read.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(rename = "type", default, deserialize_with = "crate::json::present")]
    ty: Option<Value>,
    #[serde(default, deserialize_with = "crate::json::present")]
    seq: Option<Value>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
}

/// The payload fields the checks read.
#[derive(Deserialize, Default)]
struct Payload {
    #[serde(default, deserialize_with = "crate::json::present")]
    turn: Option<Value>,
    #[serde(default, deserialize_with = "crate::json::present")]
    step: Option<Value>,
    #[serde(rename = "callId", default, deserialize_with = "crate::json::present")]
    call_id: Option<Value>,
    #[serde(rename = "isError", default, deserialize_with = "crate::json::present")]
    is_error: Option<Value>,
    #[serde(default, deserialize_with = "crate::json::present")]
    error: Option<Value>,
}

impl Payload {
    /// Read from payload text; a payload with a repeated key is read as
    /// `JSON.parse` reads it (the last occurrence wins), a non-object payload
    /// has no fields.
    fn read(data: Option<&RawValue>) -> Payload {
        let Some(data) = data else {
            return Payload::default();
        };
        if let Ok(p) = serde_json::from_str::<Payload>(data.get()) {
            return p;
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(data.get()) else {
            return Payload::default();
        };
        Payload {
            turn: map.get("turn").cloned(),
            step: map.get("step").cloned(),
            call_id: map.get("callId").cloned(),
            is_error: map.get("isError").cloned(),
            error: map.get("error").cloned(),
        }
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

/// `${value}` in a JavaScript template string.
fn show(v: &Field) -> String {
    match v {
        None => "undefined".into(),
        Some(Value::Null) => "null".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.as_f64().map_or_else(|| n.to_string(), js_number),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::Null => String::new(),
                other => show(&Some(other.clone())),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) => "[object Object]".into(),
    }
}

/// `a === b` for two payload values (objects are never identical).
fn same(a: &Field, b: &Field) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (Some(Value::Null), Some(Value::Null)) => true,
        (Some(Value::Bool(x)), Some(Value::Bool(y))) => x == y,
        (Some(Value::String(x)), Some(Value::String(y))) => x == y,
        _ => false,
    }
}

/// `value === n` for a counter.
fn is_number(v: &Field, n: f64) -> bool {
    matches!(v, Some(Value::Number(x)) if x.as_f64() == Some(n))
}

fn is_null(v: &Field) -> bool {
    matches!(v, Some(Value::Null))
}

/// A call id as a set key: strings as themselves, anything else by its
/// JSON text (so `"1"` and `1` stay apart).
fn call_key(v: &Field) -> String {
    match v {
        Some(Value::String(s)) => format!("s{s}"),
        Some(other) => format!("j{other}"),
        None => "u".into(),
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
            open_turn: Some(Value::Null),
            open_step: Some(Value::Null),
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

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn require_open_step(&self, kind: &str, p: &Payload) -> CoreResult<()> {
        if !same(&self.open_turn, &p.turn) || !same(&self.open_step, &p.step) {
            return Err(violation(format!(
                "{kind} names turn {}/step {} but open is turn {}/step {}",
                show(&p.turn),
                show(&p.step),
                show(&self.open_turn),
                show(&self.open_step)
            )));
        }
        Ok(())
    }

    /// Check one candidate event (its JSON text) against the committed
    /// state; the trace is not changed.
    pub fn validate(&self, event: &str) -> CoreResult<Transition> {
        let e: Envelope = serde_json::from_str(event).map_err(|err| {
            CoreError::new(
                Code::InvalidArgument,
                format!("invariant check: event is not a JSON object: {err}"),
            )
        })?;
        let seq = e.seq.as_ref().and_then(Value::as_f64);
        match seq {
            Some(s) if s > self.last_seq => {}
            _ => {
                return Err(violation(format!(
                    "seq must strictly increase: saw {} after {}",
                    show(&e.seq),
                    js_number(self.last_seq)
                )))
            }
        }
        let ty = match &e.ty {
            Some(Value::String(t)) => t.as_str(),
            _ => "",
        };
        let p = Payload::read(e.data);
        let mut t = Transition {
            last_seq: seq.unwrap_or(self.last_seq),
            open_turn: self.open_turn.clone(),
            open_step: self.open_step.clone(),
            next_turn: self.next_turn,
            next_step: self.next_step,
            calls: Calls::Keep,
        };
        match ty {
            "turn/start" => {
                if !is_null(&self.open_turn) {
                    return Err(violation(format!(
                        "turn/start {} while turn {} is still open",
                        show(&p.turn),
                        show(&self.open_turn)
                    )));
                }
                if !is_number(&p.turn, self.next_turn) {
                    return Err(violation(format!(
                        "turn/start expected turn {}, got {}",
                        js_number(self.next_turn),
                        show(&p.turn)
                    )));
                }
                t.open_turn = p.turn;
                t.next_step = 1.0;
            }
            "turn/end" => {
                if !same(&self.open_turn, &p.turn) {
                    return Err(violation(format!(
                        "turn/end {} does not match open turn {}",
                        show(&p.turn),
                        show(&self.open_turn)
                    )));
                }
                if !is_null(&self.open_step) {
                    return Err(violation(format!(
                        "turn/end {} while step {} is still open",
                        show(&p.turn),
                        show(&self.open_step)
                    )));
                }
                t.open_turn = Some(Value::Null);
                t.next_turn += 1.0;
            }
            "step/start" => {
                if !same(&self.open_turn, &p.turn) {
                    return Err(violation(format!(
                        "step/start in turn {} but open turn is {}",
                        show(&p.turn),
                        show(&self.open_turn)
                    )));
                }
                if !is_null(&self.open_step) {
                    return Err(violation(format!(
                        "step/start {} while step {} is still open",
                        show(&p.step),
                        show(&self.open_step)
                    )));
                }
                if !is_number(&p.step, self.next_step) {
                    return Err(violation(format!(
                        "step/start expected step {} in turn {}, got {}",
                        js_number(self.next_step),
                        show(&p.turn),
                        show(&p.step)
                    )));
                }
                t.open_step = p.step;
            }
            "step/end" => {
                self.require_open_step("step/end", &p)?;
                t.open_step = Some(Value::Null);
                t.next_step += 1.0;
                t.calls = Calls::Clear;
            }
            "assistant/chunk" | "assistant/message" => {
                self.require_open_step(ty, &p)?;
            }
            "tool/call" => {
                self.require_open_step(ty, &p)?;
                t.calls = Calls::Add(call_key(&p.call_id));
            }
            "tool/result" => {
                self.require_open_step(ty, &p)?;
                let key = call_key(&p.call_id);
                let interrupted = matches!(p.is_error, Some(Value::Bool(true)))
                    && p.error
                        .as_ref()
                        .and_then(|e| e.get("code"))
                        .is_some_and(|c| c == "interrupted");
                if !self.pending_calls.contains(&key) && !interrupted {
                    return Err(violation(format!(
                        "tool/result for {} with no prior tool/call in this step",
                        show(&p.call_id)
                    )));
                }
                t.calls = Calls::Delete(key);
            }
            other => {
                if is_null(&self.open_turn) {
                    let name = match &e.ty {
                        Some(Value::String(_)) => other.to_string(),
                        ty => show(ty),
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
        let items: Vec<&RawValue> = serde_json::from_str(events_json).map_err(|e| {
            CoreError::new(
                Code::InvalidArgument,
                format!("invariant check: events must be a JSON array: {e}"),
            )
        })?;
        for item in items {
            let t = self.validate(item.get())?;
            self.apply(t);
        }
        Ok(())
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

    #[test]
    fn values_print_as_javascript_prints_them() {
        assert_eq!(show(&Some(serde_json::json!(1.5))), "1.5");
        assert_eq!(show(&Some(serde_json::json!([1, null, "a"]))), "1,,a");
        assert_eq!(show(&Some(serde_json::json!({"a": 1}))), "[object Object]");
        assert_eq!(js_number(-1.0), "-1");
    }
}
