//! Crash repair (SPEC 8): the events that close a turn a crash left open.

use crate::event::Kind;
use serde::Deserialize;
use serde_json::{json, Value};

/// The parts of one event the repair scan reads.
pub struct ScanEvent<'a> {
    pub kind: Kind,
    pub seq: u64,
    pub time: u64,
    pub data: &'a str,
}

#[derive(Deserialize)]
struct Fields {
    turn: Option<Value>,
    step: Option<Value>,
    #[serde(rename = "callId")]
    call_id: Option<Value>,
    content: Option<Vec<Block>>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    ty: Option<Value>,
    id: Option<Value>,
}

fn fields(data: &str) -> Fields {
    serde_json::from_str(data).unwrap_or(Fields {
        turn: None,
        step: None,
        call_id: None,
        content: None,
    })
}

struct Pending {
    call_id: Value,
    step: Value,
    call_seq: Option<u64>,
}

/// The text every synthetic interrupted result carries.
pub const INTERRUPTED_TEXT: &str = "Tool call interrupted by a crash; no result was recorded.";

/// `interruptedTurnClosers(events)`: closers for a turn left open at the end
/// of `events`, or nothing for a balanced log. Each boundary resets the scan,
/// so callers may pass only the events from the last `turn/start` or
/// `turn/end` on.
pub fn closers<'a>(events: impl IntoIterator<Item = ScanEvent<'a>>) -> Vec<Value> {
    let mut open_turn: Option<Value> = None;
    let mut open_step: Option<Value> = None;
    let mut pending: Vec<Pending> = Vec::new();
    let mut last: Option<(u64, u64)> = None;
    for e in events {
        last = Some((e.seq, e.time));
        match e.kind {
            Kind::TurnStart => {
                open_turn = Some(fields(e.data).turn.unwrap_or(Value::Null));
                open_step = None;
                pending.clear();
            }
            Kind::TurnEnd => {
                open_turn = None;
                open_step = None;
                pending.clear();
            }
            Kind::StepStart => open_step = Some(fields(e.data).step.unwrap_or(Value::Null)),
            Kind::StepEnd => {
                pending.clear();
                open_step = None;
            }
            Kind::AssistantMessage => {
                let f = fields(e.data);
                let step = f.step.unwrap_or(Value::Null);
                for block in f.content.unwrap_or_default() {
                    if block.ty.as_ref().and_then(Value::as_str) == Some("tool-call") {
                        let id = block.id.unwrap_or(Value::Null);
                        match pending.iter_mut().find(|p| p.call_id == id) {
                            Some(p) => p.step = step.clone(),
                            None => pending.push(Pending {
                                call_id: id,
                                step: step.clone(),
                                call_seq: None,
                            }),
                        }
                    }
                }
            }
            Kind::ToolCall => {
                let id = fields(e.data).call_id.unwrap_or(Value::Null);
                if let Some(p) = pending.iter_mut().find(|p| p.call_id == id) {
                    p.call_seq = Some(e.seq);
                }
            }
            Kind::ToolResult => {
                let id = fields(e.data).call_id.unwrap_or(Value::Null);
                pending.retain(|p| p.call_id != id);
            }
            _ => {}
        }
    }
    let (Some(turn), Some((last_seq, time))) = (open_turn, last) else {
        return Vec::new();
    };
    let mut seq = last_seq + 1;
    let mut out = Vec::with_capacity(pending.len() + 2);
    for p in pending {
        let mut event = json!({
            "type": "tool/result",
            "seq": seq,
            "time": time,
            "data": {
                "turn": turn,
                "step": p.step,
                "callId": p.call_id,
                "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
                "isError": true,
                "error": {"name": "InterruptedError", "code": "interrupted"},
            },
            "surfaceOp": "append",
        });
        if let (Some(call_seq), Some(obj)) = (p.call_seq, event.as_object_mut()) {
            obj.insert("sourceEventSeqs".into(), json!([call_seq]));
        }
        out.push(event);
        seq += 1;
    }
    if let Some(step) = open_step {
        out.push(json!({"type": "step/end", "seq": seq, "time": time, "data": {"turn": turn, "step": step}}));
        seq += 1;
    }
    out.push(json!({
        "type": "turn/end", "seq": seq, "time": time,
        "data": {"turn": turn, "reason": {"kind": "interrupted"}},
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: Kind, seq: u64, data: &str) -> ScanEvent<'_> {
        ScanEvent {
            kind,
            seq,
            time: 100 + seq,
            data,
        }
    }

    #[test]
    fn balanced_and_empty_logs_need_nothing() {
        assert!(closers(Vec::new()).is_empty());
        assert!(closers(vec![
            ev(Kind::TurnStart, 0, r#"{"turn":1}"#),
            ev(
                Kind::TurnEnd,
                1,
                r#"{"turn":1,"reason":{"kind":"completed"}}"#
            ),
        ])
        .is_empty());
    }

    #[test]
    fn closes_pending_calls_then_step_then_turn() {
        let out = closers(vec![
            ev(Kind::TurnStart, 0, r#"{"turn":2}"#),
            ev(Kind::StepStart, 1, r#"{"turn":2,"step":1}"#),
            ev(
                Kind::AssistantMessage,
                2,
                r#"{"turn":2,"step":1,"content":[{"type":"tool-call","id":"a"},{"type":"tool-call","id":"b"},{"type":"tool-call","id":"c"}]}"#,
            ),
            ev(Kind::ToolCall, 3, r#"{"turn":2,"step":1,"callId":"b"}"#),
            ev(Kind::ToolResult, 4, r#"{"turn":2,"step":1,"callId":"c"}"#),
        ]);
        assert_eq!(out.len(), 4);
        assert_eq!(out[0]["data"]["callId"], "a");
        assert_eq!(out[0].get("sourceEventSeqs"), None);
        assert_eq!(out[1]["data"]["callId"], "b");
        assert_eq!(out[1]["sourceEventSeqs"], json!([3]));
        assert_eq!(out[1]["seq"], 6);
        assert_eq!(out[2]["type"], "step/end");
        assert_eq!(
            out[3]["data"],
            json!({"turn":2,"reason":{"kind":"interrupted"}})
        );
        assert!(out.iter().all(|e| e["time"] == 104));
    }

    #[test]
    fn a_turn_without_a_step_gets_only_its_end() {
        let out = closers(vec![ev(Kind::TurnStart, 7, r#"{"turn":3}"#)]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["seq"], 8);
    }
}
