//! What the log gives out: event texts (ranges or picked seqs), the whole
//! log as JSONL, and the closers of an interrupted turn.

use super::Log;
use crate::repair::{closers, ScanEvent};

impl Log {
    /// Events `from..to` as one JSON array text.
    pub fn events_json(&self, from: usize, to: usize) -> String {
        let to = to.min(self.texts.len());
        let from = from.min(to);
        let size: usize = (from..to)
            .map(|i| self.texts.get(i).map_or(0, str::len) + 1)
            .sum();
        let mut out = String::with_capacity(size + 2);
        out.push('[');
        for i in from..to {
            if i > from {
                out.push(',');
            }
            out.push_str(self.texts.get(i).unwrap_or("null"));
        }
        out.push(']');
        out
    }

    /// The payload text of event `seq` (the log holds accepted texts only).
    pub fn data_of(&self, seq: usize) -> Option<&str> {
        crate::scan::accepted_member(self.texts.get(seq)?, "data")
    }

    /// The type and payload of the events at `seqs`, as one flat JSON array
    /// `[type, data, type, data, ...]` (what deriving and the header fold
    /// read; the type is null for a kind without a fixed name).
    pub fn payloads_json(&self, seqs: &[u32]) -> String {
        let mut out = String::with_capacity(
            2 + seqs
                .iter()
                .map(|&i| self.texts.get(i as usize).map_or(8, str::len))
                .sum::<usize>(),
        );
        out.push('[');
        for (k, &i) in seqs.iter().enumerate() {
            let i = i as usize;
            if k > 0 {
                out.push(',');
            }
            match self.metas.get(i).and_then(|m| m.kind.name()) {
                Some(name) => {
                    out.push('"');
                    out.push_str(name);
                    out.push('"');
                }
                None => out.push_str("null"),
            }
            out.push(',');
            out.push_str(self.data_of(i).unwrap_or("null"));
        }
        out.push(']');
        out
    }

    /// The whole log as the JSONL store writes it.
    pub fn to_jsonl(&self) -> String {
        let header = self.header.line();
        let mut out = String::with_capacity(
            header.len() + 1 + self.texts.iter().map(|t| t.len() + 1).sum::<usize>(),
        );
        out.push_str(&header);
        out.push('\n');
        for t in self.texts.iter() {
            out.push_str(t);
            out.push('\n');
        }
        out
    }

    /// The section-8 closers for this log.
    pub fn closers(&self) -> Vec<String> {
        let from = self.last_boundary.unwrap_or(0);
        let texts = &self.texts;
        let metas = &self.metas;
        closers((from..texts.len()).filter_map(|i| {
            Some(ScanEvent {
                kind: metas[i].kind,
                seq: i as u64,
                time: metas[i].time,
                data: self.data_of(i)?,
            })
        }))
    }
}
