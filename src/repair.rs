//! Crash repair (SPEC 8): the events that close a turn a crash left open.

use crate::event::Kind;
use crate::json::canonical_eq_text;
use crate::scan::{array_items, member, object_members, string_is};
use crate::vocab::{Closers, ResultTemplate};

/// The parts of one event the repair scan reads.
pub struct ScanEvent<'a> {
    pub kind: Kind,
    pub seq: u64,
    pub time: i64,
    pub data: &'a str,
}

/// The raw JSON text of payload field `name` (`null` when it is missing),
/// read by the one scanner: a value holding a lone surrogate, or nested
/// deeper than serde reads, is read like any other.
fn field<'a>(members: &[(&'a str, &'a str)], name: &str) -> &'a str {
    member(members, name).map_or("null", str::trim)
}

struct Pending<'a> {
    call_id: &'a str,
    step: &'a str,
    call_seq: Option<u64>,
}

/// The text every synthetic interrupted result carries.
pub const INTERRUPTED_TEXT: &str = "Tool call interrupted by a crash; no result was recorded.";

/// PUB 9's texts: a call the log recorded (`tool/call` seen), and one it did not.
pub const OUTCOME_UNKNOWN_TEXT: &str = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
pub const NOT_STARTED_TEXT: &str =
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed.";

/// The raw text at `path` inside object text `data`.
fn at_path<'a>(data: &'a str, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(data, |v, name| member(&object_members(v)?, name))
}

/// The `data` of the synthetic `tool/result` closing `p` (its seq `seq`).
fn result_data(template: ResultTemplate, turn: &str, p: &Pending, seq: u64) -> String {
    let (step, id) = (p.step, p.call_id);
    match template {
        ResultTemplate::V0 => format!(
            "{{\"turn\":{turn},\"step\":{step},\"callId\":{id},\"content\":[{{\"type\":\"text\",\"text\":\"{INTERRUPTED_TEXT}\"}}],\"isError\":true,\"error\":{{\"name\":\"InterruptedError\",\"code\":\"interrupted\"}}}}"
        ),
        ResultTemplate::Published => {
            let (text, name, code) = match p.call_seq {
                Some(_) => (OUTCOME_UNKNOWN_TEXT, "ToolOutcomeUnknownError", "TOOL_OUTCOME_UNKNOWN"),
                None => (NOT_STARTED_TEXT, "ToolNotStartedError", "TOOL_NOT_STARTED"),
            };
            // `String(callId)` inside the id string: a string's own
            // (escaped) text, anything else its JSON text quoted.
            let shown = match id.strip_prefix('"').and_then(|r| r.strip_suffix('"')) {
                Some(inner) => inner.to_string(),
                None => {
                    let quoted = crate::json::quote(id);
                    quoted[1..quoted.len() - 1].to_string()
                }
            };
            format!(
                "{{\"turn\":{turn},\"step\":{step},\"message\":{{\"id\":\"interrupted-tool-result-{shown}-{seq}\",\"role\":\"user\",\"source\":{{\"kind\":\"tool\",\"callId\":{id}}},\"content\":[{{\"type\":\"tool-result\",\"toolCallId\":{id},\"isError\":true,\"content\":[{{\"type\":\"text\",\"text\":\"{text}\"}}]}}]}},\"error\":{{\"name\":\"{name}\",\"code\":\"{code}\"}}}}"
            )
        }
    }
}

/// `interruptedTurnClosers(events)`: the JSON texts of the closers for a turn
/// left open at the end of `events`, or nothing for a balanced log. Each
/// boundary resets the scan, so callers may pass only the events from the
/// last `turn/start` or `turn/end` on. Values taken from the log (turn,
/// step, call id) are written as the log has them.
/// `table` holds the paths and payloads of the log's vocabulary.
pub fn closers_in<'a>(
    table: &Closers,
    events: impl IntoIterator<Item = ScanEvent<'a>>,
) -> Vec<String> {
    let mut open_turn: Option<&'a str> = None;
    let mut open_step: Option<&'a str> = None;
    let mut pending: Vec<Pending<'a>> = Vec::new();
    let mut last: Option<(u64, i64)> = None;
    let same = |a: &str, b: &str| a == b || canonical_eq_text(a, b);
    for e in events {
        last = Some((e.seq, e.time));
        let members = || object_members(e.data).unwrap_or_default();
        match e.kind {
            Kind::TurnStart => {
                open_turn = Some(field(&members(), "turn"));
                open_step = None;
                pending.clear();
            }
            Kind::TurnEnd => {
                open_turn = None;
                open_step = None;
                pending.clear();
            }
            Kind::StepStart => open_step = Some(field(&members(), "step")),
            Kind::StepEnd => {
                pending.clear();
                open_step = None;
            }
            Kind::AssistantMessage => {
                let m = members();
                let step = field(&m, "step");
                let blocks = at_path(e.data, table.calls_at)
                    .and_then(array_items)
                    .unwrap_or_default();
                for block in blocks {
                    let b = object_members(block).unwrap_or_default();
                    if !member(&b, "type").is_some_and(|t| string_is(t, "tool-call")) {
                        continue;
                    }
                    let id = field(&b, "id");
                    match pending.iter_mut().find(|p| same(p.call_id, id)) {
                        Some(p) => p.step = step,
                        None => pending.push(Pending {
                            call_id: id,
                            step,
                            call_seq: None,
                        }),
                    }
                }
            }
            Kind::ToolCall => {
                let id = field(&members(), "callId");
                if let Some(p) = pending.iter_mut().find(|p| same(p.call_id, id)) {
                    p.call_seq = Some(e.seq);
                }
            }
            Kind::ToolResult => {
                let id = at_path(e.data, table.result_call_id_at).map_or("null", str::trim);
                pending.retain(|p| !same(p.call_id, id));
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
        let sources = p
            .call_seq
            .map(|s| format!(",\"sourceEventSeqs\":[{s}]"))
            .unwrap_or_default();
        let data = result_data(table.result, turn, &p, seq);
        out.push(format!(
            "{{\"type\":\"tool/result\",\"seq\":{seq},\"time\":{time},\"data\":{data},\"surfaceOp\":\"append\"{sources}}}"
        ));
        seq += 1;
    }
    if let Some(step) = open_step {
        out.push(format!(
            "{{\"type\":\"step/end\",\"seq\":{seq},\"time\":{time},\"data\":{{\"turn\":{turn},\"step\":{step}}}}}"
        ));
        seq += 1;
    }
    out.push(format!(
        "{{\"type\":\"turn/end\",\"seq\":{seq},\"time\":{time},\"data\":{{\"turn\":{turn},\"reason\":{{\"kind\":\"interrupted\"}}}}}}"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The v0 closers.
    fn closers<'a>(events: impl IntoIterator<Item = ScanEvent<'a>>) -> Vec<String> {
        closers_in(&crate::vocab::V0.closers, events)
    }
    use serde_json::{json, Value};

    fn parsed(texts: Vec<String>) -> Vec<Value> {
        texts
            .iter()
            .map(|t| serde_json::from_str(t).expect("a closer is JSON"))
            .collect()
    }

    fn ev(kind: Kind, seq: u64, data: &str) -> ScanEvent<'_> {
        ScanEvent {
            kind,
            seq,
            time: 100 + seq as i64,
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
        let out = parsed(closers(vec![
            ev(Kind::TurnStart, 0, r#"{"turn":2}"#),
            ev(Kind::StepStart, 1, r#"{"turn":2,"step":1}"#),
            ev(
                Kind::AssistantMessage,
                2,
                r#"{"turn":2,"step":1,"content":[{"type":"tool-call","id":"a"},{"type":"tool-call","id":"b"},{"type":"tool-call","id":"c"}]}"#,
            ),
            ev(Kind::ToolCall, 3, r#"{"turn":2,"step":1,"callId":"b"}"#),
            ev(Kind::ToolResult, 4, r#"{"turn":2,"step":1,"callId":"c"}"#),
        ]));
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
        let out = parsed(closers(vec![ev(Kind::TurnStart, 7, r#"{"turn":3}"#)]));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0]["seq"], 8);
    }

    #[test]
    fn reads_call_ids_serde_cannot() {
        // A lone surrogate in an id, and the same id spelled with an escape.
        let texts = closers(vec![
            ev(Kind::TurnStart, 0, r#"{"turn":1}"#),
            ev(
                Kind::AssistantMessage,
                1,
                r#"{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c\ud800"},{"type":"tool-call","id":"d"}]}"#,
            ),
            ev(
                Kind::ToolCall,
                2,
                r#"{"turn":1,"step":1,"callId":"c\ud800"}"#,
            ),
            ev(
                Kind::ToolResult,
                3,
                r#"{"turn":1,"step":1,"callId":"\u0064"}"#,
            ),
        ]);
        assert_eq!(texts.len(), 2);
        assert_eq!(
            texts[0],
            r#"{"type":"tool/result","seq":4,"time":103,"data":{"turn":1,"step":1,"callId":"c\ud800","content":[{"type":"text","text":"Tool call interrupted by a crash; no result was recorded."}],"isError":true,"error":{"name":"InterruptedError","code":"interrupted"}},"surfaceOp":"append","sourceEventSeqs":[2]}"#
        );
        assert!(texts[1].starts_with(r#"{"type":"turn/end","seq":5"#));
    }
}
