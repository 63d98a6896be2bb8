//! The binding of the development checks (SPEC 9) and of the `dsh-session`
//! command-line tool: reading one stored log by its address, read-only, with
//! the stores' crash-repair rules (`store::load::repair`), and making that
//! repair durable for a JSONL file.

use super::session::NativeSession;
use super::throw;
use crate::error::{CoreError, CoreResult};
use crate::invariants::{Trace, Transition};
use crate::log::Log;
use crate::session_header::SessionHeader;
use crate::store::load::{self, Place, Repaired};
use napi::bindgen_prelude::AsyncTask;
use napi::{Env, Result, Task};
use napi_derive::napi;
use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
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

/// A JSONL file split as the JSONL store splits it (`store/jsonl.rs`): the
/// header line, then each record's text (`None` when it is not UTF-8 or is
/// a final line without its newline) and the offset just past it.
struct Split<'a> {
    header: SessionHeader,
    header_end: usize,
    records: Vec<Option<&'a str>>,
    ends: Vec<usize>,
}

/// A record's text: without a trailing `\r`, `None` when not UTF-8.
fn record_text(line: &[u8]) -> Option<&str> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    std::str::from_utf8(line).ok()
}

fn split_jsonl(bytes: &[u8]) -> CoreResult<Split<'_>> {
    let header_less = || CoreError::CorruptLog("empty or header-less session log".into());
    let newline = |from: usize| {
        bytes[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map(|i| from + i)
    };
    let Some(first_end) = newline(0) else {
        return Err(header_less());
    };
    let first = &bytes[..first_end];
    if first.iter().all(u8::is_ascii_whitespace) {
        return Err(header_less());
    }
    let header = record_text(first)
        .ok_or_else(|| {
            CoreError::CorruptLog("corrupt session log: first line is not a session header".into())
        })
        .and_then(SessionHeader::from_line)?;
    let header_end = first_end + 1;
    let mut records = Vec::new();
    let mut ends = Vec::new();
    let mut pos = header_end;
    while pos < bytes.len() {
        match newline(pos) {
            Some(end) => {
                records.push(record_text(&bytes[pos..end]));
                pos = end + 1;
            }
            None => {
                records.push(None);
                pos = bytes.len();
            }
        }
        ends.push(pos);
    }
    Ok(Split {
        header,
        header_end,
        records,
        ends,
    })
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> CoreError {
    CoreError::Io(format!("{what} \"{}\": {e}", path.display()))
}

/// Read a JSONL log by path and repair it as a store load would; with
/// `write`, make the repair durable (truncate to the kept events, append
/// the closers, fsync), as the JSONL store does on load.
fn load_jsonl(path: &Path, write: bool) -> CoreResult<Loaded> {
    let mut file = if write {
        OpenOptions::new().read(true).write(true).open(path)
    } else {
        File::open(path)
    }
    .map_err(|e| io_error("cannot open session log", path, e))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error("cannot read session log", path, e))?;
    let split = split_jsonl(&bytes)?;
    let id = split.header.id().to_string();
    let records = split.records.len();
    let repaired = load::repair(&id, split.header, &split.records, Place::Line)?;
    let committed = match repaired.preserved {
        0 => split.header_end,
        n => split.ends.get(n - 1).copied().unwrap_or(bytes.len()),
    } as u64;
    let mut written = false;
    if write && repaired.needs_write() {
        let mut closers = String::new();
        for c in repaired.closers() {
            closers.push_str(c);
            closers.push('\n');
        }
        file.set_len(committed)
            .and_then(|()| file.seek(SeekFrom::Start(committed)))
            .and_then(|_| file.write_all(closers.as_bytes()))
            .and_then(|()| file.sync_data())
            .map_err(|e| io_error("cannot repair session log", path, e))?;
        written = true;
    }
    Ok(Loaded {
        repaired,
        records,
        file_bytes: Some(bytes.len() as u64),
        committed_bytes: Some(committed),
        written,
    })
}

/// A JSON value of a SQLite column.
fn sql_json(v: rusqlite::types::Value) -> Value {
    use rusqlite::types::Value as V;
    match v {
        V::Null | V::Blob(_) => Value::Null,
        V::Integer(i) => Value::from(i),
        V::Real(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        V::Text(s) => Value::String(s),
    }
}

/// One JSON value from a TEXT column, on one line (as the SQLite store reads it).
fn sql_json_text(v: &rusqlite::types::Value) -> Option<String> {
    let rusqlite::types::Value::Text(s) = v else {
        return None;
    };
    let raw: &serde_json::value::RawValue = serde_json::from_str(s).ok()?;
    Some(crate::store::one_line(raw.get()).into_owned())
}

/// A SQLite database opened read-only, its schema version checked; `None`
/// for a database no store has written (schema version 0: no sessions).
fn open_sqlite(path: &str) -> CoreResult<Option<rusqlite::Connection>> {
    use rusqlite::{Connection, OpenFlags};
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| sqlite_error(path, e))?;
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| sqlite_error(path, e))?;
    let schema = crate::store::sqlite::SCHEMA_VERSION;
    if version == 0 {
        return Ok(None);
    }
    if version != schema {
        return Err(CoreError::UnsupportedVersion(format!(
            "session database at \"{path}\" has schema version {version}, incompatible with this build ({schema})"
        )));
    }
    Ok(Some(conn))
}

fn sqlite_error(path: &str, e: rusqlite::Error) -> CoreError {
    CoreError::Sqlite(format!("session database at \"{path}\": {e}"))
}

/// The header of a `sessions` row (`version, created_at, cwd,
/// parent_session, seed_length`), checked as a JSONL header line is.
fn sqlite_header(id: &str, row: [rusqlite::types::Value; 5]) -> CoreResult<SessionHeader> {
    let [version, created_at, cwd, parent, seed_length] = row;
    let mut record = serde_json::Map::new();
    record.insert("type".into(), Value::from("session"));
    record.insert("version".into(), sql_json(version));
    record.insert("id".into(), Value::from(id));
    record.insert("createdAt".into(), sql_json(created_at));
    for (key, v) in [
        ("cwd", cwd),
        ("parentSession", parent),
        ("seedLength", seed_length),
    ] {
        if !matches!(v, rusqlite::types::Value::Null) {
            record.insert(key.into(), sql_json(v));
        }
    }
    SessionHeader::from_line(&Value::Object(record).to_string())
}

/// Read one session of a SQLite database without writing to it, and repair
/// it in memory as the SQLite store's load would (`store/sqlite.rs` reads
/// the same columns the same way).
fn load_sqlite(path: &str, id: &str) -> CoreResult<Loaded> {
    use rusqlite::types::Value as V;
    let err = |e: rusqlite::Error| sqlite_error(path, e);
    let Some(conn) = open_sqlite(path)? else {
        return Err(crate::store::not_found(id));
    };
    let row: Option<[V; 5]> = conn
        .query_row(
            "SELECT version, created_at, cwd, parent_session, seed_length FROM sessions WHERE id = ?1",
            [id],
            |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?]),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(err(e)),
        })?;
    let Some(row) = row else {
        return Err(crate::store::not_found(id));
    };
    let header = sqlite_header(id, row)?;
    let mut stmt = conn
        .prepare(
            "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events \
             WHERE session_id = ?1 ORDER BY seq",
        )
        .map_err(err)?;
    let texts: Vec<Option<String>> = stmt
        .query_map([id], |r| {
            let cols: [V; 6] = [
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ];
            Ok(row_text(&cols))
        })
        .and_then(|rows| rows.collect::<rusqlite::Result<_>>())
        .map_err(err)?;
    let records: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
    let repaired = load::repair(id, header, &records, Place::Row)?;
    Ok(Loaded {
        repaired,
        records: records.len(),
        file_bytes: None,
        committed_bytes: None,
        written: false,
    })
}

/// The headers of a SQLite database's sessions, read-only, ordered as the
/// store lists them (`createdAt`, then id); rows that are not v0 headers
/// are left out, as the store does.
fn list_sqlite(path: &str) -> CoreResult<String> {
    use rusqlite::types::Value as V;
    let err = |e: rusqlite::Error| sqlite_error(path, e);
    let Some(conn) = open_sqlite(path)? else {
        return Ok("[]".into());
    };
    let mut stmt = conn
        .prepare("SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions ORDER BY created_at, id")
        .map_err(err)?;
    let rows: Vec<[V; 6]> = stmt
        .query_map([], |r| {
            Ok([
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ])
        })
        .and_then(|rows| rows.collect())
        .map_err(err)?;
    let headers: Vec<String> = rows
        .into_iter()
        .filter_map(|[id, version, created_at, cwd, parent, seed]| {
            let V::Text(id) = id else {
                return None;
            };
            sqlite_header(&id, [version, created_at, cwd, parent, seed])
                .ok()
                .map(|h| h.json())
        })
        .collect();
    Ok(format!("[{}]", headers.join(",")))
}

/// The event text of an `events` row, or `None` when its columns do not form one.
fn row_text(row: &[rusqlite::types::Value; 6]) -> Option<String> {
    use rusqlite::types::Value as V;
    let non_negative = |v: &V| match v {
        V::Integer(i) => u64::try_from(*i).ok(),
        _ => None,
    };
    let [seq, ty, time, data, sources, op] = row;
    let (Some(seq), Some(time), V::Text(ty)) = (non_negative(seq), non_negative(time), ty) else {
        return None;
    };
    let data = sql_json_text(data)?;
    let optional = |v: &V| match v {
        V::Null => Some(None),
        v => sql_json_text(v).map(Some),
    };
    let (sources, op) = (optional(sources)?, optional(op)?);
    Some(crate::event::event_text(
        ty,
        seq,
        time,
        &data,
        sources.as_deref(),
        op.as_deref(),
    ))
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
        let closers = log.events_json(l.repaired.preserved, log.len());
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
        let mut kept = Log::new(log.header().clone());
        for i in 0..l.repaired.preserved {
            let text = log.text(i).unwrap_or("null");
            kept.accept_text(text, i).map_err(|e| {
                throw(
                    &env,
                    e.unwrap_or_else(|| {
                        CoreError::CorruptLog(format!("unparsable event at seq {i}"))
                    }),
                )
            })?;
        }
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
        Ok(trace
            .extend((0..end).map(|i| log.text(i).unwrap_or("null")))
            .err()
            .map(|e| {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_the_jsonl_store_does() {
        let text =
            b"{\"type\":\"session\",\"version\":0,\"id\":\"s\",\"createdAt\":1}\nA\r\n\xff\nB";
        let s = split_jsonl(text).unwrap();
        assert_eq!(s.records, vec![Some("A"), None, None]);
        assert_eq!(s.ends, vec![s.header_end + 3, s.header_end + 5, text.len()]);
        assert_eq!(
            split_jsonl(b"").err().map(|e| e.to_string()).as_deref(),
            Some("empty or header-less session log")
        );
        assert_eq!(
            split_jsonl(b"{}\n").err().map(|e| e.to_string()).as_deref(),
            Some("corrupt session log: first line is not a session header")
        );
    }
}
