//! `NativeSession`: the native half of `Session` (lib/core/session.js owns
//! the JS-facing object: live events, caches, observers); this class owns
//! the log (the texts it was given, the surface, the header fold).

use super::{call, guarded};
use crate::error::{Code, CoreError, CoreResult};
use crate::executor::{self, Task};
use crate::log::{Log, Prepared, COMPRESS_MIN_BYTES};
use crate::session_header::SessionHeader;
use napi::bindgen_prelude::{Buffer, Uint32Array};
use napi::{Env, Result};
use napi_derive::napi;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;

/// The token of the next session object (see `NativeSession::token`).
static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// A token no other session object of this process has.
pub(crate) fn new_token() -> u64 {
    NEXT_TOKEN.fetch_add(1, Ordering::Relaxed)
}

#[napi]
pub struct NativeSession {
    log: Log,
    /// Names this session object to the stores: a store that wrote (or
    /// opened) a session remembers its token, and later flushes of the same
    /// object need not prove the stored log is its prefix again.
    pub(crate) token: u64,
    prepared: Option<Prepared>,
    /// A long seed being checked on a helper thread (see `seedJson`).
    seeder: Option<Seeder>,
}

/// What a store's flush reads of a session, taken at the flush's call: the
/// session object's token, its header and the texts its log holds (shared,
/// so the flush reads them off the main thread while the session goes on).
#[napi]
pub struct FlushSource {
    pub(crate) token: u64,
    pub(crate) header: SessionHeader,
    pub(crate) prefix: std::sync::Arc<crate::log::Texts>,
}

/// The helper checking a long seed's slices (`seedJson`, helped): a task on
/// the executor, which owns the log until `finishSeed` takes it back.
struct Seeder {
    slices: mpsc::Sender<String>,
    task: Task<(Log, CoreResult<()>)>,
}

#[napi]
impl NativeSession {
    /// An empty session (`new Session(id, seed, header)` seeds it, then sets
    /// the header: the seed is checked first, as the TypeScript core does).
    /// `vocabulary` (absent: v0) governs every later call: the seed
    /// checks, the header's fields, the surface, closers, forks.
    #[napi(factory)]
    pub fn create(
        env: Env,
        id: String,
        now: f64,
        #[napi(ts_arg_type = "'v0' | 'published'")] vocabulary: Option<String>,
    ) -> Result<Self> {
        call(&env, || {
            let vocab = super::functions::vocabulary(vocabulary.as_deref())?;
            let header = SessionHeader::minimal(&id, now);
            Ok(NativeSession::from_log(Log::with_vocabulary(header, vocab)))
        })
    }

    /// Seed the next events, given as a JSON array of snapshotted events
    /// whose seqs continue the log (`new Session(id, seed)` hands a long
    /// seed over in slices, so no transient holds all of it). `helped`: on a
    /// helper thread, where the slice is queued and checked while JS
    /// prepares the next one; `finishSeed` waits for the helper and throws
    /// the first error, and no other call may come in between. With no
    /// helper (none asked, or no thread free), the slice is checked here.
    #[napi(js_name = "seedJson")]
    pub fn seed_json(&mut self, env: Env, events: String, helped: bool) -> Result<()> {
        call(&env, || {
            if helped && self.seeder.is_none() {
                self.seeder = self.start_seeder();
            }
            match &self.seeder {
                // A helper that is gone has failed: `finishSeed` reports how.
                Some(seeder) => {
                    let _ = seeder.slices.send(events);
                    Ok(())
                }
                None => self.log.seed_json_array(&events),
            }
        })
    }

    /// Wait for the seed helper (if any) and take the log back; throws the
    /// first error it found.
    #[napi(js_name = "finishSeed")]
    pub fn finish_seed(&mut self, env: Env) -> Result<()> {
        call(&env, || match self.seeder.take() {
            Some(Seeder { slices, task }) => {
                drop(slices);
                let (log, result) = task.wait("the seed helper thread")?;
                self.log = log;
                result
            }
            None => Ok(()),
        })
    }

    /// Replace the session header (v0's constructor checks it after the
    /// seed, as the TypeScript core does; the published line's restore
    /// before it: a header set first is kept by the seed).
    #[napi(js_name = "setHeader")]
    pub fn set_header(&mut self, env: Env, header: String) -> Result<()> {
        call(&env, || {
            let id = self.log.header().id().to_string();
            let vocab = self.log.vocab;
            self.log
                .set_header(SessionHeader::from_json_in(&id, &header, vocab)?);
            Ok(())
        })
    }

    /// Take what the compressor a read started has finished, if it has
    /// (never waits; `deriveMessages()` calls it at each model step).
    #[napi]
    pub fn settle(&mut self, env: Env) -> Result<()> {
        call(&env, || {
            self.log.compress_texts(COMPRESS_MIN_BYTES);
            Ok(())
        })
    }

    #[napi(getter)]
    pub fn length(&self, env: Env) -> Result<u32> {
        call(&env, || Ok(self.log.len() as u32))
    }

    /// Take `from`'s token (this session continues `from`'s log, whole);
    /// `from` gets a new one.
    #[napi(js_name = "takeToken")]
    pub fn take_token(&mut self, env: Env, from: &mut NativeSession) -> Result<()> {
        call(&env, || {
            self.token = std::mem::replace(&mut from.token, new_token());
            Ok(())
        })
    }

    /// What a store's flush reads of this session (see `FlushSource`).
    #[napi(js_name = "flushSource")]
    pub fn flush_source(&self, env: Env) -> Result<FlushSource> {
        call(&env, || {
            Ok(FlushSource {
                token: self.token,
                header: self.log.header().clone(),
                prefix: self.log.shared_texts()?,
            })
        })
    }

    #[napi(js_name = "headerJson")]
    pub fn header_json(&self, env: Env) -> Result<String> {
        call(&env, || Ok(self.log.header().json().to_string()))
    }

    /// Validate one live append and commit it, or, `hold`, hold it until
    /// `release` (the publication seam's veto window; the JS session lets no
    /// other append in meanwhile). Returns the surface effect, 0
    /// (untouched), 1 (appended) or 2 (replaced: read `lastReplace()`), plus
    /// 4 when the event is the new latest `request/header`.
    #[napi]
    pub fn append(
        &mut self,
        env: Env,
        ty: String,
        seq: f64,
        surface_meta: Option<String>,
        data: Option<String>,
        hold: Option<bool>,
    ) -> Result<u32> {
        call(&env, || {
            self.log.compress_texts(COMPRESS_MIN_BYTES);
            let (meta, data) = (surface_meta.as_deref(), data.as_deref());
            let p = self.log.prepare(&ty, seq as u64, meta, data)?;
            let effect = p.effect();
            match hold {
                Some(true) => self.prepared = Some(p),
                _ => self.log.commit_prepared(p),
            }
            Ok(effect)
        })
    }

    /// End the held append: commit it, or (vetoed) drop it.
    #[napi]
    pub fn release(&mut self, env: Env, commit: bool) -> Result<()> {
        call(&env, || {
            if let (Some(p), true) = (self.prepared.take(), commit) {
                self.log.commit_prepared(p);
            }
            Ok(())
        })
    }

    /// Names of the surface-eligible types (the JS fast path asks once).
    #[napi(js_name = "surfaceEligibleTypes")]
    pub fn surface_eligible_types(
        env: Env,
        #[napi(ts_arg_type = "'v0' | 'published'")] vocabulary: Option<String>,
    ) -> Result<Vec<String>> {
        call(&env, || {
            Ok(super::functions::vocabulary(vocabulary.as_deref())?
                .surface
                .iter()
                .filter_map(|k| k.name())
                .map(str::to_string)
                .collect())
        })
    }

    #[napi(js_name = "surfaceNodes")]
    pub fn surface_nodes(&self, env: Env) -> Result<Vec<f64>> {
        call(&env, || {
            Ok(self
                .log
                .surface()
                .nodes()
                .iter()
                .map(|&n| n as f64)
                .collect())
        })
    }

    #[napi(getter, js_name = "replaceGeneration")]
    pub fn replace_generation(&self, env: Env) -> Result<f64> {
        call(&env, || Ok(self.log.surface().generation() as f64))
    }

    /// `[startIdx, endIdx]` of the last replacement.
    #[napi(js_name = "lastReplace")]
    pub fn last_replace(&self, env: Env) -> Result<Vec<u32>> {
        call(&env, || {
            let (a, b) = self.log.surface().last_replace();
            Ok(vec![a as u32, b as u32])
        })
    }

    /// Events `from..to` as one JSON array; those in `held` (ascending
    /// seqs whose payloads JS holds parsed; none when left out) with a null
    /// `data`.
    #[napi(js_name = "eventsJson")]
    pub fn events_json(
        &mut self,
        env: Env,
        from: u32,
        to: u32,
        held: Option<Uint32Array>,
    ) -> Result<String> {
        call(&env, || {
            self.log.compress_texts(COMPRESS_MIN_BYTES);
            let held = held.as_deref().unwrap_or_default();
            self.log.events_json(from as usize, to as usize, held)
        })
    }

    /// The payloads of the (native) events at `seqs`, as one JSON array
    /// `[type, data, type, data, ...]` (the type null for a kind without a
    /// fixed name).
    #[napi]
    pub fn payloads(&mut self, env: Env, seqs: Uint32Array) -> Result<String> {
        call(&env, || {
            self.log.compress_texts(COMPRESS_MIN_BYTES);
            let picks = self.log.payload_picks(&seqs);
            crate::log::payloads(self.log.given_texts("payloads")?, &picks)
        })
    }

    /// Where to cut `seqs` into runs whose texts take at most `maxBytes`
    /// each (a run holds one text at least): the end index of each run.
    /// (`store.open` parses the first derive's payloads a run per
    /// event-loop turn: `warm` in lib/core/session.js.)
    #[napi(js_name = "runEnds")]
    pub fn run_ends(&self, env: Env, seqs: Uint32Array, max_bytes: u32) -> Result<Vec<u32>> {
        call(&env, || {
            self.log.given_texts("runEnds")?;
            let mut ends = Vec::new();
            let mut bytes = 0usize;
            for (i, &seq) in seqs.iter().enumerate() {
                let seq = seq as usize;
                let len = match seq < self.log.texts_len() {
                    true => self.log.texts_bytes(seq, seq + 1),
                    false => 0,
                };
                if bytes > 0 && bytes + len > max_bytes as usize {
                    ends.push(i as u32);
                    bytes = 0;
                }
                bytes += len;
            }
            ends.push(seqs.len() as u32);
            Ok(ends)
        })
    }

    /// Seq of the latest `request/header` (the header fold), or -1.
    #[napi(getter, js_name = "requestHeaderSeq")]
    pub fn request_header_seq(&self, env: Env) -> Result<f64> {
        call(&env, || {
            Ok(self.log.request_header_seq().map_or(-1.0, |s| s as f64))
        })
    }

    /// The header line and the texts the log holds, as JSONL (a live
    /// session appends its own events' lines); `TOO_LARGE` when that takes
    /// more than `maxLength` bytes (what a JS string can hold).
    #[napi(js_name = "toJsonl")]
    pub fn jsonl(&mut self, env: Env, max_length: f64) -> Result<String> {
        call(&env, || {
            self.log.compress_texts(COMPRESS_MIN_BYTES);
            let bytes = self.log.jsonl_bytes();
            if bytes as f64 > max_length {
                return Err(too_large(self.log.header().id(), bytes));
            }
            self.log.to_jsonl()
        })
    }

    /// A child session under `childId` holding the log's events `0..end`
    /// (`end` at most `length`; the JS session checked the boundary and
    /// replays its own later appends into the child). `seedLength` is the
    /// fork's whole length.
    #[napi(js_name = "forkPrefix")]
    pub fn fork_prefix(
        &self,
        env: Env,
        end: u32,
        child_id: String,
        now: f64,
        seed_length: u32,
    ) -> Result<Self> {
        call(&env, || {
            let header =
                SessionHeader::child_of(self.log.header(), &child_id, now, seed_length as usize);
            Ok(NativeSession::from_log(
                self.log.fork_prefix(end as usize, header)?,
            ))
        })
    }
}

impl NativeSession {
    /// A session over a built log (a read, a fork, a store's `open`); the
    /// texts a read left raw start compressing on a helper thread.
    pub(crate) fn from_log(log: Log) -> NativeSession {
        NativeSession::with_token(log, new_token())
    }

    /// `from_log` with a token chosen before (a store's `open` records it).
    pub(crate) fn with_token(mut log: Log, token: u64) -> NativeSession {
        log.compress_texts(COMPRESS_MIN_BYTES);
        NativeSession {
            log,
            token,
            prepared: None,
            seeder: None,
        }
    }

    /// The seed helper, which takes the log; when no thread can start, the
    /// log stays (and the slices are checked here).
    fn start_seeder(&mut self) -> Option<Seeder> {
        let header = self.log.header().clone();
        let vocab = self.log.vocab;
        let mut log = std::mem::replace(&mut self.log, Log::with_vocabulary(header, vocab));
        let (slices, queue) = mpsc::channel::<String>();
        let work = move || {
            // This thread has the time to compress as blocks fill up.
            log.compress_as_filled(true);
            let mut result = Ok(());
            for slice in queue {
                if result.is_ok() {
                    result = guarded("checking a seed", || log.seed_json_array(&slice));
                }
            }
            log.compress_as_filled(false);
            (log, result)
        };
        match executor::start(work) {
            Ok(task) => Some(Seeder { slices, task }),
            Err(not_started) => {
                // With no slice queued, the work gives the log straight back.
                drop(slices);
                self.log = (not_started.work)().0;
                None
            }
        }
    }
}

/// `TOO_LARGE`: a log whose JSONL a JS string cannot hold.
pub(crate) fn too_large(id: &str, bytes: usize) -> CoreError {
    CoreError::new(
        Code::TooLarge,
        format!(
            "session {}: its JSONL ({bytes} bytes or more) is longer than a JavaScript string can hold; \
             write it to a file with session.writeJsonl(path) instead",
            crate::json::quote(id)
        ),
    )
}

/// Write the JSONL of a session to the file at `path` (made or truncated):
/// the texts its log holds (`source`, read here off the main thread), then
/// its own events' lines (`live`, a line each). Resolves to the bytes
/// written.
#[napi(js_name = "writeJsonl", ts_return_type = "Promise<number>")]
pub fn write_jsonl(
    env: Env,
    source: &FlushSource,
    path: String,
    live: Vec<Buffer>,
) -> Result<super::store::StorePromise<f64, f64>> {
    call(&env, || {
        let (header, prefix) = (source.header.clone(), source.prefix.clone());
        Ok(super::store::task(false, super::store::same, move || {
            use std::io::Write;
            let path = std::path::PathBuf::from(path);
            let file = std::fs::File::create(&path)
                .map_err(|e| CoreError::io("cannot create", &path, e))?;
            let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
            let mut bytes = crate::log::write_jsonl(&header, &prefix, &mut out)
                .map_err(|e| e.map_message(|m| format!("{m} (\"{}\")", path.display())))?;
            for part in &live {
                out.write_all(part)
                    .map_err(|e| CoreError::io("cannot write", &path, e))?;
                bytes += part.len();
            }
            out.flush()
                .map_err(|e| CoreError::io("cannot write", &path, e))?;
            Ok(bytes as f64)
        }))
    })
}

/// How many events a fork of session `id` of `length` events takes at
/// `boundary` (`log::fork_end`, the rule's one home): `boundary` null for the
/// last event, NaN for a value that is no number (`shown`: JS's `String` of
/// it). JS reads what the rule may read first: the last event's seq (`last`,
/// NaN when no number; `lastShown`) and, when the boundary is an index of an
/// event, that event's seq (`at`) and its type (`atType`, null for
/// `turn/end`). `service`: the Cordis service's rule (SPEC 12.6).
/// `vocabulary` (absent: v0) picks the rule's form; the published one
/// (PUB 12.5) reads `openTurn`: the `data.turn` of the last `turn/start`
/// at or before the boundary with no `turn/end` after it, else null.
#[napi(js_name = "forkEnd")]
#[allow(clippy::too_many_arguments)]
pub fn fork_end(
    env: Env,
    id: String,
    boundary: Option<f64>,
    shown: String,
    length: f64,
    last: f64,
    last_shown: String,
    at: f64,
    at_type: Option<String>,
    service: bool,
    #[napi(ts_arg_type = "'v0' | 'published'")] vocabulary: Option<String>,
    open_turn: Option<f64>,
) -> Result<f64> {
    let fork_of = match service {
        true => crate::log::ForkOf::Service,
        false => crate::log::ForkOf::Session,
    };
    call(&env, || {
        crate::log::fork_end(
            &id,
            boundary.map(|b| (b, shown)),
            length as u64,
            fork_of,
            (last, last_shown),
            at,
            at_type,
            super::functions::vocabulary(vocabulary.as_deref())?.fork,
            open_turn.map(js_number),
        )
        .map(|e| e as f64)
    })
}

/// `String(n)` of a JS number, for the integers a message shows.
fn js_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}

/// A JSONL log handed over in parts cut anywhere (`Session.fromJsonl`: JS
/// encodes a long string to UTF-8 a part at a time into one small buffer,
/// which costs less than encoding it whole, and pushes each part; a Buffer,
/// the CLI's read too, is handed over whole) and read
/// from its first piece on; `finish()` gives the session.
#[napi]
pub struct JsonlReading {
    reading: Option<crate::log::JsonlReading>,
}

#[napi]
impl JsonlReading {
    /// A reading fed by `push`, or one of the caller's whole log `bytes`,
    /// read where it is: the log takes its texts compressed and makes no
    /// copy of them, and holds `bytes` (which must not change meanwhile)
    /// until `finish`.
    #[napi(constructor)]
    pub fn new(env: Env, bytes: Option<Buffer>) -> Result<Self> {
        call(&env, || {
            let reading = match bytes {
                Some(bytes) => crate::log::JsonlReading::of_owner(Box::new(bytes)),
                None => crate::log::JsonlReading::default(),
            };
            Ok(JsonlReading {
                reading: Some(reading),
            })
        })
    }

    /// Append `bytes[0..length]` (cut anywhere) to the log; the bytes are
    /// copied.
    #[napi]
    pub fn push(&mut self, env: Env, bytes: Buffer, length: u32) -> Result<()> {
        call(&env, || {
            if let Some(reading) = self.reading.as_mut() {
                reading.push(&bytes[..(length as usize).min(bytes.len())]);
            }
            Ok(())
        })
    }

    /// The session read (waiting for the read); a defect throws with its
    /// `line`.
    #[napi]
    pub fn finish(&mut self, env: Env) -> Result<NativeSession> {
        call(&env, || match self.reading.take() {
            Some(mut reading) => Ok(NativeSession::from_log(reading.finish()?)),
            None => Err(CoreError::new(
                Code::Internal,
                "the JSONL log was already taken",
            )),
        })
    }
}
