//! Durable session stores (SPEC 11): what every backend shares. `Store`
//! keeps the per-session bookkeeping (lazy creation, the stored length, the
//! write lease, which live session the stored log belongs to) and checks
//! every batch; a `Backend` only reads, writes and repairs one medium (JSONL
//! files, one SQLite database, PostgreSQL). Every method here blocks on I/O:
//! the binding runs them off the JS thread.
//!
//! A live session's flush (SPEC 11.1) writes the events `[stored length,
//! session length at the call)`, in one step that holds the session's slot
//! and its lease: the store proves first that what it holds is the
//! session's own prefix (once per session object, by its token; again after
//! anything that may have changed storage behind it), and refuses a batch
//! that does not start exactly at the stored length.

pub(crate) mod inspect;
pub mod jsonl;
pub mod lease;
pub mod load;
pub mod postgres;
pub mod regular;
pub(crate) mod rows;
pub mod sqlite;

use crate::error::{Code, CoreError, CoreResult};
use crate::event::{legacy_of, read_event, Kind, ReadError};
use crate::log::{Log, Texts};
use crate::session_header::SessionHeader;
use crate::surface::Surface;
use lease::{Lease, Leases, Refused};
use load::Repaired;
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
}

/// The events of a live session a flush may read: the texts its native log
/// holds (events `0..prefix.len()`, shared) and the lines JS wrote for its
/// own later events, from `live_from` on.
pub struct SessionTexts {
    pub prefix: Arc<Texts>,
    pub live_from: u64,
    /// The live events' texts, a line each.
    pub live: String,
}

impl SessionTexts {
    /// Call `f` with the texts of events `from..to` in order; an event it
    /// does not hold stops it (`INTERNAL`).
    fn visit(&self, from: u64, to: u64, mut f: impl FnMut(u64, &str)) -> CoreResult<()> {
        let split = (self.prefix.len() as u64).clamp(from, to);
        self.prefix
            .visit(from as usize, split as usize, |i, t| f(i as u64, t))?;
        if split >= to {
            return Ok(());
        }
        let mut lines = self.live.split_terminator('\n');
        if split < self.live_from {
            return Err(missing_live(split));
        }
        for _ in self.live_from..split {
            lines.next();
        }
        for seq in split..to {
            f(seq, lines.next().ok_or_else(|| missing_live(seq))?);
        }
        Ok(())
    }
}

fn missing_live(seq: u64) -> CoreError {
    CoreError::new(
        Code::Internal,
        format!("the flush was not given the text of event {seq}"),
    )
}

/// A live session's flush, as the binding hands it over.
pub struct Flush {
    /// The session object (`NativeSession::token`).
    pub token: u64,
    /// The session's header (a log created by this flush gets it).
    pub header: SessionHeader,
    /// The session's texts are given from this seq on: the store's cursor
    /// for this session when the flush began (`cursor`), else 0.
    pub start: u64,
    /// The session's length when `flush` was called: the batch ends here.
    pub to: u64,
    pub texts: SessionTexts,
}

/// What a flush did.
#[derive(Debug, PartialEq, Eq)]
pub enum Flushed {
    /// Wrote this many events.
    Wrote(u64),
    /// The store must compare more of the session than it was given (its
    /// knowledge changed since `cursor`): call again from seq 0.
    FromStart,
}

/// A stored session found by `list()`.
#[derive(Debug)]
pub struct Listed {
    pub header: SessionHeader,
}

/// What a load may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// Nothing: the repair stays in memory (a reader, or a read beside a
    /// live writer).
    Read,
    /// Make the SPEC 11 repair durable (the caller holds the lease): drop a
    /// torn tail, append the closers.
    Repair,
    /// Drop a torn tail durably, append no closers: a live writer of the
    /// session may still continue its turn (the caller holds the lease).
    Continue,
}

/// A loaded log: the repaired log (closers last), and how many of its
/// events storage holds (the closers too after a `Repair`).
pub struct Loaded {
    pub log: Log,
    pub stored: usize,
}

/// The writes a load may make, in the step that read the log (one
/// transaction of a database; a file under its lease): the primitives the
/// repair policy (`LoadMode::repair`) is made of.
pub trait Repairs {
    /// Drop the torn tail: every stored record from the first one the
    /// repair did not keep (`Repaired::preserved`) on.
    fn truncate(&mut self, repaired: &Repaired) -> CoreResult<()>;
    /// Store the closers after the kept records (the torn tail dropped).
    fn insert(&mut self, closers: &[String]) -> CoreResult<()>;
}

impl LoadMode {
    /// SPEC 11's repair policy, one home for every backend: make durable
    /// what the mode says through the backend's primitives, and how many
    /// of the repaired log's events storage then holds.
    pub(crate) fn repair(self, repaired: &Repaired, writes: &mut dyn Repairs) -> CoreResult<usize> {
        if self == LoadMode::Read {
            return Ok(repaired.preserved);
        }
        if repaired.torn {
            writes.truncate(repaired)?;
        }
        if self == LoadMode::Continue {
            return Ok(repaired.preserved);
        }
        let closers = repaired.closers()?;
        if !closers.is_empty() {
            writes.insert(&closers)?;
        }
        Ok(repaired.log.len())
    }
}

/// How a backend makes the repair policy's writes in its load's step.
pub type Policy<'a> = &'a mut dyn FnMut(&Repaired, &mut dyn Repairs) -> CoreResult<()>;

/// What a backend found instead of the stored length a batch continues:
/// storage holds this many events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holds(pub u64);

/// `Ok` when a batch starting at `first` continues a log of `stored`
/// events (the one length check, in each backend's write step).
pub(crate) fn continues(first: u64, stored: u64) -> Result<(), Holds> {
    if first == stored {
        Ok(())
    } else {
        Err(Holds(stored))
    }
}

/// `SEQ_MISMATCH`: an insert of event `seq`, which the database holds already.
pub(crate) fn seq_taken(id: &str, seq: impl std::fmt::Display) -> CoreError {
    CoreError::new(
        Code::SeqMismatch,
        format!(
            "append seq mismatch for {}: the database already holds seq {seq}",
            crate::json::quote(id)
        ),
    )
}

/// One storage medium.
pub trait Backend: Send + Sync + 'static {
    /// What the backend keeps per session between operations (where its
    /// log is, its lease epoch).
    type Handle: Send + Default + 'static;

    /// Whether a log is stored for `key`.
    fn exists(&self, key: &Key) -> CoreResult<bool>;
    /// The lock file of the session's write lease; `None` when no other
    /// store can reach the session (an in-memory database) or the backend
    /// keeps its own lease (PostgreSQL's lease row).
    fn lease_path(&self, key: &Key) -> Option<PathBuf>;
    /// Read the stored log and repair it (SPEC 11) in memory; `None` when
    /// nothing is stored. `policy` is called once, inside the step that
    /// read the log, with the repaired log and the backend's write
    /// primitives: what it writes is durable when `load` returns. Unless
    /// `mode` is `Read` the read is a writer's; in a `Read`, the first write
    /// fails unless storage is still what was read, and a backend that keeps
    /// its own lease calls no policy. A backend that keeps its own lease and
    /// finds another writer holding it reads as a reader instead and calls
    /// no policy (`refusal` says why). A
    /// failed load changes nothing. A handle that already names a log (a
    /// store reading again what it wrote) refuses another one found in its
    /// place (`LOG_REPLACED`).
    fn load(
        &self,
        key: &Key,
        handle: &mut Self::Handle,
        mode: LoadMode,
        policy: Policy<'_>,
    ) -> CoreResult<Option<Repaired>>;
    /// Create the log with its header and first batch, atomically and durably;
    /// never overwrites a stored log.
    fn create_log(
        &self,
        key: &Key,
        header: &SessionHeader,
        batch: &Batch,
        handle: &mut Self::Handle,
    ) -> CoreResult<()>;
    /// Append one batch to a stored log, atomically and durably, in the step
    /// that reads the stored length: `Holds(n)`, writing nothing, when
    /// storage holds `n` events and `batch.first_seq` is not `n` (the store
    /// says `SEQ_MISMATCH`).
    fn append(
        &self,
        key: &Key,
        batch: &Batch,
        handle: &mut Self::Handle,
    ) -> CoreResult<Result<(), Holds>>;
    /// Every stored session's header, reading headers only.
    fn list(&self) -> CoreResult<Vec<Listed>>;
    /// Release files and connections.
    fn close(&self);
    /// Why this store may not write the session it loaded into `handle`
    /// (`SESSION_IN_USE`): a backend that keeps its own lease found another
    /// writer holding it and read as a reader, writing nothing.
    fn refusal(&self, _handle: &Self::Handle) -> Option<CoreError> {
        None
    }
    /// Let go of the lease a `Repair` load took into `handle` (a reader
    /// that made a repair durable keeps no lease): a backend that keeps its
    /// own lease releases it; a lock file's lease is the store's to drop.
    fn let_go(&self, _key: &Key, _handle: &Self::Handle) {}
    /// Why this store may not write at all (`READ_ONLY`: a SQLite database
    /// this process cannot write), checked before it takes a write lease.
    fn check_writable(&self) -> CoreResult<()> {
        Ok(())
    }
}

/// What the store knows about one session.
struct Tracked<H> {
    header: SessionHeader,
    handle: H,
    /// The session's write lease, once this store has taken it.
    lease: Option<Lease>,
    known: Known,
    owner: Option<Owner>,
}

/// What a store knows of a session's stored log.
enum Known {
    /// Nothing is stored (lazy creation: not before the first write),
    /// known under the lease or needing none; the first write never
    /// overwrites a log (it refuses one that appeared meanwhile).
    Intent,
    /// Read or written under the lease (or needing none), nothing failed
    /// since: storage holds `next_seq` events, the seq the next batch must
    /// start at.
    Stored {
        next_seq: u64,
        /// The stored session's surface, to check `append` batches against
        /// (SPEC 5); `None` after a flush (the session checked those
        /// events), read back when an append needs it.
        surface: Option<Surface>,
    },
    /// To read again under the lease before any write: read without it
    /// (another store held it), or a write failed. `materialized`: whether
    /// the log was known to exist.
    Stale { materialized: bool },
}

impl Known {
    fn materialized(&self) -> bool {
        !matches!(
            self,
            Known::Intent
                | Known::Stale {
                    materialized: false
                }
        )
    }

    /// Whether this says what storage holds.
    fn authoritative(&self) -> bool {
        !matches!(self, Known::Stale { .. })
    }
}

/// The live session (`token`) whose events `0..verified` the stored log is
/// known to hold, and the text of event `verified - 1` as written or read
/// then (to check, after a lapse, that storage still ends so).
struct Owner {
    token: u64,
    verified: u64,
    last: Option<Box<str>>,
}

impl<H: Default> Tracked<H> {
    /// A session created here and not stored yet.
    fn intent(header: SessionHeader) -> Tracked<H> {
        Tracked {
            header,
            handle: H::default(),
            lease: None,
            known: Known::Intent,
            owner: None,
        }
    }

    /// What a load found: under the lease, or needing none
    /// (`authoritative`), or read as a reader.
    fn loaded(
        header: SessionHeader,
        loaded: &Loaded,
        handle: H,
        authoritative: bool,
    ) -> Tracked<H> {
        let known = if authoritative {
            Known::Stored {
                next_seq: loaded.stored as u64,
                surface: Some(loaded.log.surface().clone()),
            }
        } else {
            Known::Stale { materialized: true }
        };
        Tracked {
            header,
            handle,
            lease: None,
            known,
            owner: None,
        }
    }
}

type Slot<H> = Arc<Mutex<Option<Tracked<H>>>>;

/// The operations of the three stores.
pub trait SessionStore: Send + Sync {
    fn create(&self, key: &Key, header: SessionHeader) -> CoreResult<()>;
    fn append(&self, key: &Key, batch_json: &str) -> CoreResult<()>;
    /// Repair-load a stored session. A reader's load takes no lease and
    /// keeps none: it makes the repair durable only when it can take the
    /// lease for that step alone, and otherwise returns it in memory. A
    /// writer's load (`writer`) takes the lease (`SESSION_IN_USE` when
    /// another store holds it) and keeps it until the store closes.
    fn load(&self, key: &Key, writer: bool) -> CoreResult<Log>;
    /// `load`, for a session object with `token`: when the load is the
    /// writer's, the store knows that object's log is the stored log.
    fn open(&self, key: &Key, writer: bool, token: u64) -> CoreResult<Log>;
    /// Where a flush of the session object `token` starts: the stored
    /// length when the store knows its log is that object's prefix.
    fn cursor(&self, id: &str, token: u64) -> Option<u64>;
    fn flush(&self, key: &Key, flush: Flush) -> CoreResult<Flushed>;
    fn list(&self) -> CoreResult<Vec<Listed>>;
    fn close(&self);
}

pub struct Store<B: Backend> {
    backend: B,
    sessions: Mutex<HashMap<String, Slot<B::Handle>>>,
    /// The write leases this store takes (held in its slots).
    leases: Leases,
    closed: AtomicBool,
}

/// `m` locked; a lock a panicking thread held is taken as it was left.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn not_found(id: &str) -> CoreError {
    CoreError::new(
        Code::NotFound,
        format!("session {} not found", crate::json::quote(id)),
    )
}

pub fn persisted_collision(id: &str) -> CoreError {
    CoreError::new(
        Code::AlreadyExists,
        format!(
            "session {} already has a persisted log on disk; load/resume it instead of creating",
            crate::json::quote(id)
        ),
    )
}

/// A flush of a session whose history is not the stored log's.
fn different_history(id: &str, why: &str) -> CoreError {
    CoreError::new(
        Code::AlreadyExists,
        format!(
        "session {} already has a persisted log on disk that does not match this live session: \
         the histories differ ({why}); nothing was written",
        crate::json::quote(id)
    ),
    )
}

/// A header a store can write: SQLite keeps `createdAt` as an INTEGER, so
/// every store requires a non-negative safe integer.
pub fn check_persistable(header: &SessionHeader) -> CoreResult<()> {
    let created_at = header.member("createdAt");
    if created_at.and_then(crate::json::seq_of_text).is_some() {
        return Ok(());
    }
    Err(CoreError::new(
        Code::InvalidHeader,
        format!(
            "session header createdAt must be a non-negative safe integer to be persisted, got {}",
            created_at.unwrap_or("undefined")
        ),
    ))
}

/// `SEQ_MISMATCH`: a batch starting at `first` where storage holds `stored` events.
pub(crate) fn seq_mismatch(id: &str, first: u64, stored: u64) -> CoreError {
    CoreError::new(Code::SeqMismatch, format!(
        "append seq mismatch for {}: expected {stored} at index 0, got {first} (the store holds {stored} events)",
        crate::json::quote(id)
    ))
}

/// The seq of an event text (its `seq` member), when it reads as one.
fn seq_of_text(text: &str) -> Option<u64> {
    crate::scan::accepted_member(text, "seq")?.parse().ok()
}

impl<B: Backend> Store<B> {
    pub fn new(backend: B) -> Store<B> {
        Store {
            backend,
            sessions: Mutex::new(HashMap::new()),
            leases: Leases::new(),
            closed: AtomicBool::new(false),
        }
    }

    pub fn backend(&self) -> &B {
        &self.backend
    }

    fn check_open(&self) -> CoreResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(CoreError::new(Code::Closed, "session store is closed"));
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
    /// (`SESSION_IN_USE`); `None` when the session needs none. The slot
    /// that keeps it holds it until the store closes.
    fn take_lease(&self, key: &Key) -> CoreResult<Option<Lease>> {
        // A store that cannot write takes no lease: its loads are a
        // reader's, and its writes are refused before any lock file.
        self.backend.check_writable()?;
        self.lease(key)
    }

    /// `take_lease` of a store known to be writable (in a backend's step,
    /// which may hold what `check_writable` needs).
    fn lease(&self, key: &Key) -> CoreResult<Option<Lease>> {
        let Some(path) = self.backend.lease_path(key) else {
            return Ok(None);
        };
        let lease = self
            .leases
            .take(&path, &lease::subject(&key.id))
            .map_err(Refused::into_error)?;
        Ok(Some(lease))
    }

    /// The stored log read as a reader: nothing written, nothing tracked.
    fn read_only(&self, key: &Key) -> CoreResult<Option<Loaded>> {
        let mut handle = B::Handle::default();
        load_with(&self.backend, key, &mut handle, LoadMode::Read)
    }

    /// A load by `load` or `open` (`token`: the session object `open`
    /// makes). A writer's load (`writer`), or a load by the store that
    /// holds the session's lease already, is made under the lease: taken
    /// (`SESSION_IN_USE` when another store holds it) and kept, the repair
    /// made durable, and the store adopts what it read (for `open`, that
    /// the session it makes holds the stored log). While a live session of
    /// this store writes the session, a load is a reader's (SPEC 11.1: a
    /// read never wedges a writer); so is every other load (`read`).
    fn load_as(&self, key: &Key, writer: bool, token: Option<u64>) -> CoreResult<Log> {
        self.check_open()?;
        let slot = self.slot(&key.id);
        let mut slot = lock(&slot);
        if slot.as_ref().is_some_and(|t| t.owner.is_some()) {
            if writer {
                return Err(CoreError::new(
                    Code::SessionInUse,
                    format!(
                        "{} is in use: a live session of this store writes it; nothing was written",
                        lease::subject(&key.id)
                    ),
                ));
            }
            return Ok(self.read_only(key)?.ok_or_else(|| not_found(&key.id))?.log);
        }
        let own_lease = self.backend.lease_path(key).is_none();
        let holds = slot
            .as_ref()
            .is_some_and(|t| t.lease.is_some() || (own_lease && t.known.authoritative()));
        if !writer && !holds {
            return self.read(key);
        }
        let lease = match slot.as_mut().and_then(|t| t.lease.take()) {
            Some(held) => Some(held),
            None => self.take_lease(key)?,
        };
        let mut handle = B::Handle::default();
        let loaded = match load_with(&self.backend, key, &mut handle, LoadMode::Repair) {
            Ok(Some(loaded)) => loaded,
            other => {
                if let Some(t) = slot.as_mut() {
                    t.lease = t.lease.take().or(lease);
                }
                return match other {
                    Ok(_) => Err(not_found(&key.id)),
                    Err(e) => Err(e),
                };
            }
        };
        let refused = self.backend.refusal(&handle);
        if let (true, Some(refused)) = (writer, refused.clone()) {
            return Err(refused);
        }
        let authoritative = refused.is_none();
        let mut t = Tracked::loaded(loaded.log.header().clone(), &loaded, handle, authoritative);
        t.lease = lease;
        if let (true, Some(token)) = (authoritative, token) {
            // The session `open` makes holds exactly what storage holds.
            t.owner = Some(Owner {
                token,
                verified: loaded.stored as u64,
                last: last_text(&loaded.log, loaded.stored)?,
            });
        }
        *slot = Some(t);
        Ok(loaded.log)
    }

    /// A reader's load: no lease kept, nothing tracked. When the log needs
    /// a repair (a torn tail, an interrupted turn), the step that read it
    /// makes the repair durable (SPEC 11) only if the lease is free, taken
    /// for that step alone; otherwise it stays in what the load returns, as
    /// it does when the durable repair fails (a read-only directory). Only
    /// a step that could not write it (storage moved before the lease was
    /// taken, a write failed, PostgreSQL's lease is its own) reads again,
    /// under the lease.
    fn read(&self, key: &Key) -> CoreResult<Log> {
        let (mut lease, mut again) = (None, true);
        let mut handle = B::Handle::default();
        let writable = self.backend.check_writable().is_ok();
        let policy: Policy<'_> = &mut |r, writes| {
            again = r.needs_write()
                && writable
                && match self.lease(key) {
                    Ok(taken) => {
                        lease = Some(taken);
                        LoadMode::Repair.repair(r, writes).is_err()
                    }
                    Err(_) => false,
                };
            Ok(())
        };
        let read = self
            .backend
            .load(key, &mut handle, LoadMode::Read, policy)?
            .ok_or_else(|| not_found(&key.id))?;
        if !again || !read.needs_write() {
            return Ok(read.log);
        }
        let Ok(lease) = lease.map_or_else(|| self.take_lease(key), Ok) else {
            return Ok(read.log);
        };
        let mut handle = B::Handle::default();
        let repaired = load_with(&self.backend, key, &mut handle, LoadMode::Repair);
        let durable = self.backend.refusal(&handle).is_none();
        self.backend.let_go(key, &handle);
        drop(lease);
        match repaired {
            Ok(Some(repaired)) if durable => Ok(repaired.log),
            _ => Ok(read.log),
        }
    }

    /// Make this store the session's writer before it writes: take the
    /// lease (`SESSION_IN_USE` when another store holds it) and, unless
    /// what the store knows was read under it and nothing failed since,
    /// read the log again under it (`mode`: `Repair` for an append with no
    /// live writer, `Continue` when one may still continue its turn). The
    /// log read again, if it was, comes back: under the lease it is what
    /// storage holds, so a flush compares against it without reading twice.
    fn become_writer(
        &self,
        key: &Key,
        slot: &mut Option<Tracked<B::Handle>>,
        mode: LoadMode,
    ) -> CoreResult<Option<Log>> {
        let Some(t) = slot.as_mut() else {
            return Err(not_found(&key.id));
        };
        if t.lease.is_none() {
            t.lease = self.take_lease(key)?;
        }
        if t.known.authoritative() {
            return Ok(None);
        }
        match self.refresh(key, t, mode) {
            Err(e) if e.kind() == Code::NotFound => {
                *slot = None;
                Err(e)
            }
            other => other,
        }
    }

    /// Read the stored log again (see `become_writer`). The live session
    /// the store verified stays its owner only if storage still holds what
    /// was verified (at least as many events, the last one verified
    /// unchanged): otherwise a flush proves the history again from seq 0.
    /// Returns the log read, if one is stored.
    fn refresh(
        &self,
        key: &Key,
        t: &mut Tracked<B::Handle>,
        mode: LoadMode,
    ) -> CoreResult<Option<Log>> {
        if !t.known.materialized() && !self.backend.exists(key)? {
            // Nothing stored yet: the first write never overwrites a log.
            t.known = Known::Intent;
            return Ok(None);
        }
        // Through the handle the store has: a backend refuses a log that is
        // not the one it had (`LOG_REPLACED`).
        let loaded = load_with(&self.backend, key, &mut t.handle, mode)?
            .ok_or_else(|| not_found(&key.id))?;
        if let Some(refused) = self.backend.refusal(&t.handle) {
            return Err(refused);
        }
        let stored = loaded.stored as u64;
        if let Some(owner) = &t.owner {
            let keeps = stored >= owner.verified
                && (owner.verified == 0
                    || matches!(
                        (last_text(&loaded.log, owner.verified as usize)?, owner.last.as_deref()),
                        (Some(a), Some(b)) if same_event(&a, b)
                    ));
            if !keeps {
                t.owner = None;
            }
        }
        t.header = loaded.log.header().clone();
        t.known = Known::Stored {
            next_seq: stored,
            surface: Some(loaded.log.surface_at(loaded.stored)?),
        };
        Ok(Some(loaded.log))
    }

    /// Check that storage holds the session's own events `from..stored`
    /// (the caller holds the lease, so nothing changes meanwhile): in
    /// `read`, the log the lease's refresh just read, or read now.
    fn compare(
        &self,
        key: &Key,
        texts: &SessionTexts,
        from: u64,
        stored: u64,
        read: Option<Log>,
    ) -> CoreResult<()> {
        let log = match read {
            Some(log) => log,
            None => {
                let loaded = self.read_only(key)?.ok_or_else(|| not_found(&key.id))?;
                if loaded.stored as u64 != stored {
                    return Err(CoreError::new(Code::SeqMismatch, format!(
                        "flush of session {}: storage holds {} events where this store read {stored}; nothing was written",
                        crate::json::quote(&key.id),
                        loaded.stored
                    )));
                }
                loaded.log
            }
        };
        let mut differs = None;
        let mut failed = None;
        texts.visit(from, stored, |seq, text| {
            if differs.is_some() || failed.is_some() {
                return;
            }
            match log.text(seq as usize) {
                Ok(held) if same_event(&held, text) => {}
                Ok(_) => differs = Some(seq),
                Err(e) => failed = Some(e),
            }
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        match differs {
            Some(seq) => Err(different_history(
                &key.id,
                &format!("the stored event at seq {seq} is not this session's"),
            )),
            None => Ok(()),
        }
    }

    /// Write `batch` durably and advance the cursor, in the step that
    /// checks it starts at the stored length (`SEQ_MISMATCH` otherwise). A
    /// failed write leaves what storage holds unknown: the next write reads
    /// it again first.
    /// `after`: the stored surface once the batch is written (`None`: an
    /// append reads it back when it needs it).
    fn write(
        &self,
        key: &Key,
        t: &mut Tracked<B::Handle>,
        batch: &Batch,
        after: Option<Surface>,
    ) -> CoreResult<()> {
        if batch.count == 0 {
            return Ok(());
        }
        let stored = match t.known {
            Known::Intent => None,
            Known::Stored { next_seq, .. } => Some(next_seq),
            Known::Stale { .. } => {
                return Err(CoreError::new(
                    Code::Internal,
                    format!(
                        "session {}: a write before the store read the log under its lease",
                        crate::json::quote(&key.id)
                    ),
                ))
            }
        };
        let first = batch.first_seq;
        if let Err(Holds(n)) = continues(first, stored.unwrap_or(0)) {
            return Err(seq_mismatch(&key.id, first, n));
        }
        let written = match stored {
            Some(_) => self
                .backend
                .append(key, batch, &mut t.handle)
                .and_then(|r| r.map_err(|Holds(n)| seq_mismatch(&key.id, first, n))),
            None => check_persistable(&t.header).and_then(|()| {
                self.backend
                    .create_log(key, &t.header, batch, &mut t.handle)
            }),
        };
        if let Err(e) = written {
            t.known = Known::Stale {
                materialized: stored.is_some(),
            };
            return Err(e);
        }
        t.known = Known::Stored {
            next_seq: stored.unwrap_or(0) + batch.count as u64,
            surface: after,
        };
        Ok(())
    }
}

/// Load the stored log of `key` from `backend` through `handle`, writing
/// what `mode` says (`LoadMode::repair`): how many of its events storage
/// then holds.
pub(crate) fn load_with<B: Backend>(
    backend: &B,
    key: &Key,
    handle: &mut B::Handle,
    mode: LoadMode,
) -> CoreResult<Option<Loaded>> {
    let mut stored = None;
    let repaired = backend.load(key, handle, mode, &mut |r, writes| {
        stored = Some(mode.repair(r, writes)?);
        Ok(())
    })?;
    // No policy ran: a load that wrote nothing.
    Ok(repaired.map(|r| Loaded {
        stored: stored.unwrap_or(r.preserved),
        log: r.log,
    }))
}

/// The text of event `end - 1` of `log` (`None` for `end` 0).
fn last_text(log: &Log, end: usize) -> CoreResult<Option<Box<str>>> {
    match end.checked_sub(1) {
        None => Ok(None),
        Some(i) => Ok(Some(Box::from(&*log.text(i)?))),
    }
}

/// The batch of a flush: the session's events `from..to`, each checked to
/// be the event of its seq (`SEQ_MISMATCH` otherwise). When they are all
/// live events, the lines JS wrote are the batch as they are.
fn batch_of(id: &str, texts: SessionTexts, from: u64, to: u64) -> CoreResult<Batch> {
    let wrong = |seq: u64| {
        CoreError::new(
            Code::SeqMismatch,
            format!(
                "flush of session {}: the text given for seq {seq} is not the event at that seq",
                crate::json::quote(id)
            ),
        )
    };
    if from >= to {
        return Ok(Batch {
            first_seq: from,
            count: 0,
            lines: String::new(),
        });
    }
    if from >= texts.prefix.len() as u64 && from == texts.live_from {
        let mut seq = from;
        for line in texts.live.split_terminator('\n') {
            if seq >= to {
                break;
            }
            if seq_of_text(line) != Some(seq) {
                return Err(wrong(seq));
            }
            seq += 1;
        }
        if seq < to {
            return Err(missing_live(seq));
        }
        let mut lines = texts.live;
        let end = lines
            .match_indices('\n')
            .nth((to - from) as usize - 1)
            .map_or(0, |(i, _)| i + 1);
        lines.truncate(end);
        return Ok(Batch {
            first_seq: from,
            count: (to - from) as usize,
            lines,
        });
    }
    let mut lines = String::new();
    let mut bad = None;
    texts.visit(from, to, |seq, text| {
        if bad.is_none() && seq_of_text(text) != Some(seq) {
            bad = Some(seq);
        }
        lines.push_str(&one_line(text));
        lines.push('\n');
    })?;
    if let Some(seq) = bad {
        return Err(wrong(seq));
    }
    Ok(Batch {
        first_seq: from,
        count: (to - from) as usize,
        lines,
    })
}

/// Check an `append(id, events)` batch (the JSON array JS snapshotted):
/// every event's envelope, then legacy vocabulary (SPEC 7). Contiguity is
/// checked once the stored length is known.
fn parse_batch(id: &str, json: &str) -> CoreResult<(Batch, Vec<u64>)> {
    let items = crate::scan::array_items(json)
        .ok_or_else(|| CoreError::new(Code::InvalidArgument, "append batch is not a JSON array"))?;
    let mut seqs = Vec::with_capacity(items.len());
    let mut lines = String::with_capacity(json.len() + items.len());
    let mut legacy = None;
    for (index, &text) in items.iter().enumerate() {
        match read_event(text, index) {
            Ok(e) => seqs.push(e.seq),
            Err(ReadError::Invalid(e)) if e.kind() == Code::LegacyVocabulary => {
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
                return Err(CoreError::new(
                    Code::InvalidArgument,
                    format!(
                        "invalid append batch for session {}: event at index {index} is not JSON",
                        crate::json::quote(id)
                    ),
                ))
            }
        }
        lines.push_str(&one_line(text));
        lines.push('\n');
    }
    if let Some((l, seq)) = legacy {
        return Err(CoreError::new(
            Code::LegacyVocabulary,
            l.load_message(id, seq),
        ));
    }
    let batch = Batch {
        first_seq: seqs.first().copied().unwrap_or(0),
        count: seqs.len(),
        lines,
    };
    Ok((batch, seqs))
}

/// The legacy form (SPEC 7) of an event text, and its seq when it has one:
/// for an append batch that `read_event` rejected as legacy, and for a
/// stored record on load (load.rs).
pub(crate) fn legacy_in(text: &str) -> Option<(crate::event::Legacy, Option<u64>)> {
    let (fields, _) = crate::scan::read_event_line(text).ok()?;
    let kind = Kind::of(&crate::scan::string_value(fields.ty?)?);
    let legacy = legacy_of(kind, fields.data)?;
    Some((legacy, fields.seq.and_then(crate::json::seq_of_text)))
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
            return Err(CoreError::new(
                Code::SeqMismatch,
                format!(
                    "append seq mismatch for {}: expected {expected} at index {i}, got {seq}",
                    crate::json::quote(id)
                ),
            ));
        }
    }
    Ok(())
}

/// Whether two event texts hold the same event (byte-equal, or equal as JSON:
/// SQLite rebuilds the envelope in its own key order).
fn same_event(a: &str, b: &str) -> bool {
    a == b || crate::json::canonical_eq_text(a, b)
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
        let plan = next.plan(&e).map_err(|err| {
            err.map_message(|m| {
                format!(
                    "invalid append batch for session {}: event at index {index} (seq {}): {m}",
                    crate::json::quote(id),
                    e.seq
                )
            })
        })?;
        next.apply(plan);
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
            return Err(CoreError::new(
                Code::AlreadyExists,
                format!(
                    "session {} already exists in this backend",
                    crate::json::quote(&key.id)
                ),
            ));
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
            let mut handle = B::Handle::default();
            let Some(loaded) = load_with(&self.backend, key, &mut handle, LoadMode::Repair)? else {
                return Err(not_found(&key.id));
            };
            let authoritative = self.backend.refusal(&handle).is_none();
            let mut t =
                Tracked::loaded(loaded.log.header().clone(), &loaded, handle, authoritative);
            t.lease = lease;
            *slot = Some(t);
        }
        let live = slot.as_ref().is_some_and(|t| t.owner.is_some());
        let mode = if live {
            LoadMode::Continue
        } else {
            LoadMode::Repair
        };
        self.become_writer(key, &mut slot, mode)?;
        let Some(t) = slot.as_mut() else {
            return Err(not_found(&key.id));
        };
        if let Known::Stored {
            surface: none @ None,
            ..
        } = &mut t.known
        {
            // After a flush: the stored surface, read back under the lease.
            let loaded = self.read_only(key)?.ok_or_else(|| not_found(&key.id))?;
            *none = Some(loaded.log.surface_at(loaded.stored)?);
        }
        let (next_seq, surface) = match &t.known {
            Known::Intent => (0, check_surface(&key.id, &Surface::default(), &batch)?),
            Known::Stored {
                next_seq,
                surface: Some(s),
            } => (*next_seq, check_surface(&key.id, s, &batch)?),
            _ => return Err(not_found(&key.id)),
        };
        check_contiguous(&key.id, next_seq, &seqs)?;
        self.write(key, t, &batch, Some(surface))?;
        // Storage now holds events no live session of this store gave it.
        t.owner = None;
        Ok(())
    }

    fn load(&self, key: &Key, writer: bool) -> CoreResult<Log> {
        self.load_as(key, writer, None)
    }

    fn open(&self, key: &Key, writer: bool, token: u64) -> CoreResult<Log> {
        self.load_as(key, writer, Some(token))
    }

    fn cursor(&self, id: &str, token: u64) -> Option<u64> {
        let slot = lock(&self.sessions).get(id).cloned()?;
        // Busy: the flush proves the whole history instead.
        let guard = slot.try_lock().ok()?;
        let owner = guard.as_ref()?.owner.as_ref()?;
        (owner.token == token).then_some(owner.verified)
    }

    fn flush(&self, key: &Key, f: Flush) -> CoreResult<Flushed> {
        self.check_open()?;
        let slot = self.slot(&key.id);
        let mut slot = lock(&slot);
        if slot.is_none() {
            // Neither created nor loaded here: the log may be stored already
            // (the refresh finds out, under the lease).
            let mut t = Tracked::intent(f.header.clone());
            t.lease = self.take_lease(key)?;
            t.known = Known::Stale {
                materialized: false,
            };
            *slot = Some(t);
        }
        let read = self.become_writer(key, &mut slot, LoadMode::Continue)?;
        let Some(t) = slot.as_mut() else {
            return Err(not_found(&key.id));
        };
        let stored = match t.known {
            Known::Intent => 0,
            Known::Stored { next_seq, .. } => next_seq,
            Known::Stale { .. } => return Err(not_found(&key.id)),
        };
        let mine = t.owner.as_ref().filter(|o| o.token == f.token);
        let from = mine.map_or(0, |o| o.verified.min(stored));
        if f.start > from {
            return Ok(Flushed::FromStart);
        }
        if stored > f.to {
            return Err(different_history(
                &key.id,
                &format!(
                    "the stored log holds {stored} events, this session {}",
                    f.to
                ),
            ));
        }
        if from < stored {
            self.compare(key, &f.texts, from, stored, read)?;
        }
        let last = if stored == 0 {
            None
        } else if from < stored {
            // Compared: the last stored event is the session's.
            let mut last = None;
            f.texts
                .visit(stored - 1, stored, |_, text| last = Some(text.into()))?;
            last
        } else {
            mine.and_then(|o| o.last.clone())
        };
        t.owner = Some(Owner {
            token: f.token,
            verified: stored,
            last,
        });
        if !t.known.materialized() {
            t.header = f.header;
        }
        let batch = batch_of(&key.id, f.texts, stored, f.to)?;
        // The session checked these events; an append reads the stored
        // surface back when it needs it.
        self.write(key, t, &batch, None)?;
        if let (Some(owner), Known::Stored { next_seq, .. }) = (&mut t.owner, &t.known) {
            owner.verified = *next_seq;
            if let Some(text) = batch.last_text() {
                owner.last = Some(text.into());
            }
        }
        Ok(Flushed::Wrote(batch.count as u64))
    }

    fn list(&self) -> CoreResult<Vec<Listed>> {
        self.check_open()?;
        let mut out = self.backend.list()?;
        out.sort_by(|a, b| {
            let created = |l: &Listed| l.header.number("createdAt").unwrap_or(0.0);
            created(a)
                .total_cmp(&created(b))
                .then_with(|| a.header.id().cmp(b.header.id()))
        });
        Ok(out)
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        lock(&self.sessions).clear();
        self.leases.clear();
        self.backend.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backend that counts its loads.
    struct Counted(jsonl::JsonlBackend, std::sync::atomic::AtomicUsize);

    impl Backend for Counted {
        type Handle = jsonl::JsonlHandle;
        fn exists(&self, key: &Key) -> CoreResult<bool> {
            self.0.exists(key)
        }
        fn lease_path(&self, key: &Key) -> Option<PathBuf> {
            self.0.lease_path(key)
        }
        fn load(
            &self,
            key: &Key,
            handle: &mut Self::Handle,
            mode: LoadMode,
            policy: Policy<'_>,
        ) -> CoreResult<Option<Repaired>> {
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.load(key, handle, mode, policy)
        }
        fn create_log(
            &self,
            key: &Key,
            header: &SessionHeader,
            batch: &Batch,
            handle: &mut Self::Handle,
        ) -> CoreResult<()> {
            self.0.create_log(key, header, batch, handle)
        }
        fn append(
            &self,
            key: &Key,
            batch: &Batch,
            handle: &mut Self::Handle,
        ) -> CoreResult<Result<(), Holds>> {
            self.0.append(key, batch, handle)
        }
        fn list(&self) -> CoreResult<Vec<Listed>> {
            self.0.list()
        }
        fn close(&self) {}
    }

    #[test]
    fn a_reader_repairs_a_torn_log_in_the_one_read_when_the_lease_is_free() {
        let root = std::env::temp_dir().join(format!("dsh-one-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = |root: &std::path::Path| {
            Store::new(Counted(
                jsonl::JsonlBackend::new(root.to_path_buf()),
                Default::default(),
            ))
        };
        let key = Key {
            id: "s".into(),
            file: "s".into(),
        };
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        let writer = store(&root);
        writer
            .create(&key, SessionHeader::from_line(header).unwrap())
            .unwrap();
        let events = r#"[{"type":"turn/start","seq":0,"time":1,"data":{"turn":0}},{"type":"user/message","seq":1,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}]"#;
        writer.append(&key, events).unwrap();
        writer.close();
        let path = root.join("_no-cwd").join("s.jsonl");
        let mut torn = std::fs::read(&path).unwrap();
        torn.extend_from_slice(br#"{"type":"assist"#);
        // Another store holds the lease: the repair stays in memory.
        std::fs::write(&path, &torn).unwrap();
        let leases = Leases::new();
        let lock = writer.backend().lease_path(&key).unwrap();
        let held = leases.take(&lock, &lease::subject("s")).unwrap();
        let reader = store(&root);
        assert_eq!(reader.load(&key, false).unwrap().len(), 3);
        assert_eq!(reader.backend().1.load(Ordering::SeqCst), 1);
        assert_eq!(std::fs::read(&path).unwrap(), torn);
        drop(held);
        // The lease is free: one read, the repair made durable, the lease let go.
        let reader = store(&root);
        let log = reader.load(&key, false).unwrap();
        assert_eq!(reader.backend().1.load(Ordering::SeqCst), 1);
        assert_eq!(log.len(), 3);
        let stored = std::fs::read_to_string(&path).unwrap();
        assert_eq!(stored, log.to_jsonl().unwrap());
        let next = store(&root);
        assert_eq!(next.load(&key, true).unwrap().len(), 3);
        let _ = std::fs::remove_dir_all(&root);
    }

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
}
