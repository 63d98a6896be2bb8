'use strict'
// The Session class (SPEC 3-6, 10).
//
// One owner for every piece of session state:
//
// | state                                                  | owner                                  | what the other side holds |
// |--------------------------------------------------------|----------------------------------------|---------------------------|
// | events given as text (a seed, a read, a fork's copy):  | native log (`NativeSession`), events   | objects parsed when read  |
// |   their texts, kinds, times, surface ops               |   `0..#prefix`                         |   (`events`, derive)      |
// | events appended here (live): the frozen objects        | JS (`#objs`), events `#prefix..#seq`   | nothing: a store's flush, |
// |                                                        |                                        |   `toJsonl` write their   |
// |                                                        |                                        |   text, nobody keeps it   |
// | the surface (order, `replaceGeneration`, every rule)   | native log (`surface.rs`)              | `#nodes`: changed only by |
// |                                                        |                                        |   the effect an append    |
// |                                                        |                                        |   returns                 |
// | the header fold (which event is the latest header)     | native log                             | a "stale" flag            |
// | the session header                                     | native log                             | the frozen object parsed  |
// |                                                        |                                        |   once                    |
// | derived messages, the canonical request header         | JS (`derive.js`, `header.js`)          | nothing                   |
//
// An event is never edited, so an object parsed from a native text is a
// cache of it; a fork starts with its parent's caches of the events they
// share (`#shareDerived`: frozen values, each session its own maps and
// arrays); the service's fork, whose child must hold copies, copies the
// messages at its first derive (`#borrowDerived`). The per-step calls cost
// O(new surface nodes): `deriveMessages()` derives only nodes it has not
// seen, from objects already in JS; `requestHeader()` is a cached object.

const binding = require('../../binding.js')
const { randomUUID } = require('node:crypto')
const path = require('node:path')
const { FAIL, fail, snapshot, snapshotEvent, deepFreeze, copyFrozen, parseFrozen, snapshotEvents } = require('./json.js')
const { deriveFrozen, deriveEventMessage } = require('./derive.js')
const { canonicalForm } = require('./header.js')

const { NativeSession, JsonlReading } = binding
const { freeze } = Object
const isArray = Array.isArray

/** Types whose appends the native surface fold must see (the list lives in Rust). */
const SURFACE_TYPES = new Set(NativeSession.surfaceEligibleTypes())
/** Whether a derive or the header fold reads events of this type (JS keeps their objects). */
const readByFolds = (type) => SURFACE_TYPES.has(type) || type === 'request/header'
/** Bits of the effect `NativeSession.append` returns. */
const EFFECT_SURFACE = 3
const EFFECT_APPEND = 1
const EFFECT_REPLACE = 2
const EFFECT_HEADER = 4

const INTERNAL = Symbol('internal construction')
/** Seed events checked and handed over per native call. */
const SEED_SLICE = 2048
/** A surface node whose message is to be derived (`#derivedOf`). */
const PENDING = Symbol('pending')
/** Events parsed per native call when `events` is first read. */
const EVENTS_SLICE = 8192
/** Internal hooks for the stores and tools of this package (not public API). */
const internal = { binding, snapshotEvents, parseFrozen }
const reportObserverError = (error) => {
  console.error('[dsh-session-native] session observer failed:', error)
}

/** Live events whose texts are built per event-loop turn: a few ms of `JSON.stringify` (why this many: benchmark/README.md). */
const LIVE_PART_EVENTS = 1024
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

/**
 * The texts of `session`'s live events `from..to`, as UTF-8 parts built a
 * part per event-loop turn (a live session of a million events would
 * otherwise stringify them all at once on the main thread).
 */
async function liveParts(session, from, to) {
  const parts = []
  for (let a = from; a < to; a += LIVE_PART_EVENTS) {
    if (a > from) await nextTurn()
    parts.push(Buffer.from(internal.liveLines(session, a, Math.min(to, a + LIVE_PART_EVENTS)), 'utf8'))
  }
  return parts
}

/** The native form of an event's surface fields (`{surfaceOp?, sourceEventSeqs?}`), or null. */
function surfaceMetaJson(meta) {
  if (meta.sourceEventSeqs === undefined && meta.surfaceOp === undefined) return null
  if (meta.sourceEventSeqs === undefined && meta.surfaceOp === 'append') return '{"surfaceOp":"append"}'
  const out = {}
  if (meta.sourceEventSeqs !== undefined) out.sourceEventSeqs = meta.sourceEventSeqs
  if (meta.surfaceOp !== undefined) out.surfaceOp = meta.surfaceOp
  return JSON.stringify(out)
}

/**
 * A JSONL log reaches the native reader in parts, which it copies into pieces
 * of whole lines and starts reading from the first piece on (see
 * src/log/resume.rs). A long string is encoded to UTF-8 a part at a time
 * into one small reused buffer (`encodeInto` costs a fraction of a
 * whole-string `Buffer.from`, and writes no fresh memory); a lone surrogate
 * becomes U+FFFD, as `Buffer.from` does, and a part ends on a whole
 * character.
 */
const JSONL_PIECE = 1 << 20
const utf8Encoder = new TextEncoder()
let pieceBuffer
function readPieces(text) {
  pieceBuffer ??= Buffer.allocUnsafeSlow(JSONL_PIECE)
  const reading = new JsonlReading()
  for (let at = 0; at < text.length; ) {
    const { read, written } = utf8Encoder.encodeInto(at === 0 ? text : text.slice(at), pieceBuffer)
    reading.push(pieceBuffer, written)
    at += read
  }
  return reading
}

/**
 * A whole log in a Buffer is read where it is (the native log takes its
 * texts compressed, no copy of them made) and held until `finish`, which
 * `fromJsonl` reaches before anything else runs on this thread. Memory
 * another thread may write meanwhile (a SharedArrayBuffer) is copied first.
 */
function readBytes(bytes) {
  const own = bytes.buffer instanceof SharedArrayBuffer ? Buffer.from(bytes) : bytes
  return JsonlReading.ofBuffer(own)
}

/**
 * Parse the payloads of the events at `seqs` (`json`: the native log's
 * `[type, data, ...]` of them) into `into` (seq -> { type, data }, data
 * frozen).
 */
function takePayloads(seqs, json, into) {
  const flat = JSON.parse(json)
  for (let i = 0; i < seqs.length; i++) into.set(seqs[i], { type: flat[2 * i], data: deepFreeze(flat[2 * i + 1]) })
}

class Session {
  /** The native log: texts of events `0..#prefix`, surface, session header, header fold. */
  #native
  #id
  #header
  /** How many events the native log holds as text (fixed once built). */
  #prefix = 0
  /** Frozen events held in JS for seqs `#objsFrom..#seq` (`#objsFrom` is `#prefix`, or 0 once `events` was read). */
  #objs = []
  #objsFrom = 0
  /**
   * Payloads of events below `#objsFrom` that a derive or the header fold
   * read (seq -> { type, data }, data frozen). When `events` is read, the
   * parsed events take these `data` objects, so messages keep sharing them.
   */
  #payloads = new Map()
  #seq = 0
  #eventsCache = undefined
  /** View of the native surface order (see the top of this file). */
  #nodes = []
  #generation = 0
  #surface
  /**
   * What `#nodes[0..#derivedNodes]` derive to, a message or null per node
   * (`PENDING` for the node a replace put in their place, derived when
   * next asked), and those messages alone, in order (`#derived`, rebuilt
   * from `#derivedOf` when a replace made it stale): a replace forgets the
   * messages of the nodes it removed and keeps the others.
   */
  #derivedOf = []
  #derived = []
  #derivedNodes = 0
  #derivedStale = false
  /**
   * `#derivedOf` holds another session's messages, to copy before they are
   * listed (a detached fork: `#borrowDerived`).
   */
  #derivedBorrowed = false
  #headerStale = true
  #headerCache = undefined
  #attachments = []
  #appending = false
  /** SPEC 9 checks (`{ invariants: true }`), or undefined. */
  #trace = undefined

  constructor(id, seed, header, options) {
    if (id === INTERNAL) {
      this.#adopt(seed, header, options)
      return
    }
    if (typeof id !== 'string') throw fail('session id must be a string', 'INVALID_ARGUMENT')
    if (seed instanceof Session && options?.invariants !== true) {
      this.#continue(id, seed, header)
      return
    }
    if (seed instanceof Session) seed = seed.events
    const now = Date.now()
    if (seed !== undefined && seed !== null && !isArray(seed)) {
      throw fail('session seed must be an array of events', 'INVALID_ARGUMENT')
    }
    const native = NativeSession.create(id, null, null, now)
    const length = seed?.length ?? 0
    // The seed is checked and handed to the native log in slices: each
    // slice's copies die young, and no transient holds the whole seed. The
    // log keeps the texts; JS keeps (frozen) only the events a derive or the
    // header fold reads, and parses the others when `events` is read.
    const payloads = this.#payloads
    const traced = options?.invariants === true ? [] : undefined
    // A long seed's slices are checked on a native helper thread while
    // this one copies the next slice.
    const helped = length > SEED_SLICE
    const hand = (text) => (helped ? native.seedJsonAsync(text) : native.seedJson(text))
    try {
      for (let from = 0; from < length; from += SEED_SLICE) {
        const to = Math.min(length, from + SEED_SLICE)
        const copies = []
        for (let i = from; i < to; i++) {
          const copy = snapshotEvent(seed[i], false)
          if (copy === FAIL) {
            // An earlier event's error wins, as in a one-event-at-a-time check.
            hand(JSON.stringify(copies))
            native.finishSeed()
            throw fail(`seed event at index ${i} is not losslessly JSON-serializable`, 'NOT_LOSSLESS_JSON')
          }
          copies.push(copy)
        }
        const text = JSON.stringify(copies)
        hand(text)
        if (traced !== undefined) traced.push(text)
        for (let k = 0; k < copies.length; k++) {
          const e = copies[k]
          if (readByFolds(e.type)) {
            payloads.set(from + k, { type: e.type, data: deepFreeze(e.data) })
          }
        }
      }
    } catch (error) {
      // A throwing getter while the helper still checks earlier slices: an
      // earlier event's error wins, and no helper thread is left waiting.
      native.finishSeed()
      throw error
    }
    native.finishSeed()
    let headerObj
    if (header !== undefined) {
      // The seed is checked first: its error wins over the header's.
      headerObj = snapshot(header, true)
      if (headerObj === FAIL) throw fail('session header is not losslessly JSON-serializable', 'INVALID_HEADER')
      native.setHeader(JSON.stringify(headerObj))
    }
    if (traced !== undefined) {
      const trace = binding.InvariantTrace.fromEventsJson('[]')
      for (const text of traced) trace.extend(text)
      this.#trace = trace
    }
    this.#native = native
    this.#id = id
    this.#header = headerObj ?? parseFrozen(native.headerJson())
    this.#seq = length
    this.#prefix = length
    this.#objsFrom = length
    this.#loadNativeState()
  }

  /**
   * A session holding `source`'s whole log under `id` and `header` (a
   * resume: `ctx.sessions.create(id, { from: await store.open(id) })`),
   * without checking it event by event again: the log's texts are shared,
   * its surface replayed from the kept surface ops, `source`'s own events
   * and what it derived (frozen) taken as they are. A store that knew
   * `source`'s log as its stored log knows this one's (the native token
   * moves here; `source` gets a new one, and a store it wrote compares it
   * in full before writing it again).
   */
  #continue(id, source, header) {
    let headerText = JSON.stringify({ version: 0, id, createdAt: Date.now() })
    if (header !== undefined) {
      const copy = snapshot(header, true)
      if (copy === FAIL) throw fail('session header is not losslessly JSON-serializable', 'INVALID_HEADER')
      headerText = JSON.stringify(copy)
    }
    const { native, live, cached } = source.#forkParts(source.#seq, id)
    native.setHeader(headerText)
    native.takeToken(source.#native)
    this.#adopt(native, live, cached)
    // The same surface over the same events: the same messages and payloads.
    this.#shareDerived(source)
  }

  /**
   * A native log under `id` holding this session's events `0..end`: the
   * texts the log holds (shared when all), then this session's own events'
   * surface and header effects replayed.
   */
  #forkNative(end, id) {
    const prefix = Math.min(end, this.#prefix)
    const child = this.#native.forkPrefix(prefix, id, Date.now(), end)
    for (let seq = prefix; seq < end; seq++) {
      const e = this.#objs[seq - this.#objsFrom]
      if (SURFACE_TYPES.has(e.type) || e.type === 'request/header') child.append(e.type, seq, surfaceMetaJson(e), null)
    }
    return child
  }

  /**
   * Wrap a native log: its texts (`native.length` events), then `live`
   * (frozen events after them, whose effects the log already applied: a
   * fork). `cached`: objects already parsed for the texts (a fork of a
   * session whose `events` was read), kept so identities hold.
   */
  #adopt(native, live = [], cached = undefined) {
    this.#native = native
    this.#header = parseFrozen(native.headerJson())
    this.#id = this.#header.id
    this.#prefix = native.length
    this.#seq = this.#prefix + live.length
    if (cached !== undefined && cached.length === this.#prefix) {
      this.#objs = cached.concat(live)
      this.#objsFrom = 0
    } else {
      this.#objs = live
      this.#objsFrom = this.#prefix
    }
    this.#loadNativeState()
  }

  #loadNativeState() {
    const native = this.#native
    const nodes = native.surfaceNodes()
    for (let i = 0; i < nodes.length; i++) this.#nodes.push(nodes[i])
    this.#generation = native.replaceGeneration
    const nodesRef = this.#nodes
    const self = this
    this.#surface = freeze({
      get nodes() {
        return nodesRef
      },
      get replaceGeneration() {
        return self.#generation
      },
    })
  }

  static fromJsonl(text) {
    let reading
    if (typeof text === 'string') {
      reading = text.length < JSONL_PIECE ? readBytes(Buffer.from(text, 'utf8')) : readPieces(text)
    } else {
      if (!(text instanceof Uint8Array)) {
        throw fail('Session.fromJsonl expects a string or a Buffer', 'INVALID_ARGUMENT')
      }
      reading = readBytes(Buffer.isBuffer(text) ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength))
    }
    // The log is read on native threads (src/log/resume.rs); a defective
    // log throws its error (`code`, `line`) from here, and the read lets
    // the caller's Buffer go before anything else runs.
    return new Session(INTERNAL, reading.finish())
  }

  get id() {
    return this.#id
  }

  get header() {
    return this.#header
  }

  get seq() {
    return this.#seq
  }

  get surface() {
    return this.#surface
  }

  get events() {
    if (this.#eventsCache !== undefined) return this.#eventsCache
    if (this.#objsFrom > 0) {
      // In slices: the JSON text of a whole long log at once would be a
      // transient as large as the log, twice (native and JS).
      // A payload already parsed (for a message or the header) keeps its
      // identity, and its text crosses without it (`data` null).
      const payloads = this.#payloads
      const held = Uint32Array.from(payloads.keys()).sort()
      const head = []
      for (let from = 0; from < this.#objsFrom; from += EVENTS_SLICE) {
        const slice = JSON.parse(this.#native.eventsJson(from, Math.min(from + EVENTS_SLICE, this.#objsFrom), held))
        for (let i = 0; i < slice.length; i++) {
          const e = slice[i]
          const known = payloads.get(from + i)
          if (known !== undefined) e.data = known.data
          head.push(deepFreeze(e))
        }
      }
      this.#objs = head.concat(this.#objs)
      this.#objsFrom = 0
      payloads.clear()
    }
    this.#eventsCache = freeze(this.#objs.slice())
    return this.#eventsCache
  }

  /** `{ type, data }` of the event at `seq`, data frozen (materialized: see `#materialize`). */
  #payloadAt(seq) {
    return seq >= this.#objsFrom ? this.#objs[seq - this.#objsFrom] : this.#payloads.get(seq)
  }

  /** Parse, in one native call, the payloads of the events at `seqs` that JS does not hold yet. */
  #materialize(seqs) {
    const from = this.#objsFrom
    const payloads = this.#payloads
    const missing = []
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i]
      if (seq < from && !payloads.has(seq)) missing.push(seq)
    }
    if (missing.length === 0) return
    const seqsOut = Uint32Array.from(missing)
    takePayloads(seqsOut, this.#native.payloads(seqsOut), payloads)
  }

  /** Whether event `seq` is a `turn/end`. */
  #isTurnEnd(seq) {
    return seq >= this.#objsFrom ? this.#objs[seq - this.#objsFrom].type === 'turn/end' : this.#native.isTurnEnd(seq)
  }

  /** The texts of live events `from..to` (`from` at least `#prefix`), a line each. */
  #liveLines(from, to) {
    if (to <= from) return ''
    // One join, not `+=`: a flat string, which UTF-8 encodes at twice the
    // speed of a rope of concatenations (benchmark/README.md).
    const objs = this.#objs
    const lines = []
    for (let i = from - this.#objsFrom; i < to - this.#objsFrom; i++) lines.push(JSON.stringify(objs[i]))
    lines.push('')
    return lines.join('\n')
  }

  append(type, data, opts) {
    if (typeof type !== 'string') throw fail('session event type must be a string', 'INVALID_ARGUMENT')
    if (!type.isWellFormed()) {
      // Stores keep types as UTF-8 text, which cannot hold a lone surrogate.
      throw fail(`session event type ${JSON.stringify(type)} contains a lone UTF-16 surrogate`, 'INVALID_EVENT')
    }
    const dataCopy = snapshot(data, true)
    if (dataCopy === FAIL) {
      throw fail(`session event "${type}" carries non-JSON-serializable data`, 'NOT_LOSSLESS_JSON')
    }
    const native = this.#native
    // The legacy vocabulary rule needs the payload of request/header* events.
    let dataText = null
    if (type.startsWith('request/header')) {
      dataText = JSON.stringify(dataCopy)
      binding.checkLegacy(type, dataText)
    }
    let metaJson = null
    let metaCopy
    if (opts !== undefined && opts !== null) {
      const meta = {}
      if (opts.sourceEventSeqs !== undefined) meta.sourceEventSeqs = opts.sourceEventSeqs
      if (opts.surfaceOp !== undefined) meta.surfaceOp = opts.surfaceOp
      metaCopy = snapshot(meta, true)
      if (metaCopy === FAIL) {
        throw fail(`session event "${type}" carries non-JSON-serializable surface metadata`, 'NOT_LOSSLESS_JSON')
      }
      metaJson = surfaceMetaJson(metaCopy)
    }
    if (this.#appending) {
      throw fail('session append cannot reenter while another append is being published', 'REENTRANT_APPEND')
    }
    const seq = this.#seq
    const time = Date.now()
    const event = { type, seq, time, data: dataCopy }
    if (metaCopy !== undefined) {
      if (metaCopy.sourceEventSeqs !== undefined) event.sourceEventSeqs = metaCopy.sourceEventSeqs
      if (metaCopy.surfaceOp !== undefined) event.surfaceOp = metaCopy.surfaceOp
    }
    freeze(event)
    const trace = this.#trace
    if (trace !== undefined) trace.check(JSON.stringify(event))
    // Only surface events and headers change native state (the surface,
    // the header fold); every other live event is JS's alone.
    const needsNative = metaJson !== null || dataText !== null || SURFACE_TYPES.has(type)
    const attachments = this.#attachments
    let effect = 0
    if (attachments.length === 0) {
      if (needsNative) effect = native.append(type, seq, metaJson, dataText)
    } else {
      if (needsNative) effect = native.prepare(type, seq, metaJson, dataText)
      this.#appending = true
      const hooks = attachments.slice()
      let ran = 0
      try {
        for (; ran < hooks.length; ran++) {
          const a = hooks[ran]
          if (typeof a.beforeCommit === 'function') a.beforeCommit(event, this)
        }
      } catch (error) {
        if (needsNative) native.discardPrepared()
        if (trace !== undefined) trace.discard()
        // Each attachment the append reached, the vetoing one included, learns of the veto.
        for (let i = 0; i <= ran; i++) this.#vetoed(hooks[i], error, event)
        this.#appending = false
        throw error
      }
      if (needsNative) native.commitPrepared()
    }
    this.#commit(event, effect)
    if (trace !== undefined) trace.commit()
    if (attachments.length !== 0) {
      try {
        for (const a of attachments.slice()) this.#notify(a, event)
      } finally {
        this.#appending = false
      }
    }
    return event
  }

  /** Apply a committed append's native effect to the views, and keep the event. */
  #commit(event, effect) {
    const seq = event.seq
    const surface = effect & EFFECT_SURFACE
    if (surface === EFFECT_APPEND) {
      this.#nodes.push(seq)
    } else if (surface === EFFECT_REPLACE) {
      const [startIdx, endIdx] = this.#native.lastReplace()
      this.#nodes.splice(startIdx, endIdx - startIdx + 1, seq)
      this.#forgetDerived(startIdx, endIdx)
      this.#generation += 1
    }
    if ((effect & EFFECT_HEADER) !== 0) this.#headerStale = true
    this.#objs.push(event)
    this.#seq = seq + 1
    this.#eventsCache = undefined
  }

  #vetoed(attachment, error, event) {
    if (typeof attachment.onVeto !== 'function') return
    try {
      attachment.onVeto(error, event, this)
    } catch (inner) {
      reportObserverError(inner)
    }
  }

  #notify(attachment, event) {
    const report = (error) => {
      try {
        if (typeof attachment.onObserverError === 'function') attachment.onObserverError(error, event, this)
        else reportObserverError(error)
      } catch (inner) {
        reportObserverError(inner)
      }
    }
    if (typeof attachment.afterCommit !== 'function') return
    try {
      const result = attachment.afterCommit(event, this)
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') {
        result.then(undefined, report)
      }
    } catch (error) {
      report(error)
    }
  }

  attach(attachment) {
    if (attachment === null || typeof attachment !== 'object') {
      throw fail('session attachment must be an object', 'INVALID_ARGUMENT')
    }
    this.#attachments.push(attachment)
    let attached = true
    return () => {
      if (!attached) return
      attached = false
      const index = this.#attachments.indexOf(attachment)
      if (index !== -1) this.#attachments.splice(index, 1)
    }
  }

  deriveMessages() {
    // A model step: the texts a read left raw are kept compressed from the
    // step after the compressor (started by the read) is done.
    if (this.#prefix > 0) this.#native.settle()
    this.#deriveUpTo(this.#nodes.length)
    return this.#derived.slice()
  }

  /**
   * Derive the messages of surface nodes up to position `end` (those not
   * derived yet, and the node a replace left pending); whether nodes after
   * `end` are left.
   */
  #deriveUpTo(end) {
    if (this.#derivedStale) this.#rederive()
    const nodes = this.#nodes
    const to = Math.min(end, nodes.length)
    const from = this.#derivedNodes
    if (from < to) {
      if (this.#objsFrom > 0) this.#materialize(from === 0 && to === nodes.length ? nodes : nodes.slice(from, to))
      const derived = this.#derived
      const derivedOf = this.#derivedOf
      for (let i = from; i < to; i++) {
        const message = deriveFrozen(this.#payloadAt(nodes[i]))
        derivedOf.push(message)
        if (message !== null) derived.push(message)
      }
      this.#derivedNodes = to
    }
    return to < nodes.length
  }

  /** Surface nodes `start..end` were replaced by one (`#nodes` spliced): forget their messages. */
  #forgetDerived(start, end) {
    if (start >= this.#derivedNodes) return
    if (end >= this.#derivedNodes) {
      this.#derivedOf.length = start
      this.#derivedNodes = start
    } else {
      this.#derivedOf.splice(start, end - start + 1, PENDING)
      this.#derivedNodes -= end - start
    }
    this.#derivedStale = true
  }

  /** Derive the nodes replaces left `PENDING`, then list the messages again. */
  #rederive() {
    if (this.#derivedBorrowed) {
      this.#derivedOf = this.#derivedOf.map((m) => (m === null || m === PENDING ? m : copyFrozen(m)))
      this.#derivedBorrowed = false
    }
    const derivedOf = this.#derivedOf
    const pending = []
    for (let i = 0; i < derivedOf.length; i++) if (derivedOf[i] === PENDING) pending.push(i)
    if (pending.length > 0) {
      if (this.#objsFrom > 0) this.#materialize(pending.map((i) => this.#nodes[i]))
      for (const i of pending) derivedOf[i] = deriveFrozen(this.#payloadAt(this.#nodes[i]))
    }
    this.#derived = derivedOf.filter((message) => message !== null)
    this.#derivedStale = false
  }

  deriveEventMessage(event) {
    return deriveEventMessage(event)
  }

  requestHeader() {
    if (this.#headerStale) {
      const seq = this.#native.requestHeaderSeq
      if (seq < 0) {
        this.#headerCache = undefined
      } else {
        this.#materialize([seq])
        this.#headerCache = deepFreeze(canonicalForm(this.#payloadAt(seq).data.header))
      }
      this.#headerStale = false
    }
    return this.#headerCache
  }

  toJsonl() {
    const limit = internal.stringLimit
    const head = this.#native.toJsonl(limit)
    let live
    try {
      live = this.#liveLines(this.#prefix, this.#seq)
    } catch (error) {
      if (!(error instanceof RangeError)) throw error
      live = undefined
    }
    if (live === undefined || head.length + live.length > limit) {
      throw fail(
        `session "${this.#id}": its JSONL is longer than a JavaScript string can hold; write it to a file with session.writeJsonl(path) instead`,
        'TOO_LARGE',
      )
    }
    return head + live
  }

  /**
   * Write what `toJsonl()` gives to the file at `path` (made or
   * truncated), for a log of any size: the texts the native log holds are
   * written off the main thread, this session's own events a part per
   * event-loop turn. Resolves to the bytes written. The events are those
   * at the call.
   */
  async writeJsonl(file) {
    if (typeof file !== 'string' || file.length === 0) {
      throw fail('writeJsonl expects a file path', 'INVALID_ARGUMENT')
    }
    const source = this.#native.flushSource()
    const parts = await liveParts(this, this.#prefix, this.#seq)
    return binding.writeJsonl(source, path.resolve(file), parts)
  }

  fork(boundary, childId) {
    if (boundary !== undefined && (typeof boundary !== 'number' || !Number.isSafeInteger(boundary) || boundary < 0)) {
      throw fail(
        `fork boundary for session "${this.#id}" must be a non-negative safe integer, got ${String(boundary)}`,
        'INVALID_BOUNDARY',
      )
    }
    if (childId !== undefined && typeof childId !== 'string') {
      throw fail('fork child id must be a string', 'INVALID_ARGUMENT')
    }
    const seq = this.#seq
    if (boundary !== undefined && boundary >= seq) {
      throw fail(
        `fork boundary ${boundary} does not exist in session "${this.#id}" (last seq: ${seq === 0 ? 'none' : seq - 1})`,
        'INVALID_BOUNDARY',
      )
    }
    const end = boundary === undefined ? seq : boundary + 1
    if (end > 0 && !this.#isTurnEnd(end - 1)) {
      throw fail(`fork boundary ${end - 1} in session "${this.#id}" is not a turn/end`, 'INVALID_BOUNDARY')
    }
    const id = childId ?? `${this.#id}.fork-${randomUUID().slice(0, 8)}`
    return this.#forkPrefix(end, id, false)
  }

  /**
   * A session holding this one's events `0..end` under `id`. This
   * session's own events up to `end` go to it as the same frozen objects,
   * and it starts from what this one parsed and derived (`#shareDerived`);
   * or, `detached`, as copies, and it parses and derives its own.
   */
  #forkPrefix(end, id, detached) {
    const { native, live, cached } = this.#forkParts(end, id)
    if (detached) {
      const session = new Session(INTERNAL, native, live.map(copyFrozen))
      session.#borrowDerived(this)
      return session
    }
    const session = new Session(INTERNAL, native, live, cached)
    session.#shareDerived(this)
    return session
  }

  /**
   * What a session holding this one's events `0..end` under `id` is built
   * from (`#adopt`): the native log (`#forkNative`), this session's own
   * events up to `end`, and the objects it parsed of the texts when it
   * holds all of them (`events` was read).
   */
  #forkParts(end, id) {
    const prefix = Math.min(end, this.#prefix)
    return {
      native: this.#forkNative(end, id),
      live: this.#objs.slice(prefix - this.#objsFrom, end - this.#objsFrom),
      cached: this.#objsFrom === 0 ? this.#objs.slice(0, prefix) : undefined,
    }
  }

  /**
   * Take what `parent` parsed and derived for this fork's events: the
   * payloads it holds (so this fork's `events` give the same frozen
   * values), and the messages of the surface nodes this fork's surface
   * starts with (a node's message is its event's alone, SPEC 6). Its first
   * derive then lists them instead of parsing every payload again.
   */
  #shareDerived(parent) {
    if (parent.#objsFrom > 0) {
      const end = this.#objsFrom
      const payloads = this.#payloads
      parent.#payloads.forEach((payload, seq) => {
        if (seq < end) payloads.set(seq, payload)
      })
    }
    this.#shareMessages(parent)
  }

  /** `parent`'s messages of the surface nodes this session's surface starts with (see `#shareDerived`). */
  #shareMessages(parent) {
    const nodes = this.#nodes
    const theirs = parent.#nodes
    const n = Math.min(nodes.length, parent.#derivedNodes)
    let k = 0
    while (k < n && nodes[k] === theirs[k]) k++
    if (k === 0) return
    this.#derivedOf = parent.#derivedOf.slice(0, k)
    this.#derivedNodes = k
    this.#derivedStale = true
    this.#derivedBorrowed = parent.#derivedBorrowed
  }

  /**
   * A detached fork starts from the messages `parent` derived for the
   * surface nodes the two share, as `#shareDerived` does, but its own: its
   * first derive copies them (`copyFrozen`: new objects around the same
   * strings, a fifth of what parsing their payloads again costs) before it
   * lists them. Until then it holds the parent's frozen messages, never
   * handing them out.
   */
  #borrowDerived(parent) {
    this.#shareMessages(parent)
    this.#derivedBorrowed = this.#derivedNodes > 0
  }

  static {
    /** What a store's flush reads, fixed at its call: the native log and its text count, and the session's length. */
    internal.flushSource = (session) => ({ native: session.#native, prefix: session.#prefix, to: session.#seq })
    /** The texts of live events `from..to`, a line each. */
    internal.liveLines = (session, from, to) => session.#liveLines(from, to)
    /** `liveLines` as UTF-8 parts, a part per event-loop turn. */
    internal.liveParts = liveParts
    /** The longest string `toJsonl()` makes (V8's limit; tests lower it). */
    internal.stringLimit = 0x1fffffe8
    internal.wrapNative = (native) => new Session(INTERNAL, native)
    /**
     * For the service's fork (SPEC 12.6): a session holding copies of
     * `session`'s events `0..end` (none of its objects), and the type of
     * its event `seq`, without reading `events`.
     */
    internal.detachedPrefix = (session, end) => session.#forkPrefix(end, session.#id, true)
    internal.typeAt = (session, seq) =>
      seq >= session.#objsFrom ? session.#objs[seq - session.#objsFrom].type : JSON.parse(session.#native.eventsJson(seq, seq + 1, new Uint32Array(0)))[0].type
    /**
     * Derive the messages of the surface a run of payloads at a time,
     * yielding to the event loop between runs: a store's `open` runs this
     * before it resolves, so that the first `deriveMessages()` of a long
     * log only copies an array (the 50 ms pause bound at 1M events:
     * benchmark/pauses.mjs). A run is at most 256 KiB of payload text, or
     * one longer payload.
     */
    internal.warm = async (session) => {
      const nodes = session.#nodes
      if (session.#objsFrom === 0 || nodes.length === 0) return
      const ends = session.#native.runEnds(Uint32Array.from(nodes), 256 << 10)
      for (let run = 0; run < ends.length; run++) {
        if (run > 0) await nextTurn()
        session.#deriveUpTo(ends[run])
      }
    }
  }
}


module.exports = { Session, internal }
