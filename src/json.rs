//! Lossless-JSON rules over JSON text (SPEC 2), and the small JSON helpers the
//! rest of the core shares.
//!
//! JavaScript values are snapshotted on the JS side (only JS can see getters,
//! prototypes and sparse arrays). Text that reaches Rust from a file or a
//! database is checked here: it must parse, and every number must come back
//! from `JSON.parse` as a finite number other than `-0`.

use serde::de::Deserializer;
use serde_json::value::RawValue;
use serde_json::Value;

/// Why a JSON text is not a lossless value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextDefect {
    /// Not JSON at all (or trailing garbage).
    Syntax,
    /// JSON that `JSON.parse` would turn into `-0` or a non-finite number.
    NotLossless,
}

/// Check that `text` is one JSON value that `JSON.parse` reads losslessly
/// (the scanner's rules: no `-0` or `±Infinity`, nesting within
/// `scan::MAX_NESTING`).
pub fn check_lossless_text(text: &str) -> Result<(), TextDefect> {
    crate::scan::check_value(text)
}

/// Serde helper: a field that is present (even as `null`) is `Some`; only a
/// missing field is `None` (JavaScript's `!== undefined`).
pub fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    use serde::Deserialize;
    Value::deserialize(d).map(Some)
}

/// `JSON.stringify(s)` for a string.
pub fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| String::from("\"\""))
}

/// Structural JSON equality where object key order does not matter
/// ("canonical JSON" equality) and numbers compare as JavaScript numbers.
pub fn canonical_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| canonical_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| canonical_eq(v, w)))
        }
        _ => false,
    }
}

/// `canonical_eq` over two JSON texts the scanner read, without building
/// trees: object key order does not matter (the last of duplicate keys
/// counts, as in `JSON.parse`), strings compare as UTF-16 code units (lone
/// surrogates included), numbers as doubles. Texts nested deeper than a
/// line may be (`scan::MAX_NESTING` plus the envelope) are not equal.
pub fn canonical_eq_text(a: &str, b: &str) -> bool {
    canonical_eq_at(a.trim(), b.trim(), 0)
}

fn canonical_eq_at(a: &str, b: &str, depth: usize) -> bool {
    use crate::scan::{array_items, object_members, string_units};
    if a == b {
        return true;
    }
    if depth > crate::scan::MAX_NESTING {
        return false;
    }
    let eq = |x: &str, y: &str| canonical_eq_at(x.trim(), y.trim(), depth + 1);
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(b'{'), Some(b'{')) => {
            // Members by decoded key, the last of duplicates kept.
            let members = |t: &str| -> Option<Vec<(Vec<u16>, String)>> {
                let mut out: Vec<(Vec<u16>, String)> = Vec::new();
                for (k, v) in object_members(t)? {
                    let key = string_units(&format!("\"{k}\""))?;
                    match out.iter_mut().find(|(seen, _)| *seen == key) {
                        Some(slot) => slot.1 = v.to_string(),
                        None => out.push((key, v.to_string())),
                    }
                }
                Some(out)
            };
            let (Some(x), Some(y)) = (members(a), members(b)) else {
                return false;
            };
            x.len() == y.len()
                && x.iter().all(|(k, v)| {
                    y.iter()
                        .find(|(l, _)| l == k)
                        .is_some_and(|(_, w)| eq(v, w))
                })
        }
        (Some(b'['), Some(b'[')) => match (array_items(a), array_items(b)) {
            (Some(x), Some(y)) => x.len() == y.len() && x.iter().zip(&y).all(|(p, q)| eq(p, q)),
            _ => false,
        },
        (Some(b'"'), Some(b'"')) => string_units(a).is_some() && string_units(a) == string_units(b),
        (Some(b'-' | b'0'..=b'9'), Some(b'-' | b'0'..=b'9')) => {
            matches!((a.parse::<f64>(), b.parse::<f64>()), (Ok(x), Ok(y)) if x == y)
        }
        _ => false,
    }
}

/// Whether a JSON number is a non-negative safe integer (`Number.isSafeInteger(n) && n >= 0`).
pub fn as_seq(v: &Value) -> Option<u64> {
    let n = v.as_number()?;
    number_as_seq(n)
}

/// The same test over a `serde_json::Number`.
pub fn number_as_seq(n: &serde_json::Number) -> Option<u64> {
    const MAX_SAFE: u64 = (1u64 << 53) - 1;
    if let Some(u) = n.as_u64() {
        return (u <= MAX_SAFE).then_some(u);
    }
    if n.as_i64().is_some() {
        return None;
    }
    let f = n.as_f64()?;
    if f.fract() == 0.0 && (0.0..=MAX_SAFE as f64).contains(&f) {
        Some(f as u64)
    } else {
        None
    }
}

/// A raw JSON number text (already read by the scanner) that is a
/// non-negative safe integer, as `JSON.parse` reads it: `3`, `3.0`, `3e0`.
pub fn seq_of_text(raw: &str) -> Option<u64> {
    const MAX_SAFE: u64 = (1u64 << 53) - 1;
    let raw = raw.trim();
    if !raw.is_empty() && raw.len() <= 15 && raw.bytes().all(|b| b.is_ascii_digit()) {
        // Plain digits (what JSON.stringify writes for a seq or a time).
        return raw
            .parse::<u64>()
            .ok()
            .filter(|_| raw == "0" || !raw.starts_with('0'));
    }
    if !raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        return None;
    }
    let f: f64 = raw.parse().ok()?;
    (f.fract() == 0.0 && (0.0..=MAX_SAFE as f64).contains(&f)).then_some(f as u64)
}

/// A raw JSON text is the empty array (`[]`, any white space inside).
pub fn raw_is_empty_array(raw: &RawValue) -> bool {
    let t = raw.get().trim();
    t.starts_with('[') && t.ends_with(']') && t[1..t.len() - 1].trim().is_empty()
}

/// The elements of a raw JSON array as text, without the brackets
/// (`[a, b]` -> `a, b`), or `None` when the text is not an array.
pub fn raw_array_inner(raw: &RawValue) -> Option<&str> {
    let t = raw.get().trim();
    if t.len() >= 2 && t.starts_with('[') && t.ends_with(']') {
        Some(t[1..t.len() - 1].trim())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lossless_text_accepts_ordinary_json() {
        assert_eq!(
            check_lossless_text(r#"{"a":[1,2.5,"x",null,true,{}]}"#),
            Ok(())
        );
        assert_eq!(check_lossless_text("0"), Ok(()));
    }

    #[test]
    fn lossless_text_rejects_negative_zero_and_overflow() {
        assert_eq!(check_lossless_text("-0"), Err(TextDefect::NotLossless));
        assert_eq!(
            check_lossless_text(r#"{"a":[-0.0]}"#),
            Err(TextDefect::NotLossless)
        );
        assert!(check_lossless_text("1e400").is_err());
    }

    #[test]
    fn lossless_text_rejects_syntax_errors() {
        assert_eq!(check_lossless_text("{"), Err(TextDefect::Syntax));
        assert_eq!(check_lossless_text("{} x"), Err(TextDefect::Syntax));
        assert_eq!(check_lossless_text("NaN"), Err(TextDefect::Syntax));
    }

    #[test]
    fn canonical_equality_ignores_key_order_only() {
        assert!(canonical_eq(
            &json!({"a":1,"b":[1,2]}),
            &json!({"b":[1,2],"a":1})
        ));
        assert!(!canonical_eq(&json!([1, 2]), &json!([2, 1])));
        assert!(canonical_eq(&json!(1), &json!(1.0)));
        assert!(!canonical_eq(&json!({"a":1}), &json!({"a":1,"b":null})));
    }

    #[test]
    fn canonical_text_equality_matches_canonical_eq_and_reads_what_serde_cannot() {
        let pairs = [
            (r#"{"a":1,"b":[1,2]}"#, r#"{ "b": [1, 2], "a": 1.0 }"#, true),
            (r#"[1,2]"#, r#"[2,1]"#, false),
            (r#"{"a":1}"#, r#"{"a":1,"b":null}"#, false),
            (r#"{"a":"x"}"#, r#"{"\u0061":"\u0078"}"#, true),
            (r#"{"a":1,"a":2}"#, r#"{"a":2}"#, true),
            (r#"1e2"#, r#"100"#, true),
            (r#""x""#, r#"1"#, false),
        ];
        for (a, b, want) in pairs {
            assert_eq!(canonical_eq_text(a, b), want, "{a} vs {b}");
            let (x, y): (Value, Value) = (
                serde_json::from_str(a).unwrap(),
                serde_json::from_str(b).unwrap(),
            );
            assert_eq!(canonical_eq(&x, &y), want, "{a} vs {b}");
        }
        // Lone surrogates and nesting beyond serde's 128 levels.
        assert!(canonical_eq_text(
            r#"{"s":"\ud800","t":1}"#,
            r#"{"t":1,"s":"\uD800"}"#
        ));
        assert!(!canonical_eq_text(r#""\ud800""#, r#""\udc00""#));
        let deep = |leaf: &str| format!("{}{leaf}{}", "{\"k\":[".repeat(300), "]}".repeat(300));
        assert!(canonical_eq_text(&deep("1"), &deep("1.0")));
        assert!(!canonical_eq_text(&deep("1"), &deep("2")));
    }

    #[test]
    fn seqs_are_non_negative_safe_integers() {
        assert_eq!(as_seq(&json!(3)), Some(3));
        assert_eq!(as_seq(&json!(3.0)), Some(3));
        assert_eq!(as_seq(&json!(-1)), None);
        assert_eq!(as_seq(&json!(1.5)), None);
        assert_eq!(as_seq(&json!(9007199254740992u64)), None);
        assert_eq!(as_seq(&json!("1")), None);
    }

    #[test]
    fn raw_array_helpers() {
        let raw: Box<RawValue> = serde_json::from_str("[ ]").unwrap();
        assert!(raw_is_empty_array(&raw));
        let raw: Box<RawValue> = serde_json::from_str("[1, 2]").unwrap();
        assert!(!raw_is_empty_array(&raw));
        assert_eq!(raw_array_inner(&raw), Some("1, 2"));
    }
}
