'use strict'
// The Session class (SPEC 3-6, 10): a thin facade over two parts, each the
// one owner of its state (their first screens say more):
//
// - `#events` (lib/core/events.js): the native log (texts of the events it
//   was given, the surface, the header fold, the session header) and the
//   frozen events appended here, which JS owns.
// - `#derived` (lib/core/derived.js): the derived messages per surface
//   node, in an explicit state (fresh / stale / borrowed).
//
// The facade holds what appends change and JS reads: `#nodes` (a view of
// the native surface order, changed only by the effect an append returns),
// the cached request header (stale when an effect says the fold moved),
// the attachments (SPEC 10) and the SPEC 9 trace. Every way of building a
// session (a seed, a continuation `from` another session, `fromJsonl`, a
// store's open, a shared or a detached fork) makes a parts object and goes
// through one factory, `#init`. The stores, the service and the CLI reach
// a session's parts by name through lib/core/handle.js.

const binding = require('../../binding.js')
const { randomUUID } = require('node:crypto')
const path = require('node:path')
const { fail, snapshot, deepFreeze, parseFrozen, FAIL } = require('./json.js')
const { deriveEventMessage } = require('./derive.js')
const { canonicalForm } = require('./header.js')
const { Events, SURFACE_TYPES, limits, surfaceMetaJson, headerCopy, seedParts } = require('./events.js')
const { Derived } = require('./derived.js')

const { JsonlReading } = binding
const { freeze } = Object

/** Bits of the effect `NativeSession.append` returns. */
const EFFECT_SURFACE = 3
const EFFECT_APPEND = 1
const EFFECT_REPLACE = 2
const EFFECT_HEADER = 4

const INTERNAL = Symbol('internal construction')
const reportObserverError = (error) => console.error('[dsh-session-native] session observer failed:', error)
/** Call an observer's hook: what it throws is reported, never thrown. */
const guarded = (call) => {
  try {
    call()
  } catch (error) {
    reportObserverError(error)
  }
}
/** Set by the class's static block (they read its private fields). */
let partsOf, build

/**
 * A JSONL log reaches the native reader in parts, which it copies into pieces
 * of whole lines and reads and folds as each piece is complete (see
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

class Session {
  #events
  #derived
  #id
  #header
  /** View of the native surface order (see the top of this file). */
  #nodes = []
  #surface
  #headerStale = true
  #headerCache = undefined
  #attachments = []
  #appending = false
  /** SPEC 9 checks (`{ invariants: true }`), or undefined. */
  #trace = undefined

  constructor(id, seed, header, options) {
    if (id === INTERNAL) {
      this.#init(seed)
    } else if (typeof id !== 'string') {
      throw fail('session id must be a string', 'INVALID_ARGUMENT')
    } else if (seed instanceof Session && options?.invariants !== true) {
      this.#init(seed.#continuation(id, header))
    } else {
      this.#init(seedParts(id, seed instanceof Session ? seed.events : seed, header, options?.invariants === true))
    }
  }

  /**
   * The one factory. `parts`: a native log (`native`) and what JS holds of
   * it (`Events`: `live`, `cached`, `payloads`); `header` when already
   * parsed; `trace`; `parent`, a session to start from (the payloads it
   * parsed and the messages it derived for the surface nodes they share),
   * or to copy those messages from when `detached`.
   */
  #init({ native, live, cached, payloads, header, trace, parent, detached = false }) {
    const events = new Events(native, live, cached, payloads)
    this.#events = events
    this.#header = header ?? parseFrozen(native.headerJson())
    this.#id = this.#header.id
    this.#trace = trace
    const nodes = this.#nodes
    const surfaceNodes = native.surfaceNodes()
    for (let i = 0; i < surfaceNodes.length; i++) nodes.push(surfaceNodes[i])
    this.#surface = freeze({ get nodes() { return nodes }, get replaceGeneration() { return native.replaceGeneration } })
    this.#derived = new Derived(nodes, events)
    if (parent !== undefined) {
      if (!detached) events.sharePayloads(parent.#events)
      this.#derived.shareFrom(parent.#derived, detached)
    }
  }

  /**
   * The parts of a session holding this one's whole log under `id` and
   * `header` (a resume: `ctx.sessions.create(id, { from: await
   * store.open(id) })`), without checking it event by event again: the
   * log's texts are shared, its surface replayed from the kept surface
   * ops, this session's own events and what it derived (frozen) taken as
   * they are. A store that knew this log as its stored log knows the new
   * one's (the native token moves there; this one gets a new one, and a
   * store it wrote compares it in full before writing it again).
   */
  #continuation(id, header) {
    const headerText = JSON.stringify(header === undefined ? { version: 0, id, createdAt: Date.now() } : headerCopy(header))
    const parts = this.#events.forkParts(this.#events.seq, id, false)
    parts.native.setHeader(headerText)
    parts.native.takeToken(this.#events.native)
    return { ...parts, parent: this }
  }

  static fromJsonl(text) {
    // A whole log in a Buffer is read where it is (the native log takes its
    // texts compressed, no copy made); memory another thread may write
    // meanwhile (a SharedArrayBuffer) is copied first.
    let reading
    if (typeof text === 'string') {
      reading = text.length < JSONL_PIECE ? new JsonlReading(Buffer.from(text, 'utf8')) : readPieces(text)
    } else if (text instanceof Uint8Array) {
      const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength)
      reading = new JsonlReading(text.buffer instanceof SharedArrayBuffer ? Buffer.from(bytes) : bytes)
    } else {
      throw fail('Session.fromJsonl expects a string or a Buffer', 'INVALID_ARGUMENT')
    }
    // The log is read natively (src/log/resume.rs); a defective
    // log throws its error (`code`, `line`) from here, and the read lets
    // the caller's Buffer go before anything else runs.
    return new Session(INTERNAL, { native: reading.finish() })
  }

  get id() { return this.#id }
  get header() { return this.#header }
  get seq() { return this.#events.seq }
  get surface() { return this.#surface }
  get events() { return this.#events.all() }

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
    const native = this.#events.native
    // The legacy vocabulary rule needs the payload of request/header* events.
    let dataText = null
    if (type.startsWith('request/header')) {
      dataText = JSON.stringify(dataCopy)
      binding.checkLegacy(type, dataText)
    }
    let metaCopy
    if (opts !== undefined && opts !== null) {
      const meta = {}
      if (opts.sourceEventSeqs !== undefined) meta.sourceEventSeqs = opts.sourceEventSeqs
      if (opts.surfaceOp !== undefined) meta.surfaceOp = opts.surfaceOp
      metaCopy = snapshot(meta, true)
      if (metaCopy === FAIL) {
        throw fail(`session event "${type}" carries non-JSON-serializable surface metadata`, 'NOT_LOSSLESS_JSON')
      }
    }
    if (this.#appending) {
      throw fail('session append cannot reenter while another append is being published', 'REENTRANT_APPEND')
    }
    const seq = this.#events.seq
    const event = { type, seq, time: Date.now(), data: dataCopy }
    if (metaCopy !== undefined) Object.assign(event, metaCopy)
    freeze(event)
    const metaJson = metaCopy === undefined ? null : surfaceMetaJson(metaCopy)
    const trace = this.#trace
    if (trace !== undefined) trace.check(JSON.stringify(event))
    // Only surface events and headers change native state (the surface,
    // the header fold); every other live event is JS's alone. With
    // attachments, the append is held until they let it through.
    const needsNative = metaJson !== null || dataText !== null || SURFACE_TYPES.has(type)
    const attachments = this.#attachments
    const held = attachments.length !== 0
    const effect = needsNative ? native.append(type, seq, metaJson, dataText, held) : 0
    if (held) {
      this.#appending = true
      const hooks = attachments.slice()
      let ran = 0
      try {
        for (; ran < hooks.length; ran++) {
          const a = hooks[ran]
          if (typeof a.beforeCommit === 'function') a.beforeCommit(event, this)
        }
      } catch (error) {
        if (needsNative) native.release(false)
        if (trace !== undefined) trace.discard()
        // Each attachment the append reached, the vetoing one included, learns of the veto.
        for (const a of hooks.slice(0, ran + 1)) {
          if (typeof a.onVeto === 'function') guarded(() => a.onVeto(error, event, this))
        }
        this.#appending = false
        throw error
      }
      if (needsNative) native.release(true)
    }
    this.#commit(event, effect)
    if (trace !== undefined) trace.commit()
    if (held) {
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
      const [startIdx, endIdx] = this.#events.native.lastReplace()
      this.#nodes.splice(startIdx, endIdx - startIdx + 1, seq)
      this.#derived.forget(startIdx, endIdx)
    }
    if ((effect & EFFECT_HEADER) !== 0) this.#headerStale = true
    this.#events.push(event)
  }

  #notify(attachment, event) {
    const report = (error) => guarded(() => {
      if (typeof attachment.onObserverError === 'function') attachment.onObserverError(error, event, this)
      else reportObserverError(error)
    })
    if (typeof attachment.afterCommit !== 'function') return
    try {
      const result = attachment.afterCommit(event, this)
      if (result !== null && typeof result === 'object' && typeof result.then === 'function') result.then(undefined, report)
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
    if (this.#events.prefix > 0) this.#events.native.settle()
    this.#derived.upTo(this.#nodes.length)
    return this.#derived.list.slice()
  }

  deriveEventMessage(event) {
    return deriveEventMessage(event)
  }

  requestHeader() {
    if (this.#headerStale) {
      const seq = this.#events.native.requestHeaderSeq
      if (seq < 0) {
        this.#headerCache = undefined
      } else {
        this.#events.materialize([seq])
        this.#headerCache = deepFreeze(canonicalForm(this.#events.payloadAt(seq).data.header))
      }
      this.#headerStale = false
    }
    return this.#headerCache
  }

  toJsonl() {
    const limit = limits.stringLimit
    const events = this.#events
    const head = events.native.toJsonl(limit)
    let live
    try {
      live = events.liveLines(events.prefix, events.seq)
    } catch (error) {
      if (!(error instanceof RangeError)) throw error
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
    const events = this.#events
    const source = events.native.flushSource()
    const parts = await events.liveParts(events.prefix, events.seq)
    return binding.writeJsonl(source, path.resolve(file), parts)
  }

  fork(boundary, childId) {
    // The boundary's errors win over the child id's (the rule: `log::fork_end`).
    const end = this.#events.forkEnd(this.#id, boundary, false)
    if (childId !== undefined && typeof childId !== 'string') {
      throw fail('fork child id must be a string', 'INVALID_ARGUMENT')
    }
    const id = childId ?? `${this.#id}.fork-${randomUUID().slice(0, 8)}`
    return new Session(INTERNAL, { ...this.#events.forkParts(end, id, false), parent: this })
  }

  static {
    /** For lib/core/handle.js: a session's parts, a session over parts. */
    partsOf = (session) => ({ events: session.#events, derived: session.#derived })
    build = (parts) => new Session(INTERNAL, parts)
  }
}

module.exports = { Session, partsOf, build }
