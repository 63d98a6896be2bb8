//! Long strings of payloads, decoded off the JS thread.
//!
//! `JSON.parse` of a payload that carries a 10 MB tool output holds the JS
//! thread ~17 ms, and making a JS string of its text as long again. So a
//! payload handed over from a thread (a `fromJsonl` batch, a store `open`'s
//! first derive) crosses as a *skeleton*, each string of at least `LIFT_MIN`
//! bytes replaced by `""`, plus those strings' code units (decoded here) and
//! the path to each one's place. JS parses the skeleton and puts each string
//! in its place before freezing (`takeBatch` in lib/core/session.js): the
//! value `JSON.parse` of the text gives, property order included. Of equal
//! keys in one object `JSON.parse` keeps the last, so only a string under
//! the last of its key is lifted, and a path only enters a key's last member.

use crate::scan::{array_items, object_members, string_contents, utf16_units, Units};
use std::sync::Arc;

/// Strings shorter than this (in bytes of JSON text) stay in the skeleton.
pub const LIFT_MIN: usize = 64 << 10;

/// One step of a path into a payload: a key (its UTF-16 units) or an index.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Key(Vec<u16>),
    Index(u32),
}

/// A lifted string: which payload of its batch (`at`), where in it, and
/// its units (shared with the log that keeps them: `texts.rs::Lifted`).
#[derive(Debug, PartialEq)]
pub struct Hole {
    pub at: u32,
    pub path: Vec<Step>,
    pub units: Arc<Units>,
}

/// Where a lifted string's text (between its quotes) lies in its payload
/// text, and its units; only for a string whose text `escape_units` gives
/// back exactly (the log may keep it as units then).
pub type Place = (usize, usize, Arc<Units>);

/// What a lift does with the places of long strings (`Place`).
pub enum Lifting<'a> {
    /// Those of the strings it decodes go here (the log will keep them).
    Keep(&'a mut Vec<Place>),
    /// The log keeps these as units already: a string found at one of
    /// them crosses as those units, undecoded.
    Kept(&'a [Place]),
}

/// Append payload text `data` to `json`, each string of at least `min`
/// bytes in it replaced by `""` and pushed to `holes` as payload `at`'s,
/// its place kept or its units reused as `lifting` says.
pub fn push_lifted(
    json: &mut String,
    holes: &mut Vec<Hole>,
    mut lifting: Lifting<'_>,
    at: u32,
    data: &str,
    min: usize,
) {
    if data.len() < min {
        json.push_str(data);
        return;
    }
    let mut cuts = Vec::new();
    let value = data.trim_matches([' ', '\t', '\n', '\r']);
    let kept = match &lifting {
        Lifting::Kept(kept) => kept,
        Lifting::Keep(_) => &[][..],
    };
    walk(data, value, min, kept, &mut Vec::new(), &mut cuts);
    let mut last = 0;
    for (start, end, path, units, exact) in cuts {
        json.push_str(&data[last..start]);
        json.push_str("\"\"");
        last = end;
        if let (true, Lifting::Keep(places)) = (exact, &mut lifting) {
            places.push((start + 1, end - start - 2, units.clone()));
        }
        holes.push(Hole { at, path, units });
    }
    json.push_str(&data[last..]);
}

/// Where a lifted string was in the payload text, its path, its units and
/// whether its text is exact (see `Place`).
type Cut = (usize, usize, Vec<Step>, Arc<Units>, bool);

/// Find the strings of at least `min` bytes in `value` (a value text inside
/// `data`, which the log accepted), in text order; one at a `kept` place
/// takes its units, the others are decoded.
fn walk(
    data: &str,
    value: &str,
    min: usize,
    kept: &[Place],
    path: &mut Vec<Step>,
    cuts: &mut Vec<Cut>,
) {
    let start = value.as_ptr() as usize - data.as_ptr() as usize;
    match value.as_bytes().first() {
        Some(b'"') => {
            let (at, len) = (start + 1, value.len().saturating_sub(2));
            if let Some((_, _, units)) = kept.iter().find(|k| (k.0, k.1) == (at, len)) {
                cuts.push((
                    start,
                    start + value.len(),
                    path.clone(),
                    units.clone(),
                    true,
                ));
                return;
            }
            let inner = value.get(1..value.len() - 1).unwrap_or_default();
            if let Some((units, exact)) = string_contents(inner) {
                let units = Arc::new(units);
                cuts.push((start, start + value.len(), path.clone(), units, exact));
            }
        }
        Some(b'{') => {
            let Some(members) = object_members(value) else {
                return;
            };
            let keys: Vec<Option<Vec<u16>>> = members.iter().map(|(k, _)| utf16_units(k)).collect();
            for (i, (_, v)) in members.iter().enumerate() {
                if v.len() < min {
                    continue;
                }
                let Some(key) = &keys[i] else {
                    continue;
                };
                if keys[i + 1..].iter().any(|k| k.as_ref() == Some(key)) {
                    continue;
                }
                path.push(Step::Key(key.clone()));
                walk(data, v, min, kept, path, cuts);
                path.pop();
            }
        }
        Some(b'[') => {
            let Some(items) = array_items(value) else {
                return;
            };
            for (i, item) in items.iter().enumerate() {
                if item.len() >= min {
                    path.push(Step::Index(i as u32));
                    walk(data, item, min, kept, path, cuts);
                    path.pop();
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifted(data: &str, min: usize) -> (String, Vec<Hole>) {
        let mut json = String::new();
        let mut holes = Vec::new();
        push_lifted(&mut json, &mut holes, Lifting::Kept(&[]), 7, data, min);
        (json, holes)
    }

    fn key(s: &str) -> Step {
        Step::Key(s.encode_utf16().collect())
    }

    #[test]
    fn a_short_payload_crosses_as_it_is() {
        let data = r#"{"content":[{"type":"text","text":"hello"}]}"#;
        assert_eq!(lifted(data, 64), (data.to_string(), vec![]));
    }

    #[test]
    fn long_strings_leave_an_empty_string_and_their_path() {
        let long = "x".repeat(20);
        let data = format!(
            r#"{{"content":[{{"type":"text","text":"{long}\n\u00e9"}}],"other":"{long}","short":"ab"}}"#
        );
        let (json, holes) = lifted(&data, 16);
        assert_eq!(
            json,
            r#"{"content":[{"type":"text","text":""}],"other":"","short":"ab"}"#
        );
        let mut first = long.clone().into_bytes();
        first.extend_from_slice(&[b'\n', 0xe9]);
        assert_eq!(
            holes,
            vec![
                Hole {
                    at: 7,
                    path: vec![key("content"), Step::Index(0), key("text")],
                    units: Arc::new(Units::Latin1(first)),
                },
                Hole {
                    at: 7,
                    path: vec![key("other")],
                    units: Arc::new(Units::Latin1(long.into_bytes())),
                },
            ]
        );
    }

    #[test]
    fn non_latin1_strings_cross_as_utf16_lone_surrogates_kept() {
        let data = format!(r#"{{"t":"✓{}\ud800"}}"#, "y".repeat(20));
        let (json, holes) = lifted(&data, 16);
        assert_eq!(json, r#"{"t":""}"#);
        let mut units: Vec<u16> = format!("✓{}", "y".repeat(20)).encode_utf16().collect();
        units.push(0xd800);
        assert_eq!(*holes[0].units, Units::Utf16(units));
    }

    #[test]
    fn only_the_last_of_equal_keys_is_lifted_or_entered() {
        let long = "z".repeat(20);
        // "\u0061" is "a": JSON.parse keeps the last "a", so the first stays.
        let data = format!(r#"{{"a":"{long}","b":{{"c":"{long}"}},"\u0061":"{long}1","b":1}}"#);
        let (json, holes) = lifted(&data, 16);
        assert_eq!(
            json,
            format!(r#"{{"a":"{long}","b":{{"c":"{long}"}},"\u0061":"","b":1}}"#)
        );
        assert_eq!(holes.len(), 1);
        assert_eq!(holes[0].path, vec![key("a")]);
    }
}
