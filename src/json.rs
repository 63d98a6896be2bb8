//! The small JSON helpers the rest of the core shares, over texts the
//! scanner (`scan`, the one reader: syntax and the lossless rules of SPEC 2)
//! has read: quoting, JavaScript's number rules for seqs, and equality of
//! two texts as JSON. (JavaScript values are snapshotted on the JS side,
//! the only side that sees getters, prototypes and sparse arrays.)

/// `JSON.stringify(s)` for a string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\0'..='\u{1f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether two JSON texts the scanner read are equal as JSON ("canonical
/// JSON" equality), without building trees: object key order does not matter (the last of duplicate keys
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_equality_ignores_key_order_and_reads_what_serde_cannot() {
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
        assert_eq!(seq_of_text("3"), Some(3));
        assert_eq!(seq_of_text("3.0"), Some(3));
        assert_eq!(seq_of_text("3e0"), Some(3));
        assert_eq!(seq_of_text("-1"), None);
        assert_eq!(seq_of_text("1.5"), None);
        assert_eq!(seq_of_text("9007199254740992"), None);
        assert_eq!(seq_of_text("\"1\""), None);
    }

    #[test]
    fn quotes_as_json_stringify_does() {
        for s in [
            "",
            "plain",
            "a\"b\\c",
            "\n\r\t\u{8}\u{c}\u{1}\u{1f} \u{7f}",
            "é\u{2028}😀",
        ] {
            assert_eq!(quote(s), serde_json::to_string(s).unwrap(), "{s:?}");
        }
        assert_eq!(quote("\u{1}"), r#""\u0001""#);
    }
}
