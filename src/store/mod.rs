//! Durable session stores (SPEC 11): what both backends share. `Store` keeps
//! the per-session bookkeeping (lazy creation, the stored length, the last
//! stored event) and checks every batch; a `Backend` only reads, writes and
//! repairs one medium (JSONL files or one SQLite database). Every method here
//! blocks on I/O: the binding runs them on the libuv thread pool.

pub mod jsonl;
pub mod lease;
pub mod load;
pub mod postgres;
pub mod sqlite;

use crate::error::{CoreError, CoreResult};
use crate::event::{legacy_of, read_event, Kind, ReadError};
use crate::log::Log;
use crate::session_header::SessionHeader;
use crate::surface::{Candidate, Surface};
use lease::{Lease, Refused};
use serde_json::value::RawValue;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// How the caller names one session: its id, and for JSONL the file name
/// the id encodes to (the encoding is over UTF-16 code units, done in JS).
#[derive(Debug, Clone)]
pub struct Key {
    pub id: String,
    pub file: String,
}

/// Events to write durably as one batch: each event's JSON text followed by
/// a newline (event texts never contain a raw newline).
#[derive(Debug, Default)]
pub struct Batch {
    pub first_seq: u64,
    pub count: usize,
    pub lines: String,
}

impl Batch {
    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.lines.split_terminator('\n')
    }

    pub fn last_text(&self) -> Option<&str> {
        let body = self.lines.strip_suffix('\n')?;
        body.rsplit('\n').next()
    }

    /// The events from position `skip` on.
    fn skip(self, skip: usize) -> Batch {
        if skip == 0 {
            return self;
        }
        let offset = self
            .lines
            .match_indices('\n')
            .nth(skip - 1)
            .map_or(self.lines.len(), |(i, _)| i + 1);
        Batch {
            first_seq: self.first_seq + skip as u64,
            count: self.count.saturating_sub(skip),
            lines: self.lines[offset..].to_string(),
        }
    }

    fn text_at(&self, index: usize) -> Option<&str> {
        self.texts().nth(index)
    }
}

/// The texts of a live session's events not stored yet, copied from its
/// native log on the main thread (see `binding::store`).
#[derive(Debug)]
pub struct Staged {
    /// The session's header (a log created by this flush gets it).
    pub header: SessionHeader,
    /// Events `batch.first_seq..` of the session; `first_seq` is the store's
    /// cursor when staging began (0 when the store did not track the id).
    pub batch: Batch,
    /// The session's text of event `first_seq - 1`, to check that the
    /// stored log and the session are the same log.
    pub anchor: Option<Box<str>>,
}

/// A stored session found by `list()`.
#[derive(Debug)]
pub struct Listed {
    /// The JSONL file name without `.jsonl` (the JS side checks it encodes the id).
    pub file: Option<String>,
    pub header: SessionHeader,
}

/// One storage medium.
pub trait Backend: Send + Sync + 'static {
    /// What the backend keeps per session between operations (an open file).
    type Handle: Send + Default + 'static;

    /// Whether a log is stored for `key`.
    fn exists(&self, key: &Key) -> CoreResult<bool>;
    /// The lock file of the session's write lease; `None` when no other
    /// store can reach the session (an in-memory database).
    fn lease_path(&self, key: &Key) -> Option<PathBuf>;
    /// Read the stored log and repair it (SPEC 11); with `durable` (the
    /// caller holds the session's lease) make the repair durable, else
    /// write nothing. `None` when nothing is stored. A failed load changes
    /// nothing.
    fn load(&self, key: &Key, handle: &mut Self::Handle, durable: bool) -> CoreResult<Option<Log>>;
    /// Create the log with its header and first batch, atomically and durably;
    /// never overwrites a stored log.
    fn create_log(
        &self,
        key: &Key,
        header: &SessionHeader,
        batch: &Batch,
        handle: &mut Self::Handle,
    ) -> CoreResult<()>;
    /// Append one batch to a stored log, atomically and durably.
    fn append(&self, key: &Key, batch: &Batch, handle: &mut Self::Handle) -> CoreResult<()>;
    /// Every stored session's header, reading headers only.
    fn list(&self) -> CoreResult<Vec<Listed>>;
    /// Release files and connections.
    fn close(&self);
    /// Why this store may not write the session it loaded into `handle`
    /// (`SESSION_IN_USE`): a backend that keeps its own lease (PostgreSQL's
    /// lease row, with no lock file) found another writer holding it and
    /// read as a reader, writing nothing. The store reads it again before
    /// it writes, as after a load without the file lease, and is refused
    /// when that read is a reader's too.
    fn refusal(&self, _handle: &Self::Handle) -> Option<CoreError> {
        None
    }
}

/// What the store knows about one session.
struct Tracked<H> {
    header: SessionHeader,
    /// Whether the log exists in storage (lazy creation: not before the first append).
    materialized: bool,
    /// The stored log length: the seq the next batch must start at.
    next_seq: u64,
    /// The text of the last stored event.
    last_text: Option<Box<str>>,
    handle: H,
    /// The session's write lease, once this store has taken it.
    lease: Option<Lease>,
    /// Whether the fields above were read under the lease (or need none):
    /// only then do they say what storage holds. A load without the lease
    /// holds the repair in memory, and another writer may have written since.
    authoritative: bool,
    /// The stored session's surface, to check `append` batches against
    /// (SPEC 5); `None` after a flush (the session checked those events),
    /// rebuilt by a load when an append needs it.
    surface: Option<Surface>,
}

impl<H: Default> Tracked<H> {
    /// A session created here and not stored yet.
    fn intent(header: SessionHeader) -> Tracked<H> {
        Tracked {
            header,
            materialized: false,
            next_seq: 0,
            last_text: None,
            handle: H::default(),
            lease: None,
            authoritative: false,
            surface: Some(Surface::new()),
        }
    }
}

type Slot<H> = Arc<Mutex<Option<Tracked<H>>>>;

/// The operations of `JsonlSessionStore` and `SqliteSessionStore`.
pub trait SessionStore: Send + Sync {
    fn create(&self, key: &Key, header: SessionHeader) -> CoreResult<()>;
    fn append(&self, key: &Key, batch_json: &str) -> CoreResult<()>;
    /// Repair-load a stored session. It takes the session's write lease
    /// when it is free (and keeps it until `close`), making the repair
    /// durable; without it (another store holds it) the repair stays in
    /// memory, unless `writer` asks for the lease (`SESSION_IN_USE`).
    fn load(&self, key: &Key, writer: bool) -> CoreResult<Log>;
    /// The seq the next write for `id` starts at, when the store tracks it.
    fn cursor(&self, id: &str) -> Option<u64>;
    fn flush(&self, key: &Key, staged: Staged) -> CoreResult<u32>;
    fn list(&self) -> CoreResult<Vec<Listed>>;
    fn close(&self);
}

pub struct Store<B: Backend> {
    backend: B,
    sessions: Mutex<HashMap<String, Slot<B::Handle>>>,
    closed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn not_found(id: &str) -> CoreError {
    CoreError::NotFound(format!("session {} not found", crate::json::quote(id)))
}

pub fn persisted_collision(id: &str) -> CoreError {
    CoreError::AlreadyExists(format!(
        "session {} already has a persisted log on disk; load/resume it instead of creating",
        crate::json::quote(id)
    ))
}

fn live_collision(id: &str) -> CoreError {
    CoreError::AlreadyExists(format!(
        "session {} already has a persisted log on disk that does not match this live session (id collision)",
        crate::json::quote(id)
    ))
}

/// A header a store can write: SQLite keeps `createdAt` as an INTEGER, so
/// both stores require a non-negative safe integer.
pub fn check_persistable(header: &SessionHeader) -> CoreResult<()> {
    match header.get("createdAt") {
        Some(v) if crate::json::as_seq(v).is_some() => Ok(()),
        other => Err(CoreError::InvalidHeader(format!(
            "session header createdAt must be a non-negative safe integer to be persisted, got {}",
            other.map_or_else(|| "undefined".to_string(), Value::to_string)
        ))),
    }
}

/// Check an `append(id, events)` batch (the JSON array JS snapshotted):
/// every event's envelope, then legacy vocabulary (SPEC 7). Contiguity is
/// checked once the stored length is known.
fn parse_batch(id: &str, json: &str) -> CoreResult<(Batch, Vec<u64>)> {
    let items: Vec<&RawValue> = serde_json::from_str(json).map_err(|e| {
        CoreError::InvalidArgument(format!("append batch is not a JSON array: {e}"))
    })?;
    let mut seqs = Vec::with_capacity(items.len());
    let mut lines = String::with_capacity(json.len() + items.len());
    let mut legacy = None;
    for (index, raw) in items.iter().enumerate() {
        let text = raw.get();
        match read_event(text, index) {
            Ok(e) => {
                if legacy.is_none() {
                    legacy = legacy_of(e.kind, Some(e.data)).map(|l| (l, e.seq));
                }
                seqs.push(e.seq);
            }
            Err(ReadError::Invalid(CoreError::LegacyVocabulary(_))) => {
                if legacy.is_none() {
                    legacy = legacy_in(text).map(|(l, seq)| (l, seq.unwrap_or(index as u64)));
                }
                seqs.push(index as u64);
            }
            Err(ReadError::Invalid(e)) => {
                return Err(e.map_message(|m| {
                    format!(
                        "invalid append batch for session {}: {}",
                        crate::json::quote(id),
                        m.strip_prefix("seed ").unwrap_or(&m)
                    )
                }))
            }
            Err(ReadError::Unparsable) => {
                return Err(CoreError::InvalidArgument(format!(
                    "invalid append batch for session {}: event at index {index} is not JSON",
                    crate::json::quote(id)
                )))
            }
        }
        lines.push_str(&one_line(text));
        lines.push('\n');
    }
    if let Some((l, seq)) = legacy {
        return Err(CoreError::LegacyVocabulary(l.load_message(id, seq)));
    }
    let batch = Batch {
        first_seq: seqs.first().copied().unwrap_or(0),
        count: seqs.len(),
        lines,
    };
    Ok((batch, seqs))
}

/// The legacy form of an event text that `read_event` rejected as legacy,
/// and its seq when it has one.
pub(crate) fn legacy_in(text: &str) -> Option<(crate::event::Legacy, Option<u64>)> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(rename = "type")]
        ty: Option<Value>,
        seq: Option<Value>,
        #[serde(borrow)]
        data: Option<&'a RawValue>,
    }
    let p: Probe = serde_json::from_str(text).ok()?;
    let kind = Kind::of(p.ty.as_ref()?.as_str()?);
    let legacy = legacy_of(kind, p.data.map(RawValue::get))?;
    Some((legacy, p.seq.as_ref().and_then(crate::json::as_seq)))
}

/// An event text on one line: JSON whitespace may hold newlines (a
/// database row written by another client), the JSONL format may not.
pub(crate) fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains(['\n', '\r']) {
        // Outside strings these are whitespace; inside them JSON forbids them.
        std::borrow::Cow::Owned(text.replace(['\n', '\r'], " "))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

fn check_contiguous(id: &str, next: u64, seqs: &[u64]) -> CoreResult<()> {
    for (i, &seq) in seqs.iter().enumerate() {
        let expected = next + i as u64;
        if seq != expected {
            return Err(CoreError::SeqMismatch(format!(
                "append seq mismatch for {}: expected {expected} at index {i}, got {seq}",
                crate::json::quote(id)
            )));
        }
    }
    Ok(())
}

/// Whether two event texts hold the same event (byte-equal, or equal as JSON:
/// SQLite rebuilds the envelope in its own key order).
fn same_event(a: &str, b: &str) -> bool {
    a == b || crate::json::canonical_eq_text(a, b)
}

impl<B: Backend> Store<B> {
    pub fn new(backend: B) -> Store<B> {
        Store {
            backend,
            sessions: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn check_open(&self) -> CoreResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CoreError::Closed("session store is closed".into()));
        }
        Ok(())
    }

    fn slot(&self, id: &str) -> Slot<B::Handle> {
        lock(&self.sessions)
            .entry(id.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(None)))
            .clone()
    }

    /// Take the session's write lease, or say who holds it
    /// (`SESSION_IN_USE`); `None` when the session needs none.
    fn take_lease(&self, key: &Key) -> CoreResult<Option<Lease>> {
        match self.backend.lease_path(key) {
            None => Ok(None),
            Some(path) => lease::acquire(&path, &lease::subject(&key.id))
                .map(Some)
                .map_err(Refused::into_error),
        }
    }

    /// Load the stored log into `slot` (adopting it), or `None` when absent.
    /// The load holds `lease`, else the one the slot holds, else the
    /// session's lease when it is free; with it the repair is made durable,
    /// without it (another store writes the session) the repair stays in
    /// memory and nothing is written. A failed load leaves the slot as it was.
    fn load_into(
        &self,
        key: &Key,
        slot: &mut Option<Tracked<B::Handle>>,
        lease: Option<Lease>,
    ) -> CoreResult<Option<Log>> {
        let lease = match lease.or_else(|| slot.as_mut().and_then(|t| t.lease.take())) {
            Some(held) => Some(held),
            // No lock file for a session that is not stored.
            None if !self.backend.exists(key)? => return Ok(None),
            // A reader reads without it (held elsewhere, or a directory
            // this process cannot write).
            None => self.take_lease(key).unwrap_or_default(),
        };
        let durable = lease.is_some() || self.backend.lease_path(key).is_none();
        let mut handle = B::Handle::default();
        let log = match self.backend.load(key, &mut handle, durable) {
            Ok(Some(log)) => log,
            other => {
                if let Some(t) = slot.as_mut() {
                    t.lease = t.lease.take().or(lease);
                }
                return other;
            }
        };
        let durable = durable && self.backend.refusal(&handle).is_none();
        *slot = Some(Tracked {
            header: log.header().clone(),
            materialized: true,
            next_seq: log.len() as u64,
            last_text: log
                .len()
                .checked_sub(1)
                .and_then(|i| log.text(i))
                .map(|t| Box::from(&*t)),
            handle,
            lease,
            authoritative: durable,
            surface: Some(log.surface().clone()),
        });
        Ok(Some(log))
    }

    /// Make this store the session's writer before it writes: take the
    /// lease (`SESSION_IN_USE` when another store holds it) and, when what
    /// the store knows was read without it, read the log again under it
    /// (which makes a pending repair durable).
    fn become_writer(&self, key: &Key, slot: &mut Option<Tracked<B::Handle>>) -> CoreResult<()> {
        let Some(t) = slot.as_mut() else {
            return Ok(());
        };
        if t.lease.is_none() {
            t.lease = self.take_lease(key)?;
        }
        if t.authoritative {
            return Ok(());
        }
        if !t.materialized {
            // Nothing stored yet: the first write never overwrites a log.
            t.authoritative = true;
            return Ok(());
        }
        if self.load_into(key, slot, None)?.is_none() {
            *slot = None;
            return Err(not_found(&key.id));
        }
        match slot.as_ref().and_then(|t| self.backend.refusal(&t.handle)) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    /// Write `batch` durably and advance the cursor.
    fn write(&self, key: &Key, t: &mut Tracked<B::Handle>, batch: &Batch) -> CoreResult<()> {
        if batch.count == 0 {
            return Ok(());
        }
        if t.materialized {
            self.backend.append(key, batch, &mut t.handle)?;
        } else {
            check_persistable(&t.header)?;
            self.backend
                .create_log(key, &t.header, batch, &mut t.handle)?;
            t.materialized = true;
        }
        t.next_seq += batch.count as u64;
        t.last_text = batch.last_text().map(Into::into);
        Ok(())
    }
}

/// The surface after `batch` is applied to `surface`, or the SPEC 5 rule the
/// batch breaks (what a load of the stored log would then reject).
fn check_surface(id: &str, surface: &Surface, batch: &Batch) -> CoreResult<Surface> {
    let mut next = surface.clone();
    for (index, text) in batch.texts().enumerate() {
        let e = match read_event(text, index) {
            Ok(e) => e,
            // `parse_batch` read every event already.
            Err(_) => continue,
        };
        let parse = |raw: Option<&str>| raw.map(|r| serde_json::from_str::<Value>(r).ok());
        let (op, sources) = (parse(e.surface_op), parse(e.source_event_seqs));
        let plan = next
            .plan(&Candidate {
                ty: &e.ty,
                kind: e.kind,
                seq: e.seq,
                surface_op: op.as_ref().map(|v| v.as_ref().unwrap_or(&Value::Null)),
                source_event_seqs: sources.as_ref().map(|v| v.as_ref().unwrap_or(&Value::Null)),
            })
            .map_err(|err| {
                err.map_message(|m| {
                    format!(
                        "invalid append batch for session {}: event at index {index} (seq {}): {m}",
                        crate::json::quote(id),
                        e.seq
                    )
                })
            })?;
        next.apply(&plan);
    }
    Ok(next)
}

impl<B: Backend> SessionStore for Store<B> {
    fn create(&self, key: &Key, header: SessionHeader) -> CoreResult<()> {
        self.check_open()?;
        check_persistable(&header)?;
        let slot = self.slot(&key.id);
        let mut slot = lock(&slot);
        if slot.is_some() {
            return Err(CoreError::AlreadyExists(format!(
                "session {} already exists in this backend",
                crate::json::quote(&key.id)
            )));
        }
        if self.backend.exists(key)? {
            return Err(persisted_collision(&key.id));
        }
        *slot = Some(Tracked::intent(header));
        Ok(())
    }

    fn append(&self, key: &Key, batch_json: &str) -> CoreResult<()> {
        self.check_open()?;
        let (batch, seqs) = parse_batch(&key.id, batch_json)?;
        if batch.count == 0 {
            return Ok(());
        }
        let slot = self.slot(&key.id);
        let mut slot = lock(&slot);
        if slot.is_none() {
            let lease = self.take_lease(key)?;
            if self.load_into(key, &mut slot, lease)?.is_none() {
                return Err(not_found(&key.id));
            }
        }
        self.become_writer(key, &mut slot)?;
        if slot.as_ref().is_some_and(|t| t.surface.is_none()) {
            // After a flush: the stored surface, read back under the lease.
            self.load_into(key, &mut slot, None)?
                .ok_or_else(|| not_found(&key.id))?;
            if let Some(refused) = slot.as_ref().and_then(|t| self.backend.refusal(&t.handle)) {
                return Err(refused);
            }
        }
        let Some(t) = slot.as_mut() else {
            return Err(not_found(&key.id));
        };
        check_contiguous(&key.id, t.next_seq, &seqs)?;
        let surface = match &t.surface {
            Some(s) => check_surface(&key.id, s, &batch)?,
            None => return Err(not_found(&key.id)),
        };
        self.write(key, t, &batch)?;
        t.surface = Some(surface);
        Ok(())
    }

    fn load(&self, key: &Key, writer: bool) -> CoreResult<Log> {
        self.check_open()?;
        let slot = self.slot(&key.id);
        let mut slot = lock(&slot);
        let held = slot.as_ref().is_some_and(|t| t.lease.is_some());
        let lease = if writer && !held {
            self.take_lease(key)?
        } else {
            None
        };
        let log = self
            .load_into(key, &mut slot, lease)?
            .ok_or_else(|| not_found(&key.id))?;
        // A backend with its own lease loaded as a reader: a writer's load
        // is refused instead (its view is returned to readers only).
        if let Some(refused) = slot
            .as_ref()
            .filter(|_| writer)
            .and_then(|t| self.backend.refusal(&t.handle))
        {
            return Err(refused);
        }
        Ok(log)
    }

    fn cursor(&self, id: &str) -> Option<u64> {
        let slot = lock(&self.sessions).get(id).cloned()?;
        let slot = lock(&slot);
        slot.as_ref().map(|t| t.next_seq)
    }

    fn flush(&self, key: &Key, staged: Staged) -> CoreResult<u32> {
        self.check_open()?;
        let Staged {
            header,
            batch,
            anchor,
        } = staged;
        let slot = self.slot(&key.id);
        let mut slot = lock(&slot);
        // Neither created nor loaded here: adopt the stored log, else start one.
        if slot.is_none() {
            let lease = self.take_lease(key)?;
            if self.load_into(key, &mut slot, lease)?.is_none() {
                let mut t = Tracked::intent(header.clone());
                t.lease = self.take_lease(key)?;
                *slot = Some(t);
            }
        }
        self.become_writer(key, &mut slot)?;
        let Some(t) = slot.as_mut() else {
            return Err(not_found(&key.id));
        };
        // The batch starts at the cursor seen when staging began (0 when the
        // id was not tracked): skip what the store holds, once the stored
        // log's last event is the session's event at that seq.
        let stored = t.next_seq;
        let skip = stored.checked_sub(batch.first_seq).ok_or_else(|| {
            CoreError::InvalidArgument(format!(
                "flush of session {} was staged from seq {} but the store holds {stored} events",
                crate::json::quote(&key.id),
                batch.first_seq
            ))
        })? as usize;
        if stored > 0 {
            let session_text = match skip {
                0 => anchor.as_deref(),
                n => batch.text_at(n - 1),
            };
            let same = matches!((t.last_text.as_deref(), session_text), (Some(a), Some(b)) if same_event(a, b));
            if !same {
                return Err(live_collision(&key.id));
            }
        }
        if !t.materialized {
            t.header = header;
        }
        let rest = batch.skip(skip);
        let written = rest.count;
        if written > 0 {
            // The session checked these events; an append reads the stored
            // surface back when it needs it.
            t.surface = None;
        }
        self.write(key, t, &rest)?;
        Ok(written as u32)
    }

    fn list(&self) -> CoreResult<Vec<Listed>> {
        self.check_open()?;
        let mut out = self.backend.list()?;
        out.sort_by(|a, b| {
            let created = |l: &Listed| {
                l.header
                    .get("createdAt")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0)
            };
            created(a)
                .total_cmp(&created(b))
                .then_with(|| a.header.id().cmp(b.header.id()))
        });
        Ok(out)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.sessions).clear();
        self.backend.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_report_the_first_defect() {
        let ok =
            r#"[{"type":"x","seq":3,"time":1,"data":{}},{"type":"y","seq":4,"time":1,"data":{}}]"#;
        let (batch, seqs) = parse_batch("s", ok).unwrap();
        assert_eq!((batch.count, seqs), (2, vec![3, 4]));
        assert_eq!(
            check_contiguous("s", 2, &[3, 4]).unwrap_err().to_string(),
            "append seq mismatch for \"s\": expected 2 at index 0, got 3"
        );
        let legacy = r#"[{"type":"x","seq":3,"time":1,"data":{}},{"type":"request/header-delta","seq":4,"time":1,"data":{}}]"#;
        assert_eq!(
            parse_batch("s", legacy).unwrap_err().to_string(),
            "session \"s\" contains unsupported legacy request/header-delta event at seq 4"
        );
        let bad = r#"[{"type":"x","seq":3,"time":1}]"#;
        assert_eq!(
            parse_batch("s", bad).unwrap_err().to_string(),
            "invalid append batch for session \"s\": event at index 0 has an invalid event envelope"
        );
    }

    #[test]
    fn batches_skip_stored_events() {
        let b = Batch {
            first_seq: 5,
            count: 3,
            lines: "a\nb\nc\n".into(),
        };
        assert_eq!(b.text_at(1), Some("b"));
        assert_eq!(b.last_text(), Some("c"));
        let copy = |b: &Batch| Batch {
            first_seq: b.first_seq,
            count: b.count,
            lines: b.lines.clone(),
        };
        let rest = copy(&b).skip(2);
        assert_eq!(
            (rest.first_seq, rest.count, rest.lines.as_str()),
            (7, 1, "c\n")
        );
        assert_eq!(copy(&b).skip(3).lines, "");
        assert_eq!(b.skip(0).lines, "a\nb\nc\n");
    }
}
