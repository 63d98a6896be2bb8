//! `NativeStore`: the native half of the stores (lib/stores.js). Every
//! operation that touches storage is an `AsyncTask` on the libuv pool (for
//! the PostgreSQL store, a job on threads of the addon's own: see
//! `threads`); its rejection is an `Error` whose `code` is the `CoreError`
//! code. Only
//! `cursor` and `locate` (no I/O) run on the main thread.

use super::session::{new_token, FlushSource, NativeSession};
use super::{call, converting, guarded};
use crate::error::{Code, CoreError, CoreResult};
use crate::executor;
use crate::log::Log;
use crate::session_header::SessionHeader;
use crate::store::jsonl::JsonlBackend;
use crate::store::postgres::{PgOptions, PostgresBackend};
use crate::store::sqlite::{SqliteBackend, JOURNAL_MODES};
use crate::store::{Flush, Flushed, Key, Listed, SessionStore, SessionTexts, Store};
use napi::bindgen_prelude::{AsyncTask, Buffer, Either, ToNapiValue, TypeName, Unknown};
use napi::{Env, JsValue, Result, Task};
use napi_derive::napi;
use std::path::PathBuf;
use std::sync::Arc;

/// One store operation: `work` runs on the libuv pool, `convert` on the
/// main thread.
pub struct StoreTask<O: Send + 'static, J> {
    work: Option<Box<dyn FnOnce() -> CoreResult<O> + Send>>,
    convert: fn(O) -> J,
    failure: Option<CoreError>,
}

/// A store operation as the promise JS gets: an `AsyncTask` on the libuv
/// pool, or, with `own_thread`, a job on the addon's own threads that
/// settles a deferred promise.
pub struct StorePromise<O: Send + 'static, J> {
    task: StoreTask<O, J>,
    own_thread: bool,
}

impl<O: Send + 'static, J: ToNapiValue + TypeName + 'static> ToNapiValue for StorePromise<O, J> {
    unsafe fn to_napi_value(raw: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        converting(raw, || unsafe { StorePromise::start(raw, val) })
    }
}

impl<O: Send + 'static, J: ToNapiValue + TypeName + 'static> StorePromise<O, J> {
    /// The promise of the operation, started.
    ///
    /// # Safety
    /// `raw` is the JS thread's environment, during a call.
    unsafe fn start(raw: napi::sys::napi_env, val: Self) -> Result<napi::sys::napi_value> {
        let StorePromise {
            mut task,
            own_thread,
        } = val;
        let work = match task.work.take() {
            Some(work) if own_thread => work,
            work => {
                task.work = work;
                return AsyncTask::to_napi_value(raw, AsyncTask::new(task));
            }
        };
        let env = Env::from_raw(raw);
        type Resolver<J> = Box<dyn FnOnce(Env) -> Result<J>>;
        let (deferred, promise) = env.create_deferred::<J, Resolver<J>>()?;
        let convert = task.convert;
        let job: Box<dyn FnOnce() + Send> = Box::new(move || {
            let out = guarded("a store operation", work);
            deferred.resolve(Box::new(move |env: Env| call(&env, || out.map(convert))));
        });
        if let Err(job) = executor::queue(job) {
            // The pool has no thread and none could start: libuv's runs it.
            let _ = env.spawn(Detached(Some(job)));
        }
        Ok(promise.raw())
    }
}

impl<O: Send + 'static, J> TypeName for StorePromise<O, J> {
    fn type_name() -> &'static str {
        "Promise"
    }

    fn value_type() -> napi::ValueType {
        napi::ValueType::Object
    }
}

/// A job that settles its own promise, run on the libuv pool.
struct Detached(Option<Box<dyn FnOnce() + Send>>);

impl Task for Detached {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        if let Some(job) = self.0.take() {
            // The job settles its promise; a panic around that is a bug
            // that must not cross into Node.
            let _ = guarded("a store operation", || {
                job();
                Ok(())
            });
        }
        Ok(())
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

/// An operation that reads or writes storage (a store's, or a read of the
/// CLI's: `inspect`) as the promise JS gets: resolved with `convert` of
/// what `work` returns, rejected with its error (`js_error`).
pub(super) fn task<O: Send + 'static, J>(
    own_thread: bool,
    convert: fn(O) -> J,
    work: impl FnOnce() -> CoreResult<O> + Send + 'static,
) -> StorePromise<O, J> {
    StorePromise {
        task: StoreTask {
            work: Some(Box::new(work)),
            convert,
            failure: None,
        },
        own_thread,
    }
}

pub(super) fn same<T>(t: T) -> T {
    t
}

impl<O: Send + 'static, J: ToNapiValue + TypeName> Task for StoreTask<O, J> {
    type Output = O;
    type JsValue = J;

    fn compute(&mut self) -> Result<O> {
        let work = self
            .work
            .take()
            .ok_or_else(|| napi::Error::from_reason("store task ran twice"))?;
        guarded("a store operation", work).map_err(|e| {
            let reason = e.to_string();
            self.failure = Some(e);
            napi::Error::from_reason(reason)
        })
    }

    fn resolve(&mut self, env: Env, output: O) -> Result<J> {
        let convert = self.convert;
        call(&env, || Ok(convert(output)))
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> Result<J> {
        match self.failure.take() {
            Some(e) => call(&env, || Err(e)),
            None => Err(err),
        }
    }
}

/// `{"meta": header, "events": [...]}` for `load`.
fn loaded_json(log: Log) -> CoreResult<String> {
    Ok(format!(
        "{{\"meta\":{},\"events\":{}}}",
        log.header().json(),
        log.events_json(0, log.len(), &[])?
    ))
}

/// `[header, ...]` for `list`.
fn listed_json(listed: Vec<Listed>) -> String {
    let headers: Vec<&str> = listed.iter().map(|l| l.header.json()).collect();
    format!("[{}]", headers.join(","))
}

#[napi]
pub struct NativeStore {
    store: Arc<dyn SessionStore>,
    jsonl: Option<Arc<Store<JsonlBackend>>>,
    /// Its operations wait on a network: they run on threads of their own.
    own_threads: bool,
}

/// How the store names a session: its id, and for JSONL the file name the
/// id encodes to (SPEC 11; `jsonl::encode_id`, the rule's one home).
fn key(id: String) -> Key {
    let file = crate::store::jsonl::encode_id(&id);
    Key { id, file }
}

#[napi]
impl NativeStore {
    /// A JSONL store under `root` (nothing is touched until an operation).
    #[napi(factory)]
    pub fn jsonl(env: Env, root: String) -> Result<NativeStore> {
        call(&env, || {
            let store = Arc::new(Store::new(JsonlBackend::new(PathBuf::from(root))));
            Ok(NativeStore {
                store: store.clone(),
                jsonl: Some(store),
                own_threads: false,
            })
        })
    }

    /// A SQLite store on `path` (or `:memory:`); the database opens on first use.
    #[napi(factory)]
    pub fn sqlite(env: Env, path: String, journal_mode: String) -> Result<NativeStore> {
        call(&env, || {
            if !JOURNAL_MODES.contains(&journal_mode.as_str()) {
                return Err(CoreError::new(
                    Code::InvalidArgument,
                    format!(
                        "journalMode must be one of 'wal', 'delete', 'truncate', 'persist', got {}",
                        crate::json::quote(&journal_mode)
                    ),
                ));
            }
            Ok(NativeStore {
                store: Arc::new(Store::new(SqliteBackend::new(path, journal_mode))),
                jsonl: None,
                own_threads: false,
            })
        })
    }

    /// The schema a PostgreSQL store uses when given none (`PgOptions::SCHEMA`).
    #[napi(js_name = "postgresDefaultSchema")]
    pub fn postgres_default_schema() -> String {
        PgOptions::SCHEMA.to_string()
    }

    /// A PostgreSQL store (see `PostgresSessionStore`); nothing connects
    /// until an operation. Durations in milliseconds (checked in JS); an
    /// option not given takes its default (`PgOptions`).
    #[napi(factory)]
    pub fn postgres(
        env: Env,
        connection_string: String,
        schema: Option<Either<String, Unknown<'_>>>,
        pool_size: Option<u32>,
        lease_ms: Option<u32>,
        statement_timeout_ms: Option<u32>,
        connect_timeout_ms: Option<u32>,
    ) -> Result<NativeStore> {
        let ms = |n: Option<u32>, default| {
            n.map_or(default, |n| std::time::Duration::from_millis(u64::from(n)))
        };
        call(&env, || {
            // Checked here, with the rest of the name's rule (`check_schema`).
            let schema = match schema {
                None => PgOptions::SCHEMA.to_string(),
                Some(Either::A(schema)) => schema,
                Some(Either::B(_)) => return Err(crate::store::postgres::schema_refused()),
            };
            let backend = PostgresBackend::new(PgOptions {
                pool_size: pool_size.map_or(PgOptions::POOL_SIZE, |n| n.max(1) as usize),
                lease: ms(lease_ms, PgOptions::LEASE),
                statement_timeout: ms(statement_timeout_ms, PgOptions::STATEMENT_TIMEOUT),
                connect_timeout: ms(connect_timeout_ms, PgOptions::CONNECT_TIMEOUT),
                ..PgOptions::new(connection_string, schema)
            })?;
            Ok(NativeStore {
                store: Arc::new(Store::new(backend)),
                jsonl: None,
                own_threads: true,
            })
        })
    }

    /// Record the intent to create a session (`headerJson` is its snapshotted header).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn create(
        &self,
        env: Env,
        id: String,
        header_json: String,
    ) -> Result<StorePromise<(), ()>> {
        call(&env, || {
            let header = SessionHeader::from_json(&id, &header_json)?;
            let store = self.store.clone();
            Ok(task(self.own_threads, same, move || {
                store.create(&key(id), header)
            }))
        })
    }

    /// Append one batch (a JSON array of snapshotted events) durably.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn append(&self, env: Env, id: String, batch_json: String) -> Result<StorePromise<(), ()>> {
        call(&env, || {
            let store = self.store.clone();
            Ok(task(self.own_threads, same, move || {
                store.append(&key(id), &batch_json)
            }))
        })
    }

    /// Repair-load a stored session: `{"meta", "events"}` as JSON text.
    /// With `writer`, the load must take the session's write lease (it
    /// rejects with `SESSION_IN_USE` when another store holds it).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn load(
        &self,
        env: Env,
        id: String,
        writer: Option<bool>,
    ) -> Result<StorePromise<String, String>> {
        call(&env, || {
            let store = self.store.clone();
            let writer = writer.unwrap_or(false);
            Ok(task(self.own_threads, same, move || {
                let key = key(id);
                loaded_json(guarded("loading a session", || store.load(&key, writer))?)
            }))
        })
    }

    /// Repair-load a stored session straight into a native session; with
    /// `writer`, as `load`'s, and the store then knows that session's log is the
    /// stored log (its first flush writes only what it appends).
    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn open(
        &self,
        env: Env,
        id: String,
        writer: Option<bool>,
    ) -> Result<StorePromise<(Log, u64), NativeSession>> {
        call(&env, || {
            let store = self.store.clone();
            let writer = writer.unwrap_or(false);
            Ok(task(
                self.own_threads,
                |(log, token)| NativeSession::with_token(log, token),
                move || {
                    let key = key(id);
                    let token = new_token();
                    let log = guarded("loading a session", || store.open(&key, writer, token))?;
                    Ok((log, token))
                },
            ))
        })
    }

    /// Where a flush of `native` starts: the stored length when this store
    /// knows its log is that session's prefix, else -1 (the flush then
    /// proves it from seq 0). No I/O.
    #[napi]
    pub fn cursor(&self, env: Env, id: String, native: &NativeSession) -> Result<f64> {
        call(&env, || {
            Ok(self
                .store
                .cursor(&id, native.token)
                .map_or(-1.0, |c| c as f64))
        })
    }

    /// Write a session's events `[stored length, to)` durably (`source`:
    /// what `NativeSession.flushSource()` gave at the call). The texts of
    /// the events its log holds are read here, off the main thread; `live`
    /// holds the JS session's own events from `liveFrom` (at least `start`)
    /// on, a line each. Resolves to the number written, or -1 when the
    /// store must compare the session from seq 0 (call again with `start`
    /// 0; see `Flushed::FromStart`).
    #[napi(ts_return_type = "Promise<number>")]
    #[allow(clippy::too_many_arguments)]
    pub fn flush(
        &self,
        env: Env,
        source: &FlushSource,
        id: String,
        start: f64,
        to: f64,
        live_from: f64,
        live: Vec<Buffer>,
    ) -> Result<StorePromise<f64, f64>> {
        call(&env, || {
            let store = self.store.clone();
            let (token, header, prefix) =
                (source.token, source.header.clone(), source.prefix.clone());
            Ok(task(self.own_threads, same, move || {
                let mut lines = String::with_capacity(live.iter().map(|b| b.len()).sum());
                for part in &live {
                    lines.push_str(std::str::from_utf8(part).map_err(|_| {
                        CoreError::new(Code::InvalidArgument, "event texts are not UTF-8")
                    })?);
                }
                drop(live);
                let flushed = store.flush(
                    &key(id),
                    Flush {
                        token,
                        header,
                        start: start as u64,
                        to: to as u64,
                        texts: SessionTexts {
                            prefix,
                            live_from: live_from as u64,
                            live: lines,
                        },
                    },
                )?;
                Ok(match flushed {
                    Flushed::Wrote(n) => n as f64,
                    Flushed::FromStart => -1.0,
                })
            }))
        })
    }

    /// Every stored header: `[{"file"?, "header"}]` as JSON text.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn list(&self, env: Env) -> Result<StorePromise<Vec<Listed>, String>> {
        call(&env, || {
            let store = self.store.clone();
            Ok(task(self.own_threads, listed_json, move || store.list()))
        })
    }

    /// The JSONL path of a session with this cwd and id (no I/O).
    #[napi]
    pub fn locate(&self, env: Env, cwd: Option<String>, id: String) -> Result<Option<String>> {
        call(&env, || {
            let Some(store) = &self.jsonl else {
                return Ok(None);
            };
            let path = store
                .backend()
                .locate(cwd.as_deref(), &crate::store::jsonl::encode_id(&id))?;
            Ok(Some(path.to_string_lossy().into_owned()))
        })
    }

    /// Release files and the database; later operations reject.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self, env: Env) -> Result<StorePromise<(), ()>> {
        call(&env, || {
            let store = self.store.clone();
            Ok(task(self.own_threads, same, move || {
                store.close();
                Ok(())
            }))
        })
    }
}
