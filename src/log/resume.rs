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
const BATCH_BYTES: usize = 128 << 10;

/// Nodes handed over beyond twice the surface's before the hand-over stops.
const SPECULATION_SLACK: usize = 1024;

/// Payloads of events that entered the surface: their seqs, and one JSON
/// array `[type, data, type, data, ...]` (the form `payloads_json` gives).
#[derive(Debug, Default, PartialEq)]
pub struct PayloadBatch {
    pub seqs: Vec<u32>,
    pub json: String,
}

/// A JSONL log being read on its own thread (see the module comment).
pub struct JsonlReading {
    batches: mpsc::Receiver<PayloadBatch>,
    thread: Option<JoinHandle<Result<Log, LineError>>>,
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
            thread: Some(thread),
        }
    }

    /// The next batch of payloads, waiting for it; `None` once the read is
    /// over (then `finish` does not wait). A failed read may have handed
    /// over payloads before it failed.
    pub fn next_batch(&mut self) -> Option<PayloadBatch> {
        self.batches.recv().ok()
    }

    /// The log, once read (waiting for the reading thread).
    pub fn finish(mut self) -> Result<Log, LineError> {
        let thread = self.thread.take();
        match thread.map(JoinHandle::join) {
            Some(Ok(read)) => read,
            _ => Err(LineError {
                error: crate::error::CoreError::InvalidArgument(
                    "the JSONL reading thread failed".into(),
                ),
                line: 0,
            }),
        }
    }
}
