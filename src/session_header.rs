//! The session header (SPEC 3, 11): format version, identity, creation time
//! and lineage, kept as the JSON text of the record it was given as (its
//! members in their order, numbers as written), read by the one reader
//! (`scan`).

use crate::error::{Code, CoreError, CoreResult};
use crate::json::{quote, seq_of_text};
use crate::scan::{
    key_is, member, object_members, read_record, string_is, string_lossy, string_value,
};
use crate::vocab::{FieldRule, HeaderField, Vocabulary};

#[derive(Debug, Clone, PartialEq)]
pub struct SessionHeader {
    id: String,
    /// The record as compact JSON text; never empty (it holds the id).
    json: String,
}

/// `String(value)` as JavaScript would print a JSON value (its text) in a message.
fn js_string(raw: Option<&str>) -> String {
    match raw {
        None => "undefined".into(),
        Some(r) if r.starts_with('"') => string_lossy(r).unwrap_or_default(),
        Some(r) if r.starts_with('[') => "[array]".into(),
        Some(r) if r.starts_with('{') => "[object Object]".into(),
        Some(r) => r.to_string(),
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

/// The field rules of a vocabulary's table (SPEC 3, PUB 4.4), in its
/// order, over a record whose version and id are checked.
fn check_fields(members: &[(&str, &str)], fields: &[HeaderField]) -> CoreResult<()> {
    for f in fields {
        let Some(raw) = member(members, f.name) else {
            if f.required {
                return Err(invalid(f.message.into()));
            }
            continue;
        };
        let ok = match f.rule {
            // A number the scanner accepted is finite.
            FieldRule::Finite => raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()),
            FieldRule::NonNegativeSafeInteger => seq_of_text(raw).is_some(),
            FieldRule::String => raw.starts_with('"'),
            FieldRule::Exactly(value) => string_is(raw, value),
            FieldRule::AbsolutePath => {
                let Some(cwd) = string_lossy(raw) else {
                    return Err(invalid(f.message.into()));
                };
                if !is_absolute_path(&cwd) {
                    return Err(invalid(format!(
                        "session header {} must be an absolute path, got \"{cwd}\"",
                        f.name
                    )));
                }
                true
            }
        };
        if !ok {
            return Err(invalid(f.message.into()));
        }
    }
    Ok(())
}

/// The compact JSON text of a record: `first` (member text), then `members`.
fn record<'a>(first: &str, members: impl Iterator<Item = &'a (&'a str, &'a str)>) -> String {
    let mut json = format!("{{{first}");
    for (key, value) in members {
        if json.len() > 1 {
            json.push(',');
        }
        json.push('"');
        json.push_str(key);
        json.push_str("\":");
        // The value without the white space between its tokens.
        let (mut in_string, mut escaped) = (false, false);
        json.extend(value.chars().filter(|&c| {
            let keep = in_string || !c.is_ascii_whitespace();
            (in_string, escaped) = if in_string {
                (escaped || c != '"', !escaped && c == '\\')
            } else {
                (c == '"', false)
            };
            keep
        }));
    }
    json.push('}');
    json
}

impl SessionHeader {
    /// A header given to `new Session(id, seed, header)`, as JSON text.
    pub fn from_json(id: &str, text: &str) -> CoreResult<SessionHeader> {
        SessionHeader::from_json_in(id, text, &crate::vocab::V0)
    }

    /// `from_json` with the header fields of `vocab`'s table.
    pub fn from_json_in(id: &str, text: &str, vocab: &Vocabulary) -> CoreResult<SessionHeader> {
        let members = read_record(text)
            .map_err(|_| invalid("session header is not losslessly JSON-serializable".into()))?
            .ok_or_else(|| invalid("session header is not a plain JSON record".into()))?;
        let version = member(&members, "version");
        if version != Some("0") {
            return Err(invalid(format!(
                "session header version must be 0, got {}",
                js_string(version)
            )));
        }
        let given = member(&members, "id");
        if given.and_then(string_value).as_deref() != Some(id) {
            return Err(invalid(format!(
                "session header id \"{}\" does not match session id \"{id}\"",
                js_string(given)
            )));
        }
        check_fields(&members, vocab.header_fields)?;
        Ok(SessionHeader {
            id: id.to_string(),
            json: record("", members.iter()),
        })
    }

    /// The default header `{version: 0, id, createdAt}`.
    pub fn minimal(id: &str, created_at: f64) -> SessionHeader {
        // `Date.now()` (an integer, printed without a fraction); + 0.0 turns -0 into 0.
        let (quoted, created_at) = (quote(id), created_at + 0.0);
        let json = format!(r#"{{"version":0,"id":{quoted},"createdAt":{created_at}}}"#);
        SessionHeader {
            id: id.to_string(),
            json,
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
        h.json.pop();
        if let Some(cwd) = parent.member("cwd") {
            h.json.push_str(",\"cwd\":");
            h.json.push_str(cwd);
        }
        let parent = quote(&parent.id);
        h.json.push_str(&format!(
            r#","parentSession":{parent},"seedLength":{seed_length}}}"#
        ));
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
        let Ok(Some(members)) = read_record(line) else {
            return Err(not_header());
        };
        let field = |name| member(&members, name);
        if !field("type").is_some_and(|t| string_is(t, "session")) {
            return Err(not_header());
        }
        let Some(id) = field("id").and_then(string_value) else {
            return Err(not_header());
        };
        let version = field("version");
        if version.is_some_and(|v| seq_of_text(v) != Some(0)) {
            return Err(CoreError::new(
                Code::UnsupportedVersion,
                format!(
                    "unsupported session format version {} for {} (only v0 is supported)",
                    js_string(version),
                    quote(&id)
                ),
            ));
        }
        // Logs written before the header carried a version are v0. Stored
        // headers are taken as written (recorded logs may carry placeholder
        // paths); only the constructor enforces the field rules.
        let first = version.map_or("\"version\":0", |_| "");
        let json = record(first, members.iter().filter(|(k, _)| !key_is(k, "type")));
        Ok(SessionHeader { id, json })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// A member's JSON text (the last of duplicate keys, as `JSON.parse` keeps).
    pub fn member(&self, key: &str) -> Option<&str> {
        object_members(&self.json).and_then(|members| member(&members, key))
    }

    /// A member that is an integer JSON number (a store's INTEGER column).
    pub fn int(&self, key: &str) -> Option<i64> {
        self.member(key)?.parse().ok()
    }

    /// A member that is a JSON string (a store's TEXT column).
    pub fn text(&self, key: &str) -> Option<String> {
        self.member(key).and_then(string_value)
    }

    /// A member that is a JSON number, as JavaScript reads it.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.member(key)?.parse().ok()
    }

    /// The header record as JSON text (what `session.header` shows).
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The JSONL header line (without its newline).
    pub fn line(&self) -> String {
        format!("{{\"type\":\"session\",{}", &self.json[1..])
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
    fn keeps_the_record_as_written() {
        // Key order, number text and escapes as given; white space dropped.
        let given = r#"{"version":0,"id":"a","createdAt":1.5e-7,"z":1e+21,"k\u0041":"\ud800\/","n":[{"d":[[]]}]}"#;
        let h = SessionHeader::from_json("a", given).unwrap();
        assert_eq!(h.json(), given);
        assert_eq!(SessionHeader::from_line(&h.line()).unwrap(), h);
        let spaced = SessionHeader::from_line(
            "{ \"type\" : \"session\", \"id\": \"s\", \"a\": [ 1, \" x \\\" \" ], \"version\":0 }",
        )
        .unwrap();
        assert_eq!(spaced.json(), r#"{"id":"s","a":[1," x \" "],"version":0}"#);
        // The last of duplicate keys counts, as in JSON.parse.
        let dup = SessionHeader::from_line(r#"{"type":"session","id":"s","cwd":"/a","cwd":"/b"}"#);
        assert_eq!(dup.unwrap().text("cwd").as_deref(), Some("/b"));
        // Nesting past serde's 128 levels is read; -0 and past 1000 levels are not lossless.
        let deep = |n: usize| {
            format!(
                r#"{{"version":0,"id":"a","createdAt":1,"x":{}{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        assert!(SessionHeader::from_json("a", &deep(999)).is_ok());
        let lossy = "session header is not losslessly JSON-serializable";
        assert_eq!(msg(SessionHeader::from_json("a", &deep(1000))), lossy);
        assert_eq!(
            msg(SessionHeader::from_json(
                "a",
                r#"{"version":0,"id":"a","createdAt":-0}"#
            )),
            lossy
        );
        assert_eq!(
            msg(SessionHeader::from_json("a", "[]")),
            "session header is not a plain JSON record"
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
