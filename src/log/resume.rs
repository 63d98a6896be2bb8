//! Resuming a JSONL log (`Session.fromJsonl`) while it is still being
//! handed over, and while JS parses its surface payloads: the bytes JS
//! pushes are cut into pieces of whole lines, a reading thread reads and
//! folds each piece as it comes (the pieces still waiting when the pushing
//! ends are read on two threads), and each event that enters the surface has
//! its payload text handed back (in batches) as soon as it is folded, so the
//! JS thread parses what the first `deriveMessages()` needs while the rest
//! of the log is still being read.
//!
//! The hand-over is speculative: a later `replace` may take a node off the
//! surface, and its parsed payload is then dropped. So that a log whose
//! surface was compacted many times does not cost a parse of every payload
//! it ever had, the hand-over stops once it has sent more than twice the
//! nodes the surface holds (plus `SPECULATION_SLACK`); the first derive
//! reads the rest from the log as it would without it.

use super::lift::Lifting;
use super::project::PayloadBatch;
use super::read::{arrivals, borrowed_halves, prepare, prepare_all, Observe, Piece, Stream};
use super::texts::Lifted;
use super::Log;
use crate::error::{Code, CoreError};
use crate::surface::SurfaceOp;
use crate::threads;
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Payload text a batch gathers before it is handed over (below V8's
/// large-object size and glibc's mmap threshold, so neither side maps fresh
/// pages per batch).
const BATCH_BYTES: usize = 60 << 10;

/// Nodes handed over beyond twice the surface's before the hand-over stops.
const SPECULATION_SLACK: usize = 1024;

/// Bytes after which what was pushed is cut (after its last newline) into a
/// piece for the reading thread. A log shorter than one piece is read at
/// once when the pushing ends, on the calling thread, and hands nothing over
/// (a thread costs more than the overlap gains there).
pub(crate) const PIECE_BYTES: usize = 1 << 20;

/// The caller's whole log, held while a read borrows it (a JS Buffer: the
/// read neither copies it nor lets it go before `finish`).
pub type Owner = Box<dyn AsRef<[u8]> + Send>;

/// A JSONL log handed over in parts cut anywhere and read, from its first
/// piece on, by a thread of its own (see the module comment); or handed
/// over whole (`of_owner`) and read where it is.
pub struct JsonlReading {
    /// Bytes pushed since the last piece.
    cutter: Cutter,
    /// Strings of at least this many bytes cross lifted (`LIFT_MIN`).
    lift_min: usize,
    /// Pieces for the reading thread, until the pushing ends.
    pieces: Option<mpsc::Sender<Vec<u8>>>,
    /// The pushing ended (`next_batch` or `finish` was called).
    ended: bool,
    batches: Option<mpsc::Receiver<PayloadBatch>>,
    state: State,
}

enum State {
    Pushing,
    /// The reading thread, which gives back the caller's log it borrowed.
    Reading(JoinHandle<(Result<Log, CoreError>, Option<Owner>)>),
    Read(Box<Result<Log, CoreError>>),
    Finished,
}

impl Default for JsonlReading {
    fn default() -> Self {
        JsonlReading::lifting(super::LIFT_MIN)
    }
}

impl JsonlReading {
    /// A reading whose batches lift strings of `lift_min` bytes (`LIFT_MIN`;
    /// tests lift short strings).
    pub fn lifting(lift_min: usize) -> JsonlReading {
        JsonlReading::with_piece_bytes(PIECE_BYTES, lift_min)
    }

    /// A reading whose pieces are `piece_bytes` long (`PIECE_BYTES`; tests
    /// cut small logs) and whose batches lift strings of `lift_min` bytes.
    pub(super) fn with_piece_bytes(piece_bytes: usize, lift_min: usize) -> JsonlReading {
        JsonlReading {
            cutter: Cutter::new(piece_bytes),
            lift_min,
            pieces: None,
            ended: false,
            batches: None,
            state: State::Pushing,
        }
    }

    /// A reading of the caller's whole log, read where it is (its texts
    /// taken compressed, no copy of it made: `read.rs::take`) by a thread of
    /// its own, which hands `bytes` back to the thread that calls `finish`;
    /// a log shorter than one piece is read now, on this thread.
    pub fn of_owner(bytes: Owner, lift_min: usize) -> JsonlReading {
        let mut reading = JsonlReading::lifting(lift_min);
        reading.ended = true;
        if (*bytes).as_ref().len() < reading.cutter.piece_bytes {
            let read = Log::read_pieces(vec![Piece::Borrow((*bytes).as_ref())]);
            reading.state = State::Read(Box::new(read.map_err(|(e, _)| e)));
            return reading;
        }
        let (send, batches) = mpsc::channel();
        reading.batches = Some(batches);
        let work = move || {
            let read = Handing::new(send, lift_min).during(|mut observe| {
                let rest = prepare_all(borrowed_halves((*bytes).as_ref()));
                Stream::default()
                    .finish(rest, &mut observe)
                    .map_err(|(e, _)| e)
            });
            (read, Some(bytes))
        };
        reading.state = match threads::detached("dsh-jsonl-read", work) {
            Ok(thread) => State::Reading(thread),
            // No thread could start: the log is read now, on this thread
            // (its batches wait in the channel).
            Err(not_started) => State::Read(Box::new((not_started.work)().0)),
        };
        reading
    }

    /// Read the caller's bytes (`push` of all of them, then the end).
    #[cfg(test)]
    pub fn of_bytes(bytes: &[u8]) -> JsonlReading {
        let mut reading = JsonlReading::default();
        reading.push(bytes);
        reading.end();
        reading
    }

    /// Append the next bytes of the log (cut anywhere). They are copied into
    /// pieces of whole lines; each full piece goes to the reading thread,
    /// which starts with the first.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.ended {
            return;
        }
        let mut cut = Vec::new();
        self.cutter.push(bytes, |piece| cut.push(piece));
        for piece in cut {
            self.send(piece);
        }
    }

    /// Send a piece to the reading thread, started with the first (a
    /// thread that cannot start is the read's error, which `finish`
    /// reports; later pieces are dropped).
    fn send(&mut self, piece: Vec<u8>) {
        if self.pieces.is_none() {
            if !matches!(self.state, State::Pushing) {
                return;
            }
            let (pieces, received) = mpsc::channel();
            let (send, batches) = mpsc::channel();
            let lift_min = self.lift_min;
            let work = move || (read(received, send, lift_min), None);
            match threads::detached("dsh-jsonl-read", work) {
                Ok(thread) => {
                    self.state = State::Reading(thread);
                    self.batches = Some(batches);
                    self.pieces = Some(pieces);
                }
                Err(not_started) => {
                    self.state = State::Read(Box::new(Err(not_started.error())));
                    return;
                }
            }
        }
        if let Some(pieces) = &self.pieces {
            // A reading thread that is gone has failed: `finish` reports how.
            let _ = pieces.send(piece);
        }
    }

    /// The end of the log: the last piece goes to the reading thread, or the
    /// whole log (shorter than one piece) is read now.
    fn end(&mut self) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let last = self.cutter.rest();
        if !matches!(self.state, State::Pushing) && self.pieces.is_none() {
            // No reading thread could start: `finish` reports it.
            return;
        }
        if self.pieces.is_none() {
            let read = Log::read_pieces(vec![Piece::Keep(last)]).map_err(|(e, _)| e);
            self.state = State::Read(Box::new(read));
            return;
        }
        if !last.is_empty() {
            self.send(last);
        }
        self.pieces = None;
    }

    /// The next batch of payloads, waiting for it; `None` once the read is
    /// over (then `finish` does not wait). The pushing ends here. A failed
    /// read may have handed over payloads before it failed.
    pub fn next_batch(&mut self) -> Option<PayloadBatch> {
        self.end();
        self.batches.as_ref()?.recv().ok()
    }

    /// The log, once read (waiting for the reading thread). The pushing
    /// ends here.
    pub fn finish(&mut self) -> Result<Log, CoreError> {
        self.end();
        let failed = |what: &str| CoreError::new(Code::Internal, what);
        match std::mem::replace(&mut self.state, State::Finished) {
            // The caller's log the thread borrowed is let go here.
            State::Reading(thread) => threads::joined(thread.join(), "the JSONL reading thread")
                .and_then(|(read, _)| read),
            State::Read(read) => *read,
            State::Pushing | State::Finished => Err(failed("the JSONL log was already taken")),
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

/// The reading thread: the payloads of the events that enter the surface
/// go to `send` in batches while `read_arriving` reads the pieces.
fn read(
    pieces: mpsc::Receiver<Vec<u8>>,
    send: mpsc::Sender<PayloadBatch>,
    lift_min: usize,
) -> Result<Log, CoreError> {
    Handing::new(send, lift_min).during(|mut observe| read_arriving(&pieces, &mut observe))
}

/// Read a log whose pieces (whole lines each, in order) arrive through
/// `pieces` while they are made: each piece, as it comes, is checked as
/// UTF-8, split into lines and its events read and folded on this thread;
/// once the sender is gone, the pieces still waiting are read on two
/// threads. `observe` is told of each
/// event once folded.
pub(crate) fn read_arriving(
    pieces: &mpsc::Receiver<Vec<u8>>,
    observe: &mut Observe<'_>,
) -> Result<Log, CoreError> {
    let mut stream = Stream::default();
    let arrived = arrivals(pieces, |piece| {
        stream.piece(prepare(Piece::Keep(piece)), observe);
        true
    });
    // Never ended early: a defect is the stream's to report.
    let rest = arrived.unwrap_or_default();
    let rest = prepare_all(rest.into_iter().map(Piece::Keep).collect());
    stream.finish(rest, observe).map_err(|(e, _)| e)
}

/// The hand-over of surface payloads in batches (see the module comment).
pub struct Handing {
    send: mpsc::Sender<PayloadBatch>,
    batch: PayloadBatch,
    sent: usize,
    live: usize,
    speculating: bool,
    lift_min: usize,
}

impl Handing {
    pub fn new(send: mpsc::Sender<PayloadBatch>, lift_min: usize) -> Handing {
        Handing {
            send,
            batch: PayloadBatch::default(),
            sent: 0,
            live: 0,
            speculating: true,
            lift_min,
        }
    }

    /// Run `read` with this hand-over told of each event it folds; once it
    /// succeeds, the last batch goes too (a failed read's error is what
    /// counts).
    pub fn during<T>(
        mut self,
        read: impl FnOnce(Observe<'_>) -> Result<T, CoreError>,
    ) -> Result<T, CoreError> {
        let mut observe =
            |log: &mut Log, seq: usize, data: &str, at: usize| self.observe(log, seq, data, at);
        let out = read(Some(&mut observe));
        if out.is_ok() {
            self.flush();
        }
        out
    }

    /// An event was folded: hand its payload over if it entered the
    /// surface (`data`, at `at` in the log's texts). The log keeps the
    /// exact long strings it lifts as the units JS gets (`texts.rs::Lifted`).
    fn observe(&mut self, log: &mut Log, seq: usize, data: &str, at: usize) {
        let Some(meta) = log.metas.get(seq) else {
            return;
        };
        match meta.op {
            None => return,
            Some(SurfaceOp::Append) => self.live += 1,
            Some(SurfaceOp::Replace { .. }) => {
                let (start, end) = log.last_replace();
                self.live = (self.live + 1).saturating_sub(end + 1 - start);
            }
        }
        if !self.speculating {
            return;
        }
        if self.sent > 2 * self.live + SPECULATION_SLACK {
            self.speculating = false;
            return;
        }
        let Some(name) = meta.kind.name() else {
            return;
        };
        let mut places = Vec::new();
        let lifting = match at {
            usize::MAX => Lifting::Kept(&[]),
            _ => Lifting::Keep(&mut places),
        };
        self.batch
            .push(seq as u32, Some(name), data, self.lift_min, lifting);
        for (start, len, units) in places {
            log.texts_mut().lift(Lifted {
                at: at + start,
                len,
                units,
            });
        }
        self.sent += 1;
        if self.batch.json.len() >= BATCH_BYTES {
            self.flush();
        }
    }

    /// Hand the batch over.
    fn flush(&mut self) {
        if self.batch.seqs.is_empty() {
            return;
        }
        self.batch.close();
        let batch = std::mem::take(&mut self.batch);
        // JS may have stopped listening (it threw): the read goes on.
        let _ = self.send.send(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::lift::Hole;
    use crate::log::payloads;
    use std::sync::Arc;

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
    fn read_all(bytes: &[u8]) -> (Vec<PayloadBatch>, Result<Log, CoreError>) {
        read_lifting(bytes, crate::log::LIFT_MIN)
    }

    /// `read_all`, lifting strings of `lift_min` bytes.
    fn read_lifting(bytes: &[u8], lift_min: usize) -> (Vec<PayloadBatch>, Result<Log, CoreError>) {
        let mut reading = JsonlReading::with_piece_bytes(64 << 10, lift_min);
        for part in bytes.chunks(10_000) {
            reading.push(part);
        }
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
        let log = log
            .map_err(|e| e.line().unwrap_or(0))
            .expect("the log reads");
        assert!(batches.len() > 1);
        let seqs: Vec<u32> = batches
            .iter()
            .flat_map(|b| b.seqs.iter().copied())
            .collect();
        let nodes: Vec<u32> = log.surface().nodes().iter().map(|&n| n as u32).collect();
        assert_eq!(seqs, nodes);
        for b in &batches {
            assert_eq!(b.json, log.payloads_json(&b.seqs).expect("payloads read"));
        }
        assert_eq!(
            log.to_jsonl().expect("texts read"),
            Log::from_jsonl(text.as_bytes())
                .map_err(|e| e.line().unwrap_or(0))
                .expect("reads")
                .to_jsonl()
                .expect("texts read")
        );
    }

    #[test]
    fn long_strings_cross_lifted_each_with_its_place() {
        let mut text = HEADER.to_string() + "\n";
        for seq in 0..3000 {
            text.push_str(&user(seq, r#""append""#, ""));
            text.push('\n');
        }
        let (batches, log) = read_lifting(text.as_bytes(), 256);
        let log = log
            .map_err(|e| e.line().unwrap_or(0))
            .expect("the log reads");
        for b in &batches {
            assert_eq!(b.holes.len(), b.seqs.len());
            let mut expected = log.payloads_json(&b.seqs).expect("payloads read");
            for (k, (hole, &seq)) in b.holes.iter().zip(&b.seqs).enumerate() {
                let body = format!("m{seq} é {}", "p".repeat(300));
                // Not ASCII (é): UTF-16 units, which V8 keeps one byte a unit.
                let units: Vec<u16> = body.encode_utf16().collect();
                assert_eq!(*hole.units, crate::scan::Units::Utf16(units));
                assert_eq!(hole.at as usize, k);
                let key = |s: &str| crate::log::Step::Key(s.encode_utf16().collect());
                assert_eq!(
                    hole.path,
                    vec![key("content"), crate::log::Step::Index(0), key("text")]
                );
                expected = expected.replacen(&format!("\"{body}\""), "\"\"", 1);
            }
            assert_eq!(b.json, expected);
        }
        assert_eq!(batches.iter().map(|b| b.holes.len()).sum::<usize>(), 3000);
    }

    #[test]
    fn the_hand_over_stops_when_replaces_drop_most_of_what_it_sent() {
        let text = compacted(600);
        let (batches, log) = read_all(text.as_bytes());
        let log = log
            .map_err(|e| e.line().unwrap_or(0))
            .expect("the log reads");
        assert_eq!(log.surface().nodes().len(), 1);
        let sent: usize = batches.iter().map(|b| b.seqs.len()).sum();
        // Two nodes at most at a time: it stops past 2 * 2 + the slack.
        assert!(sent <= 2 * 4 + SPECULATION_SLACK + 1, "sent {sent}");
        assert!(sent > SPECULATION_SLACK);
        for b in &batches {
            assert_eq!(b.json, log.payloads_json(&b.seqs).expect("payloads read"));
        }
        // A log compacted fewer times is handed over whole.
        let text = compacted(200);
        assert!(text.len() >= 2 * (64 << 10));
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
        let err = log.err().map(|e| (e.line().unwrap_or(0), e.code()));
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
        let mut reading =
            JsonlReading::of_owner(Box::new(text.clone().into_bytes()), crate::log::LIFT_MIN);
        let mut batches = Vec::new();
        while let Some(b) = reading.next_batch() {
            batches.push(b);
        }
        let mut lent = reading
            .finish()
            .map_err(|e| e.code())
            .expect("the log reads");
        let seqs = |bs: &[PayloadBatch]| bs.iter().flat_map(|b| b.seqs.clone()).collect::<Vec<_>>();
        assert_eq!(seqs(&batches), seqs(&pushed.0));
        let mut pushed = pushed.1.map_err(|e| e.code()).expect("the log reads");
        assert_eq!(lent.to_jsonl().ok(), Some(text.clone()));
        assert_eq!(pushed.to_jsonl().ok(), Some(text.clone()));
        assert!(
            lent.texts_mut().compress(0),
            "nothing waits for the compressor"
        );
        assert!(!pushed.texts_mut().compress(0), "the pushed pieces wait");
        // A defect is named by its line; a short log is read at once.
        let bad = text.replacen("\"seq\":7000,", "\"seq\":7000", 1);
        let mut reading = JsonlReading::of_owner(Box::new(bad.into_bytes()), crate::log::LIFT_MIN);
        while reading.next_batch().is_some() {}
        assert_eq!(reading.finish().err().and_then(|e| e.line()), Some(7002));
        let mut reading =
            JsonlReading::of_owner(Box::new(compacted(20).into_bytes()), crate::log::LIFT_MIN);
        assert!(reading.next_batch().is_none());
        assert_eq!(reading.finish().map(|l| l.len()).ok(), Some(80));
    }

    #[test]
    fn a_short_log_is_read_at_once_and_hands_nothing_over() {
        let text = compacted(20);
        assert!(text.len() < 64 << 10);
        let (batches, log) = read_all(text.as_bytes());
        assert!(batches.is_empty());
        assert_eq!(log.map(|l| l.len()).ok(), Some(80));
        let (batches, log) = read_all(b"");
        assert!(batches.is_empty());
        assert_eq!(log.err().map(|e| e.line().unwrap_or(0)), Some(1));
        // The log is taken once.
        let mut reading = JsonlReading::of_bytes(text.as_bytes());
        assert!(reading.finish().is_ok());
        assert!(reading.finish().is_err());
    }

    #[test]
    fn a_long_string_the_log_keeps_crosses_again_as_the_same_units() {
        // Over 1 MiB, so the log's texts are compressed; long strings with
        // escapes, some spelled as JSON.stringify would not (`\/`): those
        // the log keeps as text, the others as the units JS got.
        let mut text = HEADER.to_string() + "\n";
        for seq in 0..30 {
            let slash = if seq % 3 == 0 { "\\/" } else { "" };
            let long = format!(
                "out {seq}{slash} ✓\\n\\\"{}",
                "line of output ".repeat(5_000)
            );
            text.push_str(&format!(
                r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"{long}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
            ));
            text.push('\n');
        }
        let (batches, log) = read_lifting(text.as_bytes(), 1_000);
        let mut log = log.map_err(|e| e.to_string()).expect("the log reads");
        // Taken at once as the pieces were read, before any compressor.
        let kept = |log: &Log| {
            (0..30)
                .filter(|&i| !log.texts.kept_strings(i).is_empty())
                .count()
        };
        assert_eq!(
            kept(&log),
            20,
            "the exact strings are kept as units as read"
        );
        let mut spins = 0;
        while !log.texts.idle {
            log.compress_texts(0);
            std::thread::sleep(std::time::Duration::from_millis(2));
            spins += 1;
            assert!(spins < 5_000, "the compressor never finished");
        }
        let handed: Vec<&Hole> = batches.iter().flat_map(|b| b.holes.iter()).collect();
        assert_eq!(handed.len(), 30);
        let seqs: Vec<u32> = (0..30).collect();
        let again = payloads(&log.texts, &log.payload_picks(&seqs), 1_000).expect("payloads read");
        assert_eq!(again.holes.len(), 30);
        let joined: String = batches
            .iter()
            .map(|b| b.json.trim_matches(['[', ']']))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(again.json, format!("[{joined}]"));
        for (k, (a, b)) in again.holes.iter().zip(handed).enumerate() {
            assert_eq!(a.units, b.units, "hole {k}");
            // Kept as units: the same units cross, not a second decoding.
            assert_eq!(Arc::ptr_eq(&a.units, &b.units), k % 3 != 0, "hole {k}");
        }
        assert_eq!(log.to_jsonl().expect("the log writes"), text);
    }
}
