//! Reading events into a log: a seed (a JSON array per slice) or a whole
//! JSONL log, read on two threads when it is long, then folded in order.

use super::{LineError, Log, TextRef};
use crate::error::{CoreError, CoreResult};
use crate::event::{read_event, EventText, ReadError};
use crate::priority::lower_priority;
use crate::session_header::SessionHeader;

/// Logs shorter than this are read on one thread.
pub(super) const PARALLEL_MIN_LINES: usize = 4096;

/// Event texts to load: a buffer and each event's span in it.
pub(crate) struct Part<'s> {
    pub text: String,
    pub spans: &'s [(usize, usize)],
}

/// Byte ranges of each line of `text` (without `\n` or a trailing `\r`).
fn line_spans(text: &str) -> Vec<(usize, usize)> {
    let base = text.as_ptr() as usize;
    let mut spans = Vec::with_capacity(text.len() / 128 + 1);
    // `split` finds newlines with the standard library's vectorized search.
    for line in text.split('\n') {
        let start = line.as_ptr() as usize - base;
        let line = line.strip_suffix('\r').unwrap_or(line);
        spans.push((start, start + line.len()));
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

impl Log {
    /// Seed from a JSON array of events (`new Session(id, seed)`) that
    /// continue the log: the first is at index `len()`.
    pub fn seed_json_array(&mut self, json: &str) -> CoreResult<()> {
        let items = crate::scan::array_items(json)
            .ok_or_else(|| CoreError::InvalidArgument("seed is not a JSON array".into()))?;
        let first = self.len();
        for (k, raw) in items.iter().enumerate() {
            let index = first + k;
            self.accept_text(raw, index).map_err(|e| {
                e.unwrap_or_else(|| {
                    CoreError::NotLossless(format!(
                        "seed event at index {index} is not losslessly JSON-serializable"
                    ))
                })
            })?;
        }
        Ok(())
    }

    /// Parse a whole v0 JSONL log: header line, then one event per line.
    /// Lines are read (validated, split into fields) on two threads; the
    /// surface fold then runs over them in order.
    pub fn from_jsonl(bytes: &[u8]) -> Result<Log, LineError> {
        Log::from_jsonl_vec(bytes.to_vec()).map_err(|(e, _)| e)
    }

    /// `from_jsonl` of a buffer the log may keep (no copy of the text);
    /// the buffer comes back with the error.
    pub fn from_jsonl_vec(bytes: Vec<u8>) -> Result<Log, (LineError, Vec<u8>)> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.into_bytes();
                let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
                let error = CoreError::CorruptLog(format!(
                    "corrupt session log: invalid UTF-8 at line {line}"
                ));
                return Err((LineError { error, line }, bytes));
            }
        };
        let spans = line_spans(&text);
        let header = match spans
            .first()
            .filter(|&&(s, e)| !text[s..e].trim().is_empty())
        {
            None => Err(CoreError::CorruptLog(
                "empty or header-less session log".into(),
            )),
            Some(&(hs, he)) => SessionHeader::from_line(&text[hs..he]),
        };
        let header = match header {
            Ok(header) => header,
            Err(error) => return Err((LineError { error, line: 1 }, text.into_bytes())),
        };
        // Events: every line after the header; blank lines are allowed only at the end.
        let mut events = &spans[1..];
        while events
            .last()
            .is_some_and(|&(s, e)| text[s..e].trim().is_empty())
        {
            events = &events[..events.len() - 1];
        }
        let parts = vec![Part {
            text,
            spans: events,
        }];
        Log::from_parts(header, parts, &|_, _, _, _| true).map_err(|(index, err, texts)| {
            let line = index + 2;
            let error = err.unwrap_or_else(|| {
                CoreError::CorruptLog(format!(
                    "corrupt session log: unparsable event at line {line}"
                ))
            });
            let text = texts.into_iter().next().unwrap_or_default();
            (LineError { error, line }, text.into_bytes())
        })
    }

    /// A log of the events at the spans of `parts` (each part's spans are
    /// offsets into its own text; the parts' events follow one another):
    /// each is read (validated, split into fields) and passed to `verify`
    /// (part, its text, index in the part, event), on two threads when
    /// there are many; the surface fold then runs over them in order. The
    /// log keeps the parts' texts as they are (nothing is copied). The
    /// error names the index of the first event that failed (`None`:
    /// unparsable, or refused by `verify`) and gives the texts back.
    pub(crate) fn from_parts(
        header: SessionHeader,
        parts: Vec<Part<'_>>,
        verify: &(dyn Fn(usize, &str, usize, &EventText<'_>) -> bool + Sync),
    ) -> Result<Log, (usize, Option<CoreError>, Vec<String>)> {
        // Each part's first event index and first byte offset.
        let mut firsts = Vec::with_capacity(parts.len());
        let mut bases = Vec::with_capacity(parts.len());
        let (mut count, mut bytes) = (0, 0);
        for part in &parts {
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
                if verify(k, &part.text, i, &event) {
                    Ok(event)
                } else {
                    Err(ReadError::Unparsable)
                }
            })
        };
        // Units of work: whole parts, or the halves of a lone long part.
        let mut units: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            let n = part.spans.len();
            if parts.len() == 1 && n >= PARALLEL_MIN_LINES {
                units.push((k, 0..n / 2));
                units.push((k, n / 2..n));
            } else if n > 0 {
                units.push((k, 0..n));
            }
        }
        let read_unit = |(k, range): &(usize, std::ops::Range<usize>)| -> Vec<_> {
            range.clone().map(|i| read(*k, i)).collect()
        };
        // The fold records spans only; the log takes the texts after it.
        let mut log = Log::new(header);
        let mut fold = |k: usize, i: usize, r: Result<EventText<'_>, ReadError>| {
            let (s, e) = parts[k].spans[i];
            let index = firsts[k] + i;
            log.accept_read(r, index, TextRef::Span(bases[k] + s, bases[k] + e))
                .map_err(|err| (index, err))
        };
        let folded = if units.len() > 1 && count >= PARALLEL_MIN_LINES {
            // A helper reads the later units while this thread reads and
            // folds the first (the fold is in order), then folds the rest.
            let (first, later) = units.split_at(1);
            std::thread::scope(|scope| {
                let helper = scope.spawn(|| {
                    lower_priority();
                    later.iter().map(read_unit).collect::<Vec<_>>()
                });
                let (k, range) = &first[0];
                let done = range.clone().try_for_each(|i| fold(*k, i, read(*k, i)));
                // Joined whatever the first unit gave: a panicking reader is
                // a bug, and the rest is then read here instead.
                let rest = helper
                    .join()
                    .unwrap_or_else(|_| later.iter().map(read_unit).collect());
                done?;
                for ((k, range), reads) in later.iter().zip(rest) {
                    for (i, r) in range.clone().zip(reads) {
                        fold(*k, i, r)?;
                    }
                }
                Ok(())
            })
        } else {
            units
                .iter()
                .try_for_each(|(k, range)| range.clone().try_for_each(|i| fold(*k, i, read(*k, i))))
        };
        let texts: Vec<String> = parts.into_iter().map(|p| p.text).collect();
        if let Err((index, err)) = folded {
            return Err((index, err, texts));
        }
        log.texts.adopt_buffers(texts);
        Ok(log)
    }
}
