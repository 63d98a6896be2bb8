//! The one reader of stored and appended JSON: a validating single-pass
//! scanner. It checks syntax, the lossless-number rule (no `-0` in any
//! spelling, nothing `JSON.parse` turns into `±Infinity`) and the nesting
//! limit in one read, and returns the raw text of the envelope's fields and
//! of the payload's top-level fields, so resuming a log never builds a tree
//! for payloads nobody reads. Nesting is tracked on an explicit stack, so
//! any depth is read without recursion; syntax is judged before the
//! lossless rules (a torn line is unparsable even if it holds a `-0`).

/// Why a JSON text is not a lossless value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextDefect {
    /// Not JSON at all (or trailing garbage).
    Syntax,
    /// JSON that `JSON.parse` would turn into `-0` or a non-finite number,
    /// or that nests deeper than `MAX_NESTING`.
    NotLossless,
}

/// How deeply a payload (an event's `data`, a header) may nest arrays and
/// objects: `[]` nests 1 level, `[[1]]` 2. Deeper is not lossless JSON for
/// this package, on write (`copyJson` in index.js) as on read. Node 20's
/// `JSON.stringify`, which writes every event, overflows its stack at about
/// 4,200 levels with the stack empty, so the limit leaves room for callers'
/// frames.
pub const MAX_NESTING: usize = 1000;

/// Raw field texts of one event line.
#[derive(Debug, Default, Clone)]
pub struct Fields<'a> {
    pub ty: Option<&'a str>,
    pub seq: Option<&'a str>,
    pub time: Option<&'a str>,
    pub data: Option<&'a str>,
    pub surface_op: Option<&'a str>,
    pub source_event_seqs: Option<&'a str>,
    /// The `ignorable` key's value (PUB 1: envelope keys of the published
    /// line; a foreign key to v0).
    pub ignorable: Option<&'a str>,
    /// A key other than the six envelope keys and `ignorable`, or one of
    /// them twice.
    pub foreign_key: bool,
    /// The payload's top-level fields, when the payload is an object.
    pub data_fields: Vec<(&'a str, &'a str)>,
    /// The whole line is one JSON object.
    pub is_object: bool,
}

/// The kinds of the containers open around the scanner (a bit per level,
/// set for an array), the first 64 levels without allocating.
#[derive(Default)]
struct Nest {
    len: usize,
    low: u64,
    high: Vec<u64>,
}

impl Nest {
    #[inline]
    fn push(&mut self, array: bool) {
        let i = self.len;
        if i < 64 {
            self.low = (self.low & !(1 << i)) | (u64::from(array) << i);
        } else {
            let (word, bit) = ((i - 64) / 64, (i - 64) % 64);
            if word == self.high.len() {
                self.high.push(0);
            }
            self.high[word] = (self.high[word] & !(1 << bit)) | (u64::from(array) << bit);
        }
        self.len += 1;
    }

    /// Whether the innermost open container is an array (`None`: none open).
    #[inline]
    fn top(&self) -> Option<bool> {
        let i = self.len.checked_sub(1)?;
        Some(if i < 64 {
            self.low >> i & 1 == 1
        } else {
            self.high[(i - 64) / 64] >> ((i - 64) % 64) & 1 == 1
        })
    }

    #[inline]
    fn pop(&mut self) {
        self.len -= 1;
    }
}

struct Scanner<'a> {
    text: &'a str,
    b: &'a [u8],
    pos: usize,
    /// Containers nesting deeper than this are not lossless.
    limit: usize,
    /// A number `JSON.parse` cannot keep, or nesting beyond `limit`, was read.
    lossy: bool,
}

type Scan<T> = Result<T, TextDefect>;

#[inline]
fn syntax<T>() -> Scan<T> {
    Err(TextDefect::Syntax)
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `text` that refuses nesting deeper than `limit`.
    fn new(text: &'a str, limit: usize) -> Scanner<'a> {
        Scanner {
            text,
            b: text.as_bytes(),
            pos: 0,
            limit,
            lossy: false,
        }
    }

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

    /// A number; marks it lossy when `JSON.parse` would read it as `-0` or
    /// `±Infinity`. Rust's `f64` parse rounds correctly, as V8's does, so
    /// both read every spelling as the same double.
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
        let int_len = self.pos - int_start;
        let mut all_zero = self.b[int_start..self.pos].iter().all(|&c| c == b'0');
        // Plain digits can overflow only when long, and a fraction (of a
        // negative number) can round to -0 only when long.
        let mut needs_range_check = int_len > 15;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            let frac_start = self.pos;
            let frac_len = self.digits();
            if frac_len == 0 {
                return syntax();
            }
            all_zero &= self.b[frac_start..self.pos].iter().all(|&c| c == b'0');
            needs_range_check |= negative && frac_len > 15;
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
            self.lossy = true;
        } else if needs_range_check {
            let v: f64 = self.text[start..self.pos]
                .parse()
                .map_err(|_| TextDefect::Syntax)?;
            if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
                self.lossy = true;
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

    /// `"key"` and the colon after it (white space around both).
    fn member_key(&mut self) -> Scan<&'a str> {
        self.ws();
        let key = self.string()?;
        self.ws();
        self.expect(b':')?;
        Ok(key)
    }

    /// A container opens at nesting `level`.
    #[inline]
    fn open(&mut self, level: usize) {
        if level > self.limit {
            self.lossy = true;
        }
    }

    /// Any value, inside `depth` containers, read without recursion.
    fn skip_value(&mut self, depth: usize) -> Scan<()> {
        let mut nest = Nest::default();
        loop {
            // A value starts here.
            self.ws();
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    let array = open == b'[';
                    self.pos += 1;
                    self.open(depth + nest.len + 1);
                    self.ws();
                    if self.peek() == Some(if array { b']' } else { b'}' }) {
                        self.pos += 1;
                    } else {
                        nest.push(array);
                        if !array {
                            self.member_key()?;
                        }
                        continue;
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
            // A value ended: close the containers it ends, or go on to the
            // next element or member.
            loop {
                let Some(array) = nest.top() else {
                    return Ok(());
                };
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        if !array {
                            self.member_key()?;
                        }
                        break;
                    }
                    Some(b']') if array => {
                        self.pos += 1;
                        nest.pop();
                    }
                    Some(b'}') if !array => {
                        self.pos += 1;
                        nest.pop();
                    }
                    _ => return syntax(),
                }
            }
        }
    }

    /// Any value inside `depth` containers; `fields` (when given and the
    /// value is an object) receives its top-level key/value texts.
    fn value(
        &mut self,
        depth: usize,
        fields: Option<&mut Vec<(&'a str, &'a str)>>,
    ) -> Scan<&'a str> {
        self.ws();
        let start = self.pos;
        match fields {
            Some(fields) if self.peek() == Some(b'{') => self.members(depth, fields)?,
            _ => self.skip_value(depth)?,
        }
        Ok(&self.text[start..self.pos])
    }

    /// An object (on its `{`) inside `depth` containers, its members' texts
    /// pushed to `fields`.
    fn members(&mut self, depth: usize, fields: &mut Vec<(&'a str, &'a str)>) -> Scan<()> {
        self.pos += 1;
        self.open(depth + 1);
        self.ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            let key = self.member_key()?;
            let v = self.value(depth + 1, None)?;
            fields.push((key, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return syntax(),
            }
        }
    }

    /// The rest is white space.
    fn end(&mut self) -> Scan<()> {
        self.ws();
        if self.pos == self.b.len() {
            Ok(())
        } else {
            syntax()
        }
    }
}

/// The members (raw key and value texts, in order) of `text`, a record
/// read with every rule (a session header): `Err` when it is not lossless
/// JSON nesting at most `MAX_NESTING` levels, `Ok(None)` when it is JSON
/// but not an object.
pub fn read_record(text: &str) -> Scan<Option<Vec<(&str, &str)>>> {
    let mut s = Scanner::new(text, MAX_NESTING);
    let mut fields = Vec::new();
    s.value(0, Some(&mut fields))?;
    s.end()?;
    if s.lossy {
        return Err(TextDefect::NotLossless);
    }
    Ok(text.trim_start().starts_with('{').then_some(fields))
}

/// Check that `text` is one JSON value (a payload) that `JSON.parse` reads
/// losslessly and that nests at most `MAX_NESTING` levels (the tests' view
/// of the rules every read applies).
#[cfg(test)]
pub fn check_value(text: &str) -> Scan<()> {
    read_record(text).map(drop)
}

/// The members (raw key and value texts, in order) of `text` when it is a
/// JSON object; `None` when it is another value or not JSON. For texts the
/// scanner already read: no limit is enforced here.
pub fn object_members(text: &str) -> Option<Vec<(&str, &str)>> {
    let mut s = Scanner::new(text, usize::MAX);
    s.ws();
    if s.peek() != Some(b'{') {
        return None;
    }
    let mut fields = Vec::new();
    s.members(0, &mut fields).ok()?;
    s.end().ok()?;
    Some(fields)
}

/// The elements (raw texts, in order) of `text` when it is a JSON array;
/// `None` when it is another value or not JSON. For texts the scanner
/// already read: no limit is enforced here.
pub fn array_items(text: &str) -> Option<Vec<&str>> {
    let mut s = Scanner::new(text, usize::MAX);
    s.ws();
    if s.peek() != Some(b'[') {
        return None;
    }
    s.pos += 1;
    s.ws();
    let mut items = Vec::new();
    if s.peek() == Some(b']') {
        s.pos += 1;
    } else {
        loop {
            items.push(s.value(1, None).ok()?);
            s.ws();
            match s.peek() {
                Some(b',') => s.pos += 1,
                Some(b']') => {
                    s.pos += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    s.end().ok()?;
    Some(items)
}

/// The UTF-16 code units of a raw JSON string literal (with its quotes),
/// lone surrogates included; `None` when it is not a string.
pub fn string_units(raw: &str) -> Option<Vec<u16>> {
    utf16_units(raw.trim().strip_prefix('"')?.strip_suffix('"')?)
}

/// The value text of member `name` of `members` (the last one, as
/// `JSON.parse` keeps the last of duplicate keys).
pub fn member<'a>(members: &[(&'a str, &'a str)], name: &str) -> Option<&'a str> {
    members
        .iter()
        .rev()
        .find(|(k, _)| key_is(k, name))
        .map(|&(_, v)| v)
}

/// The UTF-16 code units a JSON string's contents (between the quotes, as
/// the scanner returned them) stand for; lone surrogates included. `None`
/// on a malformed escape.
pub fn utf16_units(inner: &str) -> Option<Vec<u16>> {
    let b = inner.as_bytes();
    let mut out = Vec::with_capacity(inner.len());
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\\', &b[at..]).map(|i| at + i) {
        out.extend(inner[at..i].encode_utf16());
        let unit = match *b.get(i + 1)? {
            b'"' => 0x22,
            b'\\' => 0x5c,
            b'/' => 0x2f,
            b'b' => 0x08,
            b'f' => 0x0c,
            b'n' => 0x0a,
            b'r' => 0x0d,
            b't' => 0x09,
            b'u' => {
                let hex = inner.get(i + 2..i + 6)?;
                if !hex.bytes().all(|h| h.is_ascii_hexdigit()) {
                    return None;
                }
                at = i + 6;
                out.push(u16::from_str_radix(hex, 16).ok()?);
                continue;
            }
            _ => return None,
        };
        at = i + 2;
        out.push(unit);
    }
    out.extend(inner[at..].encode_utf16());
    Some(out)
}

/// Key text (between quotes) equal to `name`; keys with escapes are decoded.
pub fn key_is(raw: &str, name: &str) -> bool {
    if raw.as_bytes().contains(&b'\\') {
        utf16_units(raw).is_some_and(|units| units.iter().copied().eq(name.encode_utf16()))
    } else {
        raw == name
    }
}

/// Whether a raw JSON value text is the string `name`.
pub fn string_is(raw: &str, name: &str) -> bool {
    raw.trim()
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .is_some_and(|inner| key_is(inner, name))
}

/// A raw JSON string literal (with its quotes) as Rust text; `None` when it
/// is not a string or holds a lone surrogate (which UTF-8 cannot hold).
pub fn string_value(raw: &str) -> Option<String> {
    let inner = raw.trim().strip_prefix('"')?.strip_suffix('"')?;
    if inner.as_bytes().contains(&b'\\') {
        String::from_utf16(&utf16_units(inner)?).ok()
    } else {
        Some(inner.to_string())
    }
}

/// A raw JSON string literal as Rust text for a message, lone surrogates
/// shown as U+FFFD.
pub fn string_lossy(raw: &str) -> Option<String> {
    let inner = raw.trim().strip_prefix('"')?.strip_suffix('"')?;
    Some(String::from_utf16_lossy(&utf16_units(inner)?))
}

/// Read one event line: its fields, and whether every number in it is one
/// `JSON.parse` keeps and its payload nests at most `MAX_NESTING` levels
/// (`false`: readable, but not lossless). `Err`: not JSON (syntax only).
pub fn read_event_line(line: &str) -> Scan<(Fields<'_>, bool)> {
    // The envelope is one level around the payload.
    let mut s = Scanner::new(line, MAX_NESTING + 1);
    s.ws();
    let mut out = Fields::default();
    if s.peek() != Some(b'{') {
        s.skip_value(0)?;
        s.end()?;
        return Ok((out, !s.lossy));
    }
    out.is_object = true;
    s.pos += 1;
    s.ws();
    if s.peek() == Some(b'}') {
        s.pos += 1;
    } else {
        loop {
            let key = s.member_key()?;
            let which = envelope_key(key);
            let slot = match which {
                Some(EnvelopeKey::Type) => &mut out.ty,
                Some(EnvelopeKey::Seq) => &mut out.seq,
                Some(EnvelopeKey::Time) => &mut out.time,
                Some(EnvelopeKey::Data) => &mut out.data,
                Some(EnvelopeKey::SurfaceOp) => &mut out.surface_op,
                Some(EnvelopeKey::SourceEventSeqs) => &mut out.source_event_seqs,
                None => {
                    let v = s.value(1, None)?;
                    match key == "ignorable" && out.ignorable.is_none() {
                        true => out.ignorable = Some(v),
                        false => out.foreign_key = true,
                    }
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
            let is_data = matches!(which, Some(EnvelopeKey::Data));
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
            match which {
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
    s.end()?;
    // A payload read before its type: read its fields now if the type needs them.
    if out.data_fields.is_empty() && out.ty.is_some_and(payload_fields_wanted) {
        if let Some(data) = out.data {
            out.data_fields = object_members(data).unwrap_or_default();
        }
    }
    Ok((out, !s.lossy))
}

/// Validate one event line and split out its fields.
pub fn scan_event(line: &str) -> Scan<Fields<'_>> {
    match read_event_line(line)? {
        (fields, true) => Ok(fields),
        (_, false) => Err(TextDefect::NotLossless),
    }
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
            let decoded = String::from_utf16(&utf16_units(raw)?).ok()?;
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
#[cfg(test)]
pub fn data_field<'a>(fields: &Fields<'a>, name: &str) -> Option<&'a str> {
    member(&fields.data_fields, name)
}

/// The raw value text of member `name` of `text`, an object text this
/// scanner has already accepted whole (an event text the log holds): it is
/// not checked again, only walked, strings found by a vectorized search for
/// their closing quote. The first member of that name is the one, as the
/// envelope rule refuses a repeated key. `None` when there is none (or the
/// text is not an object).
pub fn accepted_member<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let b = text.as_bytes();
    let mut pos = skip_ws(b, 0);
    if b.get(pos) != Some(&b'{') {
        return None;
    }
    pos += 1;
    loop {
        pos = skip_ws(b, pos);
        if b.get(pos) != Some(&b'"') {
            return None;
        }
        let key_end = accepted_string_end(b, pos)?;
        let key = text.get(pos + 1..key_end - 1)?;
        pos = skip_ws(b, key_end);
        if b.get(pos) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, pos + 1);
        let end = accepted_value_end(b, start)?;
        if key_is(key, name) {
            return text.get(start..end);
        }
        pos = skip_ws(b, end);
        match b.get(pos) {
            Some(b',') => pos += 1,
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut pos: usize) -> usize {
    while matches!(b.get(pos), Some(b' ' | b'\n' | b'\t' | b'\r')) {
        pos += 1;
    }
    pos
}

/// The end (past the closing quote) of the accepted string at `pos` (its
/// opening quote): the first quote not escaped by an odd run of backslashes.
fn accepted_string_end(b: &[u8], pos: usize) -> Option<usize> {
    let mut from = pos + 1;
    loop {
        let quote = from + memchr::memchr(b'"', b.get(from..)?)?;
        let backslashes = b[pos + 1..quote]
            .iter()
            .rev()
            .take_while(|&&c| c == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return Some(quote + 1);
        }
        from = quote + 1;
    }
}

/// The end of the accepted value at `pos`.
fn accepted_value_end(b: &[u8], pos: usize) -> Option<usize> {
    match *b.get(pos)? {
        b'"' => accepted_string_end(b, pos),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = pos;
            loop {
                match *b.get(at)? {
                    b'"' => {
                        at = accepted_string_end(b, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => Some(
            pos + b[pos..]
                .iter()
                .position(|&c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\t' | b'\r'))
                .unwrap_or(b.len() - pos),
        ),
    }
}

#[cfg(test)]
mod differential;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lossless_values_pass_and_negative_zero_overflow_and_syntax_do_not() {
        assert_eq!(check_value(r#"{"a":[1,2.5,"x",null,true,{}]}"#), Ok(()));
        assert_eq!(check_value("0"), Ok(()));
        assert_eq!(check_value("-0"), Err(TextDefect::NotLossless));
        assert_eq!(check_value(r#"{"a":[-0.0]}"#), Err(TextDefect::NotLossless));
        assert!(check_value("1e400").is_err());
        assert_eq!(check_value("{"), Err(TextDefect::Syntax));
        assert_eq!(check_value("{} x"), Err(TextDefect::Syntax));
        assert_eq!(check_value("NaN"), Err(TextDefect::Syntax));
    }

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

    #[test]
    fn rejects_minus_zero_in_every_spelling_that_json_parse_reads_as_minus_zero() {
        let underflow = format!("-0.{}1", "0".repeat(330));
        for bad in [
            "-0",
            "-0.0",
            "-0e5",
            "-0E-5",
            "-0.000e+12",
            "-1e-400",
            "-2.4703282292062327e-324",
            underflow.as_str(),
        ] {
            assert_eq!(check_value(bad), Err(TextDefect::NotLossless), "{bad}");
            assert_eq!(
                check_value(&format!("[{bad}]")),
                Err(TextDefect::NotLossless),
                "{bad}"
            );
        }
        // Small, but JSON.parse keeps them as non-zero numbers.
        let tiny = format!("-0.{}1", "0".repeat(300));
        for good in [
            "-5e-324",
            "-2.4703282292062328e-324",
            "-0.0000000000000000000001",
            tiny.as_str(),
        ] {
            assert_eq!(check_value(good), Ok(()), "{good}");
        }
    }

    #[test]
    fn judges_syntax_before_the_lossless_rules() {
        // A torn line is unparsable, whatever it holds before the tear.
        for torn in ["{\"a\":-0", "[1e400,", "{\"a\":[-0.0]"] {
            assert_eq!(scan_event(torn).err(), Some(TextDefect::Syntax), "{torn}");
        }
        let (fields, lossless) =
            read_event_line(r#"{"type":"turn/end","seq":2,"data":-0}"#).unwrap();
        assert!(!lossless);
        assert_eq!((fields.ty, fields.seq), (Some("\"turn/end\""), Some("2")));
    }

    #[test]
    fn reads_lone_surrogates_as_string_contents_and_keys() {
        let line = r#"{"type":"x","seq":0,"time":1,"data":{"\ud800":"a\udc00b"}}"#;
        let f = scan_event(line).unwrap();
        assert_eq!(f.data, Some(r#"{"\ud800":"a\udc00b"}"#));
        let members = object_members(f.data.unwrap()).unwrap();
        assert_eq!(members, vec![(r"\ud800", r#""a\udc00b""#)]);
        // UTF-8 cannot hold a lone surrogate: no Rust string, a lossy one for messages.
        assert_eq!(string_value(r#""a\udc00b""#), None);
        assert_eq!(string_lossy(r#""a\udc00b""#).as_deref(), Some("a\u{fffd}b"));
        assert_eq!(
            string_value(r#""\ud83d\ude00""#).as_deref(),
            Some("\u{1f600}")
        );
        // Escaped spellings of a name are that name.
        assert!(string_is(r#""f\u0061llback""#, "fallback"));
        assert!(!string_is(r#""fallback\ud800""#, "fallback"));
        let f = scan_event(r#"{"t\u0079pe":"turn\/end","seq":0,"time":1,"data":{}}"#).unwrap();
        assert!(!f.foreign_key);
        assert!(f.ty.is_some_and(|t| string_is(t, "turn/end")));
    }

    #[test]
    fn accepted_member_finds_what_the_validating_scanner_finds() {
        let texts = [
            r#"{"type":"x","seq":0,"time":1,"data":{"a":"}","b":["]",{"c":"\""}]},"surfaceOp":"append"}"#,
            r#"{"data":"\\","type":"x"}"#,
            r#"{"type":"x","data":"a\\\"b\\\\","seq":1}"#,
            r#" { "type" : "x" , "d\u0061ta" : [ 1 , -2.5e3 , true , null , { } , [ ] ] , "seq" : 2 } "#,
            r#"{"type":"x","seq":3,"time":4,"data":12.5}"#,
            r#"{"type":"x","seq":3,"time":4,"data":null,"sourceEventSeqs":[1,2]}"#,
            r#"{"type":"x","seq":3,"time":4,"data":{"\"data\"":"data"}}"#,
            r#"{"type":"x","seq":3,"time":4}"#,
            r#"{}"#,
            r#"{"data":"é中😀\u00e9","x":1}"#,
        ];
        for text in texts {
            let members = object_members(text).expect("an object");
            assert_eq!(
                accepted_member(text, "data"),
                member(&members, "data"),
                "{text}"
            );
            assert_eq!(
                accepted_member(text, "type"),
                member(&members, "type"),
                "{text}"
            );
        }
        assert_eq!(accepted_member("[1]", "data"), None);
        assert_eq!(accepted_member("", "data"), None);
    }
}
