//! Resuming a JSONL log while JS parses its surface payloads: the log is
//! read and folded on threads of its own, and each event that enters the
//! surface has its payload text handed over (in batches) as soon as it is
//! folded, so the JS thread parses what the first `deriveMessages()` needs
//! while the rest of the log is still being read.
//!
//! The hand-over is speculative: a later `replace` may take a node off the
//! surface, and its parsed payload is then dropped. So that a log whose
//! surface was compacted many times does not cost a parse of every payload
//! it ever had, the hand-over stops once it has sent more than twice the
//! nodes the surface holds (plus `SPECULATION_SLACK`); the first derive
//! reads the rest from the log as it would without it.

use super::read::Piece;
use super::{Helper, LineError, Log};
use crate::surface::SurfaceOp;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Payload text a batch gathers before it is handed over.
const BATCH_BYTES: usize = 60 << 10;

/// Nodes handed over beyond twice the surface's before the hand-over stops.
const SPECULATION_SLACK: usize = 1024;

/// Payloads of events that entered the surface: their seqs, and one JSON
/// array `[type, data, type, data, ...]` (the form `payloads_json` gives).
#[derive(Debug, Default, PartialEq)]
pub struct PayloadBatch {
    pub seqs: Vec<u32>,
    pub json: String,
}

/// Logs shorter than this are read at once, on the calling thread (a
/// thread costs more than the overlap gains) and hand nothing over.
const THREAD_MIN_BYTES: usize = 256 << 10;

/// A JSONL log being read on its own thread (see the module comment), or
/// already read.
pub struct JsonlReading {
    batches: mpsc::Receiver<PayloadBatch>,
    state: State,
}

enum State {
    Reading(JoinHandle<Result<Log, LineError>>),
    Read(Box<Result<Log, LineError>>),
    Finished,
}

impl JsonlReading {
    /// Read the caller's bytes: they are copied first (two halves on two
    /// threads when long), then read on the reading thread.
    pub fn of_bytes(bytes: &[u8]) -> JsonlReading {
        JsonlReading::start(super::read::copy_lines(bytes))
    }

    /// Read a log held in pieces of whole lines (every piece but the last
    /// ends with a newline).
    pub fn start(pieces: Vec<Vec<u8>>) -> JsonlReading {
        let (send, batches) = mpsc::channel();
        if pieces.iter().map(Vec::len).sum::<usize>() < THREAD_MIN_BYTES {
            let pieces = pieces.into_iter().map(Piece::Keep).collect();
            let read = Log::from_jsonl_pieces(pieces, Helper::Awaited, None);
            return JsonlReading {
                batches,
                state: State::Read(Box::new(read)),
            };
        }
        let thread = std::thread::spawn(move || {
            let mut batch = PayloadBatch::default();
            let (mut sent, mut live, mut speculating) = (0usize, 0usize, true);
            let mut observe = |log: &Log, seq: usize, data: &str| {
                let Some(meta) = log.metas.get(seq) else {
                    return;
                };
                match meta.op {
                    None => return,
                    Some(SurfaceOp::Append) => live += 1,
                    Some(SurfaceOp::Replace { .. }) => {
                        let (start, end) = log.last_replace();
                        live = (live + 1).saturating_sub(end + 1 - start);
                    }
                }
                if !speculating {
                    return;
                }
                if sent > 2 * live + SPECULATION_SLACK {
                    speculating = false;
                    return;
                }
                let Some(name) = meta.kind.name() else {
                    return;
                };
                batch
                    .json
                    .push(if batch.seqs.is_empty() { '[' } else { ',' });
                batch.json.push('"');
                batch.json.push_str(name);
                batch.json.push_str("\",");
                batch.json.push_str(data);
                batch.seqs.push(seq as u32);
                sent += 1;
                if batch.json.len() >= BATCH_BYTES {
                    batch.json.push(']');
                    // JS may have stopped listening (it threw): the read goes on.
                    let _ = send.send(std::mem::take(&mut batch));
                }
            };
            let pieces = pieces.into_iter().map(Piece::Keep).collect();
            let log = Log::from_jsonl_pieces(pieces, Helper::Awaited, Some(&mut observe));
            if log.is_ok() && !batch.seqs.is_empty() {
                batch.json.push(']');
                let _ = send.send(batch);
            }
            log
        });
        JsonlReading {
            batches,
            state: State::Reading(thread),
        }
    }

    /// The next batch of payloads, waiting for it; `None` once the read is
    /// over (then `finish` does not wait). A failed read may have handed
    /// over payloads before it failed.
    pub fn next_batch(&mut self) -> Option<PayloadBatch> {
        match self.state {
            State::Reading(_) => self.batches.recv().ok(),
            _ => None,
        }
    }

    /// The log, once read (waiting for the reading thread).
    pub fn finish(&mut self) -> Result<Log, LineError> {
        let failed = |what: &str| LineError {
            error: crate::error::CoreError::InvalidArgument(what.into()),
            line: 0,
        };
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Reading(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(failed("the JSONL reading thread failed"))),
            State::Read(read) => *read,
            State::Finished => Err(failed("the JSONL log was already taken")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;

    fn user(seq: usize, op: &str, sources: &str) -> String {
        let pad = "p".repeat(300);
        format!(
            r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"m{seq} é {pad}"}}],"source":{{"kind":"user"}}}},"surfaceOp":{op}{sources}}}"#
        )
    }

    /// `cycles` of three appended messages, each cycle ending with a
    /// replace of the whole surface by one message.
    fn compacted(cycles: usize) -> String {
        let mut lines = vec![HEADER.to_string()];
        let mut nodes: Vec<usize> = Vec::new();
        let mut seq = 0;
        for _ in 0..cycles {
            for _ in 0..3 {
                lines.push(user(seq, r#""append""#, ""));
                nodes.push(seq);
                seq += 1;
            }
            let (start, end) = (nodes[0], nodes[nodes.len() - 1]);
            let sources = nodes
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",");
            lines.push(user(
                seq,
                &format!(r#"{{"op":"replace","start":{start},"end":{end}}}"#),
                &format!(r#","sourceEventSeqs":[{sources}]"#),
            ));
            nodes = vec![seq];
            seq += 1;
        }
        lines.join("\n") + "\n"
    }

    fn read_all(bytes: &[u8]) -> (Vec<PayloadBatch>, Result<Log, LineError>) {
        let mut reading = JsonlReading::of_bytes(bytes);
        let mut batches = Vec::new();
        while let Some(b) = reading.next_batch() {
            batches.push(b);
        }
        (batches, reading.finish())
    }

    #[test]
    fn batches_hand_over_each_surface_payload_as_payloads_json_gives_it() {
        // Long enough for two readers and several batches.
        let mut text = HEADER.to_string() + "\n";
        for seq in 0..6000 {
            let line = if seq % 2 == 0 {
                user(seq, r#""append""#, "")
            } else {
                format!(
                    r#"{{"type":"assistant/chunk","seq":{seq},"time":1,"data":{{"text":"{}"}}}}"#,
                    "x".repeat(seq % 300)
                )
            };
            text.push_str(&line);
            text.push('\n');
        }
        let (batches, log) = read_all(text.as_bytes());
        let log = log.map_err(|e| e.line).expect("the log reads");
        assert!(batches.len() > 1);
        let seqs: Vec<u32> = batches
            .iter()
            .flat_map(|b| b.seqs.iter().copied())
            .collect();
        let nodes: Vec<u32> = log.surface().nodes().iter().map(|&n| n as u32).collect();
        assert_eq!(seqs, nodes);
        for b in &batches {
            assert_eq!(b.json, log.payloads_json(&b.seqs));
        }
        assert_eq!(
            log.to_jsonl(),
            Log::from_jsonl(text.as_bytes())
                .map_err(|e| e.line)
                .expect("reads")
                .to_jsonl()
        );
    }

    #[test]
    fn the_hand_over_stops_when_replaces_drop_most_of_what_it_sent() {
        let text = compacted(600);
        let (batches, log) = read_all(text.as_bytes());
        let log = log.map_err(|e| e.line).expect("the log reads");
        assert_eq!(log.surface().nodes().len(), 1);
        let sent: usize = batches.iter().map(|b| b.seqs.len()).sum();
        // Two nodes at most at a time: it stops past 2 * 2 + the slack.
        assert!(sent <= 2 * 4 + SPECULATION_SLACK + 1, "sent {sent}");
        assert!(sent > SPECULATION_SLACK);
        for b in &batches {
            assert_eq!(b.json, log.payloads_json(&b.seqs));
        }
        // A log compacted fewer times is handed over whole.
        let text = compacted(200);
        assert!(text.len() >= THREAD_MIN_BYTES);
        let (batches, log) = read_all(text.as_bytes());
        assert!(log.is_ok());
        assert_eq!(batches.iter().map(|b| b.seqs.len()).sum::<usize>(), 800);
    }

    #[test]
    fn a_failed_read_is_reported_after_its_batches() {
        let mut text = compacted(200);
        text.push_str("{\"type\":\n");
        let (batches, log) = read_all(text.as_bytes());
        assert!(!batches.is_empty());
        let err = log.err().map(|e| (e.line, e.error.code()));
        assert_eq!(err, Some((802, "CORRUPT_LOG")));
    }

    #[test]
    fn a_short_log_is_read_at_once_and_hands_nothing_over() {
        let text = compacted(20);
        assert!(text.len() < THREAD_MIN_BYTES);
        let (batches, log) = read_all(text.as_bytes());
        assert!(batches.is_empty());
        assert_eq!(log.map(|l| l.len()).ok(), Some(80));
        let (batches, log) = read_all(b"");
        assert!(batches.is_empty());
        assert_eq!(log.err().map(|e| e.line), Some(1));
        // The log is taken once.
        let mut reading = JsonlReading::of_bytes(text.as_bytes());
        assert!(reading.finish().is_ok());
        assert!(reading.finish().is_err());
    }
}
