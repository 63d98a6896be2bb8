//! The row codec both SQL stores use (SPEC 11): an event's columns out of
//! its text for a write, and an event text spliced back from a row's columns
//! for a load, each column checked to be exactly one JSON value so that no
//! column can smuggle in another field. Engine-neutral: each store turns its
//! driver's values into `Cell`s.

use super::load::{self, Place, Repaired};
use crate::error::{Code, CoreError, CoreResult};
use crate::event::{event_text, push_event_text, read_event, EventSpans, EventText, ReadError};
use crate::executor;
use crate::log::{too_roomy, ArrivingPiece, Log, PIECE_BYTES};
use crate::session_header::SessionHeader;
use std::sync::mpsc;

/// One column's value as a driver read it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Cell<'a> {
    Null,
    Int(i64),
    Real(f64),
    /// TEXT, as bytes (a hand-made database can hold any).
    Text(&'a [u8]),
    Blob,
}

impl<'a> Cell<'a> {
    /// The text of a TEXT value that is UTF-8.
    fn text(self) -> Option<&'a str> {
        match self {
            Cell::Text(bytes) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }
    }
}

/// One event split into the columns of `events`.
pub(crate) struct Columns<'a> {
    pub(crate) ty: String,
    pub(crate) seq: i64,
    pub(crate) time: i64,
    pub(crate) data: &'a str,
    pub(crate) source_event_seqs: Option<String>,
    pub(crate) surface_op: Option<String>,
}

pub(crate) fn columns(text: &str) -> CoreResult<Columns<'_>> {
    let e = read_event(text, 0).map_err(|e| match e {
        ReadError::Invalid(e) => e,
        ReadError::Unparsable => CoreError::new(Code::InvalidArgument, "event text is not JSON"),
    })?;
    Ok(Columns {
        ty: e.ty.into_owned(),
        seq: e.seq as i64,
        time: e.time,
        data: e.data,
        source_event_seqs: e.source_event_seqs.map(|v| v.to_string()),
        surface_op: e.surface_op.map(|v| v.to_string()),
    })
}

/// The columns of an `events` row (after its session id), in the order
/// `values_text` and `Splicer::push` take their values, and `columns` gives them.
pub(crate) const EVENT_COLUMNS: &str = "seq, type, time, data, source_event_seqs, surface_op";

/// The columns of a `sessions` row (after its id), in this order: the one
/// mapping between a header and its row, both ways, for both SQL stores.
pub(crate) const HEADER_COLUMNS: &str = "version, created_at, cwd, parent_session, seed_length";

/// The header members the `sessions` columns hold, in `HEADER_COLUMNS`
/// order, and whether each column is an INTEGER (else TEXT).
const HEADER_MEMBERS: [(&str, bool); 5] = [
    ("version", true),
    ("createdAt", true),
    ("cwd", false),
    ("parentSession", false),
    ("seedLength", true),
];

/// A header's `sessions` columns for a write: a member the column cannot
/// hold is NULL (a header a store writes passed `check_persistable`).
pub(crate) struct HeaderRow {
    pub(crate) version: Option<i64>,
    pub(crate) created_at: Option<i64>,
    pub(crate) cwd: Option<String>,
    pub(crate) parent_session: Option<String>,
    pub(crate) seed_length: Option<i64>,
}

pub(crate) fn header_row(header: &SessionHeader) -> HeaderRow {
    let [(version, _), (created_at, _), (cwd, _), (parent, _), (seed_length, _)] = HEADER_MEMBERS;
    HeaderRow {
        version: header.int(version),
        created_at: header.int(created_at),
        cwd: header.text(cwd),
        parent_session: header.text(parent),
        seed_length: header.int(seed_length),
    }
}

/// The JSON text of a column's value; `None` for TEXT that is not UTF-8.
fn json_of(v: Cell<'_>) -> Option<String> {
    Some(match v {
        Cell::Null | Cell::Blob => "null".into(),
        Cell::Int(i) => i.to_string(),
        Cell::Real(f) if f.is_finite() => format!("{f:?}"),
        Cell::Real(_) => "null".into(),
        Cell::Text(_) => crate::json::quote(v.text()?),
    })
}

/// The header of a `sessions` row (`HEADER_COLUMNS`), checked as a JSONL
/// header line would be: the line is written from the columns and read
/// as one.
pub(crate) fn header_of(id: &str, row: [Cell<'_>; 5]) -> CoreResult<SessionHeader> {
    let mut line = String::from("{\"type\":\"session\"");
    for (i, ((key, _), v)) in HEADER_MEMBERS.into_iter().zip(row).enumerate() {
        if i == 1 {
            // The members in a header line's order.
            line.push_str(&format!(",\"id\":{}", crate::json::quote(id)));
        }
        // version and createdAt always (a missing one is refused), the
        // others only when stored.
        if i >= 2 && matches!(v, Cell::Null) {
            continue;
        }
        let value = json_of(v).ok_or_else(|| {
            CoreError::new(
                Code::CorruptLog,
                format!(
                    "corrupt session log: the {key} of session {} is not UTF-8 text",
                    crate::json::quote(id)
                ),
            )
        })?;
        line.push_str(&format!(",\"{key}\":{value}"));
    }
    line.push('}');
    SessionHeader::from_line(&line)
}

/// Byte classes for `json_column`'s scan.
const PLAIN: u8 = 0;
const QUOTE: u8 = 1;
const BACKSLASH: u8 = 2;
const OPEN: u8 = 3;
const CLOSE: u8 = 4;
const SEPARATOR: u8 = 5;
const NEWLINE: u8 = 6;
const CLASSES: [u8; 256] = {
    let mut t = [PLAIN; 256];
    t[b'"' as usize] = QUOTE;
    t[b'\\' as usize] = BACKSLASH;
    t[b'{' as usize] = OPEN;
    t[b'[' as usize] = OPEN;
    t[b'}' as usize] = CLOSE;
    t[b']' as usize] = CLOSE;
    t[b',' as usize] = SEPARATOR;
    t[b':' as usize] = SEPARATOR;
    t[b'\n' as usize] = NEWLINE;
    t[b'\r' as usize] = NEWLINE;
    t
};

/// The JSON text of a TEXT column, on one line, when it has the shape of
/// exactly one value: brackets balance and nothing outside strings
/// separates values. With that, an event text built around the column
/// parses only if the column is one value, so a column can never smuggle
/// in another field (the parse of the whole event text checks the rest).
fn json_column(v: Cell<'_>) -> Option<std::borrow::Cow<'_, str>> {
    let Cell::Text(bytes) = v else {
        return None;
    };
    let (mut depth, mut in_string, mut newline) = (0usize, false, false);
    let mut i = 0;
    while i < bytes.len() {
        let class = CLASSES[bytes[i] as usize];
        i += 1;
        if in_string {
            match class {
                QUOTE => in_string = false,
                BACKSLASH => i += 1,
                NEWLINE => return None,
                _ => {}
            }
            continue;
        }
        match class {
            QUOTE => in_string = true,
            OPEN => depth += 1,
            CLOSE => depth = depth.checked_sub(1)?,
            SEPARATOR if depth == 0 => return None,
            NEWLINE => newline = true,
            _ => {}
        }
    }
    if depth != 0 || in_string {
        return None;
    }
    let s = std::str::from_utf8(bytes).ok()?;
    Some(if newline {
        // Whitespace between tokens; a store line holds no newline.
        std::borrow::Cow::Owned(s.replace(['\n', '\r'], " "))
    } else {
        std::borrow::Cow::Borrowed(s)
    })
}

fn non_negative(v: Cell<'_>) -> Option<u64> {
    match v {
        Cell::Int(i) => u64::try_from(i).ok(),
        _ => None,
    }
}

/// The event text of an `events` row's values (`seq, type, time, data,
/// source_event_seqs, surface_op`), or `None` when its columns cannot form
/// one (a record that cannot be read).
pub(crate) fn values_text(cols: [Cell<'_>; 6]) -> Option<String> {
    let [seq, ty, time, data, sources, op] = cols;
    let (Some(seq), Some(time), Some(ty)) = (non_negative(seq), non_negative(time), ty.text())
    else {
        return None;
    };
    let data = json_column(data)?;
    let optional = |v: Cell<'_>| match v {
        Cell::Null => Some(None),
        v => json_column(v).map(|t| Some(t.into_owned())),
    };
    let (Some(sources), Some(op)) = (optional(sources), optional(op)) else {
        return None;
    };
    Some(event_text(
        ty,
        seq,
        time,
        &data,
        sources.as_deref(),
        op.as_deref(),
    ))
}

/// A column's text when it is UTF-8 on one line; `None` otherwise (the
/// row-by-row read decides what a newline means there).
fn line_column(bytes: &[u8]) -> Option<&str> {
    if bytes.contains(&b'\n') || bytes.contains(&b'\r') {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// Append the event text of an `events` row (`seq, type, time, data,
/// source_event_seqs, surface_op`) to `out`: the envelope `event_text`
/// writes around the column texts as they are. Its span and where the
/// columns landed; `None` (and `out` unchanged) when the columns cannot
/// form an event that way.
fn splice_values(out: &mut String, cols: [Cell<'_>; 6]) -> Option<((usize, usize), EventSpans)> {
    fn text(v: Cell<'_>) -> Option<&str> {
        match v {
            Cell::Text(bytes) => line_column(bytes),
            _ => None,
        }
    }
    // An absent optional column is NULL: `Some(None)`.
    fn optional(v: Cell<'_>) -> Option<Option<&str>> {
        match v {
            Cell::Null => Some(None),
            v => text(v).map(Some),
        }
    }
    let [seq, ty, time, data, sources, op] = cols;
    let (Some(seq), Some(time), Some(ty), Some(data), Some(sources), Some(op)) = (
        non_negative(seq),
        non_negative(time),
        ty.text(),
        text(data),
        optional(sources),
        optional(op),
    ) else {
        return None;
    };
    let start = out.len();
    let spans = push_event_text(out, ty, seq, time, data, sources, op);
    Some(((start, out.len()), spans))
}

/// Whether `field` (a slice of `text`, or absent) is exactly what the
/// column at `span` holds: that one value with at most whitespace around
/// it. A column that smuggles in another field (`1,"surfaceOp":...`) is not
/// one value, so the value the event read there ends before the column.
fn is_column(text: &str, span: Option<(usize, usize)>, field: Option<&str>) -> bool {
    let (Some((start, end)), Some(field)) = (span, field) else {
        return span.is_none() && field.is_none();
    };
    let Some(at) = (field.as_ptr() as usize).checked_sub(text.as_ptr() as usize) else {
        return false;
    };
    let blank = |s: Option<&str>| s.is_some_and(|s| s.bytes().all(|b| matches!(b, b' ' | b'\t')));
    at >= start
        && at + field.len() <= end
        && blank(text.get(start..at))
        && blank(text.get(at + field.len()..end))
}

/// Rows spliced into one buffer (see `splice_values`): a piece of a
/// session's rows, folded as it arrives (`read_spliced`).
struct SplicedRows {
    text: String,
    spans: Vec<(usize, usize)>,
    columns: Vec<EventSpans>,
}

impl SplicedRows {
    fn new() -> SplicedRows {
        SplicedRows {
            text: String::new(),
            spans: Vec::new(),
            columns: Vec::new(),
        }
    }

    /// Whether each column of event `i` (read from `text`, this piece's)
    /// is exactly the value the event read there.
    fn holds(&self, text: &str, i: usize, e: &EventText<'_>) -> bool {
        self.columns.get(i).is_some_and(|c| {
            is_column(text, Some(c.data), Some(e.data))
                && is_column(text, c.source_event_seqs, e.source_event_seqs)
                && is_column(text, c.surface_op, e.surface_op)
        })
    }
}

impl ArrivingPiece for SplicedRows {
    fn text(&self) -> &str {
        &self.text
    }
    fn spans(&self) -> &[(usize, usize)] {
        &self.spans
    }
    fn into_text(self) -> String {
        self.text
    }
}

/// The rows of one session, spliced a piece at a time for a thread that
/// folds each piece as it is made (`read_spliced`).
pub(crate) struct Splicer {
    piece: SplicedRows,
    send: mpsc::Sender<SplicedRows>,
    /// Rows pushed, those that could not form an event included.
    rows: usize,
    /// Whether every row formed an event.
    whole: bool,
}

impl Splicer {
    /// Splice one more row (see `splice_values`); a full piece goes to the fold.
    pub(crate) fn push(&mut self, cols: [Cell<'_>; 6]) {
        self.rows += 1;
        if !self.whole {
            return;
        }
        // About the row's text: its columns and the envelope. A piece that
        // cannot hold it goes now, and the next is made to fit it (a tool
        // output of megabytes would otherwise double the piece as it grows).
        let need = 64
            + cols
                .iter()
                .map(|c| if let Cell::Text(b) = c { b.len() } else { 24 })
                .sum::<usize>();
        let piece = &mut self.piece.text;
        if !piece.is_empty() && piece.len() + need > piece.capacity() {
            self.send_piece();
        }
        if self.piece.text.capacity() == 0 {
            self.piece
                .text
                .reserve_exact(need.max(PIECE_BYTES + (64 << 10)));
        }
        match splice_values(&mut self.piece.text, cols) {
            Some((span, spliced)) => {
                self.piece.spans.push(span);
                self.piece.columns.push(spliced);
            }
            None => self.whole = false,
        }
        if self.piece.text.len() >= PIECE_BYTES {
            self.send_piece();
        }
    }

    fn send_piece(&mut self) {
        if self.piece.spans.is_empty() {
            return;
        }
        let mut piece = std::mem::replace(&mut self.piece, SplicedRows::new());
        // The log keeps the text: the last piece of a short session (or
        // one sent early for a long row) must not keep a full piece's room.
        if too_roomy(piece.text.len(), piece.text.capacity()) {
            piece.text.shrink_to_fit();
        }
        // A fold that is gone has refused an event: the result says so.
        let _ = self.send.send(piece);
    }
}

/// Session `id`'s rows read and repaired (SPEC 11), with how many there
/// were (a torn tail included), for both SQL stores: `splice` pushes them
/// in seq order and they are read as one log while they are spliced
/// (`read_spliced`); when a row cannot be read that way, `records` reads
/// them all again, each row's event text (`values_text`) or `None` for a
/// row whose columns do not form one, and the log is repaired around them.
/// Both read through `source` (a transaction).
pub(crate) fn read_rows<S>(
    id: &str,
    header: SessionHeader,
    source: &mut S,
    splice: impl FnOnce(&mut S, &mut Splicer) -> CoreResult<()>,
    records: impl FnOnce(&mut S) -> CoreResult<Vec<Option<String>>>,
) -> CoreResult<(Repaired, usize)> {
    let (spliced, rows) = read_spliced(id, &header, |splicer| splice(source, splicer))?;
    if let Some(repaired) = spliced {
        return Ok((repaired, rows));
    }
    let records = records(source)?;
    let texts: Vec<Option<&str>> = records.iter().map(Option::as_deref).collect();
    Ok((load::repair(id, header, &texts, Place::Row)?, records.len()))
}

/// Session `id`'s rows, which `splice` pushes in seq order, read as one log
/// while they are spliced: a thread of its own folds each piece as it is
/// made, each column checked to be exactly the value the event read there,
/// then the log is repaired (closers only: every row was accepted). The
/// repaired log, or `None` when a row cannot be read that way (the caller
/// reads the rows one by one, as records that may be damaged); and how many
/// rows there were.
fn read_spliced(
    id: &str,
    header: &SessionHeader,
    splice: impl FnOnce(&mut Splicer) -> CoreResult<()>,
) -> CoreResult<(Option<Repaired>, usize)> {
    let (send, pieces) = mpsc::channel();
    let (spliced, folded, rows, whole) = std::thread::scope(|scope| {
        let fold = || {
            let verify =
                |p: &SplicedRows, text: &str, i: usize, e: &EventText<'_>| p.holds(text, i, e);
            Log::from_arriving(header.clone(), pieces, &verify)
        };
        let folding = executor::scoped(scope, "dsh-row-fold", fold);
        let mut splicer = Splicer {
            piece: SplicedRows::new(),
            send,
            rows: 0,
            whole: true,
        };
        let spliced = splice(&mut splicer);
        splicer.send_piece();
        let (rows, whole) = (splicer.rows, splicer.whole);
        // The fold ends once it has read the last piece.
        drop(splicer);
        let folded = match folding {
            Ok(folding) => executor::joined(folding.join(), "the row fold"),
            // No thread could start: the pieces waited in the channel.
            Err(not_started) => Ok((not_started.work)()),
        };
        (spliced, folded, rows, whole)
    });
    spliced?;
    let folded = folded?;
    match folded {
        Some(log) if whole => Ok((Some(load::complete(id, log)?), rows)),
        _ => Ok((None, rows)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_row_reads_back_as_the_header_it_was_written_from() {
        let cwd = "/a \"b\"\\c";
        let row = [
            Cell::Int(0),
            Cell::Int(5),
            Cell::Text(cwd.as_bytes()),
            Cell::Null,
            Cell::Int(3),
        ];
        let header = header_of("s\"1", row).unwrap();
        assert_eq!(
            header.line(),
            r#"{"type":"session","version":0,"id":"s\"1","createdAt":5,"cwd":"/a \"b\"\\c","seedLength":3}"#
        );
        let h = header_row(&header);
        assert_eq!(
            (
                h.version,
                h.created_at,
                h.cwd,
                h.parent_session,
                h.seed_length
            ),
            (Some(0), Some(5), Some(cwd.to_string()), None, Some(3))
        );
        // A REAL is a JSON number; a missing version is refused as a line's is.
        let real = header_of(
            "s",
            [
                Cell::Int(0),
                Cell::Real(1.5),
                Cell::Null,
                Cell::Null,
                Cell::Null,
            ],
        );
        assert_eq!(real.unwrap().number("createdAt"), Some(1.5));
        let none = header_of(
            "s",
            [Cell::Null, Cell::Int(1), Cell::Null, Cell::Null, Cell::Null],
        );
        assert_eq!(none.unwrap_err().code(), "UNSUPPORTED_VERSION");
    }
}
