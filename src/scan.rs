//! A validating single-pass JSON scanner for event lines. It checks syntax
//! and the lossless-number rule (no `-0`, nothing `JSON.parse` turns into
//! `Infinity`) in one read, and returns the raw text of the envelope's fields
//! and of the payload's top-level fields, so resuming a log never builds a
//! tree for payloads nobody reads.

use crate::json::TextDefect;

/// Deeper nesting than this is rejected (it also bounds the stack).
const MAX_DEPTH: usize = 512;

/// Raw field texts of one event line.
#[derive(Debug, Default, Clone)]
pub struct Fields<'a> {
    pub ty: Option<&'a str>,
    pub seq: Option<&'a str>,
    pub time: Option<&'a str>,
    pub data: Option<&'a str>,
    pub surface_op: Option<&'a str>,
    pub source_event_seqs: Option<&'a str>,
    /// A key other than the six envelope keys, or one of them twice.
    pub foreign_key: bool,
    /// The payload's top-level fields, when the payload is an object.
    pub data_fields: Vec<(&'a str, &'a str)>,
    /// The whole line is one JSON object.
    pub is_object: bool,
}

struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
}

type Scan<T> = Result<T, TextDefect>;

#[inline]
fn syntax<T>() -> Scan<T> {
    Err(TextDefect::Syntax)
}

impl<'a> Scanner<'a> {
    #[inline]
    fn ws(&mut self) {
        while let Some(&c) = self.b.get(self.pos) {
            if c == b' ' || c == b'\n' || c == b'\t' || c == b'\r' {
                self.pos += 1;
            } else {
                break;
            }
        }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn expect(&mut self, c: u8) -> Scan<()> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            syntax()
        }
    }

    /// A string starting at `pos` (on the opening quote); returns the text
    /// between the quotes (escapes left as written).
    fn string(&mut self) -> Scan<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        loop {
            self.skip_plain_string_bytes();
            let Some(&c) = self.b.get(self.pos) else {
                return syntax();
            };
            match c {
                b'"' => {
                    let s = &self.text[start..self.pos];
                    self.pos += 1;
                    return Ok(s);
                }
                b'\\' => {
                    let Some(&e) = self.b.get(self.pos + 1) else {
                        return syntax();
                    };
                    match e {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.pos += 2,
                        b'u' => {
                            let hex = self.b.get(self.pos + 2..self.pos + 6);
                            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                                return syntax();
                            }
                            self.pos += 6;
                        }
                        _ => return syntax(),
                    }
                }
                0..=0x1f => return syntax(),
                _ => self.pos += 1,
            }
        }
    }

    /// Skip string bytes that are none of `"`, `\\` or a control byte,
    /// 16 at a time (SSE2, part of every x86-64) or 8 at a time elsewhere.
    #[inline]
    fn skip_plain_string_bytes(&mut self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            while self.pos + 16 <= self.b.len() {
                // SAFETY: SSE2 is baseline on x86_64, and the 16 bytes read
                // are in bounds (checked above); loadu has no alignment need.
                let mask = unsafe {
                    let chunk = _mm_loadu_si128(self.b.as_ptr().add(self.pos) as *const __m128i);
                    let quote = _mm_cmpeq_epi8(chunk, _mm_set1_epi8(b'"' as i8));
                    let slash = _mm_cmpeq_epi8(chunk, _mm_set1_epi8(b'\\' as i8));
                    // Bytes < 0x20: min(chunk, 0x1f) == chunk, unsigned.
                    let control = _mm_cmpeq_epi8(_mm_min_epu8(chunk, _mm_set1_epi8(0x1f)), chunk);
                    _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, slash), control))
                };
                if mask != 0 {
                    self.pos += mask.trailing_zeros() as usize;
                    return;
                }
                self.pos += 16;
            }
        }
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        #[inline]
        fn has_zero(v: u64) -> bool {
            (v.wrapping_sub(ONES) & !v & HIGH) != 0
        }
        while let Some(chunk) = self.b.get(self.pos..self.pos + 8) {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            let x = u64::from_le_bytes(word);
            let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
            if control != 0
                || has_zero(x ^ (ONES * b'"' as u64))
                || has_zero(x ^ (ONES * b'\\' as u64))
            {
                return;
            }
            self.pos += 8;
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Scan<()> {
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.pos += 1;
        }
        let int_start = self.pos;
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return syntax(),
        }
        let mut all_zero = self.b[int_start..self.pos].iter().all(|&c| c == b'0');
        let mut needs_range_check = self.pos - int_start > 15;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let frac_start = self.pos;
            if self.digits() == 0 {
                return syntax();
            }
            all_zero &= self.b[frac_start..self.pos].iter().all(|&c| c == b'0');
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return syntax();
            }
            needs_range_check = true;
        }
        if negative && all_zero {
            return Err(TextDefect::NotLossless);
        }
        if needs_range_check {
            let v: f64 = self.text[start..self.pos]
                .parse()
                .map_err(|_| TextDefect::Syntax)?;
            if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
                return Err(TextDefect::NotLossless);
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &[u8]) -> Scan<()> {
        if self.b.get(self.pos..self.pos + word.len()) == Some(word) {
            self.pos += word.len();
            Ok(())
        } else {
            syntax()
        }
    }

    /// Any value; `fields` (when given and the value is an object) receives
    /// its top-level key/value texts.
    fn value(
        &mut self,
        depth: usize,
        mut fields: Option<&mut Vec<(&'a str, &'a str)>>,
    ) -> Scan<&'a str> {
        if depth > MAX_DEPTH {
            return syntax();
        }
        self.ws();
        let start = self.pos;
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                self.ws();
                if self.peek() == Some(b'}') {
                    self.pos += 1;
                } else {
                    loop {
                        self.ws();
                        let key = self.string()?;
                        self.ws();
                        self.expect(b':')?;
                        let v = self.value(depth + 1, None)?;
                        if let Some(f) = fields.as_deref_mut() {
                            f.push((key, v));
                        }
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b'}') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return syntax(),
                        }
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                self.ws();
                if self.peek() == Some(b']') {
                    self.pos += 1;
                } else {
                    loop {
                        self.value(depth + 1, None)?;
                        self.ws();
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b']') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return syntax(),
                        }
                    }
                }
            }
            Some(b'"') => {
                self.string()?;
            }
            Some(b't') => self.literal(b"true")?,
            Some(b'f') => self.literal(b"false")?,
            Some(b'n') => self.literal(b"null")?,
            Some(b'-' | b'0'..=b'9') => self.number()?,
            _ => return syntax(),
        }
        Ok(&self.text[start..self.pos])
    }
}

/// Key text (between quotes) equal to `name`; keys with escapes are decoded.
fn key_is(raw: &str, name: &str) -> bool {
    if raw.as_bytes().contains(&b'\\') {
        serde_json::from_str::<String>(&format!("\"{raw}\"")).is_ok_and(|k| k == name)
    } else {
        raw == name
    }
}

/// Validate one event line and split out its fields.
pub fn scan_event(line: &str) -> Scan<Fields<'_>> {
    let mut s = Scanner {
        text: line,
        b: line.as_bytes(),
        pos: 0,
    };
    s.ws();
    let mut out = Fields::default();
    if s.peek() != Some(b'{') {
        s.value(0, None)?;
        s.ws();
        return if s.pos == s.b.len() {
            Ok(out)
        } else {
            syntax()
        };
    }
    out.is_object = true;
    s.pos += 1;
    s.ws();
    if s.peek() == Some(b'}') {
        s.pos += 1;
    } else {
        loop {
            s.ws();
            let key = s.string()?;
            s.ws();
            s.expect(b':')?;
            let slot = match envelope_key(key) {
                Some(EnvelopeKey::Type) => &mut out.ty,
                Some(EnvelopeKey::Seq) => &mut out.seq,
                Some(EnvelopeKey::Time) => &mut out.time,
                Some(EnvelopeKey::Data) => &mut out.data,
                Some(EnvelopeKey::SurfaceOp) => &mut out.surface_op,
                Some(EnvelopeKey::SourceEventSeqs) => &mut out.source_event_seqs,
                None => {
                    out.foreign_key = true;
                    s.value(1, None)?;
                    s.ws();
                    match s.peek() {
                        Some(b',') => {
                            s.pos += 1;
                            continue;
                        }
                        Some(b'}') => {
                            s.pos += 1;
                            break;
                        }
                        _ => return syntax(),
                    }
                }
            };
            if slot.is_some() {
                out.foreign_key = true;
            }
            let is_data = matches!(envelope_key(key), Some(EnvelopeKey::Data));
            // Payload fields are needed only for the types whose payload the
            // seed rules read (or when the type is not known yet).
            let want_fields = is_data && out.ty.is_none_or(payload_fields_wanted);
            let v = if want_fields {
                let mut data_fields = Vec::new();
                let v = s.value(1, Some(&mut data_fields))?;
                out.data_fields = data_fields;
                v
            } else {
                s.value(1, None)?
            };
            match envelope_key(key) {
                Some(EnvelopeKey::Type) => out.ty = Some(v),
                Some(EnvelopeKey::Seq) => out.seq = Some(v),
                Some(EnvelopeKey::Time) => out.time = Some(v),
                Some(EnvelopeKey::Data) => out.data = Some(v),
                Some(EnvelopeKey::SurfaceOp) => out.surface_op = Some(v),
                Some(EnvelopeKey::SourceEventSeqs) => out.source_event_seqs = Some(v),
                None => {}
            }
            s.ws();
            match s.peek() {
                Some(b',') => s.pos += 1,
                Some(b'}') => {
                    s.pos += 1;
                    break;
                }
                _ => return syntax(),
            }
        }
    }
    s.ws();
    if s.pos != s.b.len() {
        return syntax();
    }
    // A payload read before its type: read its fields now if the type needs them.
    if out.data_fields.is_empty() && out.ty.is_some_and(payload_fields_wanted) {
        if let Some(data) = out.data {
            let mut again = Scanner {
                text: data,
                b: data.as_bytes(),
                pos: 0,
            };
            let mut fields = Vec::new();
            again.value(1, Some(&mut fields))?;
            out.data_fields = fields;
        }
    }
    Ok(out)
}

#[derive(Clone, Copy)]
enum EnvelopeKey {
    Type,
    Seq,
    Time,
    Data,
    SurfaceOp,
    SourceEventSeqs,
}

fn envelope_key(raw: &str) -> Option<EnvelopeKey> {
    match raw {
        "type" => Some(EnvelopeKey::Type),
        "seq" => Some(EnvelopeKey::Seq),
        "time" => Some(EnvelopeKey::Time),
        "data" => Some(EnvelopeKey::Data),
        "surfaceOp" => Some(EnvelopeKey::SurfaceOp),
        "sourceEventSeqs" => Some(EnvelopeKey::SourceEventSeqs),
        _ if raw.as_bytes().contains(&b'\\') => {
            let decoded: String = serde_json::from_str(&format!("\"{raw}\"")).ok()?;
            if decoded.contains('\\') {
                return None;
            }
            envelope_key(&decoded)
        }
        _ => None,
    }
}

/// The raw type literals whose payload fields the seed rules read.
fn payload_fields_wanted(raw_type: &str) -> bool {
    matches!(raw_type, "\"request/header\"" | "\"assistant/message\"") || raw_type.contains('\\')
}

/// The raw text of payload field `name`.
pub fn data_field<'a>(fields: &Fields<'a>, name: &str) -> Option<&'a str> {
    fields
        .data_fields
        .iter()
        .rev()
        .find(|(k, _)| key_is(k, name))
        .map(|&(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_envelope_and_payload_fields() {
        let f = scan_event(r#"{"type":"assistant/message","seq":3,"time":4,"data":{"x":[1,{"y":"z"}],"w":null},"surfaceOp":"append"}"#)
            .unwrap();
        assert_eq!(f.ty, Some(r#""assistant/message""#));
        assert_eq!(f.seq, Some("3"));
        assert_eq!(f.data, Some(r#"{"x":[1,{"y":"z"}],"w":null}"#));
        assert_eq!(f.surface_op, Some(r#""append""#));
        assert_eq!(data_field(&f, "x"), Some(r#"[1,{"y":"z"}]"#));
        assert!(!f.foreign_key);
    }

    #[test]
    fn flags_foreign_and_duplicate_keys() {
        assert!(scan_event(r#"{"type":"a","extra":1}"#).unwrap().foreign_key);
        assert!(
            scan_event(r#"{"type":"a","type":"b"}"#)
                .unwrap()
                .foreign_key
        );
        assert!(!scan_event("[1]").unwrap().is_object);
    }

    #[test]
    fn agrees_with_serde_on_syntax() {
        for bad in [
            "{",
            "{\"a\":}",
            "{\"a\":1,}",
            "[1,]",
            "\"\\x\"",
            "01",
            "1.",
            "1e",
            "-",
            "tru",
            "{} x",
            "\"a\u{1}\"",
            "{\"a\" 1}",
            "NaN",
        ] {
            assert_eq!(scan_event(bad).err(), Some(TextDefect::Syntax), "{bad}");
            assert!(
                serde_json::from_str::<serde_json::Value>(bad).is_err(),
                "{bad}"
            );
        }
        for good in [
            "{}",
            "[]",
            "0",
            "-1.5e-3",
            "\"\\u00e9\\n\"",
            " { \"a\" : [ true , false , null ] } ",
        ] {
            assert!(scan_event(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn rejects_numbers_json_parse_cannot_keep() {
        for bad in ["-0", "-0.0", "-0e3", "[1e400]", "{\"a\":-1e999}"] {
            assert_eq!(
                scan_event(bad).err(),
                Some(TextDefect::NotLossless),
                "{bad}"
            );
        }
        for good in ["0", "0.0", "1e-400", "12345678901234567890", "-0.5"] {
            assert!(scan_event(good).is_ok(), "{good}");
        }
    }
}
