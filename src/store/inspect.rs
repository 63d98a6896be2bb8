//! The read-only store API the `dsh-session` command-line tool reads
//! through: one stored log read by its address with the stores' own load
//! code (`jsonl::repair_bytes`, `sqlite::read_session`, the PostgreSQL
//! reader) and the load repair of SPEC 11 applied in memory, the first
//! record a torn tail drops, the sessions of a database, and who holds a
//! session's write lease. Nothing here writes, except `read_jsonl` asked to
//! make the repair durable (`LoadMode::repair` through `jsonl::FileRepairs`, under the lease), and
//! nothing beside a SQLite database is created (no `-wal`, no `-shm`).

use super::load::Repaired;
use super::postgres::{PgOptions, PostgresBackend};
use super::regular::open_regular;
use super::{jsonl, lease, not_found, sqlite, Backend, LoadMode};
use crate::error::{Code, CoreError, CoreResult};
use crate::invariants::Trace;
use crate::log::Log;
use crate::session_header::SessionHeader;
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};

/// A stored log read with the load repair of SPEC 11.
pub struct StoredLog {
    pub repaired: Repaired,
    /// Stored event records (the torn tail included).
    pub records: usize,
    /// JSONL only: the file size and the length the repair truncates to.
    pub file_bytes: Option<u64>,
    pub committed_bytes: Option<u64>,
    /// Whether the repair was written.
    pub written: bool,
    /// The first record a torn tail drops.
    pub torn_record: Option<TornRecord>,
}

/// Where a dropped record is: a 1-based line of a JSONL file (the header is
/// line 1) or a 1-based event row of a database, in seq order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Line(usize),
    Row(usize),
}

/// The first record a torn tail drops: where, the seq it should hold, why
/// it ends the kept events, and its text (cut to `TORN_SHOWN` characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornRecord {
    pub place: Place,
    pub seq: usize,
    pub cause: String,
    pub text: String,
    /// JSONL only: the record's length in bytes.
    pub bytes: Option<usize>,
}

/// The first SPEC 9 violation over a log, and the seq of the event it is about.
pub struct Violation {
    pub error: CoreError,
    pub seq: usize,
}

impl StoredLog {
    /// A database session read without writing (no file sizes).
    fn read_only(repaired: Repaired, records: usize) -> StoredLog {
        StoredLog {
            repaired,
            records,
            file_bytes: None,
            committed_bytes: None,
            written: false,
            torn_record: None,
        }
    }

    /// The log as a store load returns it (kept events and closers), or,
    /// unless `repaired`, as stored (the kept events alone).
    pub fn log(&self, repaired: bool) -> CoreResult<Log> {
        let log = &self.repaired.log;
        if repaired || log.len() == self.repaired.preserved {
            return Ok(log.clone());
        }
        log.fork_prefix(self.repaired.preserved, log.header().clone())
    }

    /// The first SPEC 9 violation over the kept events (and the closers
    /// when `repaired`), or `None`.
    pub fn first_violation(&self, repaired: bool) -> CoreResult<Option<Violation>> {
        let log = &self.repaired.log;
        let end = if repaired {
            log.len()
        } else {
            self.repaired.preserved
        };
        let texts = (0..end)
            .map(|i| log.text(i))
            .collect::<CoreResult<Vec<_>>>()?;
        let mut trace = Trace::new();
        Ok(trace
            .extend(texts.iter().map(|t| &**t))
            .err()
            .map(|error| Violation {
                error,
                seq: trace.len(),
            }))
    }
}

/// At most this many characters of a torn record are shown.
const TORN_SHOWN: usize = 100;

/// `text` cut to `TORN_SHOWN` characters (an ellipsis says it was).
fn shown_text(text: &str) -> String {
    match text.char_indices().nth(TORN_SHOWN) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// Why the record `text` (expected at seq `expected`) ends the kept
/// events, as the one reader of event lines sees it.
fn torn_cause(text: &str, expected: usize) -> String {
    match crate::scan::read_event_line(text) {
        Err(_) => "is not a JSON event".into(),
        Ok((fields, _)) => match fields.seq.and_then(crate::json::seq_of_text) {
            Some(seq) if seq == expected as u64 => "is not a valid event".into(),
            Some(seq) => format!("breaks the seq order (expected seq {expected}, got {seq})"),
            None => format!("breaks the seq order (expected seq {expected}, got none)"),
        },
    }
}

/// The first line a JSONL repair drops (the bytes after `committed`).
fn torn_jsonl(bytes: &[u8], committed: u64, preserved: usize) -> Option<TornRecord> {
    let start = usize::try_from(committed).ok()?;
    let tail = bytes.get(start..).filter(|t| !t.is_empty())?;
    let line = bytes[..start].iter().filter(|&&b| b == b'\n').count() + 1;
    let (record, ended) = match tail.iter().position(|&b| b == b'\n') {
        Some(end) => (&tail[..end], true),
        None => (tail, false),
    };
    let record = record.strip_suffix(b"\r").unwrap_or(record);
    let (text, cause) = match std::str::from_utf8(record) {
        Err(_) => (
            String::from_utf8_lossy(record).into_owned(),
            "is not valid UTF-8".to_string(),
        ),
        Ok(text) if !ended => (
            text.to_string(),
            "has no newline at its end (a write cut short)".to_string(),
        ),
        Ok(text) => (text.to_string(), torn_cause(text, preserved)),
    };
    Some(TornRecord {
        place: Place::Line(line),
        seq: preserved,
        cause,
        text: shown_text(&text),
        bytes: Some(record.len()),
    })
}

/// The first event row a SQLite repair drops (row `preserved + 1` in seq
/// order), its columns shown as JSON values.
fn torn_sqlite(conn: &Connection, id: &str, preserved: usize) -> Option<TornRecord> {
    let (seq, ty, data) = conn
        .query_row(
            "SELECT seq, type, data FROM events WHERE session_id = ?1 ORDER BY seq LIMIT 1 OFFSET ?2",
            rusqlite::params![id, preserved as i64],
            |r| {
                let json = |v: ValueRef<'_>| match v {
                    ValueRef::Integer(i) => i.to_string(),
                    ValueRef::Real(f) if f.is_finite() => format!("{f:?}"),
                    ValueRef::Text(t) | ValueRef::Blob(t) => {
                        crate::json::quote(&String::from_utf8_lossy(t))
                    }
                    _ => "null".into(),
                };
                Ok((json(r.get_ref(0)?), json(r.get_ref(1)?), json(r.get_ref(2)?)))
            },
        )
        .ok()?;
    // An INTEGER seq (a REAL's text has a point or an exponent).
    let cause = match seq.parse::<u64>() {
        Ok(s) if s != preserved as u64 => {
            format!("breaks the seq order (expected seq {preserved}, got {s})")
        }
        _ => "does not form an event from its columns".to_string(),
    };
    Some(TornRecord {
        place: Place::Row(preserved + 1),
        seq: preserved,
        cause,
        text: shown_text(&format!("seq {seq}, type {ty}, data {data}")),
        bytes: None,
    })
}

/// Read a JSONL log by path and repair it as a store load would
/// (`jsonl::repair_bytes`); with `write`, make the repair durable as the
/// JSONL store does on load (`LoadMode::repair`).
pub fn read_jsonl(path: &Path, write: bool) -> CoreResult<StoredLog> {
    // A repair is a writer: it needs the session's lease (SESSION_IN_USE
    // while a store writes the session), held until it is done.
    let _lease = if write { jsonl::lease_log(path)? } else { None };
    let mut options = OpenOptions::new();
    options.read(true).write(write);
    let mut file =
        open_regular(path, &options).map_err(|e| e.into_error("cannot open session log", path))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| CoreError::io("cannot read session log", path, e))?;
    let (repaired, committed, records) = jsonl::repair_bytes(&bytes, None)?;
    let written = write && repaired.needs_write();
    if written {
        let id = repaired.log.header().id().to_string();
        let len = bytes.len() as u64;
        let mut writes = jsonl::FileRepairs::new(&file, path, &id, committed, len);
        LoadMode::Repair.repair(&repaired, &mut writes)?;
        writes.finish()?;
    }
    let torn_record = if repaired.torn {
        torn_jsonl(&bytes, committed, repaired.preserved)
    } else {
        None
    };
    Ok(StoredLog {
        repaired,
        records,
        file_bytes: Some(bytes.len() as u64),
        committed_bytes: Some(committed),
        written,
        torn_record,
    })
}

/// Read one session of a SQLite database without writing to it, and repair
/// it in memory as the SQLite store's load does (`sqlite::read_session`).
pub fn read_sqlite(path: &str, id: &str) -> CoreResult<StoredLog> {
    sqlite::read_only::with_sqlite(path, |conn| {
        if !sqlite::has_sessions(conn, path)? {
            return Err(not_found(id));
        }
        let (repaired, records) =
            sqlite::read_session(conn, path, id)?.ok_or_else(|| not_found(id))?;
        let torn_record = if repaired.torn {
            torn_sqlite(conn, id, repaired.preserved)
        } else {
            None
        };
        Ok(StoredLog {
            torn_record,
            ..StoredLog::read_only(repaired, records)
        })
    })
}

/// Headers in the order the stores list them: `createdAt`, then id.
fn sorted(mut headers: Vec<SessionHeader>) -> Vec<SessionHeader> {
    let created = |h: &SessionHeader| h.number("createdAt").unwrap_or(0.0);
    headers.sort_by(|a, b| {
        created(a)
            .total_cmp(&created(b))
            .then_with(|| a.id().cmp(b.id()))
    });
    headers
}

/// The headers of a SQLite database's sessions, read-only, in list order;
/// rows that are not v0 headers are left out, as the store does
/// (`sqlite::list_headers`).
pub fn list_sqlite(path: &str) -> CoreResult<Vec<SessionHeader>> {
    let headers = sqlite::read_only::with_sqlite(path, |conn| {
        if !sqlite::has_sessions(conn, path)? {
            return Ok(Vec::new());
        }
        sqlite::list_headers(conn, path)
    })?;
    Ok(sorted(headers))
}

/// Run `read` with a read-only reader of the PostgreSQL store at `url`,
/// schema `schema` (default timeouts; one connection), closed after.
fn with_postgres<T>(
    url: String,
    schema: String,
    read: impl FnOnce(&PostgresBackend) -> CoreResult<T>,
) -> CoreResult<T> {
    let reader = PostgresBackend::reader(PgOptions {
        pool_size: 1,
        ..PgOptions::new(url, schema)
    })?;
    let result = read(&reader);
    reader.close();
    result
}

/// Read one session of a PostgreSQL store read-only (no lease, no repair
/// written), with the load repair in memory.
pub fn read_postgres(url: String, schema: String, id: &str) -> CoreResult<StoredLog> {
    let (repaired, records) =
        with_postgres(url, schema, |r| r.read_log(id))?.ok_or_else(|| not_found(id))?;
    Ok(StoredLog::read_only(repaired, records))
}

/// The session headers of a PostgreSQL store, read-only, in list order; a
/// schema without the store's tables holds no session.
pub fn list_postgres(url: String, schema: String) -> CoreResult<Vec<SessionHeader>> {
    match with_postgres(url, schema, |r| r.list()) {
        Ok(listed) => Ok(sorted(listed.into_iter().map(|l| l.header).collect())),
        Err(e) if e.kind() == Code::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// A session whose write lease `lease_holder` looks for: a JSONL log (by
/// its path) or a session of a SQLite database (by the database's path and
/// the session's id).
pub enum Leased<'a> {
    Jsonl { log: &'a Path },
    Sqlite { database: &'a str, id: &'a str },
}

/// The lock file of a stored session's write lease (`None` for a JSONL
/// log outside a store's layout, which no store writes).
fn lease_file(session: &Leased<'_>) -> Option<PathBuf> {
    match *session {
        Leased::Jsonl { log } => jsonl::lease_path_of_log(log),
        Leased::Sqlite { database, id } => {
            Some(PathBuf::from(format!("{database}.locks")).join(lease::hashed_name(id)))
        }
    }
}

/// The pid of the process holding the write lease of a stored session,
/// seen without taking it; `None` when it is free, has no lock file, or
/// cannot be seen (outside Linux).
pub fn lease_holder(session: &Leased<'_>) -> Option<u32> {
    lease::holder(&lease_file(session)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_jsonl_record_names_its_line_cause_and_text() {
        let bytes = b"{\"type\":\"session\"}\n{\"seq\":0}\n{\"type\":\"x\",\"se";
        let torn = torn_jsonl(bytes, 29, 1).unwrap();
        assert_eq!(torn.place, Place::Line(3));
        assert_eq!(torn.seq, 1);
        assert_eq!(torn.text, "{\"type\":\"x\",\"se");
        assert!(torn.cause.contains("no newline"));
        let gap =
            b"{\"type\":\"session\"}\n{\"type\":\"turn/end\",\"seq\":5,\"time\":1,\"data\":{}}\n";
        let torn = torn_jsonl(gap, 19, 0).unwrap();
        assert_eq!(torn.cause, "breaks the seq order (expected seq 0, got 5)");
        assert_eq!(torn_jsonl(gap, gap.len() as u64, 1), None);
    }

    #[test]
    fn a_long_torn_record_is_shown_cut() {
        let long = "é".repeat(TORN_SHOWN + 5);
        assert_eq!(shown_text(&long).chars().count(), TORN_SHOWN + 1);
        assert!(shown_text(&long).ends_with('…'));
    }
}
