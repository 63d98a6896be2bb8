//! Differential fuzz test: mutated event lines are read by the scanner and by
//! `serde_json`, and the two must agree wherever both can read the input.
//!
//! The intended differences, each checked on its own terms:
//! - `-0` in any spelling: serde reads it as `-0.0`; the scanner reads the
//!   syntax and marks the line not lossless (`JSON.parse` gives `-0`, which
//!   does not survive `JSON.stringify`).
//! - numbers beyond `f64` (`1e400`): serde refuses them; the scanner reads
//!   the syntax and marks them not lossless (`JSON.parse` gives `±Infinity`).
//! - lone surrogate escapes (`"\ud800"`): serde's `Value` refuses them; the
//!   scanner accepts them (they are legal JSON, and `JSON.parse` keeps them).
//! - nesting: serde's `Value` stops at 128 levels; the scanner reads any
//!   depth without recursion and marks a payload deeper than `MAX_NESTING`
//!   not lossless.
//!
//! Duplicate keys are not a difference: both keep the last value at the
//! first key's position, as `JSON.parse` does. The scanner refuses a `-0`
//! even as the value of a key a later duplicate shadows (where
//! `JSON.parse` would drop it): no JavaScript writer produces duplicate
//! keys, and the rule stays one of spelling.
//!
//! Syntax is compared with serde's `IgnoredAny` reader (no depth limit, any
//! number, any `\u` escape), values with its `Value` reader.

use super::*;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

/// A small deterministic PRNG (xorshift64*), so a failure replays exactly.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "0.0",
    "-0.0",
    "-0e5",
    "-0E-5",
    "-0.000e+12",
    "1e400",
    "-1e400",
    "1e-400",
    "-1e-400",
    UNDERFLOW,
    "-0.000000000000000000001",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "-2.4703282292062327e-324",
    "-2.4703282292062328e-324",
    "5e-324",
    "-5e-324",
    "12345678901234567890123",
    "-1.5",
    "9007199254740993",
    "1E2",
    "0.1",
];

/// A negative number without an exponent that rounds to -0.
const UNDERFLOW: &str = "-0.00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001";

const STRINGS: &[&str] = &[
    r#""plain""#,
    r#""\ud800""#,
    r#""\udfff tail""#,
    r#""\ud83d\ude00""#,
    r#""\u00e9\n\t\"\\\/""#,
    "\"caf\u{e9} \u{1f600}\"",
    r#""\u0000""#,
];

const TOKENS: &[&str] = &[
    "-0",
    "1e400",
    UNDERFLOW,
    "\"\\ud800\"",
    "\"\\udc00\"",
    "{\"a\":1,\"a\":2}",
    "\"seq\":1,",
    "\"type\":\"turn/end\",",
    ",",
    ":",
    "[",
    "]",
    "{",
    "}",
    "\"",
    "\\",
    "null",
    "tru",
    " ",
    "\n",
];

/// A random JSON value as text, at most `depth` levels deep, in varied
/// spellings.
fn value(rng: &mut Rng, depth: usize) -> String {
    let ws = |rng: &mut Rng| if rng.below(6) == 0 { " " } else { "" };
    match rng.below(if depth == 0 { 5 } else { 8 }) {
        0 => rng.pick(NUMBERS).to_string(),
        1 => rng.pick(STRINGS).to_string(),
        2 => rng.pick(&["true", "false", "null"]).to_string(),
        3 => format!("{}", rng.next() % 100_000),
        4 => format!("-{}.{}", rng.below(1000), rng.below(1000)),
        5 | 6 => {
            let n = rng.below(4);
            let members: Vec<String> = (0..n)
                .map(|_| {
                    let key = rng.pick(&["a", "b", "\\ud800", "x\\u0079", "type", "seq"]);
                    format!("{}\"{key}\"{}:{}", ws(rng), ws(rng), value(rng, depth - 1))
                })
                .collect();
            format!("{{{}}}", members.join(","))
        }
        _ => {
            let n = rng.below(4);
            let items: Vec<String> = (0..n).map(|_| value(rng, depth - 1)).collect();
            format!("[{}{}]", ws(rng), items.join(","))
        }
    }
}

/// A random event line, in the envelope's key order or another.
fn event_line(rng: &mut Rng) -> String {
    let ty = rng.pick(&[
        "\"turn/end\"",
        "\"turn/start\"",
        "\"assistant/message\"",
        "\"request/header\"",
        "\"x/y\"",
        "\"turn\\/end\"",
    ]);
    let data = if rng.below(8) == 0 {
        let depth = *rng.pick(&[100, 127, 128, 129, 999, 1000, 1001, 1002, 5000]);
        format!("{{\"v\":{}}}", deep(rng, depth - 1))
    } else if rng.below(2) == 0 {
        format!(
            "{{\"provenance\":{{\"provider\":\"p\",\"model\":{}}},\"reason\":{},\"v\":{}}}",
            rng.pick(STRINGS),
            value(rng, 2),
            value(rng, 4)
        )
    } else {
        value(rng, 4)
    };
    let mut fields = vec![
        format!("\"type\":{ty}"),
        format!(
            "\"seq\":{}",
            rng.pick(&["3", "3.0", "3e0", "-0", "1e400", "\"3\""])
        ),
        "\"time\":1700000000000".to_string(),
        format!("\"data\":{data}"),
    ];
    if rng.below(3) == 0 {
        fields.push("\"surfaceOp\":\"append\"".to_string());
    }
    if rng.below(4) == 0 {
        let i = rng.below(fields.len());
        fields.swap(0, i);
    }
    format!("{{{}}}", fields.join(","))
}

/// Deep nesting around a value: `depth` arrays or objects.
fn deep(rng: &mut Rng, depth: usize) -> String {
    if rng.below(2) == 0 {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    } else {
        format!("{}1{}", "{\"k\":".repeat(depth), "}".repeat(depth))
    }
}

fn mutate(rng: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..=rng.below(3) {
        let at = rng.below(bytes.len() + 1);
        match rng.below(8) {
            0 if !bytes.is_empty() => {
                let i = at.min(bytes.len() - 1);
                bytes[i] ^= 1 << rng.below(8);
            }
            1 => bytes.truncate(at),
            2 | 3 => {
                let token = rng.pick(TOKENS).as_bytes();
                bytes.splice(at..at, token.iter().copied());
            }
            4 => {
                let depth = *rng.pick(&[100, 127, 128, 129, 999, 1000, 1001, 1002, 5000]);
                let text = deep(rng, depth);
                bytes.splice(at..at, text.into_bytes());
            }
            5 => {
                const BAD: [&[u8]; 4] =
                    [&[0xff], &[0xc0, 0x80], &[0xed, 0xa0, 0x80], &[0xe2, 0x82]];
                let bad = *rng.pick(&BAD);
                bytes.splice(at..at, bad.iter().copied());
            }
            6 if at < bytes.len() => {
                let end = (at + 1 + rng.below(8)).min(bytes.len());
                bytes.drain(at..end);
            }
            _ => {
                let value = value(rng, 2);
                bytes.splice(at..at, value.into_bytes());
            }
        }
    }
    bytes
}

/// The value the scanner's pieces make of a text it read (strings that
/// UTF-8 cannot hold are `None`; so are the trees holding them).
fn tree(raw: &str) -> Option<Value> {
    let raw = raw.trim();
    Some(match raw.as_bytes().first()? {
        b'{' => {
            let mut map = Map::new();
            for (k, v) in object_members(raw)? {
                map.insert(string_value(&format!("\"{k}\""))?, tree(v)?);
            }
            Value::Object(map)
        }
        b'[' => Value::Array(
            array_items(raw)?
                .into_iter()
                .map(tree)
                .collect::<Option<_>>()?,
        ),
        b'"' => Value::String(string_value(raw)?),
        b't' => Value::Bool(true),
        b'f' => Value::Bool(false),
        b'n' => Value::Null,
        _ => Value::Number(serde_json::Number::from_f64(raw.parse().ok()?)?),
    })
}

/// JSON values equal as JavaScript sees them (numbers as doubles, the sign
/// of zero included; keys in order).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64(), y.as_f64());
            x == y && x.map(f64::is_sign_negative) == y.map(f64::is_sign_negative)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|((k, p), (l, q))| k == l && same(p, q))
        }
        _ => a == b,
    }
}

/// Whether any number in the text, a shadowed duplicate key's value
/// included, is `-0` as serde reads it.
fn has_negative_zero(input: &[u8]) -> bool {
    use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
    struct Walk<'f>(&'f std::cell::Cell<bool>);
    impl<'de> DeserializeSeed<'de> for Walk<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> Visitor<'de> for Walk<'_> {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, v: f64) -> Result<(), E> {
            if v == 0.0 && v.is_sign_negative() {
                self.0.set(true);
            }
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            while seq.next_element_seed(Walk(self.0))?.is_some() {}
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while map.next_key::<IgnoredAny>()?.is_some() {
                map.next_value_seed(Walk(self.0))?;
            }
            Ok(())
        }
    }
    let found = std::cell::Cell::new(false);
    let mut de = serde_json::Deserializer::from_slice(input);
    let _ = Walk(&found).deserialize(&mut de);
    found.get()
}

/// The deepest nesting of a JSON text, counted without the scanner.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[derive(Default, Debug)]
struct Tally {
    both_read: usize,
    both_refused: usize,
    negative_zero: usize,
    out_of_range: usize,
    lone_surrogate: usize,
    too_deep_for_serde: usize,
    beyond_limit: usize,
}

/// Compare the two readers on one input; panics naming the input on a
/// disagreement.
fn compare(input: &[u8], tally: &mut Tally) {
    let shown = String::from_utf8_lossy(&input[..input.len().min(300)]).into_owned();
    let scanned = std::str::from_utf8(input)
        .ok()
        .map(|t| (t, read_event_line(t)));
    let syntax_ok = serde_json::from_slice::<IgnoredAny>(input).is_ok();
    let full = serde_json::from_slice::<Value>(input);
    let Some((text, scanned)) = scanned else {
        // Invalid UTF-8: the scanner never sees it (the stores treat it as
        // an unreadable record); serde refuses it too.
        assert!(full.is_err(), "serde read invalid UTF-8: {shown}");
        tally.both_refused += 1;
        return;
    };
    assert_eq!(
        scanned.is_ok(),
        syntax_ok,
        "syntax verdicts differ on {shown}"
    );
    // The standalone reader agrees on syntax.
    assert_eq!(
        check_value(text).is_ok() || check_value(text) == Err(TextDefect::NotLossless),
        syntax_ok,
        "{shown}"
    );
    let Ok((fields, lossless)) = scanned else {
        tally.both_refused += 1;
        return;
    };
    match full {
        Ok(v) => {
            tally.both_read += 1;
            let zero = has_negative_zero(input);
            if zero {
                tally.negative_zero += 1;
            }
            // serde reads at most 128 levels: never beyond the limit.
            assert_eq!(lossless, !zero, "lossless verdict on {shown}");
            let mine = tree(text).expect("a tree of a text serde reads");
            assert!(same(&mine, &v), "values differ on {shown}");
            if let Value::Object(map) = &v {
                let pairs = [
                    ("type", fields.ty),
                    ("seq", fields.seq),
                    ("time", fields.time),
                    ("data", fields.data),
                    ("surfaceOp", fields.surface_op),
                    ("sourceEventSeqs", fields.source_event_seqs),
                ];
                for (key, raw) in pairs {
                    match (map.get(key), raw) {
                        (Some(want), Some(raw)) => {
                            let got = tree(raw).expect("a field serde reads");
                            assert!(same(&got, want), "field {key} differs on {shown}");
                        }
                        (None, None) => {}
                        _ => panic!("field {key} found by one reader only on {shown}"),
                    }
                }
                if let Some(Value::Object(data)) = map.get("data") {
                    for (k, want) in data {
                        if let Some(raw) = data_field(&fields, k) {
                            assert!(
                                same(&tree(raw).expect("a field"), want),
                                "data.{k} on {shown}"
                            );
                        }
                    }
                }
            }
        }
        Err(e) => {
            let message = e.to_string();
            if message.contains("recursion limit") {
                tally.too_deep_for_serde += 1;
                if nesting(text) > MAX_NESTING + 1 {
                    tally.beyond_limit += 1;
                    assert!(
                        !lossless,
                        "a line nested {} levels read as lossless: {shown}",
                        nesting(text)
                    );
                }
            } else if message.contains("number out of range") {
                tally.out_of_range += 1;
                assert!(
                    !lossless,
                    "an out-of-range number read as lossless: {shown}"
                );
            } else if message.contains("surrogate") || message.contains("hex escape") {
                tally.lone_surrogate += 1;
            } else {
                panic!("serde refused ({message}) what the scanner read: {shown}");
            }
        }
    }
}

#[test]
fn the_scanner_and_serde_agree_on_mutated_event_lines() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut tally = Tally::default();
    for _ in 0..20_000 {
        let line = event_line(&mut rng);
        let input = if rng.below(5) == 0 {
            line.into_bytes()
        } else {
            mutate(&mut rng, line.into_bytes())
        };
        compare(&input, &mut tally);
    }
    // Every class of input was seen, so the comparison covered it.
    assert!(tally.both_read > 1000, "{tally:?}");
    assert!(tally.both_refused > 1000, "{tally:?}");
    for n in [
        tally.negative_zero,
        tally.out_of_range,
        tally.lone_surrogate,
        tally.too_deep_for_serde,
        tally.beyond_limit,
    ] {
        assert!(n > 20, "{tally:?}");
    }
}

#[test]
fn nesting_is_limited_at_the_payload_and_read_without_recursion() {
    let line = |depth: usize| {
        format!(
            "{{\"type\":\"x\",\"seq\":0,\"time\":1,\"data\":{}}}",
            format_args!("{}1{}", "[".repeat(depth), "]".repeat(depth))
        )
    };
    assert!(scan_event(&line(MAX_NESTING)).is_ok());
    assert_eq!(
        scan_event(&line(MAX_NESTING + 1)).err(),
        Some(TextDefect::NotLossless)
    );
    // A million levels: read to the end without overflowing the stack.
    assert_eq!(
        scan_event(&line(1_000_000)).err(),
        Some(TextDefect::NotLossless)
    );
    let torn = &line(1_000_000)[..2_000_000];
    assert_eq!(scan_event(torn).err(), Some(TextDefect::Syntax));
    // Mixed arrays and objects past the inline 64 levels of the stack:
    // every closer must match its opener.
    let (mut open, mut close) = (String::new(), Vec::new());
    for i in 0..300 {
        if i % 3 == 0 {
            open.push_str("{\"k\":");
            close.push("}");
        } else {
            open.push('[');
            close.push("]");
        }
    }
    close.reverse();
    let mixed = |close: &[&str]| format!("{open}1{}", close.concat());
    assert_eq!(check_value(&mixed(&close)), Ok(()));
    for at in [0, 50, 150, 299] {
        let mut wrong = close.clone();
        wrong[at] = if wrong[at] == "]" { "}" } else { "]" };
        assert_eq!(check_value(&mixed(&wrong)), Err(TextDefect::Syntax), "{at}");
    }
    let payload = |depth: usize| {
        format!("{}{}", "{\"a\":".repeat(depth), "}".repeat(depth)).replace("{\"a\":}", "{}")
    };
    assert_eq!(check_value(&payload(MAX_NESTING)), Ok(()));
    assert_eq!(
        check_value(&payload(MAX_NESTING + 1)),
        Err(TextDefect::NotLossless)
    );
}
