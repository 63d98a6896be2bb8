//! The binding of the development checks (SPEC 9) and of the `dsh-session`
//! command-line tool: reading one stored log by its address, read-only, with
//! the stores' own load code (`store::jsonl::repair_bytes`,
//! `store::sqlite::read_session`), and making that repair durable for a
//! JSONL file (`store::jsonl::write_repair`).

use super::session::NativeSession;
use super::throw;
use crate::error::{CoreError, CoreResult};
use crate::invariants::{Trace, Transition};
use crate::session_header::SessionHeader;
use crate::store::load::Repaired;
use crate::store::postgres::{PgOptions, PostgresBackend};
use crate::store::{jsonl, not_found, sqlite};
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
    crate::invariants::check_log_json(&events_json).map_err(|e| throw(&env, e))
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
        trace.extend_json(&json).map_err(|e| throw(&env, e))?;
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
            .map_err(|e| throw(&env, e))?;
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
            .map_err(|e| throw(&env, e))
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
        }
    }
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
    .map_err(|e| jsonl::io("cannot open session log", path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| jsonl::io("cannot read session log", path, e))?;
    let (repaired, committed, records) = jsonl::repair_bytes(&bytes, None)?;
    let written = write && repaired.needs_write();
    if written {
        jsonl::write_repair(&file, path, committed, &repaired)?;
    }
    Ok(Loaded {
        repaired,
        records,
        file_bytes: Some(bytes.len() as u64),
        committed_bytes: Some(committed),
        written,
    })
}

/// A SQLite database opened read-only, its schema version checked; `None`
/// for a database without sessions (schema version 0 and no tables). A
/// version-0 database that has both tables is read like a stamped one: the
/// store stamps it and reads them (`CREATE TABLE IF NOT EXISTS`), so the
/// CLI sees the same sessions. Nothing here stamps a schema or creates a
/// table.
fn open_sqlite(path: &str) -> CoreResult<Option<Connection>> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sqlite::sql_err(path, e))?;
    if sqlite::schema_version(&conn, path)? != 0 {
        return Ok(Some(conn));
    }
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('sessions', 'events')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| sqlite::sql_err(path, e))?;
    Ok((tables == 2).then_some(conn))
}

/// Read one session of a SQLite database without writing to it, and repair
/// it in memory as the SQLite store's load does (`sqlite::read_session`).
fn load_sqlite(path: &str, id: &str) -> CoreResult<Loaded> {
    let conn = open_sqlite(path)?.ok_or_else(|| not_found(id))?;
    let (repaired, records) =
        sqlite::read_session(&conn, path, id)?.ok_or_else(|| not_found(id))?;
    Ok(Loaded::read_only(repaired, records))
}

/// The headers of a SQLite database's sessions, read-only, ordered as the
/// store lists them (`createdAt`, then id); rows that are not v0 headers
/// are left out, as the store does (`sqlite::list_headers`).
fn list_sqlite(path: &str) -> CoreResult<String> {
    let Some(conn) = open_sqlite(path)? else {
        return Ok("[]".into());
    };
    let mut headers = sqlite::list_headers(&conn, path)?;
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
            (None, Some(e)) => Err(throw(env, e.clone())),
            (None, None) => Err(throw(
                env,
                CoreError::InvalidArgument("no log was read".into()),
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

    /// The repair plan: `{header, records, preserved, torn, closers,
    /// fileBytes, committedBytes, written}` as JSON text.
    #[napi(js_name = "planJson")]
    pub fn plan_json(&self, env: Env) -> Result<String> {
        let l = self.loaded(&env)?;
        let log = &l.repaired.log;
        let closers = log
            .events_json(l.repaired.preserved, log.len())
            .map_err(|e| throw(&env, e))?;
        Ok(format!(
            "{{\"header\":{},\"records\":{},\"preserved\":{},\"torn\":{},\"closers\":{},\"fileBytes\":{},\"committedBytes\":{},\"written\":{}}}",
            log.header().json(),
            l.records,
            l.repaired.preserved,
            l.repaired.torn,
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
            .map_err(|e| throw(&env, e))?;
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
            .map_err(|e| throw(&env, e))?;
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
        connection_string: url,
        schema,
        pool_size: 1,
        lease: std::time::Duration::from_secs(30),
        statement_timeout: std::time::Duration::from_secs(30),
        connect_timeout: std::time::Duration::from_secs(10),
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
            Err(CoreError::NotFound(_)) => "{\"headers\":[]}".into(),
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
