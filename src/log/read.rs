//! Reading events into a log: a seed (a JSON array per slice) or a whole
//! JSONL log, read on two threads when it is long, then folded in order.

use super::texts::{Taken, COMPRESS_MIN_BYTES};
use super::Log;
use crate::error::{Code, CoreError, CoreResult};
use crate::event::{read_event, EventText, ReadError};
use crate::executor;
use crate::session_header::SessionHeader;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::mpsc;

/// Logs shorter than this are read on one thread.
pub(super) const PARALLEL_MIN_LINES: usize = 4096;

/// Events two reader threads claim at a time.
const READ_CHUNK: usize = 512;

/// Event texts to load: a buffer (the log's own, or the caller's bytes,
/// which the log compresses as it takes them) and each event's span in it.
pub(crate) struct Part<'s> {
    pub text: &'s str,
    pub spans: &'s [(usize, usize)],
}

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

/// Logs at least this long are checked and split into lines on two threads.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// A piece of a JSONL log: the caller's bytes (read where they are; the
/// log takes its texts compressed, so no raw copy of the log is ever whole:
/// `take`) or a buffer the log keeps.
pub(crate) enum Piece<'a> {
    Borrow(&'a [u8]),
    Keep(Vec<u8>),
}

impl Piece<'_> {
    fn len(&self) -> usize {
        match self {
            Piece::Borrow(b) => b.len(),
            Piece::Keep(v) => v.len(),
        }
    }
}

/// Each line's span in a text.
type Lines = Vec<(usize, usize)>;

/// A piece as the log's text and its lines' spans, or the 1-based line,
/// within the piece, of its first invalid UTF-8.
pub(super) type Prepared<'a> = Result<(Cow<'a, str>, Lines), usize>;

pub(super) fn prepare(piece: Piece<'_>) -> Prepared<'_> {
    let text = match piece {
        Piece::Borrow(b) => match std::str::from_utf8(b) {
            Ok(text) => Cow::Borrowed(text),
            Err(e) => return Err(newlines(&b[..e.valid_up_to()]) + 1),
        },
        Piece::Keep(v) => match String::from_utf8(v) {
            Ok(text) => Cow::Owned(text),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                return Err(newlines(&e.as_bytes()[..at]) + 1);
            }
        },
    };
    let spans = line_spans(&text);
    Ok((text, spans))
}

/// `prepare` of each piece, on two threads when the pieces are long (the
/// helper takes the pieces after the first half of the bytes).
pub(super) fn prepare_all(pieces: Vec<Piece<'_>>) -> Vec<Prepared<'_>> {
    let total: usize = pieces.iter().map(Piece::len).sum();
    if pieces.len() > 1 && total >= PARALLEL_MIN_BYTES {
        // The helper takes the pieces after the first half of the bytes.
        let (mut at, mut bytes) = (0, 0);
        while at < pieces.len() && bytes < total / 2 {
            bytes += pieces[at].len();
            at += 1;
        }
        let mut pieces = pieces;
        let later = pieces.split_off(at.max(1));
        std::thread::scope(|scope| {
            let thread = executor::scoped(scope, "dsh-read-half", || {
                later.into_iter().map(prepare).collect::<Vec<_>>()
            });
            let mut first: Vec<Prepared> = pieces.into_iter().map(prepare).collect();
            match thread.map(|thread| thread.join()) {
                Ok(Ok(rest)) => first.extend(rest),
                // A panicking helper is a bug; its pieces are gone, so
                // the log reads as corrupt rather than short.
                Ok(Err(_)) => first.push(Err(1)),
                // No thread could start: its pieces are prepared here.
                Err(not_started) => first.extend((not_started.work)()),
            }
            first
        })
    } else {
        pieces.into_iter().map(prepare).collect()
    }
}

/// The session header of a JSONL log from its first line (`None`: the log
/// has no line).
pub(super) fn read_header(line: Option<&str>) -> Result<SessionHeader, CoreError> {
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
pub(super) fn event_error(index: usize, err: Option<CoreError>) -> CoreError {
    let line = index + 2;
    let error = err.unwrap_or_else(|| {
        CoreError::new(
            Code::CorruptLog,
            format!("corrupt session log: unparsable event at line {line}"),
        )
    });
    error.at_line(line)
}

pub(super) fn newlines(bytes: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', bytes).count()
}

pub(super) fn invalid_utf8(line: usize) -> CoreError {
    CoreError::new(
        Code::CorruptLog,
        format!("corrupt session log: invalid UTF-8 at line {line}"),
    )
    .at_line(line)
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

/// Texts read (the first at offset `base` of the log's texts, `lines` their
/// lines' spans) as the log takes them. The caller's bytes are compressed
/// (each borrowed text after the first on a thread of its own: a long log's
/// two halves, two threads), so no raw copy of them is ever whole; under
/// `COMPRESS_MIN_BYTES` in all they are copied instead, as the compressor
/// would leave them. Buffers the log owns wait for the compressor.
fn take(texts: Vec<Cow<'_, str>>, lines: &[Vec<(usize, usize)>], base: usize) -> Vec<Taken> {
    // Each text's offset in the log's texts.
    let bases: Vec<usize> = texts
        .iter()
        .scan(base, |at, t| {
            *at += t.len();
            Some(*at - t.len())
        })
        .collect();
    let borrowed = |k: usize| matches!(texts[k], Cow::Borrowed(_));
    let borrowed_bytes: usize = (0..texts.len())
        .filter(|&k| borrowed(k))
        .map(|k| texts[k].len())
        .sum();
    let threaded = borrowed_bytes >= COMPRESS_MIN_BYTES;
    let compress = |k: usize| Taken::compressed(bases[k], &texts[k], &lines[k]);
    let mut compressing = (0..texts.len()).filter(|&k| threaded && borrowed(k));
    let first = compressing.next();
    let mut compressed: Vec<Option<Taken>> = texts.iter().map(|_| None).collect();
    std::thread::scope(|scope| {
        let later: Vec<_> = compressing
            .map(|k| {
                let work = move || compress(k);
                (k, executor::scoped(scope, "dsh-compress", work))
            })
            .collect();
        if let Some(k) = first {
            compressed[k] = Some(compress(k));
        }
        for (k, thread) in later {
            // A panicking thread is a bug, and a text no thread could
            // start for is compressed here too.
            compressed[k] = Some(match thread {
                Ok(thread) => thread.join().unwrap_or_else(|_| compress(k)),
                Err(not_started) => (not_started.work)(),
            });
        }
    });
    // The others as a piece a read folds is taken (`Stream::piece`).
    texts
        .into_iter()
        .zip(compressed)
        .map(|(text, taken)| taken.unwrap_or_else(|| Taken::Buffer(text.into_owned())))
        .collect()
}

/// The one reader of JSONL lines: the header line, then one event per
/// line, blank lines only at the end, the first invalid UTF-8 winning over
/// every other defect. Fed a piece (of whole lines) at a time as pieces
/// come (`piece`: read and folded on this thread), then the pieces that
/// waited (`finish`: read on two threads); a one-shot read is a `finish`
/// of all of them.
#[derive(Default)]
pub(super) struct Stream {
    /// Each piece folded as it came, as the log takes it: a buffer that
    /// waits for the compressor. A defect gives back only the texts of the
    /// pieces that waited (`finish`).
    folded: Vec<Taken>,
    /// Lines and bytes in `folded`.
    lines: usize,
    bytes: usize,
    /// The line of the first invalid UTF-8 (it wins over every other defect).
    invalid_utf8: Option<usize>,
    /// The first other defect.
    failed: Option<CoreError>,
    /// The log, once its header is read.
    log: Option<Log>,
    /// Whether the header line was read.
    header_read: bool,
    /// The index of the first of the blank lines just read (allowed only at
    /// the end of the log).
    blank: Option<usize>,
    /// The index of the next event.
    next: usize,
}

impl Stream {
    /// Read and fold a piece's events, in order, on this thread.
    pub(super) fn piece(&mut self, piece: Prepared<'_>) {
        let (text, spans) = match piece {
            Ok(piece) => piece,
            Err(line) => {
                self.invalid_utf8.get_or_insert(self.lines + line);
                return;
            }
        };
        let pieces = [(text, spans)];
        if self.invalid_utf8.is_none() && self.failed.is_none() {
            if let Err(error) = self.fold(&pieces, false) {
                self.failed = Some(error);
            }
        }
        let [(text, spans)] = pieces;
        let taken = Taken::Buffer(text.into_owned());
        self.lines += spans.len();
        self.bytes += taken.len();
        self.folded.push(taken);
    }

    /// Read and fold the events of `pieces` (the next lines of the log), in
    /// order, on two threads when `parallel` and there are many: the
    /// header line first; blank lines only at the end of the log (those
    /// that end `pieces` wait to see whether an event follows).
    fn fold(&mut self, pieces: &[(Cow<'_, str>, Lines)], parallel: bool) -> Result<(), CoreError> {
        let mut spans: Vec<&[(usize, usize)]> = pieces.iter().map(|(_, s)| &s[..]).collect();
        if !self.header_read {
            self.header_read = true;
            let first = pieces.iter().position(|(t, _)| !t.is_empty());
            let line = first.and_then(|k| spans[k].first().map(|&(s, e)| &pieces[k].0[s..e]));
            self.log = Some(Log::new(read_header(line)?));
            if let Some(k) = first {
                spans[k] = spans[k].get(1..).unwrap_or_default();
            }
        }
        let Some(log) = self.log.as_mut() else {
            return Ok(());
        };
        let blank = |k: usize, i: usize| {
            let (s, e) = spans[k][i];
            pieces[k].0[s..e].trim().is_empty()
        };
        let mut ends: Vec<usize> = spans.iter().map(|s| s.len()).collect();
        'trim: for k in (0..pieces.len()).rev() {
            while ends[k] > 0 {
                if !blank(k, ends[k] - 1) {
                    break 'trim;
                }
                ends[k] -= 1;
            }
        }
        let events: usize = ends.iter().sum();
        if let (Some(blank), true) = (self.blank, events > 0) {
            return Err(event_error(blank, None));
        }
        let parts: Vec<Part<'_>> = pieces
            .iter()
            .zip(&spans)
            .zip(&ends)
            .map(|(((text, _), spans), &end)| Part {
                text: text.as_ref(),
                spans: &spans[..end],
            })
            .collect();
        log.metas.reserve(events);
        log.texts_mut().reserve(events);
        log.fold_parts(&parts, self.next, self.bytes, &|_, _, _, _| true, parallel)
            .map_err(|(index, err)| event_error(index, err))?;
        let lines: usize = spans.iter().map(|s| s.len()).sum();
        if lines > events {
            self.blank.get_or_insert(self.next + events);
        }
        self.next += lines;
        Ok(())
    }

    /// The log, once the pieces that waited (`rest`, prepared) are read
    /// too; on a defect, the texts of the pieces come back with it.
    pub(super) fn finish<'a>(
        mut self,
        rest: Vec<Prepared<'a>>,
    ) -> Result<Log, (CoreError, Vec<Cow<'a, str>>)> {
        let mut pieces = Vec::with_capacity(rest.len());
        let mut lines = self.lines;
        for piece in rest {
            match piece {
                Ok((text, spans)) => {
                    lines += spans.len();
                    pieces.push((text, spans));
                }
                Err(line) => {
                    self.invalid_utf8.get_or_insert(lines + line);
                }
            }
        }
        let failed = match (self.invalid_utf8, self.failed.take()) {
            (Some(line), _) => Some(invalid_utf8(line)),
            (None, Some(error)) => Some(error),
            (None, None) => self.fold(&pieces, true).err(),
        };
        let (texts, spans): (Vec<Cow<'a, str>>, Vec<Lines>) = pieces.into_iter().unzip();
        match (failed, self.log.take()) {
            (Some(error), _) => Err((error, texts)),
            // Only a failed header leaves no log, and it was reported.
            (None, None) => read_header(None).map(Log::new).map_err(|e| (e, texts)),
            (None, Some(mut log)) => {
                let taken = self
                    .folded
                    .into_iter()
                    .chain(take(texts, &spans, self.bytes))
                    .collect();
                log.texts_mut().adopt(taken);
                Ok(log)
            }
        }
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
    /// are and taken compressed (`take`), two halves on two threads
    /// when the log is long.
    pub fn from_jsonl(bytes: &[u8]) -> Result<Log, CoreError> {
        let pieces = match halves(bytes) {
            Some((a, b)) => vec![Piece::Borrow(a), Piece::Borrow(b)],
            None => vec![Piece::Borrow(bytes)],
        };
        Log::read_pieces(pieces).map_err(|(e, _)| e)
    }

    /// `from_jsonl` of a buffer the log keeps (no copy of the text); the
    /// buffer comes back with the error.
    pub fn from_jsonl_vec(bytes: Vec<u8>) -> Result<Log, (CoreError, Vec<u8>)> {
        if let Err(e) = std::str::from_utf8(&bytes) {
            let line = newlines(&bytes[..e.valid_up_to()]) + 1;
            return Err((invalid_utf8(line), bytes));
        }
        Log::read_pieces(vec![Piece::Keep(bytes)])
            .map_err(|(e, texts)| (e, texts.concat().into_bytes()))
    }

    /// A JSONL log in pieces of whole lines (every piece but the last ends
    /// with a newline), read whole by the one reader (`Stream`): each piece
    /// borrowed or kept, checked as UTF-8 and split into lines (on two
    /// threads when the log is long), then its events read and folded.
    pub(super) fn read_pieces<'a>(
        pieces: Vec<Piece<'a>>,
    ) -> Result<Log, (CoreError, Vec<Cow<'a, str>>)> {
        Stream::default().finish(prepare_all(pieces))
    }

    /// Read the events of `parts` (the first at index `first_index`, the
    /// first part's text at byte `first_byte` of the log's texts) and fold
    /// them into this log in order: on two threads when there are many, this
    /// one reading and folding units from the front while a helper reads
    /// units from the back; they meet wherever their speeds put them
    /// (another process may hold a core), then this thread folds what the
    /// helper read (no helper: on this thread only). The error names the
    /// index of the first event that failed (`None`: unparsable, or refused
    /// by `verify`).
    fn fold_parts(
        &mut self,
        parts: &[Part<'_>],
        first_index: usize,
        first_byte: usize,
        verify: &(dyn Fn(usize, &str, usize, &EventText<'_>) -> bool + Sync),
        parallel: bool,
    ) -> Result<(), (usize, Option<CoreError>)> {
        // Each part's first event index and first byte offset.
        let mut firsts = Vec::with_capacity(parts.len());
        let mut bases = Vec::with_capacity(parts.len());
        let (mut count, mut bytes) = (first_index, first_byte);
        for part in parts {
            firsts.push(count);
            bases.push(bytes);
            count += part.spans.len();
            bytes += part.text.len();
        }
        let read = |k: usize, i: usize| {
            let part = &parts[k];
            let (s, e) = part.spans[i];
            // A blank line inside the log reads as unparsable.
            read_event(&part.text[s..e], firsts[k] + i).and_then(|event| {
                if verify(k, part.text, i, &event) {
                    Ok(event)
                } else {
                    Err(ReadError::Unparsable)
                }
            })
        };
        // Units of work: runs of up to READ_CHUNK events of one part, in order.
        let mut units: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            let n = part.spans.len();
            for from in (0..n).step_by(READ_CHUNK) {
                units.push((k, from..(from + READ_CHUNK).min(n)));
            }
        }
        let log = self;
        let mut fold = |k: usize, i: usize, r: Result<EventText<'_>, ReadError>| {
            let (s, e) = parts[k].spans[i];
            let index = firsts[k] + i;
            log.accept_read(r, index).map_err(|err| (index, err))?;
            log.texts_mut().push_span(bases[k] + s, bases[k] + e);
            Ok(())
        };
        if parallel && count - first_index >= PARALLEL_MIN_LINES && units.len() > 1 {
            // This thread reads and folds units from the front (the fold is
            // in order) while a helper reads units from the back; they meet
            // wherever their speeds put them (another process may hold a
            // core), then this thread folds what the helper read.
            let ends = std::sync::Mutex::new((0, units.len()));
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
                        let (k, range) = &units[u];
                        read_units.push(range.clone().map(|i| read(*k, i)).collect::<Vec<_>>());
                    }
                    read_units
                })
                .ok();
                let mut done = Ok(());
                let mut next = 0;
                while let Some(u) = claim(true) {
                    let (k, range) = &units[u];
                    done = range.clone().try_for_each(|i| fold(*k, i, read(*k, i)));
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
                    Some(rest) => {
                        // The helper read units `next..` from the back.
                        for (u, reads) in (next..units.len()).zip(rest.into_iter().rev()) {
                            let (k, range) = &units[u];
                            for (i, r) in range.clone().zip(reads) {
                                fold(*k, i, r)?;
                            }
                        }
                    }
                    None => {
                        for (k, range) in &units[next..] {
                            range.clone().try_for_each(|i| fold(*k, i, read(*k, i)))?;
                        }
                    }
                }
                Ok(())
            })
        } else {
            units
                .iter()
                .try_for_each(|(k, range)| range.clone().try_for_each(|i| fold(*k, i, read(*k, i))))
        }
    }
}

/// Wait on `pieces`: each piece that arrives while the sender lives goes
/// to `each`, in order (one for which it returns false ends the wait:
/// `None`); the pieces still waiting once the sender is gone come back, to
/// be read together.
pub(super) fn arrivals<P>(
    pieces: &mpsc::Receiver<P>,
    mut each: impl FnMut(P) -> bool,
) -> Option<Vec<P>> {
    let mut waiting = VecDeque::new();
    loop {
        // What has arrived waits; a gone sender ends the stream.
        let ended = loop {
            match pieces.try_recv() {
                Ok(piece) => waiting.push_back(piece),
                Err(mpsc::TryRecvError::Empty) => break false,
                Err(mpsc::TryRecvError::Disconnected) => break true,
            }
        };
        if ended {
            break;
        }
        match waiting.pop_front() {
            Some(piece) => {
                if !each(piece) {
                    return None;
                }
            }
            None => match pieces.recv() {
                Ok(piece) => waiting.push_back(piece),
                Err(_) => break,
            },
        }
    }
    Some(waiting.into())
}

/// A piece of event texts, one per span, that arrives while the rest is
/// made (`Log::from_arriving`).
pub(crate) trait ArrivingPiece: Send + Sync {
    fn text(&self) -> &str;
    fn spans(&self) -> &[(usize, usize)];
    fn into_text(self) -> String;
}

impl Log {
    /// A log of `header` and the events of `pieces` as they arrive: each
    /// piece, as it comes, read, checked by `verify` (the piece, its text,
    /// the event's index in it, the event) and folded on this thread; the
    /// pieces still waiting once the sender is gone read on two threads
    /// The log keeps the pieces' texts.
    /// `None` when an event fails (the caller reads them another way).
    pub(crate) fn from_arriving<P: ArrivingPiece>(
        header: SessionHeader,
        pieces: mpsc::Receiver<P>,
        verify: &(dyn Fn(&P, &str, usize, &EventText<'_>) -> bool + Sync),
    ) -> Option<Log> {
        let mut log = Log::new(header);
        let mut texts = Vec::new();
        let mut bytes = 0;
        let mut fold = |batch: Vec<P>, parallel: bool| {
            let parts: Vec<Part<'_>> = batch
                .iter()
                .map(|p| Part {
                    text: p.text(),
                    spans: p.spans(),
                })
                .collect();
            let check =
                |k: usize, text: &str, i: usize, e: &EventText<'_>| verify(&batch[k], text, i, e);
            let first = log.len();
            let folded = log.fold_parts(&parts, first, bytes, &check, parallel);
            drop(parts);
            // Each piece waits for the compressor.
            for p in batch {
                let taken = Taken::Buffer(p.into_text());
                bytes += taken.len();
                texts.push(taken);
            }
            folded.is_ok()
        };
        // Each piece as it arrives, on this thread; those still waiting
        // once the sender is gone, together on two.
        let rest = arrivals(&pieces, |piece| fold(vec![piece], false))?;
        if !fold(rest, true) {
            return None;
        }
        log.texts_mut().adopt(texts);
        Some(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let owned = take(
            vec![Cow::Owned(line.clone())],
            std::slice::from_ref(&spans),
            10,
        );
        assert!(
            matches!(owned[0], Taken::Buffer(_)),
            "left for the compressor"
        );
        let borrowed = take(vec![Cow::Borrowed(&line[..])], &[spans], 0);
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
        Log::read_pieces(pieces.into_iter().map(Piece::Keep).collect()).map_err(|(e, _)| e)
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
            let whole = outcome(Log::from_jsonl_vec(bytes.clone()).map_err(|(e, _)| e));
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
        let mut kept = Log::from_jsonl_vec(long.clone()).expect("a long log reads");
        assert!(!kept.texts_mut().compress(0), "the kept buffer waits");
        let mut cases = cases();
        let mut bad = long.clone();
        let at = bad.len() - 300;
        bad[at] = b'{';
        cases.extend([long, bad]);
        for bytes in cases {
            let whole = outcome(Log::from_jsonl_vec(bytes.clone()).map_err(|(e, _)| e));
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
