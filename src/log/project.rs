//! What the log gives out: event texts (ranges or picked seqs), the whole
//! log as JSONL, and the closers of an interrupted turn. A text that cannot
//! be read is an `INTERNAL` error, never a made-up value.

use super::{Log, Text};
use crate::error::{Code, CoreError, CoreResult};
use crate::event::Kind;
use crate::repair::{closers, ScanEvent};

impl Log {
    /// Events `from..to` as one JSON array text.
    pub fn events_json(&self, from: usize, to: usize) -> CoreResult<String> {
        let to = to.min(self.texts.len());
        let from = from.min(to);
        let mut out = String::with_capacity(self.texts_bytes(from, to) + 2);
        out.push('[');
        self.texts.visit(from, to, |i, text| {
            if i > from {
                out.push(',');
            }
            out.push_str(text);
        })?;
        out.push(']');
        Ok(out)
    }

    /// The payload text of event `seq` (the log holds accepted texts only).
    pub fn data_of(&self, seq: usize) -> CoreResult<Text<'_>> {
        let text = self.texts.get(seq)?;
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

    /// The type and payload of the events at `seqs`, as one flat JSON array
    /// `[type, data, type, data, ...]` (what deriving and the header fold
    /// read; the type is null for a kind without a fixed name).
    pub fn payloads_json(&self, seqs: &[u32]) -> CoreResult<String> {
        let mut out = String::with_capacity(
            2 + seqs
                .iter()
                .map(|&i| self.texts_bytes(i as usize, i as usize + 1) + 8)
                .sum::<usize>(),
        );
        out.push('[');
        for (k, &i) in seqs.iter().enumerate() {
            let i = i as usize;
            if k > 0 {
                out.push(',');
            }
            match self.metas.kind(i).and_then(Kind::name) {
                Some(name) => {
                    out.push('"');
                    out.push_str(name);
                    out.push('"');
                }
                None => out.push_str("null"),
            }
            out.push(',');
            out.push_str(&self.data_of(i)?);
        }
        out.push(']');
        Ok(out)
    }

    /// The bytes `to_jsonl` takes (the header line and each text with its
    /// newline), without reading a text.
    pub fn jsonl_bytes(&self) -> usize {
        jsonl_bytes(&self.header, &self.texts)
    }
    /// The whole log as the JSONL store writes it.
    pub fn to_jsonl(&self) -> CoreResult<String> {
        let header = self.header.line();
        let mut out =
            String::with_capacity(header.len() + 1 + self.texts_bytes(0, self.texts.len()));
        out.push_str(&header);
        out.push('\n');
        self.texts.visit(0, self.texts.len(), |_, text| {
            out.push_str(text);
            out.push('\n');
        })?;
        Ok(out)
    }

    /// The section-8 closers for this log.
    pub fn closers(&self) -> CoreResult<Vec<String>> {
        let from = self.last_boundary.unwrap_or(0);
        let mut datas = Vec::with_capacity(self.texts.len().saturating_sub(from));
        for i in from..self.texts.len() {
            let meta = self.metas.get(i).ok_or_else(|| {
                CoreError::new(Code::Internal, format!("no facts kept for event {i}"))
            })?;
            datas.push((i, meta, self.data_of(i)?));
        }
        Ok(closers(datas.iter().map(|(i, meta, data)| ScanEvent {
            kind: meta.kind,
            seq: *i as u64,
            time: meta.time,
            data,
        })))
    }
}

/// At least the bytes the JSONL of `header` and `texts` takes (what lies
/// between texts a read kept may count too), without reading a text.
pub fn jsonl_bytes(header: &crate::session_header::SessionHeader, texts: &super::Texts) -> usize {
    header.line().len() + 1 + texts.span_bytes(0, texts.len()) + texts.len()
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
