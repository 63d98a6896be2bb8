//! The event envelope (SPEC 1) and the core vocabulary, read from JSON text
//! without building a tree for the payload.

use crate::error::{Code, CoreError, CoreResult};
use crate::json::seq_of_text;
use crate::scan::TextDefect;
use crate::scan::{
    array_items, key_is, member, object_members, scan_event, string_is, string_value,
};
use crate::vocab::{MessageAt, Predicate, SeedRule, Vocabulary, PUBLISHED, V0};

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
    /// The type string of a known kind (`None` for `Other`).
    pub fn name(self) -> Option<&'static str> {
        Some(match self {
            Kind::TurnStart => "turn/start",
            Kind::TurnEnd => "turn/end",
            Kind::StepStart => "step/start",
            Kind::StepEnd => "step/end",
            Kind::UserMessage => "user/message",
            Kind::PromptBlocked => "prompt/blocked",
            Kind::ContextMessage => "context/message",
            Kind::AssistantChunk => "assistant/chunk",
            Kind::AssistantMessage => "assistant/message",
            Kind::ToolCall => "tool/call",
            Kind::ToolResult => "tool/result",
            Kind::SteeringMessage => "steering/message",
            Kind::TodoWrite => "todo/write",
            Kind::RequestHeader => "request/header",
            Kind::RequestHeaderDelta => "request/header-delta",
            Kind::Other => return None,
        })
    }

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
}

/// One event read from text, envelope-checked.
#[derive(Debug)]
pub struct EventText<'a> {
    pub ty: std::borrow::Cow<'a, str>,
    pub kind: Kind,
    pub seq: u64,
    pub time: i64,
    pub data: &'a str,
    /// Raw texts; parsed only when the surface fold needs them.
    pub surface_op: Option<&'a str>,
    pub source_event_seqs: Option<&'a str>,
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

/// Whether an event of `kind` with payload `data` is legacy vocabulary.
pub fn legacy_of(kind: Kind, data: Option<&str>) -> Option<Legacy> {
    match kind {
        Kind::RequestHeaderDelta => Some(Legacy::HeaderDelta),
        Kind::RequestHeader => {
            let reason = member(&object_members(data?)?, "reason")?;
            string_is(reason, "fallback").then_some(Legacy::FallbackReason)
        }
        _ => None,
    }
}

/// Refuse a live append of legacy vocabulary (SPEC 7), as `Session.append`
/// does before it copies anything and the log's `prepare` does again.
pub fn refuse_legacy(ty: &str, data: Option<&str>) -> CoreResult<()> {
    match legacy_of(Kind::of(ty), data) {
        Some(legacy) => Err(CoreError::new(
            Code::LegacyVocabulary,
            legacy.uses_message(&format!("session event \"{ty}\"")),
        )),
        None => Ok(()),
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

/// `v` (raw JSON text) is an object whose `provider` and `model` are
/// non-empty strings.
fn has_provider_model(v: Option<&str>) -> bool {
    let Some(members) = v.and_then(object_members) else {
        return false;
    };
    let non_empty = |k: &str| {
        member(&members, k).is_some_and(|raw| {
            let raw = raw.trim();
            raw.starts_with('"') && raw.len() > 2
        })
    };
    non_empty("provider") && non_empty("model")
}

/// Read one event from JSON text and check everything SPEC 3 checks for a
/// seed event at `index` except contiguity and the surface transition, with
/// the seed messages, in v0's vocabulary.
pub fn read_event(text: &str, index: usize) -> Result<EventText<'_>, ReadError> {
    read_event_in(text, index, &V0)
}

/// A safe integer time text (`negative`: below 0 allowed).
pub(crate) fn time_of_text(raw: &str, negative: bool) -> Option<i64> {
    match raw.trim().strip_prefix('-') {
        Some(rest) if negative => seq_of_text(rest).map(|t| -(t as i64)),
        Some(_) => None,
        None => seq_of_text(raw).map(|t| t as i64),
    }
}

/// `read_event` under vocabulary `vocab`: the envelope (its keys, the
/// `time` bound), the seed checks of the table, legacy forms. One
/// validating pass over the line (see `scan`).
pub fn read_event_in<'a>(
    text: &'a str,
    index: usize,
    vocab: &Vocabulary,
) -> Result<EventText<'a>, ReadError> {
    let invalid = || {
        ReadError::Invalid(CoreError::new(
            Code::InvalidEnvelope,
            format!("seed event at index {index} has an invalid event envelope"),
        ))
    };
    let f = match scan_event(text) {
        Ok(f) => f,
        Err(TextDefect::Syntax) => return Err(ReadError::Unparsable),
        Err(TextDefect::NotLossless) => return Err(ReadError::Invalid(not_lossless(index))),
    };
    // A type holding a lone surrogate is not one: UTF-8 (the SQLite
    // `type` column, the CLI) cannot hold it.
    let ty = f.ty.and_then(|raw| {
        let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
        if inner.as_bytes().contains(&b'\\') {
            string_value(raw).map(std::borrow::Cow::Owned)
        } else {
            Some(std::borrow::Cow::Borrowed(inner))
        }
    });
    // Legacy vocabulary is reported before the envelope (a legacy line is
    // refused as legacy, whatever else is wrong with it; the published
    // line refuses the `fallback` reason after the seed checks).
    let kind = ty.as_deref().map_or(Kind::Other, Kind::of);
    let legacy = legacy_of(kind, f.data);
    if let Some(legacy) = legacy {
        if vocab.fallback_before_checks || legacy == Legacy::HeaderDelta {
            return Err(ReadError::Invalid(legacy_seed(legacy, index)));
        }
    }
    let ignorable_ok = match f.ignorable {
        None => true,
        Some(v) => vocab.ignorable && v.trim() == "true",
    };
    if !f.is_object || f.foreign_key || !ignorable_ok {
        return Err(invalid());
    }
    let time = f.time.and_then(|t| time_of_text(t, vocab.negative_time));
    let (Some(ty), Some(seq), Some(time), Some(data)) =
        (ty, f.seq.and_then(seq_of_text), time, f.data)
    else {
        return Err(invalid());
    };
    if let Some(rule) = vocab.seed_rule(kind) {
        let subject = format!("seed {ty} at index {index}");
        check_rule(rule, data, &subject).map_err(ReadError::Invalid)?;
    }
    if let Some(legacy) = legacy {
        return Err(ReadError::Invalid(legacy_seed(legacy, index)));
    }
    Ok(EventText {
        ty,
        kind,
        seq,
        time,
        data,
        surface_op: f.surface_op,
        source_event_seqs: f.source_event_seqs,
    })
}

/// The checks of `rule` over payload `data`: the first failing one throws
/// `<subject> <tail>`.
fn check_rule(rule: &SeedRule, data: &str, subject: &str) -> CoreResult<()> {
    let message = match rule.message_at {
        MessageAt::Data => Some(data),
        MessageAt::DataMessage => object_members(data).and_then(|m| member(&m, "message")),
    };
    match rule
        .checks
        .iter()
        .find(|c| !holds(c.predicate, data, message))
    {
        Some(c) => Err(CoreError::new(
            Code::InvalidEnvelope,
            format!("{subject} {}", c.tail),
        )),
        None => Ok(()),
    }
}

/// `checkMessageShape(event, subject)` (PUB 14.1): the published line's
/// message-shape checks of the event's type, with `subject`.
pub fn check_message_shape(event: &str, subject: &str) -> CoreResult<()> {
    let members = object_members(event).ok_or_else(|| {
        CoreError::new(
            Code::InvalidArgument,
            "checkMessageShape: the event is not a JSON object",
        )
    })?;
    let kind = member(&members, "type")
        .and_then(string_value)
        .map_or(Kind::Other, |t| Kind::of(&t));
    match PUBLISHED.seed_rule(kind).filter(|r| r.message_shape) {
        Some(rule) => check_rule(rule, member(&members, "data").unwrap_or("null"), subject),
        None => Ok(()),
    }
}

/// A raw JSON text that is a non-empty string.
fn non_empty_string(raw: Option<&str>) -> bool {
    raw.is_some_and(|r| {
        let r = r.trim();
        r.starts_with('"') && r.len() > 2
    })
}

/// Member `name` of object text `v`.
fn at<'a>(v: Option<&'a str>, name: &str) -> Option<&'a str> {
    member(&object_members(v?)?, name)
}

/// Whether `predicate` holds of payload `data` whose message is `message`.
fn holds(predicate: Predicate, data: &str, message: Option<&str>) -> bool {
    let header = || at(Some(data), "header").filter(|h| h.trim_start().starts_with('{'));
    let config = || at(header(), "config");
    let source = || at(message, "source");
    let kind_is = |k: &str| at(source(), "kind").is_some_and(|raw| string_is(raw, k));
    let block = || {
        let items = at(message, "content").and_then(array_items)?;
        match items.as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    };
    match predicate {
        Predicate::HeaderProviderModel => has_provider_model(config()),
        Predicate::HeaderReasoningEffort => match at(config(), "reasoningEffort") {
            None => true,
            raw => non_empty_string(raw),
        },
        Predicate::HeaderAdapterDefaults => {
            let Some(raw) = at(header(), "adapterDefaults") else {
                return true;
            };
            let Some(markers) = object_members(raw) else {
                return false;
            };
            let config = config().and_then(object_members).unwrap_or_default();
            markers.iter().all(|&(k, v)| {
                ["reasoningEffort", "maxTokens"].iter().any(|name| {
                    key_is(k, name) && v.trim() == "true" && member(&config, name).is_some()
                })
            })
        }
        Predicate::ProvenanceProviderModel => has_provider_model(at(Some(data), "provenance")),
        Predicate::MessageIdentified => non_empty_string(at(message, "id")),
        Predicate::MessageRole(role) => at(message, "role").is_some_and(|r| string_is(r, role)),
        Predicate::MessageSource => non_empty_string(at(source(), "kind")),
        Predicate::MessageContent => {
            at(message, "content").is_some_and(|c| c.trim_start().starts_with('['))
        }
        Predicate::ModelSource => kind_is("model") && has_provider_model(source()),
        Predicate::ToolSource => kind_is("tool") && non_empty_string(at(source(), "callId")),
        Predicate::OneToolResult => block().is_some_and(|b| {
            at(Some(b), "type").is_some_and(|t| string_is(t, "tool-result"))
                && at(Some(b), "content").is_some_and(|c| c.trim_start().starts_with('['))
        }),
        Predicate::ToolCallIdsMatch => {
            let id = |raw: Option<&str>| {
                raw.filter(|r| r.trim_start().starts_with('"'))
                    .and_then(string_value)
            };
            let ids = (id(at(block(), "toolCallId")), id(at(source(), "callId")));
            matches!(ids, (Some(a), Some(b)) if a == b)
        }
    }
}

pub(crate) fn not_lossless(index: usize) -> CoreError {
    CoreError::new(
        Code::NotLossless,
        format!("seed event at index {index} is not losslessly JSON-serializable"),
    )
}

fn legacy_seed(legacy: Legacy, index: usize) -> CoreError {
    CoreError::new(
        Code::LegacyVocabulary,
        legacy.uses_message(&format!("seed event at index {index}")),
    )
}

/// Where the payload texts landed in an event text (byte ranges).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventSpans {
    pub data: (usize, usize),
    pub source_event_seqs: Option<(usize, usize)>,
    pub surface_op: Option<(usize, usize)>,
}

/// Append one event's JSON text to `out` the way `JSON.stringify` writes the
/// envelope the TypeScript core builds (`type, seq, time, data,
/// sourceEventSeqs?, surfaceOp?`), the payload texts as they are; where
/// they landed.
pub fn push_event_text(
    out: &mut String,
    ty: &str,
    seq: u64,
    time: u64,
    data: &str,
    source_event_seqs: Option<&str>,
    surface_op: Option<&str>,
) -> EventSpans {
    out.push_str("{\"type\":");
    if ty.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        // Nothing to escape (every event type the vocabulary has).
        out.push('"');
        out.push_str(ty);
        out.push('"');
    } else {
        out.push_str(&crate::json::quote(ty));
    }
    out.push_str(",\"seq\":");
    push_integer(out, seq);
    out.push_str(",\"time\":");
    push_integer(out, time);
    out.push_str(",\"data\":");
    let mut push = |key: &str, text: &str| {
        out.push_str(key);
        let start = out.len();
        out.push_str(text);
        (start, out.len())
    };
    let spans = EventSpans {
        data: push("", data),
        source_event_seqs: source_event_seqs.map(|t| push(",\"sourceEventSeqs\":", t)),
        surface_op: surface_op.map(|t| push(",\"surfaceOp\":", t)),
    };
    out.push('}');
    spans
}

/// `push_event_text` into a string of its own.
pub fn event_text(
    ty: &str,
    seq: u64,
    time: u64,
    data: &str,
    source_event_seqs: Option<&str>,
    surface_op: Option<&str>,
) -> String {
    let mut out = String::with_capacity(data.len() + ty.len() + 64);
    push_event_text(&mut out, ty, seq, time, data, source_event_seqs, surface_op);
    out
}

/// Append the decimal digits of `n` (no allocation).
fn push_integer(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.push_str(std::str::from_utf8(&digits[at..]).unwrap_or("0"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_in_decimal() {
        for n in [0, 7, 10, 1_700_000_000_000, u64::MAX] {
            let mut out = String::from("x");
            push_integer(&mut out, n);
            assert_eq!(out, format!("x{n}"));
        }
    }

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
        assert_eq!(e.data, r#"{"turn":1}"#);
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
    fn reads_payloads_with_lone_surrogates_and_escaped_names() {
        // A lone surrogate anywhere in a provenance or a header is data.
        assert_eq!(
            err(
                r#"{"type":"assistant/message","seq":2,"time":5,"data":{"content":[],"provenance":{"provider":"p\ud800","model":"m","note":"\udc00"}},"surfaceOp":"append"}"#
            ),
            "ok"
        );
        assert_eq!(
            err(
                r#"{"type":"request/header","seq":2,"time":5,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"\ud800"},"reason":"initial"}}"#
            ),
            "ok"
        );
        // `reason` spelled with escapes is still "fallback" (JSON.parse decodes it).
        let escaped =
            r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"f\u0061llback"}"#;
        assert_eq!(
            legacy_of(Kind::RequestHeader, Some(escaped)),
            Some(Legacy::FallbackReason)
        );
        assert_eq!(
            err(&format!(
                r#"{{"type":"request/header","seq":2,"time":5,"data":{escaped}}}"#
            )),
            "seed event at index 2 uses unsupported legacy request/header reason \"fallback\""
        );
        // The last of duplicate keys is the one JSON.parse keeps.
        let twice = r#"{"reason":"fallback","reason":"change"}"#;
        assert_eq!(legacy_of(Kind::RequestHeader, Some(twice)), None);
        // A type holding a lone surrogate is not a type (UTF-8 cannot hold it).
        assert_eq!(
            err(r#"{"type":"x\ud800","seq":2,"time":5,"data":1}"#),
            "seed event at index 2 has an invalid event envelope"
        );
        // Seqs as JSON.parse reads them: 2.0 and 2e0 are 2.
        for seq in ["2.0", "2e0", "0.2e1"] {
            assert_eq!(
                err(&format!(r#"{{"type":"x","seq":{seq},"time":5,"data":1}}"#)),
                "ok",
                "{seq}"
            );
        }
    }

    #[test]
    fn writes_the_envelope_in_typescript_key_order() {
        assert_eq!(
            event_text("user/message", 3, 9, "{}", Some("[1]"), Some("\"append\"")),
            r#"{"type":"user/message","seq":3,"time":9,"data":{},"sourceEventSeqs":[1],"surfaceOp":"append"}"#
        );
        // A type that needs escaping is quoted as serde_json quotes it.
        assert_eq!(
            event_text("a\"b\n", 0, 1, "1", None, None),
            r#"{"type":"a\"b\n","seq":0,"time":1,"data":1}"#
        );
        // The spans name where each payload text landed.
        let mut out = String::from("x");
        let spans = push_event_text(&mut out, "t", 1, 2, "[3]", None, Some("\"append\""));
        let at = |(s, e): (usize, usize)| &out[s..e];
        assert_eq!(at(spans.data), "[3]");
        assert_eq!(spans.source_event_seqs, None);
        assert_eq!(spans.surface_op.map(at), Some("\"append\""));
    }
}
