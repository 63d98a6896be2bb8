//! `NativeStore`: the native half of `JsonlSessionStore` and
//! `SqliteSessionStore` (lib/stores.js). Every operation that touches storage
//! is an `AsyncTask` on the libuv pool (for the PostgreSQL store, a job on
//! threads of the addon's own: see `threads`); its rejection is an `Error`
//! whose `code` is the `CoreError` code. Only `stage`/`more` (copying a live
//! session's texts, in bounded chunks) and `locate` run on the main thread.

use super::session::NativeSession;
use super::threads;
use super::throw;
use crate::error::{CoreError, CoreResult};
use crate::log::{live_records, Log};
use crate::session_header::SessionHeader;
use crate::store::jsonl::JsonlBackend;
use crate::store::postgres::{PgOptions, PostgresBackend};
use crate::store::sqlite::{SqliteBackend, JOURNAL_MODES};
use crate::store::{Batch, Key, Listed, SessionStore, Staged, Store};
use napi::bindgen_prelude::{AsyncTask, Buffer, ToNapiValue, TypeName, Unknown};
use napi::{Env, JsValue, Result, Task};
use napi_derive::napi;
use std::path::PathBuf;
use std::sync::Arc;

/// A JS `Error` with `code`, to reject a promise with.
fn coded_error(env: &Env, e: &CoreError) -> napi::Error {
    let build = || -> Result<napi::Error> {
        let message = env.create_string(e.to_string())?;
        let code = env.create_string(e.code())?;
        let mut out = std::ptr::null_mut();
        napi::check_status!(unsafe {
            napi::sys::napi_create_error(env.raw(), code.raw(), message.raw(), &mut out)
        })?;
        Ok(napi::Error::from(unsafe {
            Unknown::from_raw_unchecked(env.raw(), out)
        }))
    };
    build().unwrap_or_else(|e| e)
}

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
            let out =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|_| {
                    Err(CoreError::Io(
                        "a store operation failed unexpectedly (its thread panicked)".into(),
                    ))
                });
            deferred.resolve(Box::new(move |env: Env| match out {
                Ok(o) => Ok(convert(o)),
                Err(e) => Err(coded_error(&env, &e)),
            }));
        });
        if let Err(job) = threads::spawn(job) {
            // No thread could be started: the libuv pool runs it.
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
            job();
        }
        Ok(())
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

fn task<O: Send + 'static, J>(
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

fn same<T>(t: T) -> T {
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
        work().map_err(|e| {
            let reason = e.to_string();
            self.failure = Some(e);
            napi::Error::from_reason(reason)
        })
    }

    fn resolve(&mut self, _env: Env, output: O) -> Result<J> {
        Ok((self.convert)(output))
    }

    fn reject(&mut self, env: Env, err: napi::Error) -> Result<J> {
        match self.failure.take() {
            Some(e) => Err(coded_error(&env, &e)),
            None => Err(err),
        }
    }
}

/// A store's load, on a thread of lower priority than the JS thread (it is
/// CPU-bound for a long log: parsing every event).
fn load_at_low_priority(store: &dyn SessionStore, key: Key, writer: bool) -> CoreResult<Log> {
    crate::log::at_low_priority(|| store.load(&key, writer)).unwrap_or_else(|| {
        Err(CoreError::Io(format!(
            "loading session {} failed unexpectedly (the loader panicked)",
            crate::json::quote(&key.id)
        )))
    })
}

/// `{"meta": header, "events": [...]}` for `load`.
fn loaded_json(log: Log) -> String {
    format!(
        "{{\"meta\":{},\"events\":{}}}",
        log.header().json(),
        log.events_json(0, log.len())
    )
}

/// `[{"file"?: stem, "header": {...}}]` for `list`.
fn listed_json(listed: Vec<Listed>) -> String {
    let mut out = String::from("[");
    for (i, l) in listed.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('{');
        if let Some(file) = &l.file {
            out.push_str("\"file\":");
            out.push_str(&crate::json::quote(file));
            out.push(',');
        }
        out.push_str("\"header\":");
        out.push_str(&l.header.json());
        out.push('}');
    }
    out.push(']');
    out
}

/// The texts of a live session the store has not stored yet: those its
/// native log holds, copied in chunks so a large flush never blocks the
/// event loop for long, then the session's pending events (their texts a
/// line each, which the session hands its native log too, while the write
/// runs).
#[napi]
pub struct StagedFlush {
    staged: Option<Staged>,
    /// The next event of the session to copy.
    next: usize,
    /// The end of what its log held when staging began (the pending
    /// events it takes over after that are staged from `pending`).
    end: usize,
    /// The pending events' texts, a line each.
    pending: Option<Vec<u8>>,
}

#[napi]
impl StagedFlush {
    /// Copy up to `maxBytes` more event texts; true while texts remain.
    #[napi]
    pub fn more(&mut self, native: &NativeSession, max_bytes: u32) -> bool {
        let log = native.log();
        let end = self.end.min(log.texts_len());
        let Some(staged) = self.staged.as_mut() else {
            return false;
        };
        let batch = &mut staged.batch;
        let start = batch.lines.len();
        while self.next < end && batch.lines.len() - start < max_bytes as usize {
            if let Some(text) = log.text(self.next) {
                batch.lines.push_str(&text);
                batch.lines.push('\n');
            }
            batch.count += 1;
            self.next += 1;
        }
        self.next < end
    }
}

#[napi]
pub struct NativeStore {
    store: Arc<dyn SessionStore>,
    jsonl: Option<Arc<Store<JsonlBackend>>>,
    /// Its operations wait on a network: they run on threads of their own.
    own_threads: bool,
}

fn key(id: String, file: String) -> Key {
    Key { id, file }
}

#[napi]
impl NativeStore {
    /// A JSONL store under `root` (nothing is touched until an operation).
    #[napi(factory)]
    pub fn jsonl(root: String) -> NativeStore {
        let store = Arc::new(Store::new(JsonlBackend::new(PathBuf::from(root))));
        NativeStore {
            store: store.clone(),
            jsonl: Some(store),
            own_threads: false,
        }
    }

    /// A SQLite store on `path` (or `:memory:`); the database opens on first use.
    #[napi(factory)]
    pub fn sqlite(env: Env, path: String, journal_mode: String) -> Result<NativeStore> {
        if !JOURNAL_MODES.contains(&journal_mode.as_str()) {
            return Err(throw(
                &env,
                CoreError::InvalidArgument(format!(
                    "journalMode must be one of 'wal', 'delete', 'truncate', 'persist', got {}",
                    crate::json::quote(&journal_mode)
                )),
            ));
        }
        Ok(NativeStore {
            store: Arc::new(Store::new(SqliteBackend::new(path, journal_mode))),
            jsonl: None,
            own_threads: false,
        })
    }

    /// A PostgreSQL store (see `PostgresSessionStore`); nothing connects
    /// until an operation. Durations in milliseconds (checked in JS).
    #[napi(factory)]
    pub fn postgres(
        env: Env,
        connection_string: String,
        schema: String,
        pool_size: u32,
        lease_ms: u32,
        statement_timeout_ms: u32,
        connect_timeout_ms: u32,
    ) -> Result<NativeStore> {
        let ms = |n: u32| std::time::Duration::from_millis(u64::from(n));
        let backend = PostgresBackend::new(PgOptions {
            connection_string,
            schema,
            pool_size: pool_size.max(1) as usize,
            lease: ms(lease_ms),
            statement_timeout: ms(statement_timeout_ms),
            connect_timeout: ms(connect_timeout_ms),
        })
        .map_err(|e| throw(&env, e))?;
        Ok(NativeStore {
            store: Arc::new(Store::new(backend)),
            jsonl: None,
            own_threads: true,
        })
    }

    /// Record the intent to create a session (`headerJson` is its snapshotted header).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn create(
        &self,
        env: Env,
        id: String,
        file: String,
        header_json: String,
    ) -> Result<StorePromise<(), ()>> {
        let header = SessionHeader::from_json(&id, &header_json).map_err(|e| throw(&env, e))?;
        let store = self.store.clone();
        Ok(task(self.own_threads, same, move || {
            store.create(&key(id, file), header)
        }))
    }

    /// Append one batch (a JSON array of snapshotted events) durably.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn append(&self, id: String, file: String, batch_json: String) -> StorePromise<(), ()> {
        let store = self.store.clone();
        task(self.own_threads, same, move || {
            store.append(&key(id, file), &batch_json)
        })
    }

    /// Repair-load a stored session: `{"meta", "events"}` as JSON text.
    /// With `writer`, the load must take the session's write lease (it
    /// rejects with `SESSION_IN_USE` when another store holds it).
    #[napi(ts_return_type = "Promise<string>")]
    pub fn load(
        &self,
        id: String,
        file: String,
        writer: Option<bool>,
    ) -> StorePromise<Log, String> {
        let store = self.store.clone();
        task(self.own_threads, loaded_json, move || {
            load_at_low_priority(&*store, key(id, file), writer.unwrap_or(false))
        })
    }

    /// Repair-load a stored session straight into a native session.
    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn open(&self, id: String, file: String) -> StorePromise<Log, NativeSession> {
        let store = self.store.clone();
        task(self.own_threads, NativeSession::from_log, move || {
            load_at_low_priority(&*store, key(id, file), false)
        })
    }

    /// Begin staging a flush of `native` from the store's cursor: `more`
    /// copies the texts its log holds; `pending` (their texts, a line
    /// each) holds the session's events after those, when it has any.
    #[napi]
    pub fn stage(
        &self,
        native: &NativeSession,
        id: String,
        pending: Option<Vec<Buffer>>,
    ) -> StagedFlush {
        let log = native.log();
        let from = (self.store.cursor(&id).unwrap_or(0) as usize).min(log.texts_len());
        // Reserve it all now: growing a large buffer later would copy it on
        // the main thread.
        // (The pending texts become the batch as they are when the log
        // holds none to copy.)
        let bytes = match log.texts_bytes(from, log.texts_len()) {
            0 => 0,
            logged => {
                logged
                    + pending
                        .as_ref()
                        .map_or(0, |p| p.iter().map(|b| b.len()).sum())
            }
        };
        StagedFlush {
            staged: Some(Staged {
                header: log.header().clone(),
                batch: Batch {
                    first_seq: from as u64,
                    count: 0,
                    lines: String::with_capacity(bytes),
                },
                anchor: from
                    .checked_sub(1)
                    .and_then(|i| log.text(i))
                    .map(|t| Box::from(&*t)),
            }),
            next: from,
            end: log.texts_len(),
            // One copy of the parts (a long flush builds them a part per
            // event-loop turn), joined here.
            pending: pending.map(|parts| {
                let mut all = Vec::with_capacity(parts.iter().map(|b| b.len()).sum());
                for part in &parts {
                    all.extend_from_slice(part);
                }
                all
            }),
        }
    }

    /// Write a staged flush durably; resolves to the number of events written.
    #[napi(ts_return_type = "Promise<number>")]
    pub fn flush(
        &self,
        staged: &mut StagedFlush,
        id: String,
        file: String,
    ) -> StorePromise<u32, u32> {
        let store = self.store.clone();
        let pending = staged.pending.take();
        let staged = staged.staged.take();
        task(self.own_threads, same, move || {
            let mut staged =
                staged.ok_or_else(|| CoreError::InvalidArgument("flush staged twice".into()))?;
            if let Some(bytes) = pending {
                // The session's own JSON.stringify of each pending event, a
                // line each, written as they are while the session takes
                // them too.
                let lines = String::from_utf8(bytes)
                    .map_err(|_| CoreError::InvalidArgument("event texts are not UTF-8".into()))?;
                // The check the session's hand-over makes (one line each,
                // every one an event whose meta reads): both refuse the same
                // texts, so nothing is written that the session refuses.
                let count = live_records(&lines)?.len();
                let batch = &mut staged.batch;
                batch.count += count;
                if batch.lines.is_empty() {
                    batch.lines = lines;
                } else {
                    batch.lines.push_str(&lines);
                }
            }
            store.flush(&key(id, file), staged)
        })
    }

    /// Every stored header: `[{"file"?, "header"}]` as JSON text.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn list(&self) -> StorePromise<Vec<Listed>, String> {
        let store = self.store.clone();
        task(self.own_threads, listed_json, move || store.list())
    }

    /// The JSONL path of a session with this cwd and encoded id (no I/O).
    #[napi]
    pub fn locate(&self, env: Env, cwd: Option<String>, file: String) -> Result<Option<String>> {
        let Some(store) = &self.jsonl else {
            return Ok(None);
        };
        let path = store
            .backend()
            .locate(cwd.as_deref(), &file)
            .map_err(|e| throw(&env, e))?;
        Ok(Some(path.to_string_lossy().into_owned()))
    }

    /// Release files and the database; later operations reject.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn close(&self) -> StorePromise<(), ()> {
        let store = self.store.clone();
        task(self.own_threads, same, move || {
            store.close();
            Ok(())
        })
    }
}
