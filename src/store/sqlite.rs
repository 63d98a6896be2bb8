//! The SQLite store (SPEC 11): one database, schema version 4, shared with
//! the TypeScript backend. The connection opens on first use (off the main
//! thread) and is shared behind a mutex; every statement binds its values.

use super::load::{self, Place, Repaired};
use super::{persisted_collision, Backend, Batch, Key, Listed, LoadMode, Loaded};
use crate::error::{Code, CoreError, CoreResult};
use crate::event::{event_text, push_event_text, read_event, EventSpans, ReadError};
use crate::log::{Log, Part};
use crate::session_header::SessionHeader;
use rusqlite::types::{Value as SqlValue, ValueRef};
use rusqlite::{params, Connection, ErrorCode, Transaction, TransactionBehavior};
use serde_json::{Map, Value};
use std::sync::Mutex;
use std::time::Duration;

/// `PRAGMA user_version` of the schema this build reads and writes.
pub const SCHEMA_VERSION: i64 = 4;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
  created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT;
CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
  source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq)) STRICT;
";

const INSERT_EVENT: &str =
    "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// The journal modes the store accepts.
pub const JOURNAL_MODES: [&str; 4] = ["wal", "delete", "truncate", "persist"];

enum Conn {
    Unopened,
    Open(Connection),
    Closed,
}

pub struct SqliteBackend {
    path: String,
    journal_mode: String,
    conn: Mutex<Conn>,
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
        time: e.time as i64,
        data: e.data,
        source_event_seqs: e.source_event_seqs.map(|v| v.to_string()),
        surface_op: e.surface_op.map(|v| v.to_string()),
    })
}

/// A JSON value of a column.
fn json_of(v: SqlValue) -> Value {
    match v {
        SqlValue::Null | SqlValue::Blob(_) => Value::Null,
        SqlValue::Integer(i) => Value::from(i),
        SqlValue::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        SqlValue::Text(s) => Value::String(s),
    }
}

/// The header of a `sessions` row, checked as a JSONL header line would be.
pub(crate) fn header_of(id: &str, row: [SqlValue; 5]) -> CoreResult<SessionHeader> {
    let [version, created_at, cwd, parent_session, seed_length] = row;
    let mut record = Map::new();
    record.insert("type".into(), Value::from("session"));
    record.insert("version".into(), json_of(version));
    record.insert("id".into(), Value::from(id));
    record.insert("createdAt".into(), json_of(created_at));
    for (key, v) in [
        ("cwd", cwd),
        ("parentSession", parent_session),
        ("seedLength", seed_length),
    ] {
        if !matches!(v, SqlValue::Null) {
            record.insert(key.into(), json_of(v));
        }
    }
    SessionHeader::from_line(&Value::Object(record).to_string())
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
fn json_column(v: ValueRef<'_>) -> Option<std::borrow::Cow<'_, str>> {
    let ValueRef::Text(bytes) = v else {
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

fn non_negative(v: ValueRef<'_>) -> Option<u64> {
    match v {
        ValueRef::Integer(i) => u64::try_from(i).ok(),
        _ => None,
    }
}

/// The event text of an `events` row (`seq, type, time, data,
/// source_event_seqs, surface_op`), or `None` when its columns cannot form
/// one (a record that cannot be read).
fn row_text(row: &rusqlite::Row<'_>) -> rusqlite::Result<Option<String>> {
    Ok(values_text(row_values(row)?))
}

/// The six values of an `events` row (`seq, type, time, data,
/// source_event_seqs, surface_op`).
fn row_values<'r>(row: &'r rusqlite::Row<'_>) -> rusqlite::Result<[ValueRef<'r>; 6]> {
    Ok([
        row.get_ref(0)?,
        row.get_ref(1)?,
        row.get_ref(2)?,
        row.get_ref(3)?,
        row.get_ref(4)?,
        row.get_ref(5)?,
    ])
}

/// `row_text` over the values of a row (of this database or another
/// engine's, see `store::postgres`).
pub(crate) fn values_text(cols: [ValueRef<'_>; 6]) -> Option<String> {
    let [seq, ty, time, data, sources, op] = cols;
    let (Some(seq), Some(time), ValueRef::Text(ty)) = (non_negative(seq), non_negative(time), ty)
    else {
        return None;
    };
    let ty = std::str::from_utf8(ty).ok()?;
    let data = json_column(data)?;
    let optional = |v: ValueRef<'_>| match v {
        ValueRef::Null => Some(None),
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

fn owned_row<const N: usize>(row: &rusqlite::Row<'_>) -> rusqlite::Result<[SqlValue; N]> {
    let mut out: [SqlValue; N] = std::array::from_fn(|_| SqlValue::Null);
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = row.get(i)?;
    }
    Ok(out)
}

/// How long a connection waits for another one's lock (and an open retries).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why one attempt to open the database failed.
enum Opening {
    /// Another connection held a lock: worth another attempt.
    Busy(rusqlite::Error),
    Failed(CoreError),
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

pub(crate) fn sql_err(path: &str, e: rusqlite::Error) -> CoreError {
    CoreError::new(Code::Sqlite, format!("session database at \"{path}\": {e}"))
}

/// `PRAGMA user_version` of a session database: 0 (not stamped yet) or
/// `SCHEMA_VERSION`; any other version is refused.
pub fn schema_version(conn: &Connection, path: &str) -> CoreResult<i64> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| sql_err(path, e))?;
    if version != 0 && version != SCHEMA_VERSION {
        return Err(CoreError::new(Code::UnsupportedVersion, format!(
            "session database at \"{path}\" has schema version {version}, incompatible with this build ({SCHEMA_VERSION})"
        )));
    }
    Ok(version)
}

fn header_row(conn: &Connection, path: &str, id: &str) -> CoreResult<Option<[SqlValue; 5]>> {
    let mut stmt = conn
        .prepare_cached("SELECT version, created_at, cwd, parent_session, seed_length FROM sessions WHERE id = ?1")
        .map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query([id]).map_err(|e| sql_err(path, e))?;
    match rows.next().map_err(|e| sql_err(path, e))? {
        Some(row) => Ok(Some(owned_row(row).map_err(|e| sql_err(path, e))?)),
        None => Ok(None),
    }
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
fn splice_values(
    out: &mut String,
    cols: [ValueRef<'_>; 6],
) -> Option<((usize, usize), EventSpans)> {
    fn text(v: ValueRef<'_>) -> Option<&str> {
        match v {
            ValueRef::Text(bytes) => line_column(bytes),
            _ => None,
        }
    }
    // An absent optional column is NULL: `Some(None)`.
    fn optional(v: ValueRef<'_>) -> Option<Option<&str>> {
        match v {
            ValueRef::Null => Some(None),
            v => text(v).map(Some),
        }
    }
    let [seq, ty, time, data, sources, op] = cols;
    let (Some(seq), Some(time), Some(ty), Some(data), Some(sources), Some(op)) = (
        non_negative(seq),
        non_negative(time),
        ty.as_str().ok(),
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

/// How many rows session `id` has, and about how many bytes their event
/// texts take: the rows' share of the database, plus the envelope around
/// each. Reserving that spares copying the buffer as it grows; it costs a
/// count over the session's index entries and two lookups.
fn texts_estimate(conn: &Connection, id: &str) -> (u64, usize) {
    let sizes = conn.query_row(
        "SELECT (SELECT count(*) FROM events WHERE session_id = ?1), \
                (SELECT max(rowid) FROM events), \
                (SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size())",
        [id],
        |r| {
            Ok((
                r.get::<_, Option<i64>>(0)?,
                r.get::<_, Option<i64>>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        },
    );
    let Ok((Some(rows), Some(all_rows), Some(bytes))) = sizes else {
        return (0, 0);
    };
    let (rows, all_rows, bytes) = (
        rows.max(0) as u64,
        all_rows.max(1) as u64,
        bytes.max(0) as u64,
    );
    let estimate = rows.min(all_rows) * (bytes / all_rows + 64);
    (
        rows,
        usize::try_from(estimate.min(bytes + rows * 64)).unwrap_or(0),
    )
}

/// Rows of one session spliced into one buffer (see `splice_row`).
#[derive(Default)]
pub(crate) struct SplicedRows {
    text: String,
    spans: Vec<(usize, usize)>,
    columns: Vec<EventSpans>,
    /// Rows read, those that could not form an event included.
    rows: usize,
    /// Whether every row formed an event.
    whole: bool,
}

impl SplicedRows {
    pub(crate) fn new() -> SplicedRows {
        SplicedRows {
            whole: true,
            ..SplicedRows::default()
        }
    }

    /// Splice one more row (see `splice_values`).
    pub(crate) fn push(&mut self, cols: [ValueRef<'_>; 6]) {
        self.rows += 1;
        if !self.whole {
            return;
        }
        match splice_values(&mut self.text, cols) {
            Some((span, spliced)) => {
                self.spans.push(span);
                self.columns.push(spliced);
            }
            None => self.whole = false,
        }
    }

    pub(crate) fn reserve(&mut self, bytes: usize) {
        let _ = self.text.try_reserve(bytes);
    }
}

/// Splice the rows `sql` selects (seq order) for `params`; `capacity`
/// bytes are reserved for the text first (a hint).
fn splice_rows(
    conn: &Connection,
    path: &str,
    sql: &str,
    params: impl rusqlite::Params,
    capacity: usize,
) -> CoreResult<SplicedRows> {
    let mut out = SplicedRows::new();
    out.reserve(capacity);
    let mut stmt = conn.prepare_cached(sql).map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query(params).map_err(|e| sql_err(path, e))?;
    while let Some(row) = rows.next().map_err(|e| sql_err(path, e))? {
        out.push(row_values(row).map_err(|e| sql_err(path, e))?);
    }
    Ok(out)
}

/// How much of the database file a load reads through a memory map
/// (SQLite's `mmap_size`; address space only). Mapped pages are read
/// without a system call and a copy each (what that saved a 100k-event
/// open is in benchmark/README.md). Only loads map the file:
/// SQLite cannot turn an I/O error on a mapped page into an error code (the
/// process gets SIGBUS), so the map is dropped when the load is done.
const LOAD_MMAP_BYTES: u64 = 1 << 30;

/// Map the database for a load, or stop mapping it (best effort: without
/// the map, SQLite reads as it always does).
fn map_for_load(conn: &Connection, on: bool) {
    let bytes = if on { LOAD_MMAP_BYTES } else { 0 };
    let _ = conn.execute_batch(&format!("PRAGMA mmap_size = {bytes};"));
}

/// Sessions with at least this many rows are read on two connections.
const PARALLEL_MIN_ROWS: u64 = 16_384;

/// Splice every row of session `id`, in seq order: one part, or two. A
/// long session's second half is read on a second (read-only) connection
/// of its own thread while this one reads the first, into a buffer of its
/// own (the log keeps both): only when `parallel` (the caller holds the
/// write lock, so both see the same rows) and the database is a file.
fn splice_session(
    conn: &Connection,
    path: &str,
    id: &str,
    parallel: bool,
) -> CoreResult<Vec<SplicedRows>> {
    let (rows, bytes) = texts_estimate(conn, id);
    let split = if parallel && rows >= PARALLEL_MIN_ROWS && path != ":memory:" {
        conn.query_row(
            "SELECT seq FROM events WHERE session_id = ?1 ORDER BY seq LIMIT 1 OFFSET ?2",
            rusqlite::params![id, (rows / 2) as i64],
            |r| r.get::<_, i64>(0),
        )
        .ok()
    } else {
        None
    };
    let Some(split) = split else {
        return Ok(vec![splice_rows(conn, path, EVENT_ROWS, [id], bytes)?]);
    };
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| {
            crate::log::lower_priority();
            let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
                | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let other = Connection::open_with_flags(path, flags).ok()?;
            other.busy_timeout(Duration::from_secs(5)).ok()?;
            map_for_load(&other, true);
            splice_rows(
                &other,
                path,
                EVENT_ROWS_FROM,
                rusqlite::params![id, split],
                bytes / 2,
            )
            .ok()
        });
        let first = splice_rows(
            conn,
            path,
            EVENT_ROWS_BEFORE,
            rusqlite::params![id, split],
            // Half the estimate and some room (on Linux, glibc remaps a
            // large buffer that outgrows it rather than copying it).
            bytes / 2 + bytes / 16,
        );
        (first, second.join().ok().flatten())
    });
    let first = first?;
    // Without its own connection (or if it failed), read the rest here.
    let second = match second {
        Some(rest) => rest,
        None => splice_rows(conn, path, EVENT_ROWS_FROM, rusqlite::params![id, split], 0)?,
    };
    if (first.rows + second.rows) as u64 != rows {
        // A row the split missed (a seq that is not a number compares
        // with neither half): read them all in one query instead.
        return Ok(vec![splice_rows(conn, path, EVENT_ROWS, [id], bytes)?]);
    }
    Ok(vec![first, second])
}

/// Read session `id` of the database at `path` and repair it in memory
/// (SPEC 11), with how many event rows it has (a torn tail included);
/// `None` when it has no `sessions` row. Writes nothing.
///
/// Every row's event text is spliced from its columns into one buffer and
/// read once, checking that each column was exactly the value the event
/// read there. A database with a row that fails that is read again row by
/// row, as a log with damaged records.
pub fn read_session(
    conn: &Connection,
    path: &str,
    id: &str,
) -> CoreResult<Option<(Repaired, usize)>> {
    read_session_with(conn, path, id, false)
}

/// `read_session`; `parallel`: the caller holds the database's write lock
/// (see `splice_session`).
fn read_session_with(
    conn: &Connection,
    path: &str,
    id: &str,
    parallel: bool,
) -> CoreResult<Option<(Repaired, usize)>> {
    let Some(row) = header_row(conn, path, id)? else {
        return Ok(None);
    };
    let header = header_of(id, row)?;
    let mut spliced = splice_session(conn, path, id, parallel)?;
    let rows = spliced.iter().map(|p| p.rows).sum();
    if let Some(repaired) = complete_spliced(id, &header, &mut spliced)? {
        return Ok(Some((repaired, rows)));
    }
    // Free what the read held before the row-by-row one.
    drop(spliced);
    read_rows(conn, path, id, header).map(Some)
}

/// The log of rows spliced by `SplicedRows::push`, each column checked to
/// be exactly the value the event read there, repaired (closers only: every
/// row was accepted); `None` when a row cannot be read that way (the caller
/// reads the rows one by one, as records that may be damaged).
pub(crate) fn complete_spliced(
    id: &str,
    header: &SessionHeader,
    spliced: &mut [SplicedRows],
) -> CoreResult<Option<Repaired>> {
    if !spliced.iter().all(|p| p.whole) {
        return Ok(None);
    }
    // The log takes the texts; their spans and columns stay here.
    let texts: Vec<String> = spliced
        .iter_mut()
        .map(|p| std::mem::take(&mut p.text))
        .collect();
    let parts = texts
        .into_iter()
        .zip(spliced.iter())
        .map(|(text, p)| Part {
            text,
            spans: &p.spans,
        })
        .collect();
    let verify = |k: usize, text: &str, i: usize, e: &crate::event::EventText<'_>| {
        spliced
            .get(k)
            .and_then(|p| p.columns.get(i))
            .is_some_and(|c| {
                is_column(text, Some(c.data), Some(e.data))
                    && is_column(text, c.source_event_seqs, e.source_event_seqs)
                    && is_column(text, c.surface_op, e.surface_op)
            })
    };
    match Log::from_parts(header.clone(), parts, &verify) {
        Ok(log) => load::complete(id, log).map(Some),
        Err(_) => Ok(None),
    }
}

const EVENT_ROWS: &str = "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events \
     WHERE session_id = ?1 ORDER BY seq";
const EVENT_ROWS_BEFORE: &str = "SELECT seq, type, time, data, source_event_seqs, surface_op \
     FROM events WHERE session_id = ?1 AND seq < ?2 ORDER BY seq";
const EVENT_ROWS_FROM: &str = "SELECT seq, type, time, data, source_event_seqs, surface_op \
     FROM events WHERE session_id = ?1 AND seq >= ?2 ORDER BY seq";

/// Refuse a row whose columns have a type the schema does not give them (a
/// table made by hand without STRICT can hold a REAL or TEXT `seq`): that is
/// not a torn write a repair may drop, but a database this store did not
/// write. `index` is the row's 0-based position in seq order.
fn check_column_types(
    row: &rusqlite::Row<'_>,
    id: &str,
    index: usize,
) -> Result<(), Result<CoreError, rusqlite::Error>> {
    use rusqlite::types::Type;
    let expected = [
        ("seq", Type::Integer, false),
        ("type", Type::Text, false),
        ("time", Type::Integer, false),
        ("data", Type::Text, false),
        ("source_event_seqs", Type::Text, true),
        ("surface_op", Type::Text, true),
    ];
    for (i, (name, ty, nullable)) in expected.into_iter().enumerate() {
        let v = row.get_ref(i).map_err(Err)?;
        let actual = v.data_type();
        if actual == ty || (nullable && actual == Type::Null) {
            continue;
        }
        let shown = match v {
            ValueRef::Integer(n) => format!(" ({n})"),
            ValueRef::Real(f) => format!(" ({f:?})"),
            _ => String::new(),
        };
        let class = match actual {
            Type::Null => "NULL",
            Type::Integer => "INTEGER",
            Type::Real => "REAL",
            Type::Text => "TEXT",
            Type::Blob => "BLOB",
        };
        return Err(Ok(CoreError::new(
            Code::CorruptLog,
            format!(
                "corrupt session log: row {} of session {} has a {class} {name} column{shown}; \
             the events table holds {} there",
                index + 1,
                crate::json::quote(id),
                if nullable {
                    "TEXT or NULL"
                } else if ty == Type::Integer {
                    "INTEGER"
                } else {
                    "TEXT"
                }
            ),
        )));
    }
    Ok(())
}

/// `read_session` for a database with a row that cannot be read as it is:
/// each row becomes an event text or a damaged record, and the log is
/// repaired around them.
fn read_rows(
    conn: &Connection,
    path: &str,
    id: &str,
    header: SessionHeader,
) -> CoreResult<(Repaired, usize)> {
    let mut records: Vec<Option<String>> = Vec::new();
    let mut stmt = conn
        .prepare_cached(EVENT_ROWS)
        .map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query([id]).map_err(|e| sql_err(path, e))?;
    while let Some(row) = rows.next().map_err(|e| sql_err(path, e))? {
        check_column_types(row, id, records.len()).map_err(|e| match e {
            Ok(corrupt) => corrupt,
            Err(e) => sql_err(path, e),
        })?;
        records.push(row_text(row).map_err(|e| sql_err(path, e))?);
    }
    let texts: Vec<Option<&str>> = records.iter().map(Option::as_deref).collect();
    let repaired = load::repair(id, header, &texts, Place::Row)?;
    Ok((repaired, records.len()))
}

/// The headers of the database's `sessions` rows, unordered; a row that is
/// not a v0 header is left out (load says why). Writes nothing.
pub(crate) fn list_headers(conn: &Connection, path: &str) -> CoreResult<Vec<SessionHeader>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions",
        )
        .map_err(|e| sql_err(path, e))?;
    let rows: Vec<[SqlValue; 6]> = stmt
        .query_map([], owned_row::<6>)
        .and_then(|rows| rows.collect())
        .map_err(|e| sql_err(path, e))?;
    Ok(rows
        .into_iter()
        .filter_map(|[id, version, created_at, cwd, parent, seed]| {
            let SqlValue::Text(id) = id else {
                return None;
            };
            header_of(&id, [version, created_at, cwd, parent, seed]).ok()
        })
        .collect())
}

impl SqliteBackend {
    pub fn new(path: String, journal_mode: String) -> SqliteBackend {
        SqliteBackend {
            path,
            journal_mode,
            conn: Mutex::new(Conn::Unopened),
        }
    }

    fn err(&self, e: rusqlite::Error) -> CoreError {
        sql_err(&self.path, e)
    }

    fn open(&self) -> CoreResult<Connection> {
        // Another process opening (and stamping) the same fresh database at
        // the same moment can make a step fail with SQLITE_BUSY without the
        // busy handler being asked (switching to WAL, upgrading a read
        // lock): the whole open is retried for as long as the busy timeout.
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        loop {
            match self.open_once() {
                Ok(conn) => return Ok(conn),
                Err(Opening::Busy(e)) if std::time::Instant::now() < deadline => {
                    drop(e);
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(Opening::Busy(e)) => return Err(self.err(e)),
                Err(Opening::Failed(e)) => return Err(e),
            }
        }
    }

    fn open_once(&self) -> Result<Connection, Opening> {
        let sql = |e: rusqlite::Error| {
            if is_busy(&e) {
                Opening::Busy(e)
            } else {
                Opening::Failed(self.err(e))
            }
        };
        let conn = Connection::open(&self.path).map_err(sql)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(sql)?;
        if version != 0 {
            schema_version(&conn, &self.path).map_err(Opening::Failed)?;
        }
        let _mode: String = conn
            .pragma_update_and_check(None, "journal_mode", &self.journal_mode, |r| r.get(0))
            .map_err(sql)?;
        conn.execute_batch("PRAGMA foreign_keys = ON; PRAGMA synchronous = FULL;")
            .map_err(sql)?;
        if version == 0 {
            conn.execute_batch(&format!(
                "BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            ))
            .map_err(|e| {
                let _ = conn.execute_batch("ROLLBACK");
                sql(e)
            })?;
        }
        Ok(conn)
    }

    /// Run `f` on the connection, opening it on first use.
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> CoreResult<T>) -> CoreResult<T> {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*guard, Conn::Unopened) {
            *guard = Conn::Open(self.open()?);
        }
        match &mut *guard {
            Conn::Open(conn) => f(conn),
            _ => Err(CoreError::new(Code::Closed, "session store is closed")),
        }
    }

    /// Run `f` in an immediate transaction and commit.
    fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> CoreResult<T>) -> CoreResult<T> {
        self.with(|conn| self.commit(conn, f))
    }

    /// Run `f` in an immediate transaction on `conn` and commit.
    fn commit<T>(
        &self,
        conn: &mut Connection,
        f: impl FnOnce(&Transaction<'_>) -> CoreResult<T>,
    ) -> CoreResult<T> {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.err(e))?;
        let out = f(&tx)?;
        tx.commit().map_err(|e| self.err(e))?;
        Ok(out)
    }

    fn insert_events(
        &self,
        tx: &Transaction<'_>,
        id: &str,
        texts: &[impl AsRef<str>],
    ) -> CoreResult<()> {
        let rows = texts
            .iter()
            .map(|t| columns(t.as_ref()))
            .collect::<CoreResult<Vec<_>>>()?;
        let mut chunks = rows.chunks_exact(ROWS_PER_INSERT);
        if rows.len() >= ROWS_PER_INSERT {
            let mut many = tx.prepare_cached(&INSERT_EVENTS).map_err(|e| self.err(e))?;
            for chunk in chunks.by_ref() {
                let mut at = 1;
                for c in chunk {
                    bind_row(&mut many, at, id, c).map_err(|e| self.err(e))?;
                    at += 7;
                }
                match many.raw_execute() {
                    Ok(_) => {}
                    // Which seq is taken: the row-by-row insert names it.
                    Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                        self.insert_rows(tx, id, chunk)?
                    }
                    Err(e) => return Err(self.err(e)),
                }
            }
        }
        self.insert_rows(tx, id, chunks.remainder())
    }

    /// Insert rows one statement each.
    fn insert_rows(&self, tx: &Transaction<'_>, id: &str, rows: &[Columns<'_>]) -> CoreResult<()> {
        let mut stmt = tx.prepare_cached(INSERT_EVENT).map_err(|e| self.err(e))?;
        for c in rows {
            bind_row(&mut stmt, 1, id, c).map_err(|e| self.err(e))?;
            stmt.raw_execute()
                .map_err(|e| match e.sqlite_error_code() {
                    Some(ErrorCode::ConstraintViolation) => CoreError::new(
                        Code::SeqMismatch,
                        format!(
                            "append seq mismatch for {}: the database already holds seq {}",
                            crate::json::quote(id),
                            c.seq
                        ),
                    ),
                    _ => self.err(e),
                })?;
        }
        Ok(())
    }
}

/// Rows per multi-row INSERT: one statement step for many rows costs a
/// third less than a step per row (7 parameters a row, far below SQLite's
/// limit of 32766).
const ROWS_PER_INSERT: usize = 32;

static INSERT_EVENTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op) VALUES {}",
        vec!["(?, ?, ?, ?, ?, ?, ?)"; ROWS_PER_INSERT].join(", ")
    )
});

/// Bind one row's seven values from parameter `at` on.
fn bind_row(
    stmt: &mut rusqlite::Statement<'_>,
    at: usize,
    id: &str,
    c: &Columns<'_>,
) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(at, id)?;
    stmt.raw_bind_parameter(at + 1, c.seq)?;
    stmt.raw_bind_parameter(at + 2, &c.ty)?;
    stmt.raw_bind_parameter(at + 3, c.time)?;
    stmt.raw_bind_parameter(at + 4, c.data)?;
    stmt.raw_bind_parameter(at + 5, &c.source_event_seqs)?;
    stmt.raw_bind_parameter(at + 6, &c.surface_op)
}

impl Backend for SqliteBackend {
    type Handle = ();

    fn exists(&self, key: &Key) -> CoreResult<bool> {
        self.with(|conn| Ok(header_row(conn, &self.path, &key.id)?.is_some()))
    }

    /// `<database>.locks/<sha256(id) hex>.lock`; none for `:memory:`.
    fn lease_path(&self, key: &Key) -> Option<std::path::PathBuf> {
        if self.path == ":memory:" {
            return None;
        }
        let dir = std::path::PathBuf::from(format!("{}.locks", self.path));
        Some(dir.join(super::lease::hashed_name(&key.id)))
    }

    fn load(&self, key: &Key, _handle: &mut (), mode: LoadMode) -> CoreResult<Option<Loaded>> {
        let id = key.id.as_str();
        if mode == LoadMode::Read {
            // A reader: one consistent snapshot, the repair in memory only.
            return self.with(|conn| {
                let tx = conn.transaction().map_err(|e| self.err(e))?;
                let read = read_session(&tx, &self.path, id);
                drop(tx);
                Ok(read?.map(|(repaired, _)| Loaded {
                    stored: repaired.preserved,
                    log: repaired.log,
                }))
            });
        }
        // The map is on for this load alone: no other operation takes the
        // connection between.
        self.with(|conn| {
            map_for_load(conn, true);
            // One immediate transaction: the rows read are the rows repaired.
            let loaded = self.commit(conn, |tx| {
                // The immediate transaction holds the write lock: a second
                // connection may read half the rows.
                let Some((repaired, _)) = read_session_with(tx, &self.path, id, true)? else {
                    return Ok(None);
                };
                if repaired.torn {
                    tx.execute(
                        "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
                        params![id, repaired.preserved as i64],
                    )
                    .map_err(|e| self.err(e))?;
                }
                let stored = if mode == LoadMode::Repair {
                    self.insert_events(tx, id, &repaired.closers()?)?;
                    repaired.log.len()
                } else {
                    repaired.preserved
                };
                Ok(Some(Loaded {
                    stored,
                    log: repaired.log,
                }))
            });
            map_for_load(conn, false);
            loaded
        })
    }

    fn create_log(
        &self,
        key: &Key,
        header: &SessionHeader,
        batch: &Batch,
        _handle: &mut (),
    ) -> CoreResult<()> {
        let id = key.id.as_str();
        let texts: Vec<&str> = batch.texts().collect();
        self.write(|tx| {
            let field = |k: &str| header.get(k).cloned().unwrap_or(Value::Null);
            let as_sql = |v: Value| match v {
                Value::Number(n) => n.as_i64().map_or(SqlValue::Null, SqlValue::Integer),
                Value::String(s) => SqlValue::Text(s),
                _ => SqlValue::Null,
            };
            tx.execute(
                "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    id,
                    as_sql(field("version")),
                    as_sql(field("createdAt")),
                    as_sql(field("cwd")),
                    as_sql(field("parentSession")),
                    as_sql(field("seedLength"))
                ],
            )
            .map_err(|e| match e.sqlite_error_code() {
                Some(ErrorCode::ConstraintViolation) => persisted_collision(id),
                _ => self.err(e),
            })?;
            self.insert_events(tx, id, &texts)
        })
    }

    fn append(&self, key: &Key, batch: &Batch, _handle: &mut ()) -> CoreResult<()> {
        let texts: Vec<&str> = batch.texts().collect();
        self.write(|tx| {
            // In the transaction that writes: the batch continues the stored log.
            let stored: i64 = tx
                .query_row(
                    "SELECT coalesce(max(seq) + 1, 0) FROM events WHERE session_id = ?1",
                    params![key.id],
                    |row| row.get(0),
                )
                .map_err(|e| self.err(e))?;
            if stored != batch.first_seq as i64 {
                return Err(super::seq_mismatch(&key.id, batch.first_seq, stored as u64));
            }
            self.insert_events(tx, &key.id, &texts)
        })
    }

    fn list(&self) -> CoreResult<Vec<Listed>> {
        self.with(|conn| {
            Ok(list_headers(conn, &self.path)?
                .into_iter()
                .map(|header| Listed { header })
                .collect())
        })
    }

    fn close(&self) {
        let mut guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        *guard = Conn::Closed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The event text `row_text` builds from these column values.
    fn text_of(cols: [SqlValue; 6]) -> Option<String> {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("SELECT ?1, ?2, ?3, ?4, ?5, ?6").unwrap();
        let mut rows = stmt.query(rusqlite::params_from_iter(cols)).unwrap();
        row_text(rows.next().unwrap().unwrap()).unwrap()
    }

    #[test]
    fn rows_become_event_texts_in_envelope_order() {
        let row = [
            SqlValue::Integer(3),
            SqlValue::Text("tool/result".into()),
            SqlValue::Integer(9),
            SqlValue::Text("{\n \"a\": [1, \"}\"]\n}".into()),
            SqlValue::Text("[1]".into()),
            SqlValue::Text("\"append\"".into()),
        ];
        assert_eq!(
            text_of(row.clone()).as_deref(),
            Some(
                r#"{"type":"tool/result","seq":3,"time":9,"data":{  "a": [1, "}"] },"sourceEventSeqs":[1],"surfaceOp":"append"}"#
            )
        );
        // A column that is not one value cannot smuggle in another field.
        for bad in ["1,\"surfaceOp\":\"append\"", "{\"a\":1}},{", "1}", "\"open"] {
            let mut r = row.clone();
            r[3] = SqlValue::Text(bad.into());
            assert_eq!(text_of(r), None, "{bad}");
        }
        let mut r = row.clone();
        r[3] = SqlValue::Integer(1);
        assert_eq!(text_of(r), None);
        let mut r = row;
        r[2] = SqlValue::Integer(-1);
        assert_eq!(text_of(r), None);
    }

    /// An in-memory store and the key of session `id` in it.
    fn memory_store(id: &str) -> (SqliteBackend, Key) {
        let key = Key {
            id: id.into(),
            file: String::new(),
        };
        (SqliteBackend::new(":memory:".into(), "wal".into()), key)
    }

    /// `read_session` (one read of every row) and `read_rows` (row by
    /// row) give the same repaired log for these rows of session "s".
    fn both_reads(rows: &[[SqlValue; 6]]) -> Result<(String, usize, bool), String> {
        let conn = Connection::open_in_memory().unwrap();
        // Not STRICT: a foreign client's table may hold any column type.
        conn.execute_batch(&SCHEMA.replace(" STRICT", "")).unwrap();
        conn.execute(
            "INSERT INTO sessions (id, version, created_at) VALUES ('s', 0, 1)",
            [],
        )
        .unwrap();
        for r in rows {
            conn.execute(
                "INSERT INTO events (session_id, seq, type, time, data, source_event_seqs, surface_op) \
                 VALUES ('s', ?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params_from_iter(r.iter()),
            )
            .unwrap();
        }
        let summary = |r: CoreResult<(Repaired, usize)>| {
            r.map(|(rep, _)| {
                (
                    rep.log.events_json(0, rep.log.len()).expect("texts read"),
                    rep.preserved,
                    rep.torn,
                )
            })
            .map_err(|e| e.to_string())
        };
        let fast = summary(read_session(&conn, "db", "s").map(|r| r.unwrap()));
        let header = header_of("s", header_row(&conn, "db", "s").unwrap().unwrap()).unwrap();
        let slow = summary(read_rows(&conn, "db", "s", header));
        assert_eq!(fast, slow);
        fast
    }

    #[test]
    fn a_batch_that_does_not_continue_the_stored_rows_is_refused_in_its_transaction() {
        let (b, key) = memory_store("m");
        let lines = |from: u64, to: u64| -> String {
            (from..to)
                .map(|seq| format!("{{\"type\":\"x\",\"seq\":{seq},\"time\":1,\"data\":{{}}}}\n"))
                .collect()
        };
        let batch = |from: u64, to: u64| Batch {
            first_seq: from,
            count: (to - from) as usize,
            lines: lines(from, to),
        };
        b.create_log(
            &key,
            &SessionHeader::minimal("m", 1.0),
            &batch(0, 1),
            &mut (),
        )
        .unwrap();
        // Another writer took seq 35: inside the second 32-row statement (seqs 33..=64).
        b.with(|c| {
            c.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES ('m', 35, 'x', 1, '{}')",
                [],
            )
            .map_err(|e| b.err(e))
        })
        .unwrap();
        let err = b.append(&key, &batch(1, 80), &mut ()).unwrap_err();
        // The check runs in the transaction that writes: it sees seq 35.
        assert_eq!(
            (err.code(), err.to_string().as_str()),
            (
                "SEQ_MISMATCH",
                "append seq mismatch for \"m\": expected 36 at index 0, got 1 (the store holds 36 events)"
            )
        );
        let count: i64 = b
            .with(|c| {
                c.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
                    .map_err(|e| b.err(e))
            })
            .unwrap();
        assert_eq!(count, 2);
        // Without the collision, all 79 rows go in (two full statements and a remainder).
        b.with(|c| {
            c.execute("DELETE FROM events WHERE seq = 35", [])
                .map_err(|e| b.err(e))
        })
        .unwrap();
        b.append(&key, &batch(1, 80), &mut ()).unwrap();
        let log = b
            .load(&key, &mut (), LoadMode::Repair)
            .unwrap()
            .unwrap()
            .log;
        assert_eq!(log.len(), 80);
        assert_eq!(log.text(79).ok().as_deref(), Some(lines(79, 80).trim_end()));
    }

    #[test]
    fn a_long_session_read_on_two_connections_is_the_same_log() {
        let dir = std::env::temp_dir().join(format!("dsh-sqlite-two-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.db").to_string_lossy().into_owned();
        let b = SqliteBackend::new(path.clone(), "wal".into());
        let key = Key {
            id: "long".into(),
            file: String::new(),
        };
        let n = PARALLEL_MIN_ROWS + 1001;
        let lines: String = (0..n)
            .map(|seq| {
                format!(
                    "{{\"type\":\"x\",\"seq\":{seq},\"time\":{seq},\"data\":{{\"n\":{seq}}}}}\n"
                )
            })
            .collect();
        let batch = Batch {
            first_seq: 0,
            count: n as usize,
            lines,
        };
        b.create_log(&key, &SessionHeader::minimal("long", 1.0), &batch, &mut ())
            .unwrap();
        let log = b
            .load(&key, &mut (), LoadMode::Repair)
            .unwrap()
            .unwrap()
            .log;
        let slow = b
            .with(|c| {
                let header = header_of("long", header_row(c, &path, "long")?.unwrap())?;
                read_rows(c, &path, "long", header)
            })
            .unwrap();
        assert_eq!(log.len(), n as usize);
        assert_eq!(
            log.events_json(0, log.len()).expect("texts read"),
            slow.0
                .log
                .events_json(0, slow.0.log.len())
                .expect("texts read")
        );
        // Only a load reads through a memory map: the store's connection
        // drops it afterwards.
        let mmap = |b: &SqliteBackend| -> i64 {
            b.with(|c| {
                c.pragma_query_value(None, "mmap_size", |r| r.get(0))
                    .map_err(|e| b.err(e))
            })
            .unwrap()
        };
        assert_eq!(mmap(&b), 0);
        b.with(|c| {
            map_for_load(c, true);
            Ok(())
        })
        .unwrap();
        assert_eq!(mmap(&b), LOAD_MMAP_BYTES as i64);
        b.load(&key, &mut (), LoadMode::Repair).unwrap().unwrap();
        assert_eq!(mmap(&b), 0);
        // A torn last row (in the half the second connection reads) is
        // dropped by the repair, durably, as on one connection.
        b.with(|c| {
            c.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES ('long', ?1, 'x', 1, '{')",
                [n as i64],
            )
            .map_err(|e| b.err(e))
        })
        .unwrap();
        assert_eq!(
            b.load(&key, &mut (), LoadMode::Repair)
                .unwrap()
                .unwrap()
                .log
                .len(),
            n as usize
        );
        let rows: i64 = b
            .with(|c| {
                c.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
                    .map_err(|e| b.err(e))
            })
            .unwrap();
        assert_eq!(rows, n as i64);
        b.close();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_read_of_all_rows_agrees_with_the_row_by_row_read() {
        let text = |s: &str| SqlValue::Text(s.into());
        let row = |seq: i64, ty: &str, data: &str, src: Option<&str>, op: Option<&str>| {
            [
                SqlValue::Integer(seq),
                text(ty),
                SqlValue::Integer(7),
                text(data),
                src.map_or(SqlValue::Null, text),
                op.map_or(SqlValue::Null, text),
            ]
        };
        let start = row(
            0,
            "turn/start",
            r#"{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}"#,
            None,
            None,
        );
        let user =
            |seq: i64, data: &str, op: Option<&str>| row(seq, "user/message", data, None, op);
        let content = r#"{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}"#;
        let (json, preserved, torn) =
            both_reads(&[start.clone(), user(1, content, Some("\"append\""))]).unwrap();
        assert!(json.contains(r#""surfaceOp":"append"}"#) && preserved == 2 && !torn);
        // Whitespace around a column is kept, as the column holds it.
        let spaced = format!(" \t{content} ");
        let (json, ..) =
            both_reads(&[start.clone(), user(1, &spaced, Some(" \"append\""))]).unwrap();
        assert!(json.contains(&format!(r#""data":{spaced},"surfaceOp": "append"}}"#)));
        // A data column that smuggles in a surfaceOp is a damaged record.
        let smuggled = format!(r#"{content},"surfaceOp":"append""#);
        let (json, preserved, torn) =
            both_reads(&[start.clone(), user(1, &smuggled, None)]).unwrap();
        assert!(!json.contains("append") && preserved == 1 && torn);
        // So is a sourceEventSeqs column that smuggles one.
        let r = row(
            1,
            "user/message",
            content,
            Some(r#"[0],"surfaceOp":"append""#),
            None,
        );
        let (_, preserved, torn) = both_reads(&[start.clone(), r]).unwrap();
        assert!(preserved == 1 && torn);
        // A pretty-printed column is read row by row, newlines as spaces.
        let pretty = "{\n \"content\": [],\n \"source\": {\"kind\": \"user\"}\n}";
        let (json, preserved, _) =
            both_reads(&[start.clone(), user(1, pretty, Some("\"append\""))]).unwrap();
        assert!(preserved == 2 && !json.contains('\n'));
        // A newline inside a string is not JSON: a damaged record.
        let broken =
            "{\"content\":[{\"type\":\"text\",\"text\":\"a\nb\"}],\"source\":{\"kind\":\"user\"}}";
        let (_, preserved, torn) =
            both_reads(&[start.clone(), user(1, broken, Some("\"append\""))]).unwrap();
        assert!(preserved == 1 && torn);
        // A column of a type the schema does not give it is corruption,
        // named by its row, never a torn record to drop.
        let mut r = user(1, content, Some("\"append\""));
        r[3] = SqlValue::Blob(content.as_bytes().to_vec());
        assert_eq!(
            both_reads(&[start.clone(), r]).unwrap_err(),
            "corrupt session log: row 2 of session \"s\" has a BLOB data column; the events table holds TEXT there"
        );
    }

    #[test]
    fn a_real_or_text_seq_or_time_is_corruption_wherever_it_is() {
        // (An INTEGER column of a table without STRICT keeps 1.0 or "1" as
        // the integer 1; 1.5 and "soon" keep their own types.)
        let start = |seq: SqlValue, time: SqlValue| {
            [
                seq,
                SqlValue::Text("turn/start".into()),
                time,
                SqlValue::Text(
                    r#"{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}"#.into(),
                ),
                SqlValue::Null,
                SqlValue::Null,
            ]
        };
        let int = SqlValue::Integer;
        assert_eq!(
            both_reads(&[start(int(0), int(1)), start(SqlValue::Real(1.5), int(1))]).unwrap_err(),
            "corrupt session log: row 2 of session \"s\" has a REAL seq column (1.5); the events table holds INTEGER there"
        );
        assert_eq!(
            both_reads(&[start(int(0), SqlValue::Real(1.5))]).unwrap_err(),
            "corrupt session log: row 1 of session \"s\" has a REAL time column (1.5); the events table holds INTEGER there"
        );
        assert_eq!(
            both_reads(&[start(int(0), SqlValue::Text("soon".into()))]).unwrap_err(),
            "corrupt session log: row 1 of session \"s\" has a TEXT time column; the events table holds INTEGER there"
        );
    }

    #[test]
    fn a_fresh_database_is_stamped_and_round_trips() {
        let (b, key) = memory_store("s'; DROP TABLE sessions; --");
        let header = SessionHeader::minimal(&key.id, 5.0);
        let batch = Batch {
            first_seq: 0,
            count: 1,
            lines: "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1,\"trigger\":{\"kind\":\"message\",\"source\":{\"kind\":\"user\"}}}}\n".into(),
        };
        b.create_log(&key, &header, &batch, &mut ()).unwrap();
        assert!(b.exists(&key).unwrap());
        let log = b
            .load(&key, &mut (), LoadMode::Repair)
            .unwrap()
            .unwrap()
            .log;
        // The open turn is closed by the load, durably.
        assert_eq!(log.len(), 2);
        assert_eq!(
            b.load(&key, &mut (), LoadMode::Repair)
                .unwrap()
                .unwrap()
                .log
                .len(),
            2
        );
        assert_eq!(b.list().unwrap()[0].header.id(), key.id);
        let version: i64 = b
            .with(|c| {
                c.pragma_query_value(None, "user_version", |r| r.get(0))
                    .map_err(|e| b.err(e))
            })
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
    }
}
