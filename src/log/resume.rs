//! Resuming a JSONL log (`Session.fromJsonl`) while it is still being
//! handed over: the bytes JS pushes are cut into pieces of whole lines, each
//! read and folded as it comes (`Stream::push`, on two threads when long);
//! `finish` takes the log. A log handed over whole is read where it is, by a
//! task on the executor when long. The first `deriveMessages()` parses the
//! surface's payloads.

use super::read::Stream;
use super::Log;
use crate::error::{Code, CoreError};
use crate::executor::{self, Task};
use std::borrow::Cow;
use std::sync::mpsc;

/// Bytes after which what was pushed is cut (after its last newline) into a
/// piece for the reader.
pub(crate) const PIECE_BYTES: usize = 1 << 20;

/// The caller's whole log, held while a read borrows it (a JS Buffer: the
/// read neither copies it nor lets it go before `finish`).
pub type Owner = Box<dyn AsRef<[u8]> + Send>;

/// A JSONL log handed over in parts cut anywhere and read piece by piece as
/// they come; or handed over whole (`of_owner`) and read where it is.
pub struct JsonlReading {
    state: State,
}

enum State {
    /// The bytes pushed since the last piece, and the reader of the pieces.
    Pushing(Cutter, Box<Stream<'static>>),
    /// The reading task, which gives back the caller's log it borrowed.
    Reading(Task<(Result<Log, CoreError>, Owner)>),
    Read(Box<Result<Log, CoreError>>),
    Finished,
}

impl Default for JsonlReading {
    fn default() -> Self {
        JsonlReading::with_piece_bytes(PIECE_BYTES)
    }
}

impl JsonlReading {
    /// A reading whose pieces are `piece_bytes` long (`PIECE_BYTES`; tests
    /// cut small logs).
    pub(super) fn with_piece_bytes(piece_bytes: usize) -> JsonlReading {
        let state = State::Pushing(Cutter::new(piece_bytes), Box::default());
        JsonlReading { state }
    }

    /// A reading of the caller's whole log, read where it is (its texts
    /// taken compressed, no copy of it made: `read.rs::take`) by a thread of
    /// its own, which hands `bytes` back to the thread that calls `finish`;
    /// a log shorter than one piece is read now, on this thread (a thread
    /// costs more than it gains there).
    pub fn of_owner(bytes: Owner) -> JsonlReading {
        let short = (*bytes).as_ref().len() < PIECE_BYTES;
        let work = move || (Log::from_jsonl((*bytes).as_ref()), bytes);
        let state = if short {
            State::Read(Box::new(work().0))
        } else {
            match executor::start(work) {
                Ok(task) => State::Reading(task),
                // No pool thread free: the log is read now, on this thread.
                Err(not_started) => State::Read(Box::new((not_started.work)().0)),
            }
        };
        JsonlReading { state }
    }

    /// Append the next bytes of the log (cut anywhere). They are copied into
    /// pieces of whole lines, each read as it fills up (ignored once the
    /// pushing ended).
    pub fn push(&mut self, bytes: &[u8]) {
        if let State::Pushing(cutter, stream) = &mut self.state {
            cutter.push(bytes, |piece| stream.push(Cow::Owned(piece)));
        }
    }

    /// The log, once read (waiting for the reading thread). The pushing
    /// ends here: the last piece is read.
    pub fn finish(&mut self) -> Result<Log, CoreError> {
        match std::mem::replace(&mut self.state, State::Finished) {
            State::Pushing(mut cutter, mut stream) => {
                stream.push(Cow::Owned(cutter.rest()));
                stream.finish()
            }
            // The caller's log the thread borrowed is let go here.
            State::Reading(task) => task
                .wait("the JSONL reading task")
                .and_then(|(read, _)| read),
            State::Read(read) => *read,
            State::Finished => Err(CoreError::new(
                Code::Internal,
                "the JSONL log was already taken",
            )),
        }
    }
}

/// Bytes cut anywhere, gathered into pieces of whole lines of about
/// `piece_bytes` each (a longer line makes a longer piece).
pub(crate) struct Cutter {
    /// Bytes pushed since the last piece.
    current: Vec<u8>,
    /// `current[..searched]` holds no newline.
    searched: usize,
    piece_bytes: usize,
}

impl Cutter {
    pub(crate) fn new(piece_bytes: usize) -> Cutter {
        Cutter {
            current: Vec::new(),
            searched: 0,
            piece_bytes,
        }
    }

    /// Append `bytes`; each piece that fills up goes to `send`, cut after
    /// its last newline (what follows starts the next piece).
    pub(crate) fn push(&mut self, bytes: &[u8], mut send: impl FnMut(Vec<u8>)) {
        for part in bytes.chunks(self.piece_bytes) {
            if self.current.capacity() == 0 {
                self.current.reserve_exact(self.piece_bytes + part.len());
            }
            self.current.extend_from_slice(part);
            if self.current.len() < self.piece_bytes {
                continue;
            }
            // Bytes before `searched` hold no newline, so a line longer than
            // a piece costs a search of each byte once, not of the whole
            // line at every part.
            let searched = self.searched.min(self.current.len());
            let last = memchr::memrchr(b'\n', &self.current[searched..]).map(|i| searched + i);
            self.searched = self.current.len();
            if let Some(i) = last {
                let mut next = Vec::with_capacity(self.piece_bytes + part.len());
                next.extend_from_slice(&self.current[i + 1..]);
                self.current.truncate(i + 1);
                self.searched = next.len();
                let mut piece = std::mem::replace(&mut self.current, next);
                if too_roomy(piece.len(), piece.capacity()) {
                    piece.shrink_to_fit();
                }
                send(piece);
            }
        }
    }

    /// What was pushed since the last piece.
    pub(crate) fn rest(&mut self) -> Vec<u8> {
        self.searched = 0;
        let mut rest = std::mem::take(&mut self.current);
        if too_roomy(rest.len(), rest.capacity()) {
            rest.shrink_to_fit();
        }
        rest
    }
}

/// Whether a piece of text a log is to keep (for the session's life) holds
/// more spare room than an eighth of its text, and should be shrunk to fit
/// first. A piece is reserved at a full piece's size (more for a long line,
/// which may then double it), so the last piece of a short log would
/// otherwise keep over a MiB for a few hundred bytes of text: a process
/// that opens many short sessions then holds that much per session it has
/// not yet collected, and glibc, reusing those blocks for other sizes,
/// leaves them resident page by page (issue 29 case 8: RSS +150 MB over
/// 9,000 store cycles). A full piece is left as it is.
pub(crate) fn too_roomy(len: usize, capacity: usize) -> bool {
    capacity - len > len / 8
}

/// Read a log whose pieces (whole lines each, in order) arrive through
/// `pieces` while they are made: each piece, as it comes, is checked as
/// UTF-8, split into lines and its events read and folded (on two threads
/// when long).
pub(crate) fn read_arriving(pieces: &mpsc::Receiver<Vec<u8>>) -> Result<Log, CoreError> {
    Stream::read(pieces.iter().map(Cow::Owned))
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

    /// `bytes` pushed 10,000 at a time into 64 KB pieces, and read.
    fn read_all(bytes: &[u8]) -> Result<Log, CoreError> {
        let mut reading = JsonlReading::with_piece_bytes(64 << 10);
        for part in bytes.chunks(10_000) {
            reading.push(part);
        }
        reading.finish()
    }

    #[test]
    fn a_pushed_log_reads_as_the_whole_log_does() {
        // Long enough for two readers.
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
        let log = read_all(text.as_bytes())
            .map_err(|e| e.line().unwrap_or(0))
            .expect("the log reads");
        let whole = Log::from_jsonl(text.as_bytes())
            .map_err(|e| e.line().unwrap_or(0))
            .expect("reads");
        assert_eq!(log.surface().nodes(), whole.surface().nodes());
        assert_eq!(
            log.to_jsonl().expect("texts read"),
            whole.to_jsonl().expect("texts read")
        );
        let log = read_all(compacted(600).as_bytes())
            .map_err(|e| e.line().unwrap_or(0))
            .expect("the log reads");
        assert_eq!(log.surface().nodes().len(), 1);
    }

    #[test]
    fn a_failed_read_is_reported_with_its_line() {
        let mut text = compacted(200);
        text.push_str("{\"type\":\n");
        let err = read_all(text.as_bytes())
            .err()
            .map(|e| (e.line().unwrap_or(0), e.code()));
        assert_eq!(err, Some((802, "CORRUPT_LOG")));
    }

    #[test]
    fn a_lent_log_is_read_where_it_is_as_a_pushed_one_and_given_back_once_read() {
        // Longer than a piece (1 MiB): read on threads, taken compressed.
        let mut text = HEADER.to_string() + "\n";
        for seq in 0..12_000 {
            text.push_str(&user(seq, r#""append""#, ""));
            text.push('\n');
        }
        assert!(text.len() > PIECE_BYTES);
        let pushed = read_all(text.as_bytes());
        let mut reading = JsonlReading::of_owner(Box::new(text.clone().into_bytes()));
        let mut lent = reading
            .finish()
            .map_err(|e| e.code())
            .expect("the log reads");
        let mut pushed = pushed.map_err(|e| e.code()).expect("the log reads");
        assert_eq!(lent.surface().nodes(), pushed.surface().nodes());
        assert_eq!(lent.to_jsonl().ok(), Some(text.clone()));
        assert_eq!(pushed.to_jsonl().ok(), Some(text.clone()));
        assert!(
            lent.texts_mut().compress(0),
            "nothing waits for the compressor"
        );
        assert!(!pushed.texts_mut().compress(0), "the pushed pieces wait");
        // A defect is named by its line; a short log is read at once.
        let bad = text.replacen("\"seq\":7000,", "\"seq\":7000", 1);
        let mut reading = JsonlReading::of_owner(Box::new(bad.into_bytes()));
        assert_eq!(reading.finish().err().and_then(|e| e.line()), Some(7002));
        let mut reading = JsonlReading::of_owner(Box::new(compacted(20).into_bytes()));
        assert_eq!(reading.finish().map(|l| l.len()).ok(), Some(80));
    }

    #[test]
    fn a_short_log_is_read_at_once() {
        let text = compacted(20);
        assert!(text.len() < 64 << 10);
        assert_eq!(read_all(text.as_bytes()).map(|l| l.len()).ok(), Some(80));
        assert_eq!(read_all(b"").err().map(|e| e.line().unwrap_or(0)), Some(1));
        // The log is taken once.
        let mut reading = JsonlReading::default();
        reading.push(text.as_bytes());
        assert!(reading.finish().is_ok());
        assert!(reading.finish().is_err());
    }
}
