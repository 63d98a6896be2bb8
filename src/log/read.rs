//! Reading events into a log: a seed (a JSON array per slice) or a JSONL
//! log, read a piece of whole lines at a time, each on two threads when long.

use super::texts::{Taken, COMPRESS_MIN_BYTES};
use super::Log;
use crate::error::{Code, CoreError, CoreResult};
use crate::event::{read_event, EventText, ReadError};
use crate::executor;
use crate::session_header::SessionHeader;
use std::borrow::Cow;
use std::sync::mpsc;

/// Pieces shorter than this are read on one thread.
pub(super) const PARALLEL_MIN_LINES: usize = 2048;

/// Events two reader threads claim at a time.
const READ_CHUNK: usize = 512;

/// Byte ranges of each line of `text` (without `\n` or a trailing `\r`).
fn line_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::with_capacity(text.len() / 128 + 1);
    // Newlines found with `memchr`'s vectorized search (AVX2 where the CPU
    // has it: the standard library's `split` searches a word at a time).
    let bytes = text.as_bytes();
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes).chain(std::iter::once(bytes.len())) {
        let stop = if end > start && bytes[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        spans.push((start, stop));
        start = end + 1;
    }
    if spans.len() > 1
        && spans
            .last()
            .is_some_and(|&(s, e)| s == e && s == text.len())
    {
        spans.pop();
    }
    spans
}

/// The caller's bytes are cut in two halves (compressed on two threads
/// once read: `take`) when at least this long.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// Each line's span in a text.
type Lines = Vec<(usize, usize)>;

/// The session header of a JSONL log from its first line (`None`: the log
/// has no line).
fn read_header(line: Option<&str>) -> Result<SessionHeader, CoreError> {
    match line {
        Some(line) if !line.trim().is_empty() => SessionHeader::from_line(line),
        _ => Err(CoreError::new(
            Code::CorruptLog,
            "empty or header-less session log",
        )),
    }
    .map_err(|error| error.at_line(1))
}

/// The error of the JSONL log event at `index` (on line `index + 2`) that
/// failed (`None`: unparsable).
fn event_error(index: usize, err: Option<CoreError>) -> CoreError {
    let line = index + 2;
    let error = err.unwrap_or_else(|| {
        CoreError::new(
            Code::CorruptLog,
            format!("corrupt session log: unparsable event at line {line}"),
        )
    });
    error.at_line(line)
}

fn newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

/// `bytes` cut after the first newline at or past the middle, when long.
fn halves(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    if bytes.len() < PARALLEL_MIN_BYTES {
        return None;
    }
    let mid = bytes.len() / 2;
    let i = memchr::memchr(b'\n', &bytes[mid..])?;
    Some(bytes.split_at(mid + i + 1))
}

/// Texts read (with their lines' spans) as the log takes them: buffers
/// the log owns wait for the compressor; the caller's bytes are compressed
/// now, each text on a helper of its own (a long log's two halves, two
/// threads), so no raw copy of them is ever whole. Under
/// `COMPRESS_MIN_BYTES` in all they are copied instead, as the compressor
/// would leave them.
fn take(texts: Vec<(Cow<'_, str>, Lines)>) -> Vec<Taken> {
    let borrowed = |text: &Cow<'_, str>| matches!(text, Cow::Borrowed(_));
    let borrowed_bytes: usize = texts
        .iter()
        .filter(|(t, _)| borrowed(t))
        .map(|(t, _)| t.len())
        .sum();
    let mut base = 0;
    std::thread::scope(|scope| {
        let taking: Vec<_> = texts
            .into_iter()
            .map(|(text, lines)| {
                base += text.len();
                let at = base - text.len();
                match text {
                    Cow::Borrowed(text) if borrowed_bytes >= COMPRESS_MIN_BYTES => {
                        let work = move || Taken::compressed(at, text, &lines);
                        Err((text, executor::scoped(scope, "dsh-compress", work)))
                    }
                    text => Ok(Taken::Buffer(text.into_owned())),
                }
            })
            .collect();
        taking
            .into_iter()
            .map(|taking| match taking {
                Ok(taken) => taken,
                // A panicking helper is a bug: its text is kept as it is.
                Err((text, Ok(thread))) => {
                    thread.join().unwrap_or_else(|_| Taken::Buffer(text.into()))
                }
                // No helper could start: the text is compressed here.
                Err((_, Err(not_started))) => (not_started.work)(),
            })
            .collect()
    })
}

/// The one reader of JSONL lines: the header line, then one event per
/// line, blank lines only at the end, the first invalid UTF-8 winning over
/// every other defect. Fed a piece of whole lines at a time, in order
/// (`push`: read and folded at once), then `finish`ed.
#[derive(Default)]
pub(super) struct Stream<'a> {
    /// Each piece pushed, as text, with its lines' spans (kept for the
    /// caller's bytes only, which `take` compresses by them).
    texts: Vec<(Cow<'a, str>, Lines)>,
    /// Lines and bytes in `texts`.
    lines: usize,
    bytes: usize,
    /// The line of the first invalid UTF-8 (it wins over every other defect).
    invalid_utf8: Option<usize>,
    /// The first other defect.
    failed: Option<CoreError>,
    /// The log, once its header is read.
    log: Option<Log>,
    /// The index of the first of the blank lines just read (allowed only at
    /// the end of the log).
    blank: Option<usize>,
    /// The index of the next event.
    next: usize,
}

impl<'a> Stream<'a> {
    /// The log of `pieces` (whole lines each, in order; every piece but
    /// the last ends with a newline).
    pub(super) fn read(pieces: impl IntoIterator<Item = Cow<'a, [u8]>>) -> CoreResult<Log> {
        let mut stream = Stream::default();
        pieces.into_iter().for_each(|piece| stream.push(piece));
        stream.finish()
    }

    /// Check a piece as UTF-8, split it into lines, and read and fold its
    /// events, in order (on two threads when there are many).
    pub(super) fn push(&mut self, piece: Cow<'a, [u8]>) {
        // The piece as text, or the line (within it) of its first invalid UTF-8.
        let text = match piece {
            Cow::Borrowed(b) => std::str::from_utf8(b)
                .map(Cow::Borrowed)
                .map_err(|e| newlines(&b[..e.valid_up_to()]) + 1),
            Cow::Owned(v) => String::from_utf8(v).map(Cow::Owned).map_err(|e| {
                let at = e.utf8_error().valid_up_to();
                newlines(&e.as_bytes()[..at]) + 1
            }),
        };
        let text = match text {
            // An empty piece (only ever a whole log's) holds no line.
            Ok(text) if text.is_empty() => return,
            Ok(text) => text,
            Err(line) => {
                self.invalid_utf8.get_or_insert(self.lines + line);
                return;
            }
        };
        let spans = line_spans(&text);
        if self.invalid_utf8.is_none() && self.failed.is_none() {
            if let Err(error) = self.fold(&text, &spans) {
                self.failed = Some(error);
            }
        }
        self.lines += spans.len();
        self.bytes += text.len();
        let spans = if matches!(text, Cow::Borrowed(_)) {
            spans
        } else {
            Vec::new()
        };
        self.texts.push((text, spans));
    }

    /// Read and fold the events of `text` (the next lines of the log): the
    /// header line first; blank lines only at the end of the log (those
    /// that end `text` wait to see whether an event follows).
    fn fold(&mut self, text: &str, spans: &[(usize, usize)]) -> Result<(), CoreError> {
        let mut spans = spans;
        if self.log.is_none() {
            let header = read_header(spans.first().map(|&(s, e)| &text[s..e]))?;
            self.log = Some(Log::new(header));
            spans = spans.get(1..).unwrap_or_default();
        }
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        let events = spans
            .iter()
            .rposition(|&(s, e)| !text[s..e].trim().is_empty())
            .map_or(0, |last| last + 1);
        if let (Some(blank), true) = (self.blank, events > 0) {
            return Err(event_error(blank, None));
        }
        log.metas.reserve(events);
        log.texts_mut().reserve(events);
        let all = &|_: usize, _: &EventText<'_>| true;
        log.fold_text(text, &spans[..events], self.bytes, all)
            .map_err(|(index, err)| event_error(index, err))?;
        if spans.len() > events {
            self.blank.get_or_insert(self.next + events);
        }
        self.next += spans.len();
        Ok(())
    }

    /// The log, once every piece is pushed.
    pub(super) fn finish(self) -> CoreResult<Log> {
        if let Some(line) = self.invalid_utf8 {
            let message = format!("corrupt session log: invalid UTF-8 at line {line}");
            return Err(CoreError::new(Code::CorruptLog, message).at_line(line));
        }
        if let Some(error) = self.failed {
            return Err(error);
        }
        // No log yet: no line was pushed.
        let mut log = match self.log {
            Some(log) => log,
            None => Log::new(read_header(None)?),
        };
        log.texts_mut().adopt(take(self.texts));
        Ok(log)
    }
}

impl Log {
    /// Seed from a JSON array of events (`new Session(id, seed)`) that
    /// continue the log: the first is at index `len()`.
    pub fn seed_json_array(&mut self, json: &str) -> CoreResult<()> {
        let items = crate::scan::array_items(json)
            .ok_or_else(|| CoreError::new(Code::InvalidArgument, "seed is not a JSON array"))?;
        let first = self.len();
        for (k, raw) in items.iter().enumerate() {
            let index = first + k;
            self.accept_text(raw, index).map_err(|e| {
                e.unwrap_or_else(|| {
                    CoreError::new(
                        Code::NotLossless,
                        format!("seed event at index {index} is not losslessly JSON-serializable"),
                    )
                })
            })?;
        }
        Ok(())
    }

    /// Parse a whole v0 JSONL log: the caller's bytes, read where they
    /// are and taken compressed (`take`: two halves on two threads when
    /// the log is long).
    pub fn from_jsonl(bytes: &[u8]) -> Result<Log, CoreError> {
        match halves(bytes) {
            Some((a, b)) => Stream::read([Cow::Borrowed(a), Cow::Borrowed(b)]),
            None => Stream::read([Cow::Borrowed(bytes)]),
        }
    }

    /// Read the events of `text` at `spans` (the first at index `len()`,
    /// the text at byte `first_byte` of the log's texts) and fold them into this log in order: on two threads when there are
    /// many, this one reading and folding units from the front while a
    /// helper reads units from the back; they meet wherever their speeds
    /// put them (another process may hold a core), then this thread folds
    /// what the helper read (no helper: on this thread only). The error
    /// names the index of the first event that failed (`None`: unparsable,
    /// or refused by `verify`, given an event's position in `spans`).
    fn fold_text(
        &mut self,
        text: &str,
        spans: &[(usize, usize)],
        first_byte: usize,
        verify: &(dyn Fn(usize, &EventText<'_>) -> bool + Sync),
    ) -> Result<(), (usize, Option<CoreError>)> {
        // A read keeps each text (a v0 log's: the reads are v0).
        debug_assert!(self.vocab.keeps_texts);
        let first_index = self.len();
        let read = |i: usize| {
            let (s, e) = spans[i];
            // A blank line inside the log reads as unparsable.
            read_event(&text[s..e], first_index + i).and_then(|event| {
                if verify(i, &event) {
                    Ok(event)
                } else {
                    Err(ReadError::Unparsable)
                }
            })
        };
        // Units of work: runs of up to READ_CHUNK events, in order.
        let units = spans.len().div_ceil(READ_CHUNK);
        let unit = |u: usize| u * READ_CHUNK..((u + 1) * READ_CHUNK).min(spans.len());
        let log = self;
        let mut fold = |i: usize, r: Result<EventText<'_>, ReadError>| {
            let (s, e) = spans[i];
            let index = first_index + i;
            log.accept_read(r, index).map_err(|err| (index, err))?;
            log.texts_mut().push_span(first_byte + s, first_byte + e);
            Ok(())
        };
        if spans.len() < PARALLEL_MIN_LINES {
            return (0..spans.len()).try_for_each(|i| fold(i, read(i)));
        }
        let ends = std::sync::Mutex::new((0, units));
        let claim = |front: bool| {
            let mut ends = ends.lock().unwrap_or_else(|e| e.into_inner());
            if ends.0 >= ends.1 {
                None
            } else if front {
                ends.0 += 1;
                Some(ends.0 - 1)
            } else {
                ends.1 -= 1;
                Some(ends.1)
            }
        };
        let stop = || {
            let mut ends = ends.lock().unwrap_or_else(|e| e.into_inner());
            ends.1 = ends.0;
        };
        std::thread::scope(|scope| {
            // No thread could start: this one claims every unit.
            let thread = executor::scoped(scope, "dsh-read-back", || {
                let mut read_units = Vec::new();
                while let Some(u) = claim(false) {
                    read_units.push(unit(u).map(read).collect::<Vec<_>>());
                }
                read_units
            })
            .ok();
            let mut done = Ok(());
            let mut next = 0;
            while let Some(u) = claim(true) {
                done = unit(u).try_for_each(|i| fold(i, read(i)));
                next = u + 1;
                if done.is_err() {
                    stop();
                    break;
                }
            }
            // A panicking reader is a bug; what it took is then read here.
            let rest = thread.and_then(|thread| thread.join().ok());
            done?;
            match rest {
                // The helper read units `next..` from the back.
                Some(rest) => {
                    for (u, reads) in (next..units).zip(rest.into_iter().rev()) {
                        for (i, r) in unit(u).zip(reads) {
                            fold(i, r)?;
                        }
                    }
                    Ok(())
                }
                None => (next * READ_CHUNK..spans.len()).try_for_each(|i| fold(i, read(i))),
            }
        })
    }
}

/// A piece of event texts, one per span, that arrives while the rest is
/// made (`Log::from_arriving`).
pub(crate) trait ArrivingPiece: Send + Sync {
    fn text(&self) -> &str;
    fn spans(&self) -> &[(usize, usize)];
    fn into_text(self) -> String;
}

impl Log {
    /// A log of `header` and the events of `pieces`, each read as it
    /// arrives (on two threads when long), checked by `verify` (the piece,
    /// its text, the event's index in it, the event) and folded; the log
    /// keeps the pieces' texts. `None` when an event fails (the caller
    /// reads them another way).
    pub(crate) fn from_arriving<P: ArrivingPiece>(
        header: SessionHeader,
        pieces: mpsc::Receiver<P>,
        verify: &(dyn Fn(&P, &str, usize, &EventText<'_>) -> bool + Sync),
    ) -> Option<Log> {
        let mut log = Log::new(header);
        let mut texts = Vec::new();
        let mut bytes = 0;
        for piece in pieces {
            let check = |i: usize, e: &EventText<'_>| verify(&piece, piece.text(), i, e);
            log.fold_text(piece.text(), piece.spans(), bytes, &check)
                .ok()?;
            // Each piece waits for the compressor.
            let taken = Taken::Buffer(piece.into_text());
            bytes += taken.len();
            texts.push(taken);
        }
        log.texts_mut().adopt(texts);
        Some(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Log::from_jsonl` of a buffer the log keeps (no copy of the text),
    /// as a pushed piece is kept.
    fn from_jsonl_vec(bytes: Vec<u8>) -> Result<Log, CoreError> {
        Stream::read([Cow::Owned(bytes)])
    }

    const HEADER: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;

    /// A log of `n` events: turns of a user message (with multi-byte
    /// characters: 2, 3 and 4 bytes) and an assistant message, some lines
    /// ending in CRLF.
    fn log_text(n: usize) -> String {
        let mut out = format!("{HEADER}\n");
        for seq in 0..n {
            let line = match seq % 4 {
                0 => format!(
                    r#"{{"type":"turn/start","seq":{seq},"time":1,"data":{{"turn":{seq}}}}}"#
                ),
                1 => format!(
                    r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"é中😀 \" \\ {seq}"}}],"source":{{"kind":"user"}}}},"surfaceOp":"append"}}"#
                ),
                2 => format!(
                    r#"{{"type":"assistant/message","seq":{seq},"time":1,"data":{{"content":[{{"type":"text","text":"ok {seq}"}}],"provenance":{{"provider":"p","model":"m"}}}},"surfaceOp":"append"}}"#
                ),
                _ => {
                    format!(r#"{{"type":"turn/end","seq":{seq},"time":1,"data":{{"turn":{seq}}}}}"#)
                }
            };
            out.push_str(&line);
            out.push_str(if seq % 7 == 3 { "\r\n" } else { "\n" });
        }
        out
    }

    #[test]
    fn a_short_text_is_left_for_the_compressor_or_copied() {
        // Far under `COMPRESS_MIN_BYTES`: an owned text waits for the
        // compressor, and the caller's bytes that short are copied.
        let line = format!(r#"{{"a":"{}"}}"#, "y".repeat(5_000));
        let spans = vec![(0, line.len())];
        let owned = take(vec![(Cow::Owned(line.clone()), spans.clone())]);
        assert!(
            matches!(owned[0], Taken::Buffer(_)),
            "left for the compressor"
        );
        let borrowed = take(vec![(Cow::Borrowed(&line[..]), spans)]);
        assert!(matches!(borrowed[0], Taken::Buffer(_)), "short: copied");
    }

    /// What reading `bytes` gives: the log's JSONL and surface, or the error.
    fn outcome(read: Result<Log, CoreError>) -> Result<(String, Vec<u64>), (usize, String)> {
        read.map(|log| (log.to_jsonl().expect("texts read"), log.surface().nodes()))
            .map_err(|e| (e.line().unwrap_or(0), e.to_string()))
    }

    /// `bytes` pushed `step` bytes at a time into a reading cut in pieces of
    /// about `piece` bytes, and read.
    fn read_pushed(bytes: &[u8], step: usize, piece: usize) -> Result<Log, CoreError> {
        let mut reading = super::super::resume::JsonlReading::with_piece_bytes(piece);
        for part in bytes.chunks(step) {
            reading.push(part);
        }
        reading.finish()
    }

    fn read_pieces(pieces: Vec<Vec<u8>>) -> Result<Log, CoreError> {
        Stream::read(pieces.into_iter().map(Cow::Owned))
    }

    /// Logs that read, and logs with a defect on a line after the first cuts.
    fn cases() -> Vec<Vec<u8>> {
        cases_with_defects()
            .into_iter()
            .map(|(bytes, _)| bytes)
            .collect()
    }

    /// The line of a log's defect and a fragment of its message.
    type Defect = Option<(usize, &'static str)>;

    /// `cases()`, each with its defect.
    fn cases_with_defects() -> Vec<(Vec<u8>, Defect)> {
        let good = log_text(60);
        let header_less = Some((1, "empty or header-less session log"));
        let mut cases = vec![
            (good.clone().into_bytes(), None),
            (format!("{good}\n\r\n  \n").into_bytes(), None),
            (HEADER.as_bytes().to_vec(), None),
            (format!("{HEADER}\n").into_bytes(), None),
            (Vec::new(), header_less),
            (b"\n".to_vec(), header_less),
        ];
        let lines: Vec<&str> = good.split_inclusive('\n').collect();
        for at in [5, 40, 59] {
            // A torn line, a blank line, and invalid UTF-8 on line `at + 1`.
            let with = |line: &[u8]| {
                let mut out = lines[..at].concat().into_bytes();
                out.extend_from_slice(line);
                out.extend_from_slice(lines[at + 1..].concat().as_bytes());
                out
            };
            let line = at + 1;
            cases.push((
                with(&lines[at].as_bytes()[..lines[at].len() / 2]),
                Some((line, "corrupt session log")),
            ));
            cases.push((with(b"\n"), Some((line, "unparsable event"))));
            let mut bad = lines[at].as_bytes().to_vec();
            bad[20] = 0xff;
            cases.push((with(&bad), Some((line, "invalid UTF-8"))));
        }
        cases
    }

    #[test]
    fn a_log_pushed_in_parts_cut_anywhere_reads_as_its_bytes_do() {
        for (bytes, defect) in cases_with_defects() {
            let whole = outcome(from_jsonl_vec(bytes.clone()));
            match (&whole, defect) {
                (Ok(_), None) => {}
                (Err((line, message)), Some((at, fragment))) => {
                    assert_eq!(*line, at, "{message}");
                    assert!(message.contains(fragment), "{message}");
                }
                _ => panic!("unexpected {whole:?} (expected {defect:?})"),
            }
            for step in [1, 2, 3, 5, 64, 1000] {
                for piece in [1, 7, 200, 1 << 20] {
                    let read = outcome(read_pushed(&bytes, step, piece));
                    assert_eq!(read, whole, "step {step} piece {piece}");
                }
            }
        }
    }

    #[test]
    fn a_borrowed_log_reads_as_a_kept_one_and_its_halves_keep_characters_whole() {
        let long = log_text(20_000).into_bytes();
        assert!(long.len() >= PARALLEL_MIN_BYTES);
        let (a, b) = halves(&long).expect("a long log is cut in two");
        assert!(a.ends_with(b"\n"));
        assert!(std::str::from_utf8(a).is_ok() && std::str::from_utf8(b).is_ok());
        assert_eq!([a, b].concat(), long);
        // The caller's bytes are taken compressed: nothing waits for the
        // compressor, while a kept buffer does.
        let mut borrowed = Log::from_jsonl(&long).expect("a long log reads");
        assert!(borrowed.texts_mut().compress(0), "nothing waits");
        let mut kept = from_jsonl_vec(long.clone()).expect("a long log reads");
        assert!(!kept.texts_mut().compress(0), "the kept buffer waits");
        let mut cases = cases();
        let mut bad = long.clone();
        let at = bad.len() - 300;
        bad[at] = b'{';
        cases.extend([long, bad]);
        for bytes in cases {
            let whole = outcome(from_jsonl_vec(bytes.clone()));
            assert_eq!(outcome(Log::from_jsonl(&bytes)), whole);
            let copied = match halves(&bytes) {
                Some((a, b)) => vec![a.to_vec(), b.to_vec()],
                None => vec![bytes.clone()],
            };
            assert_eq!(outcome(read_pieces(copied)), whole);
        }
    }

    #[test]
    fn two_readers_name_the_first_defect_wherever_they_meet() {
        let text = log_text(PARALLEL_MIN_LINES + 900);
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for at in [
            1,
            2,
            READ_CHUNK,
            lines.len() / 2,
            lines.len() - 2,
            lines.len() - 1,
        ] {
            let mut torn = lines.clone();
            torn[at] = "{\n";
            let err = Log::from_jsonl(torn.concat().as_bytes())
                .err()
                .map(|e| e.line().unwrap_or(0));
            assert_eq!(err, Some(at + 1), "defect on line {}", at + 1);
            // Read while pushed: some pieces as they come, the rest on two threads.
            let pushed = read_pushed(torn.concat().as_bytes(), 100_000, 1 << 16);
            assert_eq!(pushed.err().map(|e| e.line().unwrap_or(0)), Some(at + 1));
            // A second defect later is not the one named.
            if at + 5 < lines.len() {
                torn[at + 5] = "[\n";
                let err = Log::from_jsonl(torn.concat().as_bytes())
                    .err()
                    .map(|e| e.line().unwrap_or(0));
                assert_eq!(err, Some(at + 1));
            }
        }
        let log = Log::from_jsonl(text.as_bytes()).map_err(|e| e.line().unwrap_or(0));
        assert_eq!(log.map(|l| l.len()), Ok(PARALLEL_MIN_LINES + 900));
        let whole = outcome(Log::from_jsonl(text.as_bytes()));
        for (step, piece) in [(100_000, 1 << 16), (7_000, 1 << 20), (1 << 20, 3_000)] {
            assert_eq!(outcome(read_pushed(text.as_bytes(), step, piece)), whole);
        }
    }

    #[test]
    fn line_spans_strip_one_carriage_return_and_drop_the_last_empty_line() {
        let spans = |t: &str| -> Vec<String> {
            line_spans(t)
                .iter()
                .map(|&(s, e)| t[s..e].to_string())
                .collect()
        };
        assert_eq!(spans("a\r\nb\n"), vec!["a", "b"]);
        assert_eq!(spans("a\r\r\n\r\nb"), vec!["a\r", "", "b"]);
        assert_eq!(spans(""), vec![""]);
        assert_eq!(spans("\n"), vec![""]);
        assert_eq!(spans("\n\n"), vec!["", ""]);
        assert_eq!(spans("x\r"), vec!["x"]);
    }
}
