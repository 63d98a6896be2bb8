'use strict'
// The Session class (SPEC 3-6, 10).
//
// One owner for every piece of session state:
//
// - The native log (`NativeSession`) owns the record: the text of every event
//   it holds, each event's kind/time/surface op, the surface (its order,
//   `replaceGeneration` and every transition rule), the session header, and
//   the header fold (which event is the latest `request/header`). Nothing in
//   JS recomputes any of these.
// - JS owns the frozen event objects and what is derived from them: the
//   messages (the derivation rule lives in `derive.js` and runs on frozen
//   events, so a message shares its event's `content`) and the canonical
//   request header (`header.js`).
// - What JS holds of native state is a view, written only from what the
//   native log answered: `#nodes` is changed only by the effect an append
//   returned (push, or splice at the positions `lastReplace()` gives);
//   `#headerStale` only by the header bit of that effect.
// - An event's object and its text are two forms of one event, never edited:
//   a live append makes the object, and its text reaches the native log when
//   a native path needs it (`toJsonl`, `fork`, a store flush: `#sync`) or
//   on idle turns after a `deriveMessages()` finds 4,096 pending
//   (`#scheduleHandOver`); a resumed or seeded log has texts, and objects
//   are parsed when read (`events`, or the surface events a derive needs:
//   `#materialize`).
// - Once its text is in the native log, JS lets go of an event's object
//   (`#release`), keeping only those a derive or the header fold reads, as a
//   seeded session does, and a WeakRef to the others: while a caller holds
//   one, `events` gives that same object. So a long live session holds about
//   what a seeded one does: its surface as objects, the rest as texts the
//   native log keeps compressed (`src/log/texts.rs`).
//
// So the per-step calls cost O(new surface nodes): `deriveMessages()` derives
// only nodes it has not seen, from objects already in JS, and never hands
// texts to the native log; `requestHeader()` is a cached object.

const binding = require('../../binding.js')
const { randomUUID } = require('node:crypto')
const { FAIL, fail, snapshot, snapshotEvent, deepFreeze, parseFrozen, snapshotEvents } = require('./json.js')
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
/** Events parsed per native call when `events` is first read. */
const EVENTS_SLICE = 8192
/**
 * A live session hands its events' texts to the native log, and lets go of
 * their objects, once this many are pending at a `deriveMessages()` (a model
 * step: the loop then waits for its model), on idle turns of the event loop
 * (at most `HANDOVER_SLICE` per turn: about 2.4 µs an event, so a turn takes
 * about 5 ms). Scheduling it keeps the session reachable until that turn.
 */
const HANDOVER_AFTER = 4096
const HANDOVER_SLICE = 2048
/** Objects let go of per idle turn at most (a `WeakRef` each: about 5 ms). */
const RELEASE_SLICE = 8192
/** Internal hooks for the stores and tools of this package (not public API). */
const internal = { binding, snapshotEvents, parseFrozen }
const reportObserverError = (error) => {
  console.error('[dsh-session-native] session observer failed:', error)
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

function readBytes(bytes) {
  const reading = new JsonlReading()
  reading.push(bytes, bytes.length)
  return reading
}

class Session {
  /** The native log: texts, surface, session header, header fold. */
  #native
  #id
  #header
  /** Frozen events held in JS for seqs `#objsFrom..#seq`. */
  #objs = []
  #objsFrom = 0
  /**
   * Payloads of events below `#objsFrom` that a derive or the header fold
   * read (seq -> { type, data }, data frozen). When `events` is read, the
   * parsed events take these `data` objects, so messages keep sharing them.
   */
  #payloads = new Map()
  /**
   * For events below `#objsFrom` that the session handed out and let go of:
   * a WeakRef to the object (by seq), so that while a caller still holds
   * it, `events` gives that same object.
   */
  #weak = []
  /** The idle hand-over is scheduled (see `#scheduleHandOver`). */
  #handOverDue = false
  /** Flushes under way: the idle hand-over waits for them (they hand the same texts over). */
  #handOverHolds = 0
  /** The native compressor is being watched (see `#compressSoon`). */
  #compressing = false
  #seq = 0
  /** Events `0..#synced` have their JSON text in the native log. */
  #synced = 0
  #eventsCache = undefined
  /** View of the native surface order (see the top of this file). */
  #nodes = []
  #generation = 0
  #surface
  /** Messages of `#nodes[0..#derivedNodes]` at `#derivedGeneration`. */
  #derived = []
  #derivedNodes = 0
  #derivedGeneration = 0
  #headerStale = true
  #headerCache = undefined
  #attachments = []
  #appending = false
  /** SPEC 9 checks (`{ invariants: true }`), or undefined. */
  #trace = undefined

  constructor(id, seed, header, options) {
    if (id === INTERNAL) {
      this.#adopt(seed, header)
      return
    }
    if (typeof id !== 'string') throw fail('session id must be a string', 'INVALID_ARGUMENT')
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
    this.#objsFrom = length
    this.#synced = length
    this.#loadNativeState()
    this.#compressSoon()
  }

  /** Wrap a native log whose events are not materialized in JS. */
  #adopt(native, objs) {
    this.#native = native
    this.#header = parseFrozen(native.headerJson())
    this.#id = this.#header.id
    this.#seq = native.length
    this.#synced = native.textsLength
    if (objs !== undefined && objs.length === this.#seq) {
      this.#objs = objs
      this.#objsFrom = 0
    } else {
      this.#objsFrom = this.#seq
    }
    this.#loadNativeState()
    this.#compressSoon()
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
    // The log is read on native threads; meanwhile this thread parses (and
    // freezes) the payloads of the events that enter the surface, which the
    // first derive reads (see src/log/resume.rs).
    const parsed = new Map()
    for (let batch = reading.next(); batch !== null; batch = reading.next()) {
      const flat = JSON.parse(batch.json)
      const seqs = batch.seqs
      for (let i = 0; i < seqs.length; i++) parsed.set(seqs[i], { type: flat[2 * i], data: deepFreeze(flat[2 * i + 1]) })
    }
    const result = reading.finish()
    if (!(result instanceof NativeSession)) {
      const error = fail(result.message, result.code)
      error.line = result.line
      throw error
    }
    const session = new Session(INTERNAL, result)
    if (parsed.size > 0) session.#materialize(session.#nodes, parsed)
    return session
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
      const payloads = this.#payloads
      const weak = this.#weak
      const head = []
      for (let from = 0; from < this.#objsFrom; from += EVENTS_SLICE) {
        const slice = JSON.parse(this.#native.eventsJson(from, Math.min(from + EVENTS_SLICE, this.#objsFrom)))
        for (let i = 0; i < slice.length; i++) {
          const seq = from + i
          // An event the session let go of that a caller still holds, or a
          // payload already handed out (in a message or the header), keeps
          // its identity.
          const held = weak[seq]?.deref()
          if (held !== undefined) {
            head.push(held)
            continue
          }
          const known = payloads.get(seq)
          if (known !== undefined && known.seq === seq) {
            head.push(known)
            continue
          }
          const e = slice[i]
          if (known !== undefined) e.data = known.data
          head.push(deepFreeze(e))
        }
      }
      this.#objs = head.concat(this.#objs)
      this.#objsFrom = 0
      payloads.clear()
      this.#weak = []
    }
    this.#eventsCache = freeze(this.#objs.slice())
    return this.#eventsCache
  }

  /** `{ type, data }` of the event at `seq`, data frozen (materialized: see `#materialize`). */
  #payloadAt(seq) {
    return seq >= this.#objsFrom ? this.#objs[seq - this.#objsFrom] : this.#payloads.get(seq)
  }

  /**
   * Parse, in one native call, the payloads of the events at `seqs` that JS
   * does not hold yet. Given `parsed` (seq -> { type, data }, data frozen,
   * parsed from the log's texts while it was read: `fromJsonl`), only those
   * it holds are taken, from there; the others wait for a derive.
   */
  #materialize(seqs, parsed) {
    const from = this.#objsFrom
    const payloads = this.#payloads
    const missing = []
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i]
      if (seq >= from || payloads.has(seq)) continue
      if (parsed === undefined) {
        missing.push(seq)
      } else {
        const known = parsed.get(seq)
        if (known !== undefined) payloads.set(seq, known)
      }
    }
    if (missing.length === 0) return
    const flat = JSON.parse(this.#native.payloadsJson(Uint32Array.from(missing)))
    for (let i = 0; i < missing.length; i++) {
      payloads.set(missing[i], { type: flat[2 * i], data: deepFreeze(flat[2 * i + 1]) })
    }
  }

  /**
   * The texts of the events not handed to the native log yet, a line each
   * (JSON.stringify never writes a raw newline), in UTF-8; null when none.
   * A store writes these bytes as they are.
   */
  #pending() {
    return this.#synced >= this.#seq ? null : this.#pendingPart(this.#synced, this.#seq)
  }

  /** `#pending` of events `from..to` only (a long flush builds it in parts). */
  #pendingPart(from, to) {
    return { from, to, bytes: Buffer.from(this.#pendingText(from, to), 'utf8') }
  }

  /** The texts of events `from..to`, a line each. */
  #pendingText(from, to) {
    const objs = this.#objs
    let text = ''
    for (let i = from - this.#objsFrom; i < to - this.#objsFrom; i++) text += `${JSON.stringify(objs[i])}\n`
    return text
  }

  /**
   * Hand `pending` (from `#pending`) to the native log, unless it already
   * has it. The objects whose texts it now holds are let go of on the next
   * idle turn (`#scheduleHandOver`), not here: a `WeakRef` keeps its target
   * alive until the job that made it ends, so making 100k of them inside a
   * caller's `toJsonl()` would hold them all, and slow every collection,
   * for as long as that caller runs.
   */
  #attach(pending) {
    if (pending === null || this.#synced !== pending.from) return
    this.#native.attachTexts(pending.bytes)
    this.#synced = pending.to
    if (!this.#handOverDue && this.#releasable() >= HANDOVER_AFTER) this.#scheduleHandOver()
    this.#compressSoon()
  }

  /**
   * Texts that wait to be compressed (full blocks of handed-over texts, a
   * JSONL read's buffer: `src/log/texts.rs`) are, on a native helper thread
   * once they hold 1 MiB, started by an unref'd timer (so a first derive
   * that follows at once has both cores); the timer then takes the result
   * once it is ready. The raw blocks it frees stay with the allocator for
   * the next load to reuse: giving them back costs that load its page
   * faults (7-9 ms on a 100k-event store open, for 4 MB of RSS).
   */
  #compressSoon() {
    // A timer keeps the session reachable until it fires: none for nothing.
    if (this.#compressing || !this.#native.textsToCompress()) return
    this.#compressing = true
    const poll = () => {
      if (this.#native.compressTexts()) this.#compressing = false
      else setTimeout(poll, 10).unref()
    }
    setTimeout(poll, 0).unref()
  }

  /**
   * Let go of the objects of events whose texts the native log holds,
   * keeping those a derive or the header fold reads (surface events and
   * request headers, as a seeded session does) and a WeakRef to each other
   * one; at most `RELEASE_SLICE` a call. Not while an `events` array is
   * current: it holds them anyway, and must stay the same object until the
   * next append.
   */
  #release() {
    const from = this.#objsFrom
    const to = Math.min(this.#synced, from + RELEASE_SLICE)
    if (to <= from || this.#eventsCache !== undefined) return
    const objs = this.#objs
    const payloads = this.#payloads
    const weak = this.#weak
    while (weak.length < from) weak.push(undefined)
    for (let seq = from; seq < to; seq++) {
      const e = objs[seq - from]
      if (readByFolds(e.type)) {
        payloads.set(seq, e)
        weak.push(undefined)
      } else {
        weak.push(new WeakRef(e))
      }
    }
    objs.splice(0, to - from)
    this.#objsFrom = to
  }

  /** Objects the session holds of events whose texts the native log has (0 while an `events` array is current). */
  #releasable() {
    return this.#eventsCache === undefined ? this.#synced - this.#objsFrom : 0
  }

  /**
   * The idle hand-over: on a turn of the event loop with nothing else to
   * run, the texts of up to `HANDOVER_SLICE` pending events go to the native
   * log and their objects are let go of (`#release`); again on the next
   * turn while enough are pending. A long session then holds about a
   * quarter of its log's size natively instead of every event as objects.
   */
  #scheduleHandOver() {
    this.#handOverDue = true
    // A timer, not an immediate: an unref'd immediate does not wake a
    // waiting event loop, an unref'd timer does (and neither keeps a
    // process alive for the hand-over).
    setTimeout(() => {
      this.#handOverDue = false
      if (this.#handOverHolds > 0) {
        this.#scheduleHandOver()
        return
      }
      try {
        this.#handOverSlice()
      } catch (error) {
        // The native log refused texts the session accepted: a bug. The
        // session keeps its objects (no more idle hand-overs), and the next
        // toJsonl or flush reports the same error to its caller.
        this.#handOverDue = true
        reportObserverError(error)
        return
      }
      NativeSession.releaseFreeMemory()
      // Again while enough are pending, or any are releasable (not while an
      // `events` array is current: the next append schedules that).
      if (this.#seq - this.#synced >= HANDOVER_AFTER || this.#releasable() > 0) this.#scheduleHandOver()
    }, 0).unref()
  }

  /** One step of the hand-over: up to `HANDOVER_SLICE` pending texts, then `#release`. */
  #handOverSlice() {
    const from = this.#synced
    const to = Math.min(this.#seq, from + HANDOVER_SLICE)
    if (to > from) this.#attach({ from, to, bytes: this.#pendingText(from, to) })
    this.#release()
  }

  /** Hand every pending event's text to the native log. */
  #sync() {
    this.#attach(this.#pending())
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
      if (metaCopy.sourceEventSeqs !== undefined || metaCopy.surfaceOp !== undefined) {
        metaJson = metaCopy.sourceEventSeqs === undefined && metaCopy.surfaceOp === 'append'
          ? '{"surfaceOp":"append"}'
          : JSON.stringify(metaCopy)
      }
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
    // Only surface events and headers need the native log now; every other
    // event reaches it with the next batch of texts (#sync).
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
    // A model step: the loop is about to wait for its model, which is when
    // the hand-over runs (also to let go of objects `events` brought back).
    if (!this.#handOverDue && this.#seq - this.#objsFrom >= HANDOVER_AFTER) this.#scheduleHandOver()
    if (this.#derivedGeneration !== this.#generation) {
      this.#derived = []
      this.#derivedNodes = 0
      this.#derivedGeneration = this.#generation
    }
    const nodes = this.#nodes
    const count = nodes.length
    const from = this.#derivedNodes
    if (from < count) {
      if (this.#objsFrom > 0) this.#materialize(from === 0 ? nodes : nodes.slice(from))
      const derived = this.#derived
      for (let i = from; i < count; i++) {
        const message = deriveFrozen(this.#payloadAt(nodes[i]))
        if (message !== null) derived.push(message)
      }
      this.#derivedNodes = count
    }
    return this.#derived.slice()
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
    this.#sync()
    return this.#native.toJsonl()
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
    this.#sync()
    const id = childId ?? `${this.#id}.fork-${randomUUID().slice(0, 8)}`
    const child = this.#native.fork(boundary, id, Date.now())
    const count = child.length
    const objs = this.#objsFrom === 0 ? this.#objs.slice(0, count) : undefined
    return new Session(INTERNAL, child, objs)
  }

  /** The native log and the seqs `from..to` whose texts it does not hold yet. */
  static #pendingRange(session) {
    return { native: session.#native, from: session.#synced, to: session.#seq }
  }

  static {
    internal.pendingRange = (session) => Session.#pendingRange(session)
    internal.pendingPart = (session, from, to) => session.#pendingPart(from, to)
    internal.attachPending = (session, pending) => session.#attach(pending)
    internal.wrapNative = (native) => new Session(INTERNAL, native)
    /** Hold the idle hand-over while a flush hands the same texts over; returns the release. */
    internal.holdHandOver = (session) => {
      session.#handOverHolds += 1
      let held = true
      return () => {
        if (held) session.#handOverHolds -= 1
        held = false
      }
    }
    /** The idle hand-over, now, until nothing is pending or releasable (tests). */
    internal.handOver = (session) => {
      do session.#handOverSlice()
      while (session.#synced < session.#seq || session.#releasable() > 0)
    }
  }
}


module.exports = { Session, internal }
