//! The session log held natively: every event's JSON text plus the little
//! each rule needs (kind, time, surface op), the surface state, and the
//! request-header fold. Seeding, JSONL resume, live appends and forks all
//! pass through `accept`, so the rules are checked in one place.

use crate::error::{CoreError, CoreResult};
use crate::event::{legacy_of, read_event, EventText, Kind, ReadError};
use crate::repair::{closers, ScanEvent};
use crate::session_header::SessionHeader;
use crate::surface::{Candidate, Plan, Surface, SurfaceOp};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// Logs shorter than this are read on one thread.
const PARALLEL_MIN_LINES: usize = 4096;

/// Event texts to load: a buffer and each event's span in it.
pub(crate) struct Part<'s> {
    pub text: String,
    pub spans: &'s [(usize, usize)],
}

/// Where an accepted event's text is: to copy in, or already in the buffer.
enum TextRef<'a> {
    Copy(&'a str),
    Span(usize, usize),
}

/// Every event's JSON text, in a few large buffers (no allocation per
/// event). A buffer is never reallocated once texts live in it: appending
/// to a long session never copies what it already holds, so a live append
/// costs the same at event 10 and at event 1,000,000.
#[derive(Debug, Clone, Default)]
pub struct Texts {
    /// The buffers; only the last one takes more text.
    chunks: Vec<String>,
    /// Where each chunk starts in the offsets `spans` use.
    bases: Vec<usize>,
    /// Each text's start and end offset (its chunk's base plus its index there).
    spans: Vec<(usize, usize)>,
}

/// Bounds on the capacity of a new buffer: about what the texts before it
/// take (so buffers double as a session grows), at least the smaller bound
/// and at most the larger (a larger text gets a buffer of its own size).
/// Buffers of the larger size are mapped on their own by the allocator and
/// returned to the system when the session goes.
const TEXT_CHUNK_MIN: usize = 64 << 10;
const TEXT_CHUNK_MAX: usize = 32 << 20;

impl Texts {
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<&str> {
        let &(s, e) = self.spans.get(i)?;
        // The last chunk whose base is at or before `s`.
        let k = self.bases.partition_point(|&b| b <= s).checked_sub(1)?;
        let base = self.bases[k];
        self.chunks[k].get(s - base..e - base)
    }
    /// The end offset of the texts so far (where the next text starts).
    fn end(&self) -> usize {
        match (self.bases.last(), self.chunks.last()) {
            (Some(b), Some(c)) => b + c.len(),
            _ => 0,
        }
    }
    /// A chunk with room for `bytes` more, started when the last one is full.
    fn room(&mut self, bytes: usize) -> &mut String {
        let full = self
            .chunks
            .last()
            .is_none_or(|c| c.capacity() - c.len() < bytes);
        if full {
            let base = self.end();
            self.bases.push(base);
            let size = base.clamp(TEXT_CHUNK_MIN, TEXT_CHUNK_MAX);
            self.chunks.push(String::with_capacity(bytes.max(size)));
        }
        let last = self.chunks.len() - 1;
        &mut self.chunks[last]
    }
    pub fn push(&mut self, text: &str) {
        let start = self.end();
        self.room(text.len()).push_str(text);
        self.spans.push((start, start + text.len()));
    }
    /// Room for `count` more events (their texts take chunks as they come).
    fn reserve(&mut self, count: usize) {
        self.spans.reserve(count);
    }
    /// Take log texts as the first buffers, one after another (a span's
    /// offset is its buffer's start, the lengths before it summed, plus its
    /// offset there); before any push.
    fn adopt_buffers(&mut self, texts: Vec<String>) {
        self.chunks = Vec::with_capacity(texts.len());
        self.bases = Vec::with_capacity(texts.len());
        let mut base = 0;
        for text in texts {
            // An empty buffer holds no text: skipping it moves no offset.
            if text.is_empty() {
                continue;
            }
            self.bases.push(base);
            base += text.len();
            self.chunks.push(text);
        }
    }
    fn push_span(&mut self, start: usize, end: usize) {
        self.spans.push((start, end));
    }
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
    /// The offsets texts `from..to` cover (at least their total length).
    fn span_bytes(&self, from: usize, to: usize) -> usize {
        match (
            self.spans.get(from),
            to.checked_sub(1).and_then(|l| self.spans.get(l)),
        ) {
            (Some(&(start, _)), Some(&(_, end))) if to > from => end.saturating_sub(start),
            _ => 0,
        }
    }
}

/// Run `work` on a thread of its own at a lower priority and wait for it
/// (inline if no thread can be started); `None` if it panicked. For
/// CPU-heavy work started from the libuv pool: the JS thread then wins a
/// core whenever it wants one, so a long load never delays its timers, and
/// the pool thread (shared with the rest of the process) keeps its own
/// priority.
pub fn at_low_priority<T: Send>(work: impl FnOnce() -> T + Send) -> Option<T> {
    let mut work = Some(work);
    let mut out = None;
    let mut started = false;
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().spawn_scoped(scope, || {
            lower_priority();
            work.take().map(|w| w())
        });
        if let Ok(handle) = spawned {
            started = true;
            out = handle.join().ok().flatten();
        }
    });
    if started {
        return out;
    }
    work.map(|w| w())
}

/// Let the JS thread win a core over this helper thread: it only uses what
/// is idle (on Linux a thread's nice value and time slice are its own).
///
/// Nice 10 alone leaves the JS thread waiting for the helper's time slice
/// to end (EEVDF, Linux 6.6+): a 1 ms timer then fired up to 5-7 ms late
/// while a load ran on both cores. A helper slice longer than the default
/// lets a waking default-slice thread preempt it at once (Linux 6.12+
/// wakes shorter slices first), which measured 1.3-2.9 ms; older kernels
/// ignore the slice of a fair-policy thread.
pub(crate) fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // Never above the thread's own priority (a niced process stays so),
        // and the slice only under the normal policy (a batch, idle or
        // real-time process keeps its own).
        // SAFETY: getpriority, sched_getscheduler and setpriority have no
        // memory effects; 0 is this thread on Linux.
        let nice = HELPER_NICE.max(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) });
        let normal = unsafe { libc::sched_getscheduler(0) } == libc::SCHED_OTHER;
        if !normal || set_helper_schedule(nice).is_err() {
            // SAFETY: as above.
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, 0, nice);
            }
        }
    }
}

#[cfg(target_os = "linux")]
const HELPER_NICE: i32 = 10;

/// The time slice a helper thread asks for (the kernel allows 0.1-100 ms;
/// the default is 0.75 ms times 1 + log2 of the cores, up to 3 ms).
#[cfg(target_os = "linux")]
const HELPER_SLICE_NS: u64 = 20_000_000;

/// `struct sched_attr` of sched_setattr(2), first version (48 bytes).
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// This thread: normal policy, `nice`, a long time slice.
#[cfg(target_os = "linux")]
fn set_helper_schedule(nice: i32) -> std::io::Result<()> {
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        nice,
        runtime: HELPER_SLICE_NS,
        ..SchedAttr::default()
    };
    // SAFETY: the kernel reads `attr.size` bytes of a live, initialized
    // struct; pid 0 is the calling thread; flags must be 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Byte ranges of each line of `text` (without `\n` or a trailing `\r`).
fn line_spans(text: &str) -> Vec<(usize, usize)> {
    let base = text.as_ptr() as usize;
    let mut spans = Vec::with_capacity(text.len() / 128 + 1);
    // `split` finds newlines with the standard library's vectorized search.
    for line in text.split('\n') {
        let start = line.as_ptr() as usize - base;
        let line = line.strip_suffix('\r').unwrap_or(line);
        spans.push((start, start + line.len()));
    }
    if spans.len() > 1
        && spans
            .last()
            .is_some_and(|&(s, e)| s == e && s == text.len())
    {
        spans.pop();
    }
    spans
}

/// `seq` when the event is a `request/header` (the header fold's input:
/// the fold keeps the latest one's seq; JS builds the canonical header).
fn header_seq(kind: Kind, seq: u64) -> Option<u64> {
    (kind == Kind::RequestHeader).then_some(seq)
}

/// The meta of an event text the JS side wrote (`{"type":..,"seq":..,
/// "time":..,"data":..,"sourceEventSeqs"?:..,"surfaceOp"?:..}`), read from
/// its ends without parsing the payload; `None` when the text is not in that
/// shape (then it is parsed).
fn live_meta(line: &str) -> Option<EventMeta> {
    let rest = line.strip_prefix("{\"type\":\"")?;
    let quote = rest.find('"')?;
    let ty = &rest[..quote];
    if ty.contains('\\') {
        return None;
    }
    let rest = rest[quote..].strip_prefix("\",\"seq\":")?;
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    let rest = rest.strip_prefix(",\"time\":")?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let time: u64 = rest[..digits].parse().ok()?;
    if !rest[digits..].starts_with(",\"data\":") {
        return None;
    }
    let kind = Kind::of(ty);
    let op = if !kind.is_surface_eligible() {
        None
    } else if line.ends_with(",\"surfaceOp\":\"append\"}") {
        Some(SurfaceOp::Append)
    } else {
        // The envelope's surfaceOp is the text's last field.
        let at = line.rfind(",\"surfaceOp\":{")?;
        let op: Value = serde_json::from_str(line.get(at + 13..line.len() - 1)?).ok()?;
        Some(SurfaceOp::Replace {
            start: op.get("start").and_then(crate::json::as_seq)?,
            end: op.get("end").and_then(crate::json::as_seq)?,
        })
    };
    Some(EventMeta { kind, time, op })
}

/// The texts of live events, one per line, each followed by a newline
/// (what `JSON.stringify` of each of a session's pending events writes: it
/// never writes a raw newline), each with its meta; refused whole when one
/// of them is not an event.
pub fn live_records(lines: &str) -> CoreResult<Vec<(EventMeta, &str)>> {
    if !lines.is_empty() && !lines.ends_with('\n') {
        return Err(CoreError::InvalidArgument(
            "event texts must each end with a newline".into(),
        ));
    }
    lines
        .split_terminator('\n')
        .map(|text| {
            let meta = match live_meta(text) {
                Some(meta) => meta,
                None => parsed_meta(text)?,
            };
            Ok((meta, text))
        })
        .collect()
}

/// The meta of any event text, parsed.
fn parsed_meta(line: &str) -> CoreResult<EventMeta> {
    #[derive(Deserialize)]
    struct Lite<'a> {
        #[serde(rename = "type", borrow)]
        ty: std::borrow::Cow<'a, str>,
        time: f64,
        #[serde(rename = "surfaceOp")]
        surface_op: Option<Value>,
    }
    let lite: Lite = serde_json::from_str(line)
        .map_err(|e| CoreError::InvalidArgument(format!("event text is not an event: {e}")))?;
    let op = match lite.surface_op {
        None => None,
        Some(Value::String(_)) => Some(SurfaceOp::Append),
        Some(v) => Some(SurfaceOp::Replace {
            start: v.get("start").and_then(crate::json::as_seq).unwrap_or(0),
            end: v.get("end").and_then(crate::json::as_seq).unwrap_or(0),
        }),
    };
    Ok(EventMeta {
        kind: Kind::of(&lite.ty),
        time: lite.time.max(0.0) as u64,
        op,
    })
}

/// What the log keeps per event besides its text.
#[derive(Debug, Clone, Copy)]
pub struct EventMeta {
    pub kind: Kind,
    pub time: u64,
    pub op: Option<SurfaceOp>,
}

/// A validated, not yet committed live append.
#[derive(Debug)]
pub struct Prepared {
    plan: Plan,
    header: Option<u64>,
}

/// `Prepared::effect` bit: the event is the new latest `request/header`.
pub const EFFECT_HEADER: u32 = 4;

impl Prepared {
    /// The surface effect (0: untouched, 1: appended, 2: replaced), plus
    /// `EFFECT_HEADER` when the event moves the header fold.
    pub fn effect(&self) -> u32 {
        let surface = match self.plan {
            Plan::Untouched => 0,
            Plan::Append { .. } => 1,
            Plan::Replace { .. } => 2,
        };
        surface | if self.header.is_some() { EFFECT_HEADER } else { 0 }
    }
}

/// An error found while reading a log, with the 1-based line it is on.
#[derive(Debug)]
pub struct LineError {
    pub error: CoreError,
    pub line: usize,
}

#[derive(Debug, Clone)]
pub struct Log {
    pub(crate) header: SessionHeader,
    pub(crate) metas: Vec<EventMeta>,
    /// Texts of events `0..len()`; live appends may leave a suffix whose
    /// text the binding has not handed over yet (it keeps those events).
    pub(crate) texts: Texts,
    pub(crate) surface: Surface,
    pub(crate) last_replace: (usize, usize),
    /// Seq of the latest `request/header` (the header fold).
    pub(crate) request_header: Option<u64>,
    /// Index of the last `turn/start` or `turn/end`.
    pub(crate) last_boundary: Option<usize>,
}

#[derive(Deserialize)]
struct SurfaceMeta {
    #[serde(
        rename = "surfaceOp",
        default,
        deserialize_with = "crate::json::present"
    )]
    surface_op: Option<Value>,
    #[serde(
        rename = "sourceEventSeqs",
        default,
        deserialize_with = "crate::json::present"
    )]
    source_event_seqs: Option<Value>,
}

impl Log {
    pub fn new(header: SessionHeader) -> Log {
        Log {
            header,
            metas: Vec::new(),
            texts: Texts::default(),
            surface: Surface::new(),
            last_replace: (0, 0),
            request_header: None,
            last_boundary: None,
        }
    }

    /// The same log under another header (the constructor checks the header
    /// after the seed).
    pub fn with_header(mut self, header: SessionHeader) -> Log {
        self.header = header;
        self
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }
    pub fn set_header(&mut self, header: SessionHeader) {
        self.header = header;
    }
    pub fn len(&self) -> usize {
        self.metas.len()
    }
    pub fn is_empty(&self) -> bool {
        self.metas.is_empty()
    }
    pub fn texts_len(&self) -> usize {
        self.texts.len()
    }
    pub fn surface(&self) -> &Surface {
        &self.surface
    }
    pub fn meta(&self, seq: usize) -> Option<&EventMeta> {
        self.metas.get(seq)
    }
    pub fn text(&self, seq: usize) -> Option<&str> {
        self.texts.get(seq)
    }
    /// At least the bytes texts `from..to` take with a newline after each
    /// (what lies between them counts too), without visiting each text.
    pub fn texts_bytes(&self, from: usize, to: usize) -> usize {
        self.texts.span_bytes(from, to) + to.saturating_sub(from)
    }
    /// `[startIdx, endIdx]` of the last committed replacement.
    pub fn last_replace(&self) -> (usize, usize) {
        self.last_replace
    }
    /// Seq of the latest `request/header`, if any.
    pub fn request_header_seq(&self) -> Option<u64> {
        self.request_header
    }

    /// Apply a validated surface plan and header fold step.
    fn apply(&mut self, plan: &Plan, header: Option<u64>) {
        if let Plan::Replace {
            start_idx, end_idx, ..
        } = *plan
        {
            self.last_replace = (start_idx, end_idx);
        }
        self.surface.apply(plan);
        if header.is_some() {
            self.request_header = header;
        }
    }

    /// Record an event's text and meta (its surface effect already applied).
    fn record(&mut self, meta: EventMeta, text: &str) {
        self.note_meta(meta);
        self.texts.push(text);
    }

    /// Record an event whose text is already in the text buffer.
    fn record_span(&mut self, meta: EventMeta, start: usize, end: usize) {
        self.note_meta(meta);
        self.texts.push_span(start, end);
    }

    fn note_meta(&mut self, meta: EventMeta) {
        if matches!(meta.kind, Kind::TurnStart | Kind::TurnEnd) {
            self.last_boundary = Some(self.metas.len());
        }
        self.metas.push(meta);
    }

    /// Check one already-read event against every seed rule that needs the
    /// log (contiguity, surface transition) and commit it, with the seed
    /// messages for `index`. `text` is where the event's text lives.
    fn accept_read(
        &mut self,
        read: Result<EventText<'_>, ReadError>,
        index: usize,
        text: TextRef<'_>,
    ) -> Result<(), Option<CoreError>> {
        let e = match read {
            Ok(e) => e,
            Err(ReadError::Unparsable) => return Err(None),
            Err(ReadError::Invalid(err)) => return Err(Some(err)),
        };
        if e.seq != index as u64 {
            return Err(Some(CoreError::NotContiguous(format!(
                "seed event at index {index} has seq {} (expected {index}); seed must be contiguous from 0",
                e.seq
            ))));
        }
        let parse = |raw: Option<&str>| {
            raw.map(|r| serde_json::from_str::<Value>(r).unwrap_or(Value::Null))
        };
        let (surface_op, source_event_seqs) = (parse(e.surface_op), parse(e.source_event_seqs));
        let plan = self
            .surface
            .plan(&Candidate {
                ty: &e.ty,
                kind: e.kind,
                seq: e.seq,
                surface_op: surface_op.as_ref(),
                source_event_seqs: source_event_seqs.as_ref(),
            })
            .map_err(|err| {
                Some(err.map_message(|m| format!("invalid seed event at index {index}: {m}")))
            })?;
        let header = header_seq(e.kind, e.seq);
        let meta = EventMeta {
            kind: e.kind,
            time: e.time,
            op: plan.op(),
        };
        self.apply(&plan, header);
        match text {
            TextRef::Copy(t) => self.record(meta, t),
            TextRef::Span(start, end) => self.record_span(meta, start, end),
        }
        Ok(())
    }

    /// Accept one event from its JSON text (seed, store load): every seed
    /// rule, with the seed messages for `index`. `Err(None)`: unparsable.
    pub(crate) fn accept_text(
        &mut self,
        text: &str,
        index: usize,
    ) -> Result<(), Option<CoreError>> {
        self.accept_read(read_event(text, index), index, TextRef::Copy(text))
    }

    /// Seed from a JSON array of events (`new Session(id, seed)`) that
    /// continue the log: the first is at index `len()`.
    pub fn seed_json_array(&mut self, json: &str) -> CoreResult<()> {
        let items: Vec<&RawValue> = serde_json::from_str(json)
            .map_err(|e| CoreError::InvalidArgument(format!("seed is not a JSON array: {e}")))?;
        let first = self.len();
        for (k, raw) in items.iter().enumerate() {
            let index = first + k;
            self.accept_text(raw.get(), index).map_err(|e| {
                e.unwrap_or_else(|| {
                    CoreError::NotLossless(format!(
                        "seed event at index {index} is not losslessly JSON-serializable"
                    ))
                })
            })?;
        }
        Ok(())
    }

    /// Seed the next events from their texts, one per line, each followed
    /// by a newline (`new Session(id, seed)` hands a seed over in slices);
    /// the first is at index `len()`. Every seed rule, with the seed
    /// messages.
    pub fn seed_lines(&mut self, lines: &str) -> CoreResult<()> {
        if !lines.is_empty() && !lines.ends_with('\n') {
            return Err(CoreError::InvalidArgument(
                "seed texts must each end with a newline".into(),
            ));
        }
        let first = self.len();
        let count = lines.bytes().filter(|&b| b == b'\n').count();
        self.texts.reserve(count);
        for (k, text) in lines.split_terminator('\n').enumerate() {
            let index = first + k;
            self.accept_text(text, index).map_err(|e| {
                e.unwrap_or_else(|| {
                    CoreError::NotLossless(format!(
                        "seed event at index {index} is not losslessly JSON-serializable"
                    ))
                })
            })?;
        }
        Ok(())
    }

    /// Parse a whole v0 JSONL log: header line, then one event per line.
    /// Lines are read (validated, split into fields) on two threads; the
    /// surface fold then runs over them in order.
    pub fn from_jsonl(bytes: &[u8]) -> Result<Log, LineError> {
        Log::from_jsonl_vec(bytes.to_vec()).map_err(|(e, _)| e)
    }

    /// `from_jsonl` of a buffer the log may keep (no copy of the text);
    /// the buffer comes back with the error.
    pub fn from_jsonl_vec(bytes: Vec<u8>) -> Result<Log, (LineError, Vec<u8>)> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let bytes = e.into_bytes();
                let line = bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1;
                let error = CoreError::CorruptLog(format!(
                    "corrupt session log: invalid UTF-8 at line {line}"
                ));
                return Err((LineError { error, line }, bytes));
            }
        };
        let spans = line_spans(&text);
        let header = match spans
            .first()
            .filter(|&&(s, e)| !text[s..e].trim().is_empty())
        {
            None => Err(CoreError::CorruptLog(
                "empty or header-less session log".into(),
            )),
            Some(&(hs, he)) => SessionHeader::from_line(&text[hs..he]),
        };
        let header = match header {
            Ok(header) => header,
            Err(error) => return Err((LineError { error, line: 1 }, text.into_bytes())),
        };
        // Events: every line after the header; blank lines are allowed only at the end.
        let mut events = &spans[1..];
        while events
            .last()
            .is_some_and(|&(s, e)| text[s..e].trim().is_empty())
        {
            events = &events[..events.len() - 1];
        }
        let parts = vec![Part {
            text,
            spans: events,
        }];
        Log::from_parts(header, parts, &|_, _, _, _| true).map_err(|(index, err, texts)| {
            let line = index + 2;
            let error = err.unwrap_or_else(|| {
                CoreError::CorruptLog(format!(
                    "corrupt session log: unparsable event at line {line}"
                ))
            });
            let text = texts.into_iter().next().unwrap_or_default();
            (LineError { error, line }, text.into_bytes())
        })
    }

    /// A log of the events at the spans of `parts` (each part's spans are
    /// offsets into its own text; the parts' events follow one another):
    /// each is read (validated, split into fields) and passed to `verify`
    /// (part, its text, index in the part, event), on two threads when
    /// there are many; the surface fold then runs over them in order. The
    /// log keeps the parts' texts as they are (nothing is copied). The
    /// error names the index of the first event that failed (`None`:
    /// unparsable, or refused by `verify`) and gives the texts back.
    pub(crate) fn from_parts(
        header: SessionHeader,
        parts: Vec<Part<'_>>,
        verify: &(dyn Fn(usize, &str, usize, &EventText<'_>) -> bool + Sync),
    ) -> Result<Log, (usize, Option<CoreError>, Vec<String>)> {
        // Each part's first event index and first byte offset.
        let mut firsts = Vec::with_capacity(parts.len());
        let mut bases = Vec::with_capacity(parts.len());
        let (mut count, mut bytes) = (0, 0);
        for part in &parts {
            firsts.push(count);
            bases.push(bytes);
            count += part.spans.len();
            bytes += part.text.len();
        }
        let read = |k: usize, i: usize| {
            let part = &parts[k];
            let (s, e) = part.spans[i];
            // A blank line inside the log reads as unparsable.
            read_event(&part.text[s..e], firsts[k] + i).and_then(|event| {
                if verify(k, &part.text, i, &event) {
                    Ok(event)
                } else {
                    Err(ReadError::Unparsable)
                }
            })
        };
        // Units of work: whole parts, or the halves of a lone long part.
        let mut units: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (k, part) in parts.iter().enumerate() {
            let n = part.spans.len();
            if parts.len() == 1 && n >= PARALLEL_MIN_LINES {
                units.push((k, 0..n / 2));
                units.push((k, n / 2..n));
            } else if n > 0 {
                units.push((k, 0..n));
            }
        }
        let read_unit = |(k, range): &(usize, std::ops::Range<usize>)| -> Vec<_> {
            range.clone().map(|i| read(*k, i)).collect()
        };
        // The fold records spans only; the log takes the texts after it.
        let mut log = Log::new(header);
        let mut fold = |k: usize, i: usize, r: Result<EventText<'_>, ReadError>| {
            let (s, e) = parts[k].spans[i];
            let index = firsts[k] + i;
            log.accept_read(r, index, TextRef::Span(bases[k] + s, bases[k] + e))
                .map_err(|err| (index, err))
        };
        let folded = if units.len() > 1 && count >= PARALLEL_MIN_LINES {
            // A helper reads the later units while this thread reads and
            // folds the first (the fold is in order), then folds the rest.
            let (first, later) = units.split_at(1);
            std::thread::scope(|scope| {
                let helper = scope.spawn(|| {
                    lower_priority();
                    later.iter().map(read_unit).collect::<Vec<_>>()
                });
                let (k, range) = &first[0];
                let done = range.clone().try_for_each(|i| fold(*k, i, read(*k, i)));
                // Joined whatever the first unit gave: a panicking reader is
                // a bug, and the rest is then read here instead.
                let rest = helper
                    .join()
                    .unwrap_or_else(|_| later.iter().map(read_unit).collect());
                done?;
                for ((k, range), reads) in later.iter().zip(rest) {
                    for (i, r) in range.clone().zip(reads) {
                        fold(*k, i, r)?;
                    }
                }
                Ok(())
            })
        } else {
            units
                .iter()
                .try_for_each(|(k, range)| range.clone().try_for_each(|i| fold(*k, i, read(*k, i))))
        };
        let texts: Vec<String> = parts.into_iter().map(|p| p.text).collect();
        if let Err((index, err)) = folded {
            return Err((index, err, texts));
        }
        log.texts.adopt_buffers(texts);
        Ok(log)
    }

    /// Validate a live append (SPEC 4 steps 2, 5, 6). `surface_meta` is the
    /// JSON of `{surfaceOp?, sourceEventSeqs?}`; `data` the payload text when
    /// the binding has it (always for `request/header`).
    pub fn prepare(
        &self,
        ty: &str,
        seq: u64,
        surface_meta: Option<&str>,
        data: Option<&str>,
    ) -> CoreResult<Prepared> {
        if seq < self.metas.len() as u64 {
            return Err(CoreError::InvalidArgument(format!(
                "append seq {seq} is behind the native log ({})",
                self.metas.len()
            )));
        }
        let kind = Kind::of(ty);
        if let Some(legacy) = legacy_of(kind, data) {
            return Err(CoreError::LegacyVocabulary(
                legacy.uses_message(&format!("session event \"{ty}\"")),
            ));
        }
        let meta: SurfaceMeta = match surface_meta {
            Some(m) => serde_json::from_str(m).map_err(|_| {
                CoreError::NotLossless(format!(
                    "session event \"{ty}\" carries non-JSON-serializable surface metadata"
                ))
            })?,
            None => SurfaceMeta {
                surface_op: None,
                source_event_seqs: None,
            },
        };
        let plan = self.surface.plan(&Candidate {
            ty,
            kind,
            seq,
            surface_op: meta.surface_op.as_ref(),
            source_event_seqs: meta.source_event_seqs.as_ref(),
        })?;
        let header = header_seq(kind, seq);
        Ok(Prepared { plan, header })
    }

    /// Commit a prepared append. The caller guarantees nothing was committed
    /// since `prepare`.
    pub fn commit_prepared(&mut self, p: Prepared) {
        self.apply(&p.plan, p.header);
    }

    /// Hand over live events `len()..` as their texts, one per line (see
    /// `live_records`). Their surface effects were applied when they were
    /// appended; this records texts and metas.
    pub fn attach_texts(&mut self, lines: &str) -> CoreResult<()> {
        let records = live_records(lines)?;
        self.texts.reserve(records.len());
        for (meta, text) in records {
            self.record(meta, text);
        }
        Ok(())
    }

    /// Events `from..to` as one JSON array text.
    pub fn events_json(&self, from: usize, to: usize) -> String {
        let to = to.min(self.texts.len());
        let from = from.min(to);
        let size: usize = (from..to)
            .map(|i| self.texts.get(i).map_or(0, str::len) + 1)
            .sum();
        let mut out = String::with_capacity(size + 2);
        out.push('[');
        for i in from..to {
            if i > from {
                out.push(',');
            }
            out.push_str(self.texts.get(i).unwrap_or("null"));
        }
        out.push(']');
        out
    }

    /// The payload text of event `seq`.
    pub fn data_of(&self, seq: usize) -> Option<&str> {
        #[derive(Deserialize)]
        struct DataOnly<'a> {
            #[serde(borrow)]
            data: &'a RawValue,
        }
        let text = self.texts.get(seq)?;
        serde_json::from_str::<DataOnly>(text)
            .ok()
            .map(|d| d.data.get())
    }

    /// The texts of events `seqs` (each held natively) as one JSON array text.
    pub fn texts_json(&self, seqs: &[u32]) -> String {
        let size: usize = seqs
            .iter()
            .map(|&i| self.texts.get(i as usize).map_or(4, str::len) + 1)
            .sum();
        let mut out = String::with_capacity(size + 2);
        out.push('[');
        for (k, &i) in seqs.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            out.push_str(self.texts.get(i as usize).unwrap_or("null"));
        }
        out.push(']');
        out
    }

    /// The whole log as the JSONL store writes it.
    pub fn to_jsonl(&self) -> String {
        let header = self.header.line();
        let mut out = String::with_capacity(
            header.len() + 1 + self.texts.iter().map(|t| t.len() + 1).sum::<usize>(),
        );
        out.push_str(&header);
        out.push('\n');
        for t in self.texts.iter() {
            out.push_str(t);
            out.push('\n');
        }
        out
    }

    /// The section-8 closers for this log.
    pub fn closers(&self) -> Vec<Value> {
        let from = self.last_boundary.unwrap_or(0);
        let texts = &self.texts;
        let metas = &self.metas;
        closers((from..texts.len()).filter_map(|i| {
            Some(ScanEvent {
                kind: metas[i].kind,
                seq: i as u64,
                time: metas[i].time,
                data: self.data_of(i)?,
            })
        }))
    }

    /// `fork(boundary?, childId)`: a new log holding events `0..=boundary`,
    /// which must end on a `turn/end`.
    pub fn fork(&self, boundary: Option<f64>, child: SessionHeader) -> CoreResult<Log> {
        let id = self.header.id();
        let end = match boundary {
            None if self.metas.is_empty() => None,
            None => Some(self.metas.len() - 1),
            Some(b) => {
                if !(b.fract() == 0.0 && (0.0..=9_007_199_254_740_991.0).contains(&b)) {
                    return Err(CoreError::InvalidBoundary(format!(
                        "fork boundary for session \"{id}\" must be a non-negative safe integer, got {b}"
                    )));
                }
                let b = b as usize;
                if b >= self.metas.len() {
                    let last = if self.metas.is_empty() {
                        "none".to_string()
                    } else {
                        (self.metas.len() - 1).to_string()
                    };
                    return Err(CoreError::InvalidBoundary(format!(
                        "fork boundary {b} does not exist in session \"{id}\" (last seq: {last})"
                    )));
                }
                Some(b)
            }
        };
        let mut log = Log::new(child);
        let Some(end) = end else {
            return Ok(log);
        };
        if self.metas[end].kind != Kind::TurnEnd {
            return Err(CoreError::InvalidBoundary(format!(
                "fork boundary {end} in session \"{id}\" is not a turn/end"
            )));
        }
        if self.texts.len() <= end {
            return Err(CoreError::InvalidArgument(
                "fork needs the texts of every event up to the boundary".into(),
            ));
        }
        for i in 0..=end {
            let meta = self.metas[i];
            let plan = log.surface.replay_plan(i as u64, meta.op)?;
            log.apply(&plan, header_seq(meta.kind, i as u64));
            log.record(meta, self.texts.get(i).unwrap_or("null"));
        }
        Ok(log)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn a_helper_thread_runs_at_nice_10_with_a_long_slice() {
        // SAFETY: getpriority and sched_getscheduler have no memory effects.
        let own = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
        let own_policy = unsafe { libc::sched_getscheduler(0) } as u32;
        let (nice, attr) = std::thread::spawn(|| {
            lower_priority();
            let mut attr = SchedAttr::default();
            // SAFETY: the kernel writes at most `size` bytes into `attr`.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_sched_getattr,
                    0,
                    &mut attr as *mut SchedAttr,
                    std::mem::size_of::<SchedAttr>() as u32,
                    0,
                )
            };
            // SAFETY: getpriority has no memory effects.
            let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
            (nice, (r == 0).then_some(attr))
        })
        .join()
        .expect("helper thread");
        assert_eq!(nice, HELPER_NICE.max(own));
        if let Some(attr) = attr {
            assert_eq!(attr.nice, HELPER_NICE.max(own));
            // The policy is the process's own; only a normal one gets the
            // long slice (kernels before 6.12 keep none for it; later ones
            // show other policies' default slice).
            assert_eq!(attr.policy, own_policy);
            if own_policy == libc::SCHED_OTHER as u32 {
                assert!(
                    attr.runtime == HELPER_SLICE_NS || attr.runtime == 0,
                    "slice {}",
                    attr.runtime
                );
            } else {
                assert_ne!(attr.runtime, HELPER_SLICE_NS);
            }
        }
        // The JS thread (here: the test thread) keeps its own priority.
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }, own);
    }

    #[test]
    fn texts_span_chunks_without_moving_what_they_hold() {
        let mut t = Texts::default();
        t.push_span(5, 7);
        t.adopt_buffers(vec!["head\nab".to_string()]);
        let big = "x".repeat(TEXT_CHUNK_MIN + 3);
        let first_chunk = t.chunks[0].as_ptr();
        t.push("cd");
        let second = t.chunks[1].as_ptr();
        t.push(&big);
        t.push("");
        t.push("ef");
        assert_eq!(t.chunks[0].as_ptr(), first_chunk);
        assert_eq!(t.chunks[1].as_ptr(), second);
        assert_eq!(t.chunks.len(), 4);
        let all: Vec<&str> = t.iter().collect();
        assert_eq!(all, vec!["ab", "cd", big.as_str(), "", "ef"]);
        assert_eq!(t.get(5), None);
        assert_eq!(t.len(), 5);
        // Offsets only grow: what spans cover bounds the texts' length.
        for from in 0..5 {
            for to in from..=5 {
                let sum: usize = (from..to).map(|i| t.get(i).unwrap().len()).sum();
                assert!(t.span_bytes(from, to) >= sum, "{from}..{to}");
            }
        }
    }

    #[test]
    fn texts_adopt_several_buffers_and_grow_after_them() {
        let mut t = Texts::default();
        // "ab" and "c" in the first buffer, "de" in the third (the empty
        // second buffer moves no offset).
        for (s, e) in [(0, 2), (3, 4), (5, 7)] {
            t.push_span(s, e);
        }
        t.adopt_buffers(vec!["ab\nc\n".into(), String::new(), "de".into()]);
        t.push("fg");
        let all: Vec<&str> = t.iter().collect();
        assert_eq!(all, vec!["ab", "c", "de", "fg"]);
        assert_eq!(t.chunks.len(), 3, "the empty buffer is not kept");
        assert_eq!(t.get(4), None);
    }

    #[test]
    fn a_log_read_from_two_parts_is_the_log_read_from_one() {
        let header =
            SessionHeader::from_line(r#"{"type":"session","version":0,"id":"p"}"#).expect("header");
        let lines: Vec<String> = (0..PARALLEL_MIN_LINES + 7)
            .map(|seq| {
                let ty = match seq % 3 {
                    0 => "turn/start",
                    1 => "message/user",
                    _ => "turn/end",
                };
                format!(r#"{{"type":"{ty}","seq":{seq},"time":{seq},"data":{{"k":"é{seq}"}}}}"#)
            })
            .collect();
        let spans_of = |ls: &[String]| {
            let mut at = 0;
            ls.iter()
                .map(|l| {
                    let span = (at, at + l.len());
                    at += l.len() + 1;
                    span
                })
                .collect::<Vec<_>>()
        };
        let joined = |ls: &[String]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
        // The log of these groups of lines, one part each.
        let read = |groups: &[&[String]]| {
            let spans: Vec<_> = groups.iter().map(|g| spans_of(g)).collect();
            let parts = groups
                .iter()
                .zip(&spans)
                .map(|(g, spans)| Part {
                    text: joined(g),
                    spans,
                })
                .collect();
            Log::from_parts(header.clone(), parts, &|_, _, _, _| true)
                .map_err(|(index, _, texts)| (index, texts.len()))
        };
        let one = read(&[&lines]).expect("one part");
        for cut in [1, 4096, lines.len() - 1] {
            let (a, b) = lines.split_at(cut);
            let two = read(&[a, b]).expect("two parts");
            assert!(two.texts.iter().eq(one.texts.iter()), "cut at {cut}");
            assert_eq!(two.to_jsonl(), one.to_jsonl());
            // A bad event in the second part is named by its index in the log.
            let mut bad = b.to_vec();
            bad[0] = "{".into();
            let err = read(&[a, &bad]).err();
            assert_eq!(err, Some((cut, 2)), "cut at {cut}");
        }
    }

    #[test]
    fn live_meta_reads_the_ends_of_js_written_texts() {
        let m = live_meta(r#"{"type":"turn/start","seq":0,"time":17,"data":{"turn":1}}"#).unwrap();
        assert_eq!((m.kind, m.time, m.op), (Kind::TurnStart, 17, None));
        let m = live_meta(r#"{"type":"user/message","seq":1,"time":2,"data":{"x":{"surfaceOp":{"op":"replace","start":9,"end":9}}},"surfaceOp":"append"}"#).unwrap();
        assert_eq!(m.op, Some(SurfaceOp::Append));
        let m = live_meta(r#"{"type":"user/message","seq":5,"time":2,"data":{},"sourceEventSeqs":[1,2],"surfaceOp":{"op":"replace","start":1,"end":2}}"#).unwrap();
        assert_eq!(m.op, Some(SurfaceOp::Replace { start: 1, end: 2 }));
        // Another key order is parsed instead.
        assert!(live_meta(r#"{"seq":0,"type":"turn/start","time":1,"data":{}}"#).is_none());
        let m = parsed_meta(r#"{"seq":0,"type":"turn/start","time":1,"data":{}}"#).unwrap();
        assert_eq!(m.kind, Kind::TurnStart);
    }

    #[test]
    fn from_jsonl_reads_logs_and_names_the_line_of_a_defect() {
        let header = r#"{"type":"session","version":0,"id":"s","createdAt":1}"#;
        let e0 = r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#;
        let e1 = r#"{"type":"user/message","seq":1,"time":1,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#;
        let log = Log::from_jsonl(format!("{header}\n{e0}\n{e1}\n\n").as_bytes()).unwrap();
        assert_eq!((log.len(), log.surface().nodes()), (2, vec![1u64]));
        assert_eq!(log.to_jsonl(), format!("{header}\n{e0}\n{e1}\n"));
        let err = Log::from_jsonl(format!("{header}\n{e0}\n\n{e1}\n").as_bytes()).unwrap_err();
        assert_eq!((err.line, err.error.code()), (3, "CORRUPT_LOG"));
        let err = Log::from_jsonl(format!("{header}\n{e1}\n").as_bytes()).unwrap_err();
        assert_eq!(
            err.error.to_string(),
            "seed event at index 0 has seq 1 (expected 0); seed must be contiguous from 0"
        );
        assert_eq!(err.line, 2);
    }

    #[test]
    fn attached_texts_record_metas_for_live_events() {
        let mut log = Log::new(SessionHeader::minimal("s", 1.0));
        let p = log
            .prepare("user/message", 1, Some(r#"{"surfaceOp":"append"}"#), None)
            .unwrap();
        log.commit_prepared(p);
        assert!(log.attach_texts("{\"type\":\"x\"}").is_err());
        assert!(log.attach_texts("[]\n").is_err());
        assert_eq!(log.len(), 0);
        log.attach_texts(concat!(
            r#"{"type":"turn/start","seq":0,"time":5,"data":{"turn":1}}"#,
            "\n",
            r#"{"type":"user/message","seq":1,"time":6,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}"#,
            "\n"
        ))
        .unwrap();
        assert_eq!(log.len(), 2);
        assert_eq!(
            log.texts_json(&[1]),
            r#"[{"type":"user/message","seq":1,"time":6,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}]"#
        );
        assert_eq!(log.surface().nodes(), vec![1]);
        assert_eq!(log.meta(0).map(|m| m.time), Some(5));
    }
}
