//! The SQLite store (SPEC 11): one database, schema version 4, shared with
//! the TypeScript backend. The connection opens on first use (off the main
//! thread) and is shared behind a mutex; every statement binds its values.

use super::load::Repaired;
use super::rows::{
    columns, header_of, header_row, read_rows, values_text, Cell, Columns, Splicer, EVENT_COLUMNS,
    HEADER_COLUMNS,
};
use super::{
    continues, lock, persisted_collision, seq_taken, Backend, Batch, Holds, Key, Listed, LoadMode,
    Policy, Repairs,
};
use crate::error::{Code, CoreError, CoreResult};
use crate::session_header::SessionHeader;
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, ErrorCode, Transaction, TransactionBehavior};
use std::sync::Mutex;
use std::time::Duration;

pub mod read_only;

/// `PRAGMA user_version` of the schema this build reads and writes.
pub const SCHEMA_VERSION: i64 = 4;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
  created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT;
CREATE TABLE IF NOT EXISTS events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
  source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq)) STRICT;
";

static INSERT_EVENT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("INSERT INTO events (session_id, {EVENT_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
});

/// The journal modes the store accepts.
pub const JOURNAL_MODES: [&str; 4] = ["wal", "delete", "truncate", "persist"];

enum Conn {
    Unopened,
    /// The connection, and why it is read-only when this process cannot
    /// write the database (`read_only::open`): then it only reads.
    Open(Connection, Option<String>),
    Closed,
}

pub struct SqliteBackend {
    path: String,
    journal_mode: String,
    conn: Mutex<Conn>,
}

/// A value as the row codec reads it.
fn cell(v: ValueRef<'_>) -> Cell<'_> {
    match v {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(i) => Cell::Int(i),
        ValueRef::Real(f) => Cell::Real(f),
        ValueRef::Text(t) => Cell::Text(t),
        ValueRef::Blob(_) => Cell::Blob,
    }
}

/// The `N` values of a row from column `first` on.
fn cells<'r, const N: usize>(
    row: &'r rusqlite::Row<'_>,
    first: usize,
) -> rusqlite::Result<[Cell<'r>; N]> {
    let mut out = [Cell::Null; N];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = cell(row.get_ref(first + i)?);
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

/// Whether the connection `conn` to `path` holds sessions: its schema
/// version checked; false for a database without sessions (schema version
/// 0 and no tables). A version-0 database that has both tables is read
/// like a stamped one: a writable store stamps it and reads them (`CREATE
/// TABLE IF NOT EXISTS`), so a read-only one and the CLI see the same
/// sessions. Nothing here stamps a schema or creates a table.
pub(crate) fn has_sessions(conn: &Connection, path: &str) -> CoreResult<bool> {
    if schema_version(conn, path)? != 0 {
        return Ok(true);
    }
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('sessions', 'events')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| sql_err(path, e))?;
    Ok(tables == 2)
}

/// The header of session `id`'s `sessions` row (`None` without one), read
/// by `header_of`.
fn read_header(conn: &Connection, path: &str, id: &str) -> CoreResult<Option<SessionHeader>> {
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {HEADER_COLUMNS} FROM sessions WHERE id = ?1"
        ))
        .map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query([id]).map_err(|e| sql_err(path, e))?;
    match rows.next().map_err(|e| sql_err(path, e))? {
        Some(row) => Ok(Some(header_of(
            id,
            cells(row, 0).map_err(|e| sql_err(path, e))?,
        )?)),
        None => Ok(None),
    }
}

/// Whether session `id` has a `sessions` row, readable or not.
fn has_header(conn: &Connection, path: &str, id: &str) -> CoreResult<bool> {
    let mut stmt = conn
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
        .map_err(|e| sql_err(path, e))?;
    stmt.exists([id]).map_err(|e| sql_err(path, e))
}

/// Read session `id` of the database at `path` and repair it in memory
/// (SPEC 11), with how many event rows it has (a torn tail included);
/// `None` when it has no `sessions` row. Writes nothing.
///
/// Every row's event text is spliced from its columns into pieces, each
/// folded as it is made (on a thread of its own: `read_spliced`), checking
/// that each column was exactly the value the event read there. A database
/// with a row that fails that is read again row by row, as a log with
/// damaged records.
pub fn read_session(
    conn: &Connection,
    path: &str,
    id: &str,
) -> CoreResult<Option<(Repaired, usize)>> {
    let Some(header) = read_header(conn, path, id)? else {
        return Ok(None);
    };
    let splice = |conn: &mut &Connection, splicer: &mut Splicer| {
        let mut stmt = conn
            .prepare_cached(&EVENT_ROWS)
            .map_err(|e| sql_err(path, e))?;
        let mut rows = stmt.query([id]).map_err(|e| sql_err(path, e))?;
        while let Some(row) = rows.next().map_err(|e| sql_err(path, e))? {
            splicer.push(cells(row, 0).map_err(|e| sql_err(path, e))?);
        }
        Ok(())
    };
    let records = |conn: &mut &Connection| row_records(conn, path, id);
    read_rows(id, header, &mut { conn }, splice, records).map(Some)
}

static EVENT_ROWS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ?1 ORDER BY seq")
});

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

/// Each event row of session `id` as `read_rows` reads records that may be
/// damaged; a column of a type the schema does not give it is corruption.
fn row_records(conn: &Connection, path: &str, id: &str) -> CoreResult<Vec<Option<String>>> {
    let mut records: Vec<Option<String>> = Vec::new();
    let mut stmt = conn
        .prepare_cached(&EVENT_ROWS)
        .map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query([id]).map_err(|e| sql_err(path, e))?;
    while let Some(row) = rows.next().map_err(|e| sql_err(path, e))? {
        check_column_types(row, id, records.len()).map_err(|e| match e {
            Ok(corrupt) => corrupt,
            Err(e) => sql_err(path, e),
        })?;
        records.push(values_text(cells(row, 0).map_err(|e| sql_err(path, e))?));
    }
    Ok(records)
}

/// The headers of the database's `sessions` rows, unordered; a row that is
/// not a v0 header is left out (load says why). Writes nothing.
pub(crate) fn list_headers(conn: &Connection, path: &str) -> CoreResult<Vec<SessionHeader>> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT id, {HEADER_COLUMNS} FROM sessions"))
        .map_err(|e| sql_err(path, e))?;
    let mut rows = stmt.query([]).map_err(|e| sql_err(path, e))?;
    let mut headers = Vec::new();
    while let Some(row) = rows.next().map_err(|e| sql_err(path, e))? {
        let Ok(ValueRef::Text(id)) = row.get_ref(0) else {
            continue;
        };
        let (Ok(id), Ok(values)) = (std::str::from_utf8(id), cells(row, 1)) else {
            continue;
        };
        if let Ok(header) = header_of(id, values) {
            headers.push(header);
        }
    }
    Ok(headers)
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
        read_only::check_file(&self.path).map_err(Opening::Failed)?;
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

    /// Run `f` on the connection (and why it is read-only, if it is),
    /// opening it on first use: read-only, without setting the journal mode
    /// or stamping the schema, when this process cannot write the database.
    fn with_mode<T>(
        &self,
        f: impl FnOnce(&mut Connection, Option<&str>) -> CoreResult<T>,
    ) -> CoreResult<T> {
        let mut guard = lock(&self.conn);
        if matches!(*guard, Conn::Unopened) {
            *guard = match read_only::unwritable(&self.path) {
                Some(why) => Conn::Open(read_only::open(&self.path)?, Some(why.to_string())),
                None => Conn::Open(self.open()?, None),
            };
        }
        match &mut *guard {
            Conn::Open(conn, why) => f(conn, why.as_deref()),
            _ => Err(CoreError::new(Code::Closed, "session store is closed")),
        }
    }

    /// Run `f` on the connection to read.
    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> CoreResult<T>) -> CoreResult<T> {
        self.with_mode(|conn, _| f(conn))
    }

    /// Run `f` on the connection to write: `READ_ONLY` when this process
    /// cannot write the database.
    fn with_writable<T>(&self, f: impl FnOnce(&mut Connection) -> CoreResult<T>) -> CoreResult<T> {
        self.with_mode(|conn, why| match why {
            Some(why) => Err(read_only::refused(&self.path, why)),
            None => f(conn),
        })
    }

    /// Run `f` in an immediate transaction and commit.
    fn write<T>(&self, f: impl FnOnce(&Transaction<'_>) -> CoreResult<T>) -> CoreResult<T> {
        self.with_writable(|conn| self.commit(conn, f))
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
        // A statement's rows at a time: the columns of a whole batch (a
        // million-event convert) would be a second copy of its size.
        let mut rows = Vec::with_capacity(ROWS_PER_INSERT);
        let mut many = None;
        for chunk in texts.chunks(ROWS_PER_INSERT) {
            rows.clear();
            for t in chunk {
                rows.push(columns(t.as_ref())?);
            }
            if rows.len() < ROWS_PER_INSERT {
                // The last, short chunk.
                self.insert_rows(tx, id, &rows)?;
                continue;
            }
            let many = match &mut many {
                Some(stmt) => stmt,
                None => many.insert(tx.prepare_cached(&INSERT_EVENTS).map_err(|e| self.err(e))?),
            };
            let mut at = 1;
            for c in &rows {
                bind_row(many, at, id, c).map_err(|e| self.err(e))?;
                at += 7;
            }
            match many.raw_execute() {
                Ok(_) => {}
                // Which seq is taken: the row-by-row insert names it.
                Err(e) if e.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) => {
                    self.insert_rows(tx, id, &rows)?
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Ok(())
    }

    /// Insert rows one statement each.
    fn insert_rows(&self, tx: &Transaction<'_>, id: &str, rows: &[Columns<'_>]) -> CoreResult<()> {
        let mut stmt = tx.prepare_cached(&INSERT_EVENT).map_err(|e| self.err(e))?;
        for c in rows {
            bind_row(&mut stmt, 1, id, c).map_err(|e| self.err(e))?;
            stmt.raw_execute()
                .map_err(|e| match e.sqlite_error_code() {
                    Some(ErrorCode::ConstraintViolation) => seq_taken(id, c.seq),
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
        "INSERT INTO events (session_id, {EVENT_COLUMNS}) VALUES {}",
        vec!["(?, ?, ?, ?, ?, ?, ?)"; ROWS_PER_INSERT].join(", ")
    )
});

/// The repair primitives in a load's immediate transaction.
struct TxRepairs<'a> {
    of: &'a SqliteBackend,
    tx: &'a Transaction<'a>,
    id: &'a str,
}

impl Repairs for TxRepairs<'_> {
    fn truncate(&mut self, repaired: &Repaired) -> CoreResult<()> {
        self.tx
            .execute(
                "DELETE FROM events WHERE session_id = ?1 AND seq >= ?2",
                params![self.id, repaired.preserved as i64],
            )
            .map(drop)
            .map_err(|e| self.of.err(e))
    }

    fn insert(&mut self, closers: &[String]) -> CoreResult<()> {
        self.of.insert_events(self.tx, self.id, closers)
    }
}

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
        self.with(|conn| {
            Ok(has_sessions(conn, &self.path)? && has_header(conn, &self.path, &key.id)?)
        })
    }

    fn check_writable(&self) -> CoreResult<()> {
        self.with_writable(|_| Ok(()))
    }

    /// `<database>.locks/<sha256(id) hex>.lock`; none for `:memory:`.
    fn lease_path(&self, key: &Key) -> Option<std::path::PathBuf> {
        if self.path == ":memory:" {
            return None;
        }
        let dir = std::path::PathBuf::from(format!("{}.locks", self.path));
        Some(dir.join(super::lease::hashed_name(&key.id)))
    }

    fn load(
        &self,
        key: &Key,
        _handle: &mut (),
        mode: LoadMode,
        policy: Policy<'_>,
    ) -> CoreResult<Option<Repaired>> {
        let id = key.id.as_str();
        if mode == LoadMode::Read {
            // A reader: one consistent snapshot; a write of the policy's
            // fails unless the database is still that snapshot (WAL's
            // SQLITE_BUSY_SNAPSHOT, or the shared lock the read holds).
            return self.with(|conn| {
                if !has_sessions(conn, &self.path)? {
                    return Ok(None);
                }
                let tx = conn.transaction().map_err(|e| self.err(e))?;
                let Some((repaired, _)) = read_session(&tx, &self.path, id)? else {
                    return Ok(None);
                };
                policy(
                    &repaired,
                    &mut TxRepairs {
                        of: self,
                        tx: &tx,
                        id,
                    },
                )?;
                tx.commit().map_err(|e| self.err(e))?;
                Ok(Some(repaired))
            });
        }
        self.with_writable(|conn| {
            // One immediate transaction: the rows read are the rows repaired.
            self.commit(conn, |tx| {
                let Some((repaired, _)) = read_session(tx, &self.path, id)? else {
                    return Ok(None);
                };
                policy(&repaired, &mut TxRepairs { of: self, tx, id })?;
                Ok(Some(repaired))
            })
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
        let h = header_row(header);
        self.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO sessions (id, {HEADER_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                ),
                params![
                    id,
                    h.version,
                    h.created_at,
                    h.cwd,
                    h.parent_session,
                    h.seed_length
                ],
            )
            .map_err(|e| match e.sqlite_error_code() {
                Some(ErrorCode::ConstraintViolation) => persisted_collision(id),
                _ => self.err(e),
            })?;
            self.insert_events(tx, id, &texts)
        })
    }

    fn append(&self, key: &Key, batch: &Batch, _handle: &mut ()) -> CoreResult<Result<(), Holds>> {
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
            if let Err(holds) = continues(batch.first_seq, stored as u64) {
                return Ok(Err(holds));
            }
            self.insert_events(tx, &key.id, &texts).map(Ok)
        })
    }

    fn list(&self) -> CoreResult<Vec<Listed>> {
        self.with(|conn| {
            if !has_sessions(conn, &self.path)? {
                return Ok(Vec::new());
            }
            Ok(list_headers(conn, &self.path)?
                .into_iter()
                .map(|header| Listed { header })
                .collect())
        })
    }

    fn close(&self) {
        let mut guard = lock(&self.conn);
        *guard = Conn::Closed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::load_with;
    use rusqlite::types::Value as SqlValue;

    /// The row-by-row read `read_session` falls back to, of every row.
    fn row_by_row(
        conn: &Connection,
        path: &str,
        id: &str,
        header: SessionHeader,
    ) -> CoreResult<(Repaired, usize)> {
        let records = row_records(conn, path, id)?;
        let texts: Vec<Option<&str>> = records.iter().map(Option::as_deref).collect();
        let repaired =
            super::super::load::repair(id, header, &texts, super::super::load::Place::Row)?;
        Ok((repaired, records.len()))
    }

    /// The event text `values_text` builds from these column values.
    fn text_of(cols: [SqlValue; 6]) -> Option<String> {
        let conn = Connection::open_in_memory().unwrap();
        let mut stmt = conn.prepare("SELECT ?1, ?2, ?3, ?4, ?5, ?6").unwrap();
        let mut rows = stmt.query(rusqlite::params_from_iter(cols)).unwrap();
        values_text(cells(rows.next().unwrap().unwrap(), 0).unwrap())
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
                    rep.log
                        .events_json(0, rep.log.len(), &[])
                        .expect("texts read"),
                    rep.preserved,
                    rep.torn,
                )
            })
            .map_err(|e| e.to_string())
        };
        let fast = summary(read_session(&conn, "db", "s").map(|r| r.unwrap()));
        let header = read_header(&conn, "db", "s").unwrap().unwrap();
        let slow = summary(row_by_row(&conn, "db", "s", header));
        assert_eq!(fast, slow);
        fast
    }

    #[test]
    fn a_header_column_that_is_not_utf8_is_a_corrupt_log_and_left_out_of_the_list() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SCHEMA).unwrap();
        conn.execute_batch(
            "INSERT INTO sessions (id, version, created_at, cwd) VALUES ('bad', 0, 1, CAST(X'FF2F' AS TEXT)); \
             INSERT INTO sessions (id, version, created_at, cwd) VALUES ('good', 0, 1, '/w');",
        )
        .unwrap();
        let e = read_header(&conn, "db", "bad").unwrap_err();
        assert_eq!(e.code(), "CORRUPT_LOG");
        assert!(
            e.message().contains("cwd of session \"bad\""),
            "{}",
            e.message()
        );
        assert!(has_header(&conn, "db", "bad").unwrap());
        let listed: Vec<String> = list_headers(&conn, "db")
            .unwrap()
            .iter()
            .map(|h| h.id().to_owned())
            .collect();
        assert_eq!(listed, ["good"]);
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
        // The check runs in the transaction that writes: it sees seq 35.
        assert_eq!(
            b.append(&key, &batch(1, 80), &mut ()).unwrap(),
            Err(Holds(36))
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
        b.append(&key, &batch(1, 80), &mut ()).unwrap().unwrap();
        let log = load_with(&b, &key, &mut (), LoadMode::Repair)
            .unwrap()
            .unwrap()
            .log;
        assert_eq!(log.len(), 80);
        assert_eq!(log.text(79).ok().as_deref(), Some(lines(79, 80).trim_end()));
    }

    #[test]
    fn a_long_session_folded_piece_by_piece_is_the_log_read_row_by_row() {
        let dir = std::env::temp_dir().join(format!("dsh-sqlite-pieces-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.db").to_string_lossy().into_owned();
        let b = SqliteBackend::new(path.clone(), "wal".into());
        let key = Key {
            id: "long".into(),
            file: String::new(),
        };
        // Rows of about 60 bytes: over three pieces of text.
        let n = (3 * crate::log::PIECE_BYTES / 50) as u64;
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
        let log = load_with(&b, &key, &mut (), LoadMode::Repair)
            .unwrap()
            .unwrap()
            .log;
        let slow = b
            .with(|c| {
                let header = read_header(c, &path, "long")?.unwrap();
                row_by_row(c, &path, "long", header)
            })
            .unwrap();
        assert_eq!(log.len(), n as usize);
        assert_eq!(
            log.events_json(0, log.len(), &[]).expect("texts read"),
            slow.0
                .log
                .events_json(0, slow.0.log.len(), &[])
                .expect("texts read")
        );
        // A torn last row (in the last piece) is dropped by the repair,
        // durably.
        b.with(|c| {
            c.execute(
                "INSERT INTO events (session_id, seq, type, time, data) VALUES ('long', ?1, 'x', 1, '{')",
                [n as i64],
            )
            .map_err(|e| b.err(e))
        })
        .unwrap();
        assert_eq!(
            load_with(&b, &key, &mut (), LoadMode::Repair)
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
        let log = load_with(&b, &key, &mut (), LoadMode::Repair)
            .unwrap()
            .unwrap()
            .log;
        // The open turn is closed by the load, durably.
        assert_eq!(log.len(), 2);
        assert_eq!(
            load_with(&b, &key, &mut (), LoadMode::Repair)
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
