//! The session header (SPEC 3, 11): format version, identity, creation time
//! and lineage, kept as the ordered JSON record it was given as.

use crate::error::{Code, CoreError, CoreResult};
use crate::json::{as_seq, quote};
use serde_json::{Map, Value};

/// The format version this build reads and writes.
pub const SESSION_FORMAT_VERSION: u64 = 0;

#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    id: String,
    record: Map<String, Value>,
}

/// `String(value)` as JavaScript would print a JSON value in a message.
fn js_string(v: Option<&Value>) -> String {
    match v {
        None => "undefined".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(_)) => "[array]".into(),
        Some(Value::Object(_)) => "[object Object]".into(),
        Some(other) => other.to_string(),
    }
}

/// An absolute path on POSIX (`/x`) or Windows (`C:\x`, `\\server\x`).
pub fn is_absolute_path(p: &str) -> bool {
    let b = p.as_bytes();
    p.starts_with('/')
        || p.starts_with("\\\\")
        || (b.len() >= 3
            && b[0].is_ascii_alphabetic()
            && b[1] == b':'
            && (b[2] == b'\\' || b[2] == b'/'))
}

fn invalid(msg: String) -> CoreError {
    CoreError::new(Code::InvalidHeader, msg)
}

/// The field rules of SPEC 3 over a record whose version and id are checked.
fn check_fields(record: &Map<String, Value>) -> CoreResult<()> {
    match record.get("createdAt") {
        Some(Value::Number(n)) if n.as_f64().is_some_and(f64::is_finite) => {}
        _ => {
            return Err(invalid(
                "session header createdAt must be a finite number".into(),
            ))
        }
    }
    if let Some(cwd) = record.get("cwd") {
        let Some(cwd) = cwd.as_str() else {
            return Err(invalid("session header cwd must be a string".into()));
        };
        if !is_absolute_path(cwd) {
            return Err(invalid(format!(
                "session header cwd must be an absolute path, got \"{cwd}\""
            )));
        }
    }
    if record.get("parentSession").is_some_and(|p| !p.is_string()) {
        return Err(invalid(
            "session header parentSession must be a string".into(),
        ));
    }
    if record
        .get("seedLength")
        .is_some_and(|s| as_seq(s).is_none())
    {
        return Err(invalid(
            "session header seedLength must be a non-negative safe integer".into(),
        ));
    }
    Ok(())
}

impl SessionHeader {
    /// A header given to `new Session(id, seed, header)`, as JSON text.
    pub fn from_json(id: &str, text: &str) -> CoreResult<SessionHeader> {
        let value: Value = serde_json::from_str(text)
            .map_err(|_| invalid("session header is not losslessly JSON-serializable".into()))?;
        let Value::Object(record) = value else {
            return Err(invalid("session header is not a plain JSON record".into()));
        };
        let version = record.get("version");
        if version.and_then(Value::as_u64) != Some(SESSION_FORMAT_VERSION)
            || version.and_then(Value::as_f64) != Some(0.0)
        {
            return Err(invalid(format!(
                "session header version must be 0, got {}",
                js_string(version)
            )));
        }
        if record.get("id").and_then(Value::as_str) != Some(id) {
            return Err(invalid(format!(
                "session header id \"{}\" does not match session id \"{id}\"",
                js_string(record.get("id"))
            )));
        }
        check_fields(&record)?;
        Ok(SessionHeader {
            id: id.to_string(),
            record,
        })
    }

    /// The default header `{version: 0, id, createdAt}`.
    pub fn minimal(id: &str, created_at: f64) -> SessionHeader {
        let mut record = Map::new();
        record.insert("version".into(), Value::from(SESSION_FORMAT_VERSION));
        record.insert("id".into(), Value::from(id));
        record.insert("createdAt".into(), number(created_at));
        SessionHeader {
            id: id.to_string(),
            record,
        }
    }

    /// A fork child's header: the parent's cwd, its id as `parentSession`,
    /// and the copied prefix length as `seedLength`.
    pub fn child_of(
        parent: &SessionHeader,
        id: &str,
        created_at: f64,
        seed_length: usize,
    ) -> SessionHeader {
        let mut h = SessionHeader::minimal(id, created_at);
        if let Some(cwd) = parent.record.get("cwd") {
            h.record.insert("cwd".into(), cwd.clone());
        }
        h.record
            .insert("parentSession".into(), Value::from(parent.id.as_str()));
        h.record
            .insert("seedLength".into(), Value::from(seed_length as u64));
        h
    }

    /// Line 1 of a JSONL log: `{"type":"session","version":0,...}`.
    pub fn from_line(line: &str) -> CoreResult<SessionHeader> {
        let not_header = || {
            CoreError::new(
                Code::CorruptLog,
                "corrupt session log: first line is not a session header",
            )
        };
        let Ok(Value::Object(mut record)) = serde_json::from_str::<Value>(line) else {
            return Err(not_header());
        };
        if record.get("type").and_then(Value::as_str) != Some("session") {
            return Err(not_header());
        }
        record.shift_remove("type");
        let Some(id) = record.get("id").and_then(Value::as_str).map(str::to_string) else {
            return Err(not_header());
        };
        let version = record.get("version");
        match version {
            // Logs written before the header carried a version are v0.
            None => {
                let mut normalized = Map::with_capacity(record.len() + 1);
                normalized.insert("version".into(), Value::from(SESSION_FORMAT_VERSION));
                normalized.extend(record);
                record = normalized;
            }
            Some(v) if v.as_f64() == Some(0.0) => {}
            Some(v) => {
                return Err(CoreError::new(
                    Code::UnsupportedVersion,
                    format!(
                        "unsupported session format version {} for {} (only v0 is supported)",
                        js_string(Some(v)),
                        quote(&id)
                    ),
                ))
            }
        }
        // Stored headers are taken as written (recorded logs may carry
        // placeholder paths); only the constructor enforces the field rules.
        Ok(SessionHeader { id, record })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.record.get(key)
    }

    /// A member that is an integer JSON number (a store's INTEGER column).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.record.get(key).and_then(Value::as_i64)
    }

    /// A member that is a JSON string (a store's TEXT column).
    pub fn text(&self, key: &str) -> Option<&str> {
        self.record.get(key).and_then(Value::as_str)
    }

    /// A member's JSON text (for a message).
    pub fn member_json(&self, key: &str) -> Option<String> {
        self.record.get(key).map(Value::to_string)
    }

    /// A member that is a JSON number, as JavaScript reads it.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.record.get(key).and_then(Value::as_f64)
    }

    /// The header record as JSON text (what `session.header` shows).
    pub fn json(&self) -> String {
        Value::Object(self.record.clone()).to_string()
    }

    /// The JSONL header line (without its newline).
    pub fn line(&self) -> String {
        let body = self.json();
        if body.len() <= 2 {
            return "{\"type\":\"session\"}".into();
        }
        format!("{{\"type\":\"session\",{}", &body[1..])
    }
}

/// A JSON number for a JS number (integers stay integers).
fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        Value::from(n as i64)
    } else {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: CoreResult<SessionHeader>) -> String {
        r.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn validates_constructor_headers() {
        assert!(SessionHeader::from_json(
            "a",
            r#"{"version":0,"id":"a","createdAt":1,"cwd":"/x"}"#
        )
        .is_ok());
        assert_eq!(
            msg(SessionHeader::from_json(
                "a",
                r#"{"version":1,"id":"a","createdAt":1}"#
            )),
            "session header version must be 0, got 1"
        );
        assert_eq!(
            msg(SessionHeader::from_json(
                "a",
                r#"{"version":0,"id":"b","createdAt":1}"#
            )),
            "session header id \"b\" does not match session id \"a\""
        );
        assert_eq!(
            msg(SessionHeader::from_json(
                "a",
                r#"{"version":0,"id":"a","createdAt":"x"}"#
            )),
            "session header createdAt must be a finite number"
        );
        assert_eq!(
            msg(SessionHeader::from_json(
                "a",
                r#"{"version":0,"id":"a","createdAt":1,"cwd":"rel"}"#
            )),
            "session header cwd must be an absolute path, got \"rel\""
        );
        assert_eq!(
            msg(SessionHeader::from_json(
                "a",
                r#"{"version":0,"id":"a","createdAt":1,"seedLength":-1}"#
            )),
            "session header seedLength must be a non-negative safe integer"
        );
    }

    #[test]
    fn reads_and_writes_the_jsonl_header_line() {
        let line = r#"{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w"}"#;
        let h = SessionHeader::from_line(line).unwrap();
        assert_eq!(h.line(), line);
        assert_eq!(
            h.json(),
            r#"{"version":0,"id":"s","createdAt":5,"cwd":"/w"}"#
        );
        assert_eq!(
            msg(SessionHeader::from_line(
                r#"{"type":"session","version":1,"id":"s","createdAt":5}"#
            )),
            "unsupported session format version 1 for \"s\" (only v0 is supported)"
        );
        let legacy =
            SessionHeader::from_line(r#"{"type":"session","id":"s","createdAt":5}"#).unwrap();
        assert_eq!(legacy.json(), r#"{"version":0,"id":"s","createdAt":5}"#);
        assert_eq!(
            msg(SessionHeader::from_line(r#"{"type":"turn/start","seq":0}"#)),
            "corrupt session log: first line is not a session header"
        );
    }

    #[test]
    fn fork_children_record_their_lineage() {
        let parent = SessionHeader::from_line(
            r#"{"type":"session","version":0,"id":"p","createdAt":5,"cwd":"/w"}"#,
        )
        .unwrap();
        let child = SessionHeader::child_of(&parent, "c", 9.0, 4);
        assert_eq!(
            child.json(),
            r#"{"version":0,"id":"c","createdAt":9,"cwd":"/w","parentSession":"p","seedLength":4}"#
        );
    }
}
