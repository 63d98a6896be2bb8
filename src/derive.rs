//! Event -> message projection (SPEC 6), written straight from the event's
//! JSON text: the content blocks are copied as text, never rebuilt as a tree.

use crate::event::Kind;
use crate::json::{quote, raw_array_inner, raw_is_empty_array};
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct Payload<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(borrow)]
    provenance: Option<&'a RawValue>,
    #[serde(rename = "callId", borrow)]
    call_id: Option<&'a RawValue>,
    #[serde(rename = "isError", borrow)]
    is_error: Option<&'a RawValue>,
    source: Option<Source>,
    envelope: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct Source {
    kind: Option<serde_json::Value>,
}

fn push_field(out: &mut String, first: &mut bool, key: &str, raw: Option<&RawValue>) {
    if let Some(raw) = raw {
        if !*first {
            out.push(',');
        }
        *first = false;
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        out.push_str(raw.get());
    }
}

/// `<tag source=KIND>` as a JSON text block, KIND being `JSON.stringify(source.kind)`.
fn wrap_block(text: &str) -> String {
    format!("{{\"type\":\"text\",\"text\":{}}}", quote(text))
}

fn wrapped(tag: &str, p: &Payload) -> String {
    let kind = p
        .source
        .as_ref()
        .and_then(|s| s.kind.as_ref())
        .map(|k| serde_json::to_string(k).unwrap_or_default())
        .unwrap_or_else(|| "undefined".into());
    let inner = p.content.and_then(raw_array_inner).unwrap_or("");
    let mut out = String::with_capacity(inner.len() + 96);
    out.push_str("{\"role\":\"user\",\"content\":[");
    out.push_str(&wrap_block(&format!("<{tag} source={kind}>")));
    out.push(',');
    if !inner.is_empty() {
        out.push_str(inner);
        out.push(',');
    }
    out.push_str(&wrap_block(&format!("</{tag}>")));
    out.push_str("]}");
    out
}

/// The message one event produces, as JSON text, or `None` (SPEC 6).
/// `data` is the event's payload text.
pub fn derive_message(kind: Kind, data: &str) -> Option<String> {
    if !matches!(
        kind,
        Kind::UserMessage
            | Kind::AssistantMessage
            | Kind::ToolResult
            | Kind::ContextMessage
            | Kind::SteeringMessage
    ) {
        return None;
    }
    let p: Payload = serde_json::from_str(data).ok()?;
    let mut out = String::with_capacity(data.len() + 64);
    let mut first = false;
    match kind {
        Kind::UserMessage => {
            out.push_str("{\"role\":\"user\"");
            push_field(&mut out, &mut first, "content", p.content);
            out.push('}');
        }
        Kind::AssistantMessage => {
            if p.content.is_some_and(raw_is_empty_array) {
                return None;
            }
            out.push_str("{\"role\":\"assistant\"");
            push_field(&mut out, &mut first, "content", p.content);
            push_field(&mut out, &mut first, "provenance", p.provenance);
            out.push('}');
        }
        Kind::ToolResult => {
            out.push_str("{\"role\":\"user\",\"content\":[{\"type\":\"tool-result\"");
            push_field(&mut out, &mut first, "toolCallId", p.call_id);
            push_field(&mut out, &mut first, "content", p.content);
            push_field(&mut out, &mut first, "isError", p.is_error);
            out.push_str("}]}");
        }
        Kind::ContextMessage if p.envelope.as_ref().and_then(|e| e.as_str()) == Some("raw") => {
            out.push_str("{\"role\":\"user\"");
            push_field(&mut out, &mut first, "content", p.content);
            out.push('}');
        }
        Kind::ContextMessage => return Some(wrapped("context", &p)),
        Kind::SteeringMessage => return Some(wrapped("steering", &p)),
        _ => return None,
    }
    Some(out)
}

/// `renderContextContent(content, source, envelope?)`: the content blocks of
/// a context message as JSON text. `content` is a JSON array text, `source`
/// a JSON object text.
pub fn render_context_content(
    content: &str,
    source: &str,
    envelope: Option<&str>,
) -> Option<String> {
    let data = format!(
        "{{\"content\":{content},\"source\":{source}{}}}",
        envelope
            .map(|e| format!(",\"envelope\":{}", quote(e)))
            .unwrap_or_default()
    );
    let message: serde_json::Value =
        serde_json::from_str(&derive_message(Kind::ContextMessage, &data)?).ok()?;
    message.get("content").map(|c| c.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn derive(kind: Kind, data: Value) -> Option<Value> {
        derive_message(kind, &data.to_string()).map(|t| serde_json::from_str(&t).unwrap())
    }

    #[test]
    fn user_and_assistant_messages() {
        let content = json!([{"type":"text","text":"hi"}]);
        assert_eq!(
            derive(
                Kind::UserMessage,
                json!({"content": content, "source": {"kind":"user"}})
            ),
            Some(json!({"role":"user","content": content}))
        );
        let prov = json!({"provider":"p","model":"m"});
        assert_eq!(
            derive(
                Kind::AssistantMessage,
                json!({"turn":1,"step":1,"content": content,"provenance": prov,"usage":{}})
            ),
            Some(json!({"role":"assistant","content": content,"provenance": prov}))
        );
        assert_eq!(
            derive(
                Kind::AssistantMessage,
                json!({"turn":1,"step":1,"content": [],"provenance": prov})
            ),
            None
        );
    }

    #[test]
    fn tool_results_become_user_tool_result_blocks() {
        assert_eq!(
            derive(
                Kind::ToolResult,
                json!({"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"r"}],"isError":false,"meta":{"x":1}})
            ),
            Some(
                json!({"role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"r"}],"isError":false}]})
            )
        );
    }

    #[test]
    fn context_and_steering_are_wrapped_unless_raw() {
        let block = json!({"type":"text","text":"x"});
        assert_eq!(
            derive(
                Kind::ContextMessage,
                json!({"content":[block],"source":{"kind":"plu\"g"},"meta":{"m":1}})
            ),
            Some(json!({"role":"user","content":[
                {"type":"text","text":"<context source=\"plu\\\"g\">"}, block,
                {"type":"text","text":"</context>"}]}))
        );
        assert_eq!(
            derive(
                Kind::ContextMessage,
                json!({"content":[block],"source":{"kind":"p"},"envelope":"raw"})
            ),
            Some(json!({"role":"user","content":[block]}))
        );
        assert_eq!(
            derive(
                Kind::SteeringMessage,
                json!({"turn":1,"content":[],"source":{"kind":"user"}})
            ),
            Some(json!({"role":"user","content":[
                {"type":"text","text":"<steering source=\"user\">"},
                {"type":"text","text":"</steering>"}]}))
        );
    }

    #[test]
    fn other_events_derive_nothing() {
        assert_eq!(derive(Kind::TurnStart, json!({"turn":1})), None);
        assert_eq!(derive(Kind::PromptBlocked, json!({"content":[]})), None);
    }
}
