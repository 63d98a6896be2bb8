//! The published table's rules, each message exact (PUB 1, 4.2, 4.4, 6, 9,
//! 12.5, 14.1), and the 169 published logs (PUB 16).

use super::*;
use crate::error::CoreResult;
use crate::event::check_message_shape;
use crate::log::{fork_end, ForkOf, Log};
use crate::repair::{closers_in, ScanEvent};
use crate::session_header::SessionHeader;
use serde_json::{json, Value};

fn log_of(vocab: &'static Vocabulary) -> Log {
    Log::with_vocabulary(SessionHeader::minimal("s", 0.0), vocab)
}

/// The error message of seeding `events` (`None`: accepted).
fn seed(vocab: &'static Vocabulary, events: &[Value]) -> Option<String> {
    let text = serde_json::to_string(events).expect("JSON");
    log_of(vocab)
        .seed_json_array(&text)
        .err()
        .map(|e| e.message().to_string())
}

fn published(events: &[Value]) -> Option<String> {
    seed(&PUBLISHED, events)
}

fn user(seq: u64) -> Value {
    json!({"type": "user/message", "seq": seq, "time": 1, "data": {"id": "u", "role": "user",
        "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        "surfaceOp": "append"})
}

fn assistant(seq: u64) -> Value {
    json!({"type": "assistant/message", "seq": seq, "time": 1, "data": {"turn": 1, "step": 1,
        "message": {"id": "a", "role": "assistant", "content": [],
            "source": {"kind": "model", "provider": "p", "model": "m"}}},
        "surfaceOp": "append"})
}

fn result_data(text: &str) -> Value {
    json!({"turn": 1, "step": 1, "message": {"id": "r", "role": "user",
        "source": {"kind": "tool", "callId": "c"},
        "content": [{"type": "tool-result", "toolCallId": "c", "content": [{"type": "text", "text": text}]}]}})
}

fn result(seq: u64, data: Value, op: Value) -> Value {
    let mut e =
        json!({"type": "tool/result", "seq": seq, "time": 1, "data": data, "surfaceOp": op});
    if op_is_replace(&e) {
        let start = e["surfaceOp"]["start"].clone();
        e["sourceEventSeqs"] = json!([start]);
    }
    e
}

fn op_is_replace(e: &Value) -> bool {
    e["surfaceOp"].is_object()
}

fn replace(start: u64, end: u64) -> Value {
    json!({"op": "replace", "start": start, "end": end})
}

fn header(vocab: &Vocabulary, text: &str) -> CoreResult<SessionHeader> {
    SessionHeader::from_json_in("s", text, vocab)
}

fn header_error(vocab: &Vocabulary, text: &str) -> String {
    header(vocab, text)
        .err()
        .map(|e| e.message().to_string())
        .unwrap_or_default()
}

#[test]
fn the_envelope_takes_ignorable_true_and_any_safe_integer_time() {
    let mut e = user(0);
    e["ignorable"] = json!(true);
    assert_eq!(published(&[e.clone()]), None);
    let invalid = Some("seed event at index 0 has an invalid event envelope".to_string());
    assert_eq!(seed(&V0, &[e]), invalid);
    for bad in [json!(false), json!(null), json!(1), json!("true")] {
        let mut e = user(0);
        e["ignorable"] = bad;
        assert_eq!(published(&[e]), invalid);
    }
    let mut e = user(0);
    e["time"] = json!(-5);
    assert_eq!(published(&[e.clone()]), None);
    assert_eq!(seed(&V0, &[e]), invalid);
    let mut e = user(0);
    e["time"] = json!(1.5);
    assert_eq!(published(&[e]), invalid);
    let mut e = user(0);
    e["extra"] = json!(1);
    assert_eq!(published(&[e]), invalid);
    // A negative time is kept (the closers take the last event's time).
    let mut log = log_of(&PUBLISHED);
    let turn = json!([{"type": "turn/start", "seq": 0, "time": -7, "data": {"turn": 1}}]);
    log.seed_json_array(&turn.to_string()).expect("seeded");
    assert_eq!(log.metas.get(0).map(|m| m.time), Some(-7));
}

#[test]
fn a_published_log_keeps_no_texts_only_the_payloads_its_rule_reads() {
    // Every table whose replacement rule reads payloads keeps them.
    for vocab in [&V0, &PUBLISHED] {
        assert_eq!(
            vocab.tool_result_rewrite,
            vocab.keeps_payload(Kind::ToolResult)
        );
    }
    let seed = json!([
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        user(1),
        result(2, result_data("seeded"), json!("append")),
    ]);
    let mut log = log_of(&PUBLISHED);
    log.seed_json_array(&seed.to_string()).expect("seeded");
    assert_eq!((log.len(), log.texts_len()), (3, 0));
    let kept: Vec<u64> = log.kept_payloads.keys().copied().collect();
    assert_eq!(kept, vec![2]);
    assert_eq!(
        log.kept_payloads[&2],
        serde_json::to_string(&result_data("seeded")).expect("JSON")
    );
    let refused = |r: CoreResult<String>| r.map_err(|e| (e.code(), e.message().to_string()));
    let message = |what: &str| {
        Err((
            "INVALID_ARGUMENT",
            format!("{what}: a published session's native log keeps no event texts (its events are the JS session's)"),
        ))
    };
    assert_eq!(refused(log.events_json(0, 3, &[])), message("eventsJson"));
    assert_eq!(refused(log.to_jsonl()), message("toJsonl"));
    assert_eq!(refused(log.text(0).map(|t| t.to_string())), message("text"));
    assert_eq!(
        refused(log.closers().map(|c| c.join(","))),
        message("closers")
    );
    assert_eq!(
        refused(log.shared_texts().map(|_| String::new())),
        message("flushSource")
    );
    // v0 keeps every text and no payload apart.
    let mut v0 = log_of(&V0);
    let e = json!([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}]);
    v0.seed_json_array(&e.to_string()).expect("seeded");
    assert_eq!((v0.texts_len(), v0.kept_payloads.len()), (1, 0));
    assert_eq!(v0.events_json(0, 1, &[]).expect("texts"), e.to_string());
}

#[test]
fn the_message_shape_checks_run_in_order_with_their_messages() {
    let at = |e: Value| published(&[e]).unwrap_or_default();
    let mut e = user(0);
    e["data"] = json!({"role": "user", "content": [], "source": {"kind": "user"}});
    assert_eq!(
        at(e),
        "seed user/message at index 0 lacks an identified message"
    );
    let mut e = user(0);
    e["data"]["id"] = json!("");
    assert_eq!(
        at(e),
        "seed user/message at index 0 lacks an identified message"
    );
    let mut e = user(0);
    e["data"]["role"] = json!("assistant");
    assert_eq!(
        at(e),
        "seed user/message at index 0 message must have role \"user\""
    );
    let mut e = user(0);
    e["data"]["source"] = json!({"kind": ""});
    assert_eq!(
        at(e),
        "seed user/message at index 0 message has invalid source"
    );
    let mut e = user(0);
    e["data"]["content"] = json!("text");
    assert_eq!(
        at(e),
        "seed user/message at index 0 message has invalid content"
    );

    let mut e = assistant(0);
    e["data"]["message"]["role"] = json!("user");
    assert_eq!(
        at(e),
        "seed assistant/message at index 0 message must have role \"assistant\""
    );
    let mut e = assistant(0);
    e["data"]["message"]["source"] = json!({"kind": "model", "provider": "p"});
    assert_eq!(
        at(e),
        "seed assistant/message at index 0 message must have model source"
    );
    // v0's shape: no message at all.
    let v0 = json!({"type": "assistant/message", "seq": 0, "time": 1, "surfaceOp": "append",
        "data": {"role": "assistant", "content": [], "provenance": {"provider": "p", "model": "m"}}});
    assert_eq!(
        at(v0.clone()),
        "seed assistant/message at index 0 lacks an identified message"
    );
    assert_eq!(seed(&V0, &[v0]), None);

    let ok = result(0, result_data("x"), json!("append"));
    assert_eq!(published(std::slice::from_ref(&ok)), None);
    let tool = |f: &dyn Fn(&mut Value)| {
        let mut e = ok.clone();
        f(&mut e["data"]["message"]);
        at(e)
    };
    assert_eq!(
        tool(&|m| m["source"] = json!({"kind": "user"})),
        "seed tool/result at index 0 message must have tool source"
    );
    assert_eq!(
        tool(&|m| m["content"] = json!([])),
        "seed tool/result at index 0 message must contain one tool-result block"
    );
    assert_eq!(
        tool(&|m| m["content"][0]["content"] = json!("x")),
        "seed tool/result at index 0 message must contain one tool-result block"
    );
    assert_eq!(
        tool(&|m| m["content"][0]["toolCallId"] = json!("d")),
        "seed tool/result at index 0 message has mismatched tool call ids"
    );
    // The free function: the same checks with the caller's subject.
    let mut bad = ok.clone();
    bad["data"]["message"]["role"] = json!("tool");
    let shape = check_message_shape(&bad.to_string(), "session event at seq 3");
    assert_eq!(
        shape.err().map(|e| e.message().to_string()),
        Some("session event at seq 3 message must have role \"user\"".into())
    );
    assert!(check_message_shape(&ok.to_string(), "x").is_ok());
    assert!(check_message_shape(r#"{"type":"turn/start","data":1}"#, "x").is_ok());
}

#[test]
fn request_header_seed_checks_and_the_fallback_reason_after_them() {
    let h = |config: Value, extra: Value, reason: &str| {
        let mut header = json!({"config": config});
        if let Value::Object(extra) = extra {
            header.as_object_mut().expect("object").extend(extra);
        }
        let e = json!({"type": "request/header", "seq": 0, "time": 1,
            "data": {"header": header, "reason": reason}});
        published(&[e]).unwrap_or_default()
    };
    let pm = json!({"provider": "p", "model": "m"});
    assert_eq!(h(pm.clone(), json!({}), "initial"), "");
    assert_eq!(
        h(json!({"model": "m"}), json!({}), "fallback"),
        "seed request/header at index 0 lacks provider/model"
    );
    assert_eq!(
        h(pm.clone(), json!({}), "fallback"),
        "seed event at index 0 uses unsupported legacy request/header reason \"fallback\""
    );
    let effort = json!({"provider": "p", "model": "m", "reasoningEffort": ""});
    assert_eq!(
        h(effort, json!({}), "initial"),
        "seed request/header at index 0 has an invalid reasoningEffort"
    );
    let with_effort = json!({"provider": "p", "model": "m", "reasoningEffort": "high"});
    let defaults =
        |d: Value, config: &Value| h(config.clone(), json!({"adapterDefaults": d}), "initial");
    assert_eq!(defaults(json!({"reasoningEffort": true}), &with_effort), "");
    let invalid = "seed request/header at index 0 has invalid adapterDefaults";
    assert_eq!(defaults(json!({"reasoningEffort": true}), &pm), invalid);
    assert_eq!(
        defaults(json!({"reasoningEffort": false}), &with_effort),
        invalid
    );
    assert_eq!(defaults(json!({"other": true}), &with_effort), invalid);
    assert_eq!(defaults(json!([]), &with_effort), invalid);
    // v0 refuses the legacy reason first.
    let e = json!({"type": "request/header", "seq": 0, "time": 1,
        "data": {"header": {"config": {}}, "reason": "fallback"}});
    assert_eq!(
        seed(&V0, &[e]).unwrap_or_default(),
        "seed event at index 0 uses unsupported legacy request/header reason \"fallback\""
    );
}

#[test]
fn the_published_header_fields_in_order() {
    let p = &PUBLISHED;
    let base = r#""version":0,"id":"s","createdAt":1"#;
    let with = |extra: &str| format!("{{{base}{extra}}}");
    assert!(header(
        p,
        &with(r#","origin":"subagent","delegationDepth":2,"agentPreset":"x","z":1"#)
    )
    .is_ok());
    assert_eq!(
        header_error(p, "[1]"),
        "session header is not a plain JSON record"
    );
    assert_eq!(
        header_error(p, r#"{"id":"s"}"#),
        "session header version must be 0, got undefined"
    );
    assert_eq!(
        header_error(p, r#"{"version":0,"id":"s","createdAt":1.5}"#),
        "session header createdAt must be a non-negative safe integer"
    );
    assert_eq!(
        header_error(p, r#"{"version":0,"id":"s","createdAt":-1}"#),
        "session header createdAt must be a non-negative safe integer"
    );
    assert!(header(&V0, r#"{"version":0,"id":"s","createdAt":-1.5}"#).is_ok());
    assert_eq!(
        header_error(p, &with(r#","origin":"fork""#)),
        "session header origin must be \"subagent\""
    );
    assert_eq!(
        header_error(p, &with(r#","delegationDepth":-1"#)),
        "session header delegationDepth must be a non-negative safe integer"
    );
    assert_eq!(
        header_error(p, &with(r#","agentPreset":1"#)),
        "session header agentPreset must be a string"
    );
    // Table order: seedLength before origin; cwd first.
    assert_eq!(
        header_error(p, &with(r#","origin":1,"seedLength":"x""#)),
        "session header seedLength must be a non-negative safe integer"
    );
    assert_eq!(
        header_error(p, &with(r#","agentPreset":1,"cwd":"rel""#)),
        "session header cwd must be an absolute path, got \"rel\""
    );
    // Unknown keys kept, in order; v0 does not check the published fields.
    let h = header(p, &with(r#","z":1,"a":[1, 2]"#)).expect("header");
    assert_eq!(
        h.json(),
        r#"{"version":0,"id":"s","createdAt":1,"z":1,"a":[1,2]}"#
    );
    assert!(header(&V0, &with(r#","origin":"fork""#)).is_ok());
}

#[test]
fn a_header_set_before_the_seed_is_kept() {
    let mut log = log_of(&PUBLISHED);
    let text = r#"{"version":0,"id":"s","createdAt":5,"origin":"subagent"}"#;
    log.set_header(header(&PUBLISHED, text).expect("header"));
    log.seed_json_array(&json!([user(0)]).to_string())
        .expect("seeded");
    assert_eq!(log.header().json(), text);
}

#[test]
fn three_surface_types_and_the_source_checks() {
    assert_eq!(PUBLISHED.surface.len(), 3);
    assert!(!PUBLISHED.is_surface_type("context/message"));
    assert!(V0.is_surface_type("context/message"));
    let ctx =
        json!({"type": "context/message", "seq": 0, "time": 1, "data": {}, "surfaceOp": "append"});
    assert_eq!(
        published(&[ctx]).unwrap_or_default(),
        "invalid seed event at index 0: session event \"context/message\" is not surface-eligible and cannot carry surfaceOp"
    );
    let mut e = user(1);
    e["sourceEventSeqs"] = json!([0, -1]);
    assert_eq!(
        published(&[user(0), e]).unwrap_or_default(),
        "invalid seed event at index 1: session event \"user/message\" sourceEventSeqs must densely contain non-negative safe integers"
    );
}

#[test]
fn the_tool_result_replacement_rule() {
    let r0 = result(0, result_data("long"), json!("append"));
    let ok = result(1, result_data("short"), replace(0, 0));
    assert_eq!(published(&[r0.clone(), ok.clone()]), None);
    let at1 = |e: Value| published(&[r0.clone(), e]).unwrap_or_default();
    let prefix = "invalid seed event at index 1: tool/result surface replacement";
    let mut step = result_data("short");
    step["step"] = json!(2);
    assert_eq!(
        at1(result(1, step, replace(0, 0))),
        format!("{prefix} may change only content")
    );
    let mut error = result_data("short");
    error["error"] = json!({"name": "E", "code": "X"});
    assert_eq!(
        at1(result(1, error, replace(0, 0))),
        format!("{prefix} may change only content")
    );
    let mut is_error = result_data("short");
    is_error["message"]["content"][0]["isError"] = json!(true);
    assert_eq!(
        at1(result(1, is_error, replace(0, 0))),
        format!("{prefix} may change only content")
    );
    // Key order does not matter.
    let mut reordered = json!({"step": 1, "turn": 1});
    reordered["message"] = result_data("other")["message"].clone();
    assert_eq!(at1(result(1, reordered, replace(0, 0))), "");
    // Another node type, and two nodes.
    let two = result(2, result_data("s"), replace(0, 1));
    let mut two = two;
    two["sourceEventSeqs"] = json!([0, 1]);
    assert_eq!(
        published(&[r0.clone(), user(1), two]).unwrap_or_default(),
        "invalid seed event at index 2: tool/result surface replacement must rewrite exactly one current node"
    );
    let on_user = result(1, result_data("s"), replace(0, 0));
    assert_eq!(
        published(&[user(0), on_user]).unwrap_or_default(),
        "invalid seed event at index 1: tool/result surface replacement must target a current tool/result"
    );
    // A user/message compaction may shadow a tool/result; v0 has no rule.
    let mut compaction = user(1);
    compaction["surfaceOp"] = replace(0, 0);
    compaction["sourceEventSeqs"] = json!([0]);
    assert_eq!(published(&[r0.clone(), compaction]), None);
    let mut v0_step = result_data("short");
    v0_step["step"] = json!(2);
    assert_eq!(
        seed(&V0, &[r0.clone(), result(1, v0_step, replace(0, 0))]),
        None
    );
}

#[test]
fn the_rule_reads_live_nodes_and_forks_keep_them() {
    let mut log = log_of(&PUBLISHED);
    log.seed_json_array(&json!([result(0, result_data("seeded"), json!("append"))]).to_string())
        .expect("seeded");
    let append = r#"{"surfaceOp":"append"}"#;
    let live = result_data("live").to_string();
    let p = log
        .prepare("tool/result", 1, Some(append), Some(&live))
        .expect("append");
    log.commit_prepared(p);
    let meta = |s: u64| {
        format!(
            r#"{{"surfaceOp":{{"op":"replace","start":{s},"end":{s}}},"sourceEventSeqs":[{s}]}}"#
        )
    };
    let mut changed = result_data("x");
    changed["turn"] = json!(9);
    for target in [0, 1] {
        let err = log
            .prepare(
                "tool/result",
                2,
                Some(&meta(target)),
                Some(&changed.to_string()),
            )
            .err()
            .map(|e| e.message().to_string());
        assert_eq!(
            err.as_deref(),
            Some("tool/result surface replacement may change only content")
        );
    }
    let same = result_data("y").to_string();
    let p = log
        .prepare("tool/result", 2, Some(&meta(1)), Some(&same))
        .expect("replace");
    log.commit_prepared(p);
    let missing = log.prepare("tool/result", 3, Some(append), None).err();
    assert_eq!(missing.map(|e| e.code()), Some("INVALID_ARGUMENT"));
    // A fork's replay passes no data: the parent's kept payloads serve.
    let mut child = log
        .fork_prefix(1, SessionHeader::minimal("c", 0.0))
        .expect("fork");
    for seq in [1, 2] {
        let m = if seq == 1 {
            append.to_string()
        } else {
            meta(1)
        };
        let p = child
            .prepare("tool/result", seq, Some(&m), None)
            .expect("replay");
        child.commit_prepared(p);
    }
    let err = child
        .prepare("tool/result", 3, Some(&meta(2)), Some(&changed.to_string()))
        .err()
        .map(|e| e.message().to_string());
    assert_eq!(
        err.as_deref(),
        Some("tool/result surface replacement may change only content")
    );
}

#[test]
fn published_closers_two_variants_and_their_key_order() {
    let events = [
        (crate::event::Kind::TurnStart, r#"{"turn":1}"#),
        (crate::event::Kind::StepStart, r#"{"turn":1,"step":1}"#),
        (
            crate::event::Kind::AssistantMessage,
            r#"{"turn":1,"step":1,"message":{"content":[{"type":"tool-call","id":"a"},{"type":"tool-call","id":"b"},{"type":"tool-call","id":"c"}]}}"#,
        ),
        (crate::event::Kind::ToolCall, r#"{"callId":"a"}"#),
        (
            crate::event::Kind::ToolResult,
            r#"{"message":{"source":{"kind":"tool","callId":"c"}}}"#,
        ),
    ];
    let scan = events
        .iter()
        .enumerate()
        .map(|(i, (kind, data))| ScanEvent {
            kind: *kind,
            seq: i as u64,
            time: 9,
            data,
        });
    let out = closers_in(&PUBLISHED.closers, scan);
    assert_eq!(out.len(), 4);
    let unknown = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly.";
    assert_eq!(
        out[0],
        format!(
            r#"{{"type":"tool/result","seq":5,"time":9,"data":{{"turn":1,"step":1,"message":{{"id":"interrupted-tool-result-a-5","role":"user","source":{{"kind":"tool","callId":"a"}},"content":[{{"type":"tool-result","toolCallId":"a","isError":true,"content":[{{"type":"text","text":"{unknown}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[3]}}"#
        )
    );
    assert_eq!(
        out[1],
        r#"{"type":"tool/result","seq":6,"time":9,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-b-6","role":"user","source":{"kind":"tool","callId":"b"},"content":[{"type":"tool-result","toolCallId":"b","isError":true,"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}"#
    );
    assert_eq!(
        out[2],
        r#"{"type":"step/end","seq":7,"time":9,"data":{"turn":1,"step":1}}"#
    );
    assert_eq!(
        out[3],
        r#"{"type":"turn/end","seq":8,"time":9,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
    );
}

#[test]
fn the_published_fork_rule() {
    let end = |b: f64, open: Option<&str>| {
        fork_end(
            "s",
            Some((b, b.to_string())),
            4,
            ForkOf::Service,
            (3.0, "3".into()),
            b,
            Some("step/start".into()),
            ForkRule::NotInsideOpenTurn,
            open.map(str::to_string),
        )
    };
    let err = end(1.0, Some("2")).expect_err("refused");
    assert_eq!(err.code(), "OPEN_TURN");
    assert_eq!(
        err.message(),
        "fork boundary 1 in session \"s\" ends inside open turn 2"
    );
    // Outside an open turn any event is a boundary.
    assert_eq!(end(1.0, None).ok(), Some(2));
    // The other checks are v0's.
    let err = end(7.0, None).expect_err("refused");
    assert_eq!(err.code(), "INVALID_BOUNDARY");
    assert_eq!(
        err.message(),
        "fork boundary 7 does not exist in session \"s\" (last seq: 3)"
    );
}

/// `{{cwd}}` and `{{sessionId}}` filled in.
fn filled(text: &str) -> String {
    text.replace("{{cwd}}", "/tmp/cwd")
        .replace("{{sessionId}}", "session-fixture")
}

/// A packed chunk row (PUB 14.2) expanded to its `assistant/chunk` events;
/// any other line as it is.
fn expanded(line: &str) -> Vec<String> {
    let Ok(row) = serde_json::from_str::<Value>(line) else {
        return vec![line.to_string()];
    };
    let tag = row["type"].as_str().unwrap_or_default();
    let chunk_type = match tag {
        "text-chunks" => "text-delta",
        "reasoning-chunks" => "reasoning-delta",
        "tool-call-chunks" => "tool-call-delta",
        _ => return vec![line.to_string()],
    };
    let d = &row["data"];
    let parts = d[if tag == "tool-call-chunks" {
        "args"
    } else {
        "texts"
    }]
    .as_array()
    .cloned()
    .unwrap_or_default();
    let (seq0, mut time) = (
        row["seq0"].as_u64().unwrap_or(0),
        row["time0"].as_i64().unwrap_or(0),
    );
    let dt = d["dt"].as_array().cloned().unwrap_or_default();
    parts
        .iter()
        .enumerate()
        .map(|(k, part)| {
            if k > 0 {
                time += dt[k - 1].as_i64().unwrap_or(0);
            }
            let mut chunk = json!({"type": chunk_type, "index": d["index"]});
            if tag == "tool-call-chunks" {
                chunk["id"] = d["id"].clone();
                if let Some(name) = d.get("name") {
                    chunk["name"] = name.clone();
                }
                chunk["argumentsDelta"] = part.clone();
            } else {
                chunk["text"] = part.clone();
            }
            json!({"type": "assistant/chunk", "seq": seq0 + k as u64, "time": time,
                "data": {"turn": d["turn"], "step": d["step"], "chunk": chunk}})
            .to_string()
        })
        .collect()
}

/// Every published log, header first then seed, through the published
/// table (PUB 16): 143 load, 12 lack `version`, 14 carry v0 messages.
#[test]
fn the_published_logs_load_or_are_refused_as_the_published_package_does() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures-published/logs");
    let mut files = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the published logs (../shared)") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "jsonl") {
                files.push(path);
            }
        }
    }
    assert_eq!(files.len(), 169);
    let (mut loaded, mut no_version, mut v0_messages) = (0, 0, 0);
    for path in &files {
        let text = filled(&std::fs::read_to_string(path).expect("read"));
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let head: Value = serde_json::from_str(lines.next().expect("a header line")).expect("JSON");
        let mut head = head;
        let id = head["id"].as_str().unwrap_or_default().to_string();
        head.as_object_mut().expect("a record").shift_remove("type");
        let events: Vec<String> = lines.flat_map(expanded).collect();
        let mut log = Log::with_vocabulary(SessionHeader::minimal(&id, 0.0), &PUBLISHED);
        let result = SessionHeader::from_json_in(&id, &head.to_string(), &PUBLISHED)
            .map(|h| log.set_header(h))
            .and_then(|()| log.seed_json_array(&format!("[{}]", events.join(","))));
        match result {
            Ok(()) => loaded += 1,
            Err(e) if e.message() == "session header version must be 0, got undefined" => {
                no_version += 1
            }
            Err(e)
                if e.message().starts_with("seed user/message at index ")
                    && e.message().ends_with(" lacks an identified message") =>
            {
                v0_messages += 1
            }
            Err(e) => panic!("{}: {}", path.display(), e.message()),
        }
    }
    assert_eq!((loaded, no_version, v0_messages), (143, 12, 14));
}
