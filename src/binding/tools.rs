//! The binding of the development checks (SPEC 9) and of the `dsh-session`
//! command-line tool: reading one stored log by its address, read-only, with
//! the stores' own load code (`store::jsonl::repair_bytes`,
//! `store::sqlite::read_session`), and making that repair durable for a
//! JSONL file (`store::jsonl::write_repair`).

use super::js_error;
use super::session::NativeSession;
use crate::error::{Code, CoreError, CoreResult};
use crate::invariants::{Trace, Transition};
use crate::session_header::SessionHeader;
use crate::store::load::Repaired;
use crate::store::postgres::{PgOptions, PostgresBackend};
use crate::store::{jsonl, lease, not_found, sqlite};
use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Result, Task};
use napi_derive::napi;
use rusqlite::{Connection, OpenFlags};
use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::Path;

// ---------------------------------------------------------------- invariants

/// `checkSessionInvariants(events)` over the events as one JSON array.
#[napi(js_name = "checkSessionInvariantsJson")]
pub fn check_session_invariants_json(env: Env, events_json: String) -> Result<()> {
    crate::invariants::check_log_json(&events_json).map_err(|e| js_error(&env, &e))
}

/// The SPEC 9 checks of one live session: `check` validates the next event
/// and stages its transition, `commit` applies it once the append committed.
#[napi]
pub struct InvariantTrace {
    trace: Trace,
    staged: Option<Transition>,
}

#[napi]
impl InvariantTrace {
    /// A trace over a seed (a JSON array of events); throws the first violation.
    #[napi(factory, js_name = "fromEventsJson")]
    pub fn from_events_json(env: Env, json: String) -> Result<InvariantTrace> {
        let mut trace = Trace::new();
        trace.extend_json(&json).map_err(|e| js_error(&env, &e))?;
        Ok(InvariantTrace {
            trace,
            staged: None,
        })
    }

    /// Validate the next event (its JSON text) and stage it; throws a violation.
    #[napi]
    pub fn check(&mut self, env: Env, event_json: String) -> Result<()> {
        self.staged = None;
        let t = self
            .trace
            .validate(&event_json)
            .map_err(|e| js_error(&env, &e))?;
        self.staged = Some(t);
        Ok(())
    }

    /// Apply the staged event (its append committed).
    #[napi]
    pub fn commit(&mut self) {
        if let Some(t) = self.staged.take() {
            self.trace.apply(t);
        }
    }

    /// Drop the staged event (its append was rejected).
    #[napi]
    pub fn discard(&mut self) {
        self.staged = None;
    }

    /// Validate and commit a JSON array of events in order, up to the first
    /// violation (thrown); `length` then says how many were accepted.
    #[napi]
    pub fn extend(&mut self, env: Env, events_json: String) -> Result<()> {
        self.staged = None;
        self.trace
            .extend_json(&events_json)
            .map_err(|e| js_error(&env, &e))
    }

    /// How many events the trace has accepted.
    #[napi(getter)]
    pub fn length(&self) -> u32 {
        self.trace.len() as u32
    }
}

// ---------------------------------------------------------------- reading a stored log

/// A stored log read with the load repair of SPEC 11.
struct Loaded {
    repaired: Repaired,
    /// Stored event records (the torn tail included).
    records: usize,
    /// JSONL only: the file size and the length the repair truncates to.
    file_bytes: Option<u64>,
    committed_bytes: Option<u64>,
    /// Whether the repair was written.
    written: bool,
    /// The first record a torn tail drops: where, its cause, its text.
    torn_record: Option<Value>,
}

impl Loaded {
    /// A database session read without writing (no file sizes).
    fn read_only(repaired: Repaired, records: usize) -> Loaded {
        Loaded {
            repaired,
            records,
            file_bytes: None,
            committed_bytes: None,
            written: false,
            torn_record: None,
        }
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

/// The first line a JSONL repair drops (the bytes after `committed`): its
/// 1-based file line, why, and its text.
fn torn_jsonl(bytes: &[u8], committed: u64, preserved: usize) -> Option<Value> {
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
    Some(
        json!({"line": line, "seq": preserved, "cause": cause, "text": shown_text(&text), "bytes": record.len()}),
    )
}

/// The first event row a SQLite repair drops (row `preserved + 1` in seq
/// order): its row number, its seq, why, and its columns.
fn torn_sqlite(conn: &Connection, id: &str, preserved: usize) -> Option<Value> {
    let (seq, ty, data): (Value, Value, Value) = conn
        .query_row(
            "SELECT seq, type, data FROM events WHERE session_id = ?1 ORDER BY seq LIMIT 1 OFFSET ?2",
            rusqlite::params![id, preserved as i64],
            |r| {
                let text = |v: rusqlite::types::ValueRef<'_>| match v {
                    rusqlite::types::ValueRef::Null => Value::Null,
                    rusqlite::types::ValueRef::Integer(i) => json!(i),
                    rusqlite::types::ValueRef::Real(f) => json!(f),
                    rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                        Value::String(String::from_utf8_lossy(t).into_owned())
                    }
                };
                Ok((text(r.get_ref(0)?), text(r.get_ref(1)?), text(r.get_ref(2)?)))
            },
        )
        .ok()?;
    let cause = match seq.as_u64() {
        Some(s) if s != preserved as u64 => {
            format!("breaks the seq order (expected seq {preserved}, got {s})")
        }
        _ => "does not form an event from its columns".to_string(),
    };
    let text = format!("seq {seq}, type {ty}, data {data}");
    Some(json!({"row": preserved + 1, "seq": preserved, "cause": cause, "text": shown_text(&text)}))
}

/// Read a JSONL log by path and repair it as a store load would
/// (`jsonl::repair_bytes`); with `write`, make the repair durable as the
/// JSONL store does on load (`jsonl::write_repair`).
fn load_jsonl(path: &Path, write: bool) -> CoreResult<Loaded> {
    // A repair is a writer: it needs the session's lease (SESSION_IN_USE
    // while a store writes the session), held until it is done.
    let _lease = if write { jsonl::lease_log(path)? } else { None };
    let mut file = if write {
        OpenOptions::new().read(true).write(true).open(path)
    } else {
        File::open(path)
    }
    .map_err(|e| CoreError::io("cannot open session log", path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| CoreError::io("cannot read session log", path, e))?;
    let (repaired, committed, records) = jsonl::repair_bytes(&bytes, None)?;
    let written = write && repaired.needs_write();
    if written {
        jsonl::write_repair(&file, path, committed, &repaired)?;
    }
    let torn_record = if repaired.torn {
        torn_jsonl(&bytes, committed, repaired.preserved)
    } else {
        None
    };
    Ok(Loaded {
        repaired,
        records,
        file_bytes: Some(bytes.len() as u64),
        committed_bytes: Some(committed),
        written,
        torn_record,
    })
}

/// Whether the database file at `path` is in WAL mode (header bytes 18
/// and 19, the read and write versions, are 2).
fn is_wal(path: &str) -> bool {
    let mut head = [0u8; 20];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head[18] == 2 && head[19] == 2)
}

/// What changes when a writer commits to the database file: its size,
/// modification time and inode.
fn file_stamp(path: &str) -> Option<(u64, std::time::SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.len(), m.modified().ok()?, ino))
}

/// `path` as a SQLite `file:` URI (`?`, `#` and `%` escaped).
fn file_uri(path: &str) -> String {
    let mut uri = String::from("file:");
    for c in path.chars() {
        match c {
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            '%' => uri.push_str("%25"),
            c => uri.push(c),
        }
    }
    uri
}

/// Read the SQLite database at `path` with `read`, creating nothing beside
/// it. A read-only connection to a WAL database creates its `-wal` and
/// `-shm` files and, unable to checkpoint, leaves them. So a WAL database
/// with no `-wal` (every commit is in the main file, no writer has it open)
/// is read `immutable`, and the read is kept only if no writer came
/// meanwhile (still no `-wal`, the file unchanged); otherwise, and for a
/// database a writer has open or in rollback-journal mode, it is read
/// through a plain read-only connection, which then creates nothing.
fn read_sqlite<T>(path: &str, read: impl Fn(&Connection) -> CoreResult<T>) -> CoreResult<T> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let wal = format!("{path}-wal");
    if is_wal(path) && !Path::new(&wal).exists() {
        let before = file_stamp(path);
        let uri = format!("{}?immutable=1", file_uri(path));
        if let Ok(conn) = Connection::open_with_flags(uri, flags | OpenFlags::SQLITE_OPEN_URI) {
            let result = read(&conn);
            drop(conn);
            if !Path::new(&wal).exists() && before.is_some() && file_stamp(path) == before {
                return result;
            }
        }
    }
    let conn = Connection::open_with_flags(path, flags).map_err(|e| sqlite::sql_err(path, e))?;
    read(&conn)
}

/// Whether the read-only connection `conn` to `path` holds sessions: its
/// schema version checked; false for a database without sessions (schema
/// version 0 and no tables). A version-0 database that has both tables is
/// read like a stamped one: the store stamps it and reads them (`CREATE
/// TABLE IF NOT EXISTS`), so the CLI sees the same sessions. Nothing here
/// stamps a schema or creates a table.
fn has_sessions(conn: &Connection, path: &str) -> CoreResult<bool> {
    if sqlite::schema_version(conn, path)? != 0 {
        return Ok(true);
    }
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('sessions', 'events')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| sqlite::sql_err(path, e))?;
    Ok(tables == 2)
}

/// Read one session of a SQLite database without writing to it, and repair
/// it in memory as the SQLite store's load does (`sqlite::read_session`).
fn load_sqlite(path: &str, id: &str) -> CoreResult<Loaded> {
    read_sqlite(path, |conn| {
        if !has_sessions(conn, path)? {
            return Err(not_found(id));
        }
        let (repaired, records) =
            sqlite::read_session(conn, path, id)?.ok_or_else(|| not_found(id))?;
        let torn_record = if repaired.torn {
            torn_sqlite(conn, id, repaired.preserved)
        } else {
            None
        };
        Ok(Loaded {
            torn_record,
            ..Loaded::read_only(repaired, records)
        })
    })
}

/// The headers of a SQLite database's sessions, read-only, ordered as the
/// store lists them (`createdAt`, then id); rows that are not v0 headers
/// are left out, as the store does (`sqlite::list_headers`).
fn list_sqlite(path: &str) -> CoreResult<String> {
    let mut headers = read_sqlite(path, |conn| {
        if !has_sessions(conn, path)? {
            return Ok(Vec::new());
        }
        sqlite::list_headers(conn, path)
    })?;
    let created = |h: &SessionHeader| h.get("createdAt").and_then(Value::as_f64).unwrap_or(0.0);
    headers.sort_by(|a, b| {
        created(a)
            .total_cmp(&created(b))
            .then_with(|| a.id().cmp(b.id()))
    });
    let headers: Vec<String> = headers.iter().map(SessionHeader::json).collect();
    Ok(format!("[{}]", headers.join(",")))
}

/// A log read by the CLI: the repair plan, and the log as stored (kept
/// events) or as a store load returns it (kept events and closers).
#[napi]
pub struct LoadReport {
    loaded: Option<Loaded>,
    failure: Option<CoreError>,
}

impl LoadReport {
    fn loaded(&self, env: &Env) -> Result<&Loaded> {
        match (&self.loaded, &self.failure) {
            (Some(l), _) => Ok(l),
            (None, Some(e)) => Err(js_error(env, e)),
            (None, None) => Err(js_error(
                env,
                &CoreError::new(Code::Internal, "no log was read"),
            )),
        }
    }
}

#[napi]
impl LoadReport {
    /// Why the log cannot be loaded (`{code, message}`), or `null`.
    #[napi(js_name = "errorJson")]
    pub fn error_json(&self) -> Option<String> {
        self.failure
            .as_ref()
            .map(|e| json!({"code": e.code(), "message": e.to_string()}).to_string())
    }

    /// The repair plan: `{header, records, preserved, torn, tornRecord,
    /// closers, fileBytes, committedBytes, written}` as JSON text
    /// (`tornRecord`: `{line | row, seq, cause, text}` of the first dropped
    /// record, or null).
    #[napi(js_name = "planJson")]
    pub fn plan_json(&self, env: Env) -> Result<String> {
        let l = self.loaded(&env)?;
        let log = &l.repaired.log;
        let closers = log
            .events_json(l.repaired.preserved, log.len())
            .map_err(|e| js_error(&env, &e))?;
        Ok(format!(
            "{{\"header\":{},\"records\":{},\"preserved\":{},\"torn\":{},\"tornRecord\":{},\"closers\":{},\"fileBytes\":{},\"committedBytes\":{},\"written\":{}}}",
            log.header().json(),
            l.records,
            l.repaired.preserved,
            l.repaired.torn,
            l.torn_record.as_ref().map_or("null".into(), Value::to_string),
            closers,
            l.file_bytes.map_or("null".into(), |b| b.to_string()),
            l.committed_bytes.map_or("null".into(), |b| b.to_string()),
            l.written
        ))
    }

    /// The log as a native session: the kept events alone, or with the
    /// closers when `repaired` (what a store load returns).
    #[napi]
    pub fn session(&self, env: Env, repaired: bool) -> Result<NativeSession> {
        let l = self.loaded(&env)?;
        let log = &l.repaired.log;
        if repaired || log.len() == l.repaired.preserved {
            return Ok(NativeSession::from_log(log.clone()));
        }
        let kept = log
            .fork_prefix(l.repaired.preserved, log.header().clone())
            .map_err(|e| js_error(&env, &e))?;
        Ok(NativeSession::from_log(kept))
    }

    /// The first SPEC 9 violation over the log (kept events, plus the
    /// closers when `repaired`): `{message, seq}` as JSON text, or `null`.
    #[napi]
    pub fn invariants(&self, env: Env, repaired: bool) -> Result<Option<String>> {
        let l = self.loaded(&env)?;
        let log = &l.repaired.log;
        let end = if repaired {
            log.len()
        } else {
            l.repaired.preserved
        };
        let mut trace = Trace::new();
        let texts = (0..end)
            .map(|i| log.text(i))
            .collect::<CoreResult<Vec<_>>>()
            .map_err(|e| js_error(&env, &e))?;
        Ok(trace.extend(texts.iter().map(|t| &**t)).err().map(|e| {
            json!({"message": e.to_string(), "code": e.code(), "seq": trace.len()}).to_string()
        }))
    }
}

/// Reading a log off the main thread.
pub struct ReadTask {
    work: Option<Box<dyn FnOnce() -> CoreResult<Loaded> + Send>>,
}

impl Task for ReadTask {
    type Output = LoadReport;
    type JsValue = LoadReport;

    fn compute(&mut self) -> Result<LoadReport> {
        let work = self
            .work
            .take()
            .ok_or_else(|| napi::Error::from_reason("read task ran twice"))?;
        Ok(match work() {
            Ok(l) => LoadReport {
                loaded: Some(l),
                failure: None,
            },
            Err(e) => LoadReport {
                loaded: None,
                failure: Some(e),
            },
        })
    }

    fn resolve(&mut self, _env: Env, output: LoadReport) -> Result<LoadReport> {
        Ok(output)
    }
}

/// Read a JSONL log file with the load repair; with `write`, make the repair
/// durable. Resolves to a report (a failure is in `errorJson()`).
#[napi(js_name = "readJsonlLog", ts_return_type = "Promise<LoadReport>")]
pub fn read_jsonl_log(path: String, write: bool) -> AsyncTask<ReadTask> {
    AsyncTask::new(ReadTask {
        work: Some(Box::new(move || load_jsonl(Path::new(&path), write))),
    })
}

/// Read one session of a SQLite database read-only, with the load repair in
/// memory. Resolves to a report (a failure is in `errorJson()`).
#[napi(js_name = "readSqliteLog", ts_return_type = "Promise<LoadReport>")]
pub fn read_sqlite_log(path: String, id: String) -> AsyncTask<ReadTask> {
    AsyncTask::new(ReadTask {
        work: Some(Box::new(move || load_sqlite(&path, &id))),
    })
}

/// Listing a SQLite database off the main thread.
pub struct ListTask {
    path: String,
}

impl Task for ListTask {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        Ok(match list_sqlite(&self.path) {
            Ok(headers) => format!("{{\"headers\":{headers}}}"),
            Err(e) => json!({"error": {"code": e.code(), "message": e.to_string()}}).to_string(),
        })
    }

    fn resolve(&mut self, _env: Env, output: String) -> Result<String> {
        Ok(output)
    }
}

/// The session headers of a SQLite database, read-only:
/// `{"headers": [...]}` or `{"error": {code, message}}` as JSON text.
#[napi(js_name = "listSqliteSessions", ts_return_type = "Promise<string>")]
pub fn list_sqlite_sessions(path: String) -> AsyncTask<ListTask> {
    AsyncTask::new(ListTask { path })
}

/// A read-only reader of the PostgreSQL store at `url`, schema `schema`
/// (default timeouts; one connection).
fn postgres_reader(url: String, schema: String) -> CoreResult<PostgresBackend> {
    PostgresBackend::reader(PgOptions {
        pool_size: 1,
        ..PgOptions::new(url, schema)
    })
}

fn load_postgres(url: String, schema: String, id: &str) -> CoreResult<Loaded> {
    let reader = postgres_reader(url, schema)?;
    let read = reader.read_log(id);
    crate::store::Backend::close(&reader);
    let (repaired, records) = read?.ok_or_else(|| not_found(id))?;
    Ok(Loaded::read_only(repaired, records))
}

/// Read one session of a PostgreSQL store read-only (no lease, no repair
/// written), with the load repair in memory. Resolves to a report.
#[napi(js_name = "readPostgresLog", ts_return_type = "Promise<LoadReport>")]
pub fn read_postgres_log(url: String, schema: String, id: String) -> AsyncTask<ReadTask> {
    AsyncTask::new(ReadTask {
        work: Some(Box::new(move || load_postgres(url, schema, &id))),
    })
}

/// Listing a PostgreSQL store off the main thread.
pub struct PgListTask {
    url: String,
    schema: String,
}

impl Task for PgListTask {
    type Output = String;
    type JsValue = String;

    fn compute(&mut self) -> Result<String> {
        let listed = postgres_reader(self.url.clone(), self.schema.clone()).and_then(|r| {
            let headers = r.headers();
            crate::store::Backend::close(&r);
            headers
        });
        Ok(match listed {
            Ok(headers) => {
                let headers: Vec<String> = headers.iter().map(SessionHeader::json).collect();
                format!("{{\"headers\":[{}]}}", headers.join(","))
            }
            // A schema without the store's tables holds no session.
            Err(e) if e.kind() == Code::NotFound => "{\"headers\":[]}".into(),
            Err(e) => json!({"error": {"code": e.code(), "message": e.to_string()}}).to_string(),
        })
    }

    fn resolve(&mut self, _env: Env, output: String) -> Result<String> {
        Ok(output)
    }
}

/// The session headers of a PostgreSQL store, read-only: `{"headers":
/// [...]}` or `{"error": {code, message}}` as JSON text.
#[napi(js_name = "listPostgresSessions", ts_return_type = "Promise<string>")]
pub fn list_postgres_sessions(url: String, schema: String) -> AsyncTask<PgListTask> {
    AsyncTask::new(PgListTask { url, schema })
}

// ---------------------------------------------------------------- leases

/// The lock file of the write lease of a stored session: a JSONL log's
/// (`None` outside a store's layout) or a SQLite session's.
fn lease_file(kind: &str, path: &str, id: &str) -> Option<std::path::PathBuf> {
    match kind {
        "jsonl" => jsonl::lease_path_of_log(Path::new(path)),
        "sqlite" => {
            Some(std::path::PathBuf::from(format!("{path}.locks")).join(lease::hashed_name(id)))
        }
        _ => None,
    }
}

/// The pid of the process holding an `flock` on the file `dev`:`ino`, as
/// `/proc/locks` lists it (`N: FLOCK ADVISORY WRITE <pid> <maj>:<min>:<ino> ...`,
/// major and minor in hex; `->` marks a waiter, not a holder).
#[cfg(target_os = "linux")]
fn flock_holder(locks: &str, dev: u64, ino: u64) -> Option<u32> {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let mut at = fields.get(5)?.split(':');
        let (maj, min, file) = (at.next()?, at.next()?, at.next()?);
        let same = u64::from_str_radix(maj, 16).ok()? == major
            && u64::from_str_radix(min, 16).ok()? == minor
            && file.parse::<u64>().ok()? == ino;
        same.then(|| fields[4].parse().ok()).flatten()
    })
}

/// Who holds the write lease of a stored session, seen without taking it
/// (a probe that locked the file, however briefly, could make a writer's
/// lease attempt fail): `"process N"`, or null when it is free, has no
/// lock file, or cannot be seen (systems without `/proc/locks`). `kind`
/// is `jsonl` (`path` the log) or `sqlite` (`path` the database, `id`).
#[napi(js_name = "sessionLeaseHolder")]
pub fn session_lease_holder(kind: String, path: String, id: String) -> Option<String> {
    let lock = lease_file(&kind, &path, &id)?;
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&lock).ok()?;
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        flock_holder(&locks, meta.dev(), meta.ino()).map(|pid| format!("process {pid}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = lock;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_jsonl_record_names_its_line_cause_and_text() {
        let bytes = b"{\"type\":\"session\"}\n{\"seq\":0}\n{\"type\":\"x\",\"se";
        let torn = torn_jsonl(bytes, 29, 1).unwrap();
        assert_eq!(torn["line"], 3);
        assert_eq!(torn["seq"], 1);
        assert_eq!(torn["text"], "{\"type\":\"x\",\"se");
        assert!(torn["cause"].as_str().unwrap().contains("no newline"));
        let gap =
            b"{\"type\":\"session\"}\n{\"type\":\"turn/end\",\"seq\":5,\"time\":1,\"data\":{}}\n";
        let torn = torn_jsonl(gap, 19, 0).unwrap();
        assert_eq!(
            torn["cause"],
            "breaks the seq order (expected seq 0, got 5)"
        );
        assert_eq!(torn_jsonl(gap, gap.len() as u64, 1), None);
    }

    #[test]
    fn a_long_torn_record_is_shown_cut() {
        let long = "é".repeat(TORN_SHOWN + 5);
        assert_eq!(shown_text(&long).chars().count(), TORN_SHOWN + 1);
        assert!(shown_text(&long).ends_with('…'));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_locks_lines_name_the_holder_of_one_file() {
        // dev 0x0801 (major 8, minor 1), inode 1234.
        let locks = "1: POSIX  ADVISORY  WRITE 7 08:01:1234 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 42 08:01:1234 0 EOF\n\
                     2: -> FLOCK  ADVISORY  WRITE 43 08:01:1234 0 EOF\n";
        assert_eq!(flock_holder(locks, 0x0801, 1234), Some(42));
        assert_eq!(flock_holder(locks, 0x0801, 1235), None);
        assert_eq!(flock_holder(locks, 0x0802, 1234), None);
    }

    #[test]
    fn file_uris_escape_what_sqlite_reads_as_a_query() {
        assert_eq!(file_uri("/a b/c?d#e%f.db"), "file:/a b/c%3fd%23e%25f.db");
    }
}
