//! What the log gives out: event texts (ranges or picked seqs), the whole
//! log as JSONL, and the closers of an interrupted turn. A text that cannot
//! be read is an `INTERNAL` error, never a made-up value.

use super::{Log, Text, Texts};
use crate::error::{Code, CoreError, CoreResult};
use crate::event::Kind;
use crate::repair::{closers_in, ScanEvent};

impl Log {
    /// Events `from..to` as one JSON array text; an event in `held`
    /// (ascending seqs whose payloads the caller holds parsed) has `null`
    /// for its `data`, so its payload is not parsed a second time.
    pub fn events_json(&self, from: usize, to: usize, held: &[u32]) -> CoreResult<String> {
        self.given_texts("eventsJson")?;
        let to = to.min(self.texts.len());
        let from = from.min(to);
        let mut out = String::with_capacity(self.texts_bytes(from, to) + 2);
        out.push('[');
        self.texts.visit(from, to, |i, text| {
            if i > from {
                out.push(',');
            }
            let data = held
                .binary_search(&(i as u32))
                .ok()
                .and_then(|_| crate::scan::accepted_member(text, "data"));
            match data {
                Some(data) => {
                    let start = data.as_ptr() as usize - text.as_ptr() as usize;
                    out.push_str(&text[..start]);
                    out.push_str("null");
                    out.push_str(&text[start + data.len()..]);
                }
                None => out.push_str(text),
            }
        })?;
        out.push(']');
        Ok(out)
    }

    /// What `payloads` reads of the events at `seqs`: each seq with its
    /// type's name.
    pub fn payload_picks(&self, seqs: &[u32]) -> Vec<(u32, Option<&'static str>)> {
        seqs.iter()
            .map(|&seq| (seq, self.metas.kind(seq as usize).and_then(Kind::name)))
            .collect()
    }
    /// The bytes `to_jsonl` takes (the header line and each text with its
    /// newline), without reading a text.
    pub fn jsonl_bytes(&self) -> usize {
        self.header.line().len() + 1 + self.texts_bytes(0, self.texts.len())
    }
    /// The whole log as the JSONL store writes it.
    pub fn to_jsonl(&self) -> CoreResult<String> {
        self.given_texts("toJsonl")?;
        let mut out = String::with_capacity(self.jsonl_bytes());
        out.push_str(&self.header.line());
        out.push('\n');
        self.texts.visit(0, self.texts.len(), |_, text| {
            out.push_str(text);
            out.push('\n');
        })?;
        Ok(out)
    }

    /// The section-8 closers for this log.
    pub fn closers(&self) -> CoreResult<Vec<String>> {
        self.given_texts("closers")?;
        let from = self.metas.last_boundary().unwrap_or(0);
        let mut datas = Vec::with_capacity(self.texts.len().saturating_sub(from));
        for i in from..self.texts.len() {
            let meta = self.metas.get(i).ok_or_else(|| {
                CoreError::new(Code::Internal, format!("no facts kept for event {i}"))
            })?;
            datas.push((i, meta, data_of(&self.texts, i)?));
        }
        Ok(closers_in(
            &self.vocab.closers,
            datas.iter().map(|(i, meta, data)| ScanEvent {
                kind: meta.kind,
                seq: *i as u64,
                time: meta.time,
                data,
            }),
        ))
    }
}

/// The payload text of event `seq` of `texts` (accepted texts only).
pub(super) fn data_of(texts: &Texts, seq: usize) -> CoreResult<Text<'_>> {
    let text = texts.get(seq)?;
    let data = crate::scan::accepted_member(&text, "data").ok_or_else(|| {
        CoreError::new(
            Code::Internal,
            format!("the text of event {seq} has no data"),
        )
    })?;
    let start = data.as_ptr() as usize - text.as_ptr() as usize;
    let end = start + data.len();
    Ok(text.narrow_to(start, end))
}

/// The payloads of `picks` (seq and type name, `Log::payload_picks`) as one
/// JSON array `[type, data, type, data, ...]` (the type null for a kind
/// without a fixed name).
pub fn payloads(texts: &Texts, picks: &[(u32, Option<&str>)]) -> CoreResult<String> {
    let bytes = picks
        .iter()
        .map(|&(i, _)| texts.span_bytes(i as usize, i as usize + 1) + 8)
        .sum::<usize>();
    let mut json = String::with_capacity(bytes + 2);
    json.push('[');
    for (k, &(seq, name)) in picks.iter().enumerate() {
        if k > 0 {
            json.push(',');
        }
        match name {
            Some(name) => {
                json.push('"');
                json.push_str(name);
                json.push_str("\",");
            }
            None => json.push_str("null,"),
        }
        json.push_str(&data_of(texts, seq as usize)?);
    }
    json.push(']');
    Ok(json)
}

/// Write the JSONL of `header` and `texts` (what a JSONL store holds) to
/// `out`, a text at a time; the bytes written.
pub fn write_jsonl(
    header: &crate::session_header::SessionHeader,
    texts: &super::Texts,
    out: &mut impl std::io::Write,
) -> CoreResult<usize> {
    let mut failed = None;
    let mut written = 0;
    let mut write = |bytes: &[u8]| {
        if failed.is_none() {
            match out.write_all(bytes) {
                Ok(()) => written += bytes.len(),
                Err(e) => failed = Some(e),
            }
        }
    };
    write(header.line().as_bytes());
    write(b"\n");
    texts.visit(0, texts.len(), |_, text| {
        write(text.as_bytes());
        write(b"\n");
    })?;
    match failed {
        Some(e) => Err(CoreError::new(
            crate::error::Code::Io,
            format!("cannot write the session log: {e}"),
        )),
        None => Ok(written),
    }
}
