//! The event envelope (SPEC 1) and the core vocabulary, read from JSON text
//! without building a tree for the payload.

use crate::error::CoreError;
use crate::json::{check_lossless_text, number_as_seq, TextDefect};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// The core event types the contract gives payloads to; everything else is
/// `Other` (plugins may add types freely).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    TurnStart,
    TurnEnd,
    StepStart,
    StepEnd,
    UserMessage,
    PromptBlocked,
    ContextMessage,
    AssistantChunk,
    AssistantMessage,
    ToolCall,
    ToolResult,
    SteeringMessage,
    TodoWrite,
    RequestHeader,
    RequestHeaderDelta,
    Other,
}

impl Kind {
    pub fn of(ty: &str) -> Kind {
        match ty {
            "turn/start" => Kind::TurnStart,
            "turn/end" => Kind::TurnEnd,
            "step/start" => Kind::StepStart,
            "step/end" => Kind::StepEnd,
            "user/message" => Kind::UserMessage,
            "prompt/blocked" => Kind::PromptBlocked,
            "context/message" => Kind::ContextMessage,
            "assistant/chunk" => Kind::AssistantChunk,
            "assistant/message" => Kind::AssistantMessage,
            "tool/call" => Kind::ToolCall,
            "tool/result" => Kind::ToolResult,
            "steering/message" => Kind::SteeringMessage,
            "todo/write" => Kind::TodoWrite,
            "request/header" => Kind::RequestHeader,
            "request/header-delta" => Kind::RequestHeaderDelta,
            _ => Kind::Other,
        }
    }

    /// The five types that may carry `surfaceOp` / `sourceEventSeqs` (SPEC 1).
    pub fn is_surface_eligible(self) -> bool {
        matches!(
            self,
            Kind::UserMessage
                | Kind::AssistantMessage
                | Kind::ToolResult
                | Kind::ContextMessage
                | Kind::SteeringMessage
        )
    }
}

/// The surface-eligible types by name.
pub const SURFACE_ELIGIBLE_TYPES: [&str; 5] = [
    "user/message",
    "assistant/message",
    "tool/result",
    "context/message",
    "steering/message",
];

/// `isSurfaceEligibleType(type)`.
pub fn is_surface_eligible_type(ty: &str) -> bool {
    Kind::of(ty).is_surface_eligible()
}

/// The envelope of one event as it appears in JSON text; the payload and the
/// surface metadata stay raw.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvelope<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<&'a RawValue>,
    #[serde(borrow)]
    seq: Option<&'a RawValue>,
    #[serde(borrow)]
    time: Option<&'a RawValue>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    #[serde(rename = "surfaceOp", borrow)]
    surface_op: Option<&'a RawValue>,
    #[serde(rename = "sourceEventSeqs", borrow)]
    source_event_seqs: Option<&'a RawValue>,
}

/// One event read from text, envelope-checked.
#[derive(Debug)]
pub struct EventText<'a> {
    pub ty: String,
    pub kind: Kind,
    pub seq: u64,
    pub time: u64,
    pub data: &'a RawValue,
    pub surface_op: Option<Value>,
    pub source_event_seqs: Option<Value>,
}

/// Legacy request-header vocabulary (SPEC 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Legacy {
    HeaderDelta,
    FallbackReason,
}

impl Legacy {
    /// The fragment every message about this legacy form contains.
    pub fn fragment(self) -> &'static str {
        match self {
            Legacy::HeaderDelta => "unsupported legacy request/header-delta",
            Legacy::FallbackReason => "unsupported legacy request/header reason \"fallback\"",
        }
    }

    /// `<subject> uses unsupported legacy ...` (seed and append wording).
    pub fn uses_message(self, subject: &str) -> String {
        match self {
            Legacy::HeaderDelta => format!("{subject} uses {} format", self.fragment()),
            Legacy::FallbackReason => format!("{subject} uses {}", self.fragment()),
        }
    }

    /// `session "ID" contains ... at seq N` (load wording).
    pub fn load_message(self, id: &str, seq: u64) -> String {
        match self {
            Legacy::HeaderDelta => format!(
                "session \"{id}\" contains unsupported legacy request/header-delta event at seq {seq}"
            ),
            Legacy::FallbackReason => format!(
                "session \"{id}\" contains unsupported legacy request/header reason \"fallback\" at seq {seq}"
            ),
        }
    }
}

#[derive(Deserialize)]
struct ReasonOnly<'a> {
    #[serde(borrow)]
    reason: Option<&'a RawValue>,
}

/// Whether an event of `kind` with payload `data` is legacy vocabulary.
pub fn legacy_of(kind: Kind, data: Option<&str>) -> Option<Legacy> {
    match kind {
        Kind::RequestHeaderDelta => Some(Legacy::HeaderDelta),
        Kind::RequestHeader => {
            let data = data?;
            let parsed: ReasonOnly = serde_json::from_str(data).ok()?;
            (parsed.reason?.get().trim() == "\"fallback\"").then_some(Legacy::FallbackReason)
        }
        _ => None,
    }
}

/// Why an event line could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Not JSON (a torn or garbage line).
    Unparsable,
    /// JSON, but the event breaks a rule; the error carries the seed message.
    Invalid(CoreError),
}

fn non_negative_safe_integer(raw: Option<&RawValue>) -> Option<u64> {
    let n: serde_json::Number = serde_json::from_str(raw?.get()).ok()?;
    number_as_seq(&n)
}

fn has_provider_model(v: Option<&Value>) -> bool {
    let non_empty = |k: &str| {
        v.and_then(|o| o.get(k))
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    v.is_some_and(Value::is_object) && non_empty("provider") && non_empty("model")
}

#[derive(Deserialize)]
struct HeaderPayload {
    header: Option<Value>,
}

#[derive(Deserialize)]
struct ProvenancePayload {
    provenance: Option<Value>,
}

/// Read one event from JSON text and check everything SPEC 3 checks for a
/// seed event at `index` except contiguity and the surface transition, with
/// the seed messages.
pub fn read_event(text: &str, index: usize) -> Result<EventText<'_>, ReadError> {
    let invalid = || {
        ReadError::Invalid(CoreError::InvalidEnvelope(format!(
            "seed event at index {index} has an invalid event envelope"
        )))
    };
    let env: RawEnvelope = match serde_json::from_str(text) {
        Ok(env) => env,
        Err(e) if e.is_data() => {
            // Valid JSON of the wrong shape (unknown key, not an object, ...).
            return match check_lossless_text(text) {
                Err(TextDefect::Syntax) => Err(ReadError::Unparsable),
                Err(TextDefect::NotLossless) => Err(ReadError::Invalid(not_lossless(index))),
                Ok(()) => {
                    if type_is_delta(text) {
                        Err(ReadError::Invalid(legacy_seed(Legacy::HeaderDelta, index)))
                    } else {
                        Err(invalid())
                    }
                }
            };
        }
        Err(_) => return Err(ReadError::Unparsable),
    };
    // Every number of the event must come back from JSON.parse losslessly.
    if let Some(data) = env.data {
        match check_lossless_text(data.get()) {
            Ok(()) => {}
            Err(TextDefect::Syntax) => return Err(ReadError::Unparsable),
            Err(TextDefect::NotLossless) => return Err(ReadError::Invalid(not_lossless(index))),
        }
    }
    let ty: Option<String> = env.ty.and_then(|raw| serde_json::from_str(raw.get()).ok());
    if ty.as_deref() == Some("request/header-delta") {
        return Err(ReadError::Invalid(legacy_seed(Legacy::HeaderDelta, index)));
    }
    let (Some(ty), Some(seq), Some(time), Some(data)) = (
        ty,
        non_negative_safe_integer(env.seq),
        non_negative_safe_integer(env.time),
        env.data,
    ) else {
        return Err(invalid());
    };
    let parse_small = |raw: Option<&RawValue>| -> Result<Option<Value>, ReadError> {
        match raw {
            None => Ok(None),
            Some(r) => check_lossless_text(r.get())
                .ok()
                .and_then(|()| serde_json::from_str(r.get()).ok())
                .map(Some)
                .ok_or_else(|| ReadError::Invalid(not_lossless(index))),
        }
    };
    let surface_op = parse_small(env.surface_op)?;
    let source_event_seqs = parse_small(env.source_event_seqs)?;
    let kind = Kind::of(&ty);
    match kind {
        Kind::RequestHeader => {
            let payload: Option<HeaderPayload> = serde_json::from_str(data.get()).ok();
            let config = payload
                .as_ref()
                .and_then(|p| p.header.as_ref())
                .filter(|h| h.is_object())
                .and_then(|h| h.get("config"));
            if !has_provider_model(config) {
                return Err(ReadError::Invalid(CoreError::InvalidEnvelope(format!(
                    "seed request/header at index {index} lacks provider/model"
                ))));
            }
        }
        Kind::AssistantMessage => {
            let payload: Option<ProvenancePayload> = serde_json::from_str(data.get()).ok();
            if !has_provider_model(payload.as_ref().and_then(|p| p.provenance.as_ref())) {
                return Err(ReadError::Invalid(CoreError::InvalidEnvelope(format!(
                    "seed assistant/message at index {index} lacks provider/model provenance"
                ))));
            }
        }
        _ => {}
    }
    if let Some(legacy) = legacy_of(kind, Some(data.get())) {
        return Err(ReadError::Invalid(legacy_seed(legacy, index)));
    }
    Ok(EventText {
        ty,
        kind,
        seq,
        time,
        data,
        surface_op,
        source_event_seqs,
    })
}

fn type_is_delta(text: &str) -> bool {
    #[derive(Deserialize)]
    struct TypeOnly {
        #[serde(rename = "type")]
        ty: Option<Value>,
    }
    serde_json::from_str::<TypeOnly>(text)
        .ok()
        .and_then(|t| t.ty)
        .is_some_and(|t| t == "request/header-delta")
}

fn not_lossless(index: usize) -> CoreError {
    CoreError::NotLossless(format!(
        "seed event at index {index} is not losslessly JSON-serializable"
    ))
}

fn legacy_seed(legacy: Legacy, index: usize) -> CoreError {
    CoreError::LegacyVocabulary(legacy.uses_message(&format!("seed event at index {index}")))
}

/// Build one event's JSON text the way `JSON.stringify` writes the envelope
/// the TypeScript core builds (`type, seq, time, data, sourceEventSeqs?, surfaceOp?`).
pub fn event_text(
    ty: &str,
    seq: u64,
    time: u64,
    data: &str,
    source_event_seqs: Option<&str>,
    surface_op: Option<&str>,
) -> String {
    let mut out = String::with_capacity(data.len() + ty.len() + 64);
    out.push_str("{\"type\":");
    out.push_str(&crate::json::quote(ty));
    out.push_str(",\"seq\":");
    out.push_str(&seq.to_string());
    out.push_str(",\"time\":");
    out.push_str(&time.to_string());
    out.push_str(",\"data\":");
    out.push_str(data);
    if let Some(s) = source_event_seqs {
        out.push_str(",\"sourceEventSeqs\":");
        out.push_str(s);
    }
    if let Some(s) = surface_op {
        out.push_str(",\"surfaceOp\":");
        out.push_str(s);
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        match read_event(text, 2) {
            Err(ReadError::Invalid(e)) => e.to_string(),
            Err(ReadError::Unparsable) => "unparsable".into(),
            Ok(_) => "ok".into(),
        }
    }

    #[test]
    fn reads_a_plain_event() {
        let e = read_event(
            r#"{"type":"turn/start","seq":2,"time":5,"data":{"turn":1}}"#,
            2,
        )
        .unwrap_or_else(|_| panic!("valid event"));
        assert_eq!((e.kind, e.seq, e.time), (Kind::TurnStart, 2, 5));
        assert_eq!(e.data.get(), r#"{"turn":1}"#);
    }

    #[test]
    fn rejects_bad_envelopes_with_the_seed_message() {
        let m = "seed event at index 2 has an invalid event envelope";
        assert_eq!(
            err(r#"{"type":"x","seq":2,"time":5,"data":1,"extra":1}"#),
            m
        );
        assert_eq!(err(r#"{"type":"x","seq":2,"time":-5,"data":1}"#), m);
        assert_eq!(err(r#"{"type":"x","seq":2.5,"time":5,"data":1}"#), m);
        assert_eq!(err(r#"{"type":1,"seq":2,"time":5,"data":1}"#), m);
        assert_eq!(err(r#"{"type":"x","seq":2,"time":5}"#), m);
        assert_eq!(err(r#"[1]"#), m);
        assert_eq!(err(r#"{"type":"x","seq":2,"#), "unparsable");
    }

    #[test]
    fn rejects_legacy_vocabulary_and_missing_provenance() {
        assert_eq!(
            err(r#"{"type":"request/header-delta","seq":2,"time":5,"data":{}}"#),
            "seed event at index 2 uses unsupported legacy request/header-delta format"
        );
        assert_eq!(
            err(
                r#"{"type":"request/header","seq":2,"time":5,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}"#
            ),
            "seed event at index 2 uses unsupported legacy request/header reason \"fallback\""
        );
        assert_eq!(
            err(
                r#"{"type":"request/header","seq":2,"time":5,"data":{"header":{"config":{"model":"m"}},"reason":"initial"}}"#
            ),
            "seed request/header at index 2 lacks provider/model"
        );
        assert_eq!(
            err(
                r#"{"type":"assistant/message","seq":2,"time":5,"data":{"content":[],"provenance":{"provider":"","model":"m"}},"surfaceOp":"append"}"#
            ),
            "seed assistant/message at index 2 lacks provider/model provenance"
        );
        assert_eq!(
            err(r#"{"type":"x","seq":2,"time":5,"data":{"v":-0}}"#),
            "seed event at index 2 is not losslessly JSON-serializable"
        );
    }

    #[test]
    fn writes_the_envelope_in_typescript_key_order() {
        assert_eq!(
            event_text("user/message", 3, 9, "{}", Some("[1]"), Some("\"append\"")),
            r#"{"type":"user/message","seq":3,"time":9,"data":{},"sourceEventSeqs":[1],"surfaceOp":"append"}"#
        );
    }
}
