//! The read-only store API of the `dsh-session` command-line tool
//! (`store::inspect`) for JS: a stored log read by its address resolves to
//! a `LoadReport`, a database's sessions to their headers as JSON text; a
//! failure rejects, as every store operation does (`store::task`).

use super::call;
use super::session::NativeSession;
use super::store::{same, task, StorePromise};
use crate::json::quote;
use crate::session_header::SessionHeader;
use crate::store::inspect::{self, Leased, Place, StoredLog, TornRecord};
use napi::{Env, Result};
use napi_derive::napi;
use std::path::Path;

/// A log read by the CLI: the repair plan, and the log as stored (kept
/// events) or as a store load returns it (kept events and closers).
#[napi]
pub struct LoadReport {
    stored: StoredLog,
}

fn report(stored: StoredLog) -> LoadReport {
    LoadReport { stored }
}

/// `{line | row, seq, cause, text, bytes?}`.
fn torn_json(torn: &TornRecord) -> String {
    let (place, at) = match torn.place {
        Place::Line(line) => ("line", line),
        Place::Row(row) => ("row", row),
    };
    let (seq, cause, text) = (torn.seq, quote(&torn.cause), quote(&torn.text));
    let bytes = torn
        .bytes
        .map_or(String::new(), |b| format!(r#","bytes":{b}"#));
    format!(r#"{{"{place}":{at},"seq":{seq},"cause":{cause},"text":{text}{bytes}}}"#)
}

#[napi]
impl LoadReport {
    /// The repair plan: `{header, records, preserved, torn, tornRecord,
    /// closers, fileBytes, committedBytes, written}` as JSON text
    /// (`tornRecord`: `{line | row, seq, cause, text}` of the first dropped
    /// record, or null).
    #[napi(js_name = "planJson")]
    pub fn plan_json(&self, env: Env) -> Result<String> {
        call(&env, || self.plan())
    }

    /// The log as a native session: the kept events alone, or with the
    /// closers when `repaired` (what a store load returns).
    #[napi]
    pub fn session(&self, env: Env, repaired: bool) -> Result<NativeSession> {
        call(&env, || {
            self.stored.log(repaired).map(NativeSession::from_log)
        })
    }

    /// The first SPEC 9 violation over the log (kept events, plus the
    /// closers when `repaired`): `{message, code, seq}` as JSON text, or `null`.
    #[napi]
    pub fn invariants(&self, env: Env, repaired: bool) -> Result<Option<String>> {
        call(&env, || {
            let violation = self.stored.first_violation(repaired)?;
            Ok(violation.map(|v| {
                let (message, code, seq) = (quote(&v.error.to_string()), v.error.code(), v.seq);
                format!(r#"{{"message":{message},"code":"{code}","seq":{seq}}}"#)
            }))
        })
    }
}

impl LoadReport {
    /// `planJson`.
    fn plan(&self) -> crate::error::CoreResult<String> {
        let s = &self.stored;
        let log = &s.repaired.log;
        let closers = log.events_json(s.repaired.preserved, log.len(), &[])?;
        let number = |n: Option<u64>| n.map_or("null".into(), |n| n.to_string());
        Ok(format!(
            "{{\"header\":{},\"records\":{},\"preserved\":{},\"torn\":{},\"tornRecord\":{},\"closers\":{},\"fileBytes\":{},\"committedBytes\":{},\"written\":{}}}",
            log.header().json(),
            s.records,
            s.repaired.preserved,
            s.repaired.torn,
            s.torn_record.as_ref().map_or("null".into(), torn_json),
            closers,
            number(s.file_bytes),
            number(s.committed_bytes),
            s.written
        ))
    }
}

/// `[header, ...]` as JSON text.
fn headers_json(headers: Vec<SessionHeader>) -> String {
    let headers: Vec<&str> = headers.iter().map(SessionHeader::json).collect();
    format!("[{}]", headers.join(","))
}

/// Read a JSONL log file with the load repair; with `write`, make the
/// repair durable (under the session's lease).
#[napi(js_name = "readJsonlLog", ts_return_type = "Promise<LoadReport>")]
pub fn read_jsonl_log(
    env: Env,
    path: String,
    write: bool,
) -> Result<StorePromise<StoredLog, LoadReport>> {
    call(&env, || {
        Ok(task(false, report, move || {
            inspect::read_jsonl(Path::new(&path), write)
        }))
    })
}

/// Read one session of a SQLite database read-only, with the load repair
/// in memory.
#[napi(js_name = "readSqliteLog", ts_return_type = "Promise<LoadReport>")]
pub fn read_sqlite_log(
    env: Env,
    path: String,
    id: String,
) -> Result<StorePromise<StoredLog, LoadReport>> {
    call(&env, || {
        Ok(task(false, report, move || {
            inspect::read_sqlite(&path, &id)
        }))
    })
}

/// Read one session of a PostgreSQL store read-only (no lease, no repair
/// written), with the load repair in memory.
#[napi(js_name = "readPostgresLog", ts_return_type = "Promise<LoadReport>")]
pub fn read_postgres_log(
    env: Env,
    url: String,
    schema: String,
    id: String,
) -> Result<StorePromise<StoredLog, LoadReport>> {
    call(&env, || {
        Ok(task(true, report, move || {
            inspect::read_postgres(url, schema, &id)
        }))
    })
}

/// The session headers of a SQLite database, read-only: `[header, ...]`
/// as JSON text.
#[napi(js_name = "listSqliteSessions", ts_return_type = "Promise<string>")]
pub fn list_sqlite_sessions(env: Env, path: String) -> Result<StorePromise<String, String>> {
    call(&env, || {
        Ok(task(false, same, move || {
            inspect::list_sqlite(&path).map(headers_json)
        }))
    })
}

/// The session headers of a PostgreSQL store, read-only: `[header, ...]`
/// as JSON text.
#[napi(js_name = "listPostgresSessions", ts_return_type = "Promise<string>")]
pub fn list_postgres_sessions(
    env: Env,
    url: String,
    schema: String,
) -> Result<StorePromise<String, String>> {
    call(&env, || {
        Ok(task(true, same, move || {
            inspect::list_postgres(url, schema).map(headers_json)
        }))
    })
}

/// The pid of the process holding the write lease of a stored session,
/// seen without taking it; null when it is free or cannot be seen. `kind`
/// is `jsonl` (`path` the log) or `sqlite` (`path` the database, `id`).
#[napi(js_name = "sessionLeaseHolder")]
pub fn session_lease_holder(
    env: Env,
    kind: String,
    path: String,
    id: String,
) -> Result<Option<u32>> {
    call(&env, || {
        let session = match kind.as_str() {
            "jsonl" => Leased::Jsonl {
                log: Path::new(&path),
            },
            "sqlite" => Leased::Sqlite {
                database: &path,
                id: &id,
            },
            _ => return Ok(None),
        };
        Ok(inspect::lease_holder(&session))
    })
}
