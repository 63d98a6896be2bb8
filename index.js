'use strict'
// dsh-session-native: the public JS API over the native core (binding.js).
//
// What lives here and why: JS values are snapshotted here (only JS can see
// getters, prototypes and sparse arrays), and JS keeps the frozen objects it
// has already handed out (events, messages, headers). Every rule about the
// log itself (envelope, surface, legacy vocabulary, derivation, repair) runs
// natively; results cross as JSON text, one call per operation.

const binding = require('./binding.js')
const { randomUUID } = require('node:crypto')

const { NativeSession } = binding
/** Types whose appends the native surface fold must see (the list lives in Rust). */
const SURFACE_TYPES = new Set(NativeSession.surfaceEligibleTypes())

const SESSION_FORMAT_VERSION = 0

// ---------------------------------------------------------------- errors

function fail(message, code) {
  const error = new Error(message)
  error.code = code
  return error
}

// ---------------------------------------------------------------- lossless JSON (SPEC 2)

const FAIL = Symbol('not lossless')
const ObjectPrototype = Object.prototype
const ArrayPrototype = Array.prototype
const { getPrototypeOf, keys: objectKeys, freeze, defineProperty } = Object
const { ownKeys } = Reflect
const isArray = Array.isArray
const hasOwn = Object.prototype.hasOwnProperty

/** An intrinsic `Object.prototype` of any realm (for values from vm contexts). */
function isForeignObjectPrototype(proto) {
  if (proto === null || getPrototypeOf(proto) !== null) return false
  const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value
  try {
    return typeof ctor === 'function' && ctor.name === 'Object' && ctor.prototype === proto
      && Function.prototype.toString.call(ctor) === 'function Object() { [native code] }'
  } catch {
    return false
  }
}

function isForeignArrayPrototype(proto) {
  if (!isArray(proto)) return false
  const ctor = Object.getOwnPropertyDescriptor(proto, 'constructor')?.value
  try {
    return typeof ctor === 'function' && ctor.name === 'Array' && ctor.prototype === proto
      && Function.prototype.toString.call(ctor) === 'function Array() { [native code] }'
      && isForeignObjectPrototype(getPrototypeOf(proto))
  } catch {
    return false
  }
}

/** How deeply a payload may nest arrays and objects (`MAX_NESTING` in src/scan.rs). */
const MAX_NESTING = 1000

/**
 * One pass that reads each property once, validates it and copies it:
 * returns the copy (deep-frozen when `frozen`) or FAIL. `path` holds the
 * ancestors; cycles are looked for once nesting gets deep (a cycle always
 * does), so ordinary payloads pay nothing for the check.
 */
function copyJson(value, frozen, path, depth) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return value
    case 'number':
      return Number.isFinite(value) && !(value === 0 && 1 / value < 0) ? value : FAIL
    case 'object':
      break
    default:
      return FAIL
  }
  if (value === null) return null
  // Deeper than the native reader reads (and than JSON.stringify reliably writes).
  if (depth >= MAX_NESTING) return FAIL
  if (depth > 24 && path.includes(value)) return FAIL
  path.push(value)
  let out
  if (isArray(value)) {
    const proto = getPrototypeOf(value)
    if (proto !== ArrayPrototype && !isForeignArrayPrototype(proto)) return FAIL
    const length = value.length
    if (ownKeys(value).length !== length + 1) return FAIL
    out = new Array(length)
    for (let i = 0; i < length; i++) {
      if (!hasOwn.call(value, i)) return FAIL
      const item = copyJson(value[i], frozen, path, depth + 1)
      if (item === FAIL) return FAIL
      out[i] = item
    }
  } else {
    const proto = getPrototypeOf(value)
    if (proto !== ObjectPrototype && proto !== null && !isForeignObjectPrototype(proto)) return FAIL
    const keys = objectKeys(value)
    if (ownKeys(value).length !== keys.length) return FAIL
    out = {}
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]
      const item = copyJson(value[key], frozen, path, depth + 1)
      if (item === FAIL) return FAIL
      if (key === '__proto__') {
        defineProperty(out, key, { value: item, enumerable: true, configurable: true, writable: true })
      } else {
        out[key] = item
      }
    }
  }
  path.pop()
  return frozen ? freeze(out) : out
}

function snapshot(value, frozen) {
  return copyJson(value, frozen, [], 0)
}

/** `snapshot` of a whole event: its payload may nest MAX_NESTING levels inside the envelope. */
function snapshotEvent(event, frozen) {
  return copyJson(event, frozen, [], -1)
}

function isJsonValue(value) {
  return copyJson(value, false, [], 0) !== FAIL
}

function snapshotJsonValue(value) {
  const copy = copyJson(value, false, [], 0)
  return copy === FAIL ? undefined : copy
}

/** Deep-freeze a tree freshly built by JSON.parse. */
function deepFreeze(value) {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    if (isArray(value)) {
      for (let i = 0; i < value.length; i++) deepFreeze(value[i])
    } else {
      for (const key in value) deepFreeze(value[key])
    }
    freeze(value)
  }
  return value
}

function parseFrozen(text) {
  return deepFreeze(JSON.parse(text))
}

/** Snapshot an array of events for a native bulk path; throws NOT_LOSSLESS_JSON. */
function snapshotEvents(events, what = 'event') {
  if (!isArray(events)) throw fail(`${what}s must be an array`, 'INVALID_ARGUMENT')
  const out = new Array(events.length)
  for (let i = 0; i < events.length; i++) {
    const copy = snapshotEvent(events[i], false)
    if (copy === FAIL) throw fail(`${what} at index ${i} is not losslessly JSON-serializable`, 'NOT_LOSSLESS_JSON')
    out[i] = copy
  }
  return JSON.stringify(out)
}

// ---------------------------------------------------------------- identity

function SessionId(id) {
  if (typeof id !== 'string') throw fail('session id must be a string', 'INVALID_ARGUMENT')
  return id
}

// ---------------------------------------------------------------- Session

const INTERNAL = Symbol('internal construction')
/** Events parsed per native call when `events` is first read. */
const EVENTS_SLICE = 8192
/** Internal hooks for the stores and tools of this package (not public API). */
const internal = { binding, snapshotEvents, parseFrozen }
const reportObserverError = (error) => {
  console.error('[dsh-session-native] session observer failed:', error)
}

class Session {
  /** Native log (texts, surface, header fold). */
  #native
  #id
  #header
  /** Frozen events held in JS for seqs `#objsFrom..#seq`. */
  #objs = []
  #objsFrom = 0
  #seq = 0
  /** Events `0..#synced` have their JSON text in the native log. */
  #synced = 0
  #eventsCache = undefined
  #nodes = []
  #generation = 0
  #surface
  #derived = []
  #derivedNodes = 0
  #derivedGeneration = 0
  #headerGeneration = 0
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
    const now = Date.now()
    let seedObjs = []
    let seedJson = null
    if (seed !== undefined && seed !== null) {
      if (!isArray(seed)) throw fail('session seed must be an array of events', 'INVALID_ARGUMENT')
      let bad = -1
      seedObjs = new Array(seed.length)
      for (let i = 0; i < seed.length; i++) {
        const copy = snapshotEvent(seed[i], true)
        if (copy === FAIL) {
          bad = i
          break
        }
        seedObjs[i] = copy
      }
      if (bad !== -1) {
        // An earlier event's error wins, as in a one-event-at-a-time check.
        NativeSession.create(id, JSON.stringify(seedObjs.slice(0, bad)), null, now)
        throw fail(`seed event at index ${bad} is not losslessly JSON-serializable`, 'NOT_LOSSLESS_JSON')
      }
      seedJson = JSON.stringify(seedObjs)
    }
    let headerObj
    let headerJson = null
    if (header !== undefined) {
      headerObj = snapshot(header, true)
      if (headerObj === FAIL) {
        // The seed is checked first: its error wins over the header's.
        if (seedJson !== null) NativeSession.create(id, seedJson, null, now)
        throw fail('session header is not losslessly JSON-serializable', 'INVALID_HEADER')
      }
      headerJson = JSON.stringify(headerObj)
    }
    const native = NativeSession.create(id, seedJson, headerJson, now)
    if (options?.invariants === true) this.#trace = binding.InvariantTrace.fromEventsJson(seedJson ?? '[]')
    this.#native = native
    this.#id = id
    this.#header = headerObj ?? parseFrozen(native.headerJson())
    this.#objs = seedObjs
    this.#seq = seedObjs.length
    this.#synced = seedObjs.length
    this.#loadNativeState()
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
    let input = text
    if (typeof input === 'string') {
      // V8 encodes a string to UTF-8 faster than napi's string conversion does.
      input = Buffer.from(input, 'utf8')
    } else {
      if (!(input instanceof Uint8Array)) {
        throw fail('Session.fromJsonl expects a string or a Buffer', 'INVALID_ARGUMENT')
      }
      if (!Buffer.isBuffer(input)) input = Buffer.from(input.buffer, input.byteOffset, input.byteLength)
    }
    const result = NativeSession.fromJsonl(input)
    if (!(result instanceof NativeSession)) {
      const error = fail(result.message, result.code)
      error.line = result.line
      throw error
    }
    return new Session(INTERNAL, result)
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
      const head = []
      for (let from = 0; from < this.#objsFrom; from += EVENTS_SLICE) {
        const slice = JSON.parse(this.#native.eventsJson(from, Math.min(from + EVENTS_SLICE, this.#objsFrom)))
        for (let i = 0; i < slice.length; i++) head.push(deepFreeze(slice[i]))
      }
      this.#objs = head.concat(this.#objs)
      this.#objsFrom = 0
    }
    this.#eventsCache = freeze(this.#objs.slice())
    return this.#eventsCache
  }

  /**
   * The texts of the events not handed to the native log yet, a line each
   * (JSON.stringify never writes a raw newline), in UTF-8; null when none.
   * A store writes these bytes as they are.
   */
  #pending() {
    if (this.#synced >= this.#seq) return null
    const objs = this.#objs
    let text = ''
    for (let i = this.#synced - this.#objsFrom; i < objs.length; i++) text += `${JSON.stringify(objs[i])}\n`
    return { from: this.#synced, to: this.#seq, bytes: Buffer.from(text, 'utf8') }
  }

  /** Hand `pending` (from `#pending`) to the native log, unless it already has it. */
  #attach(pending) {
    if (pending === null || this.#synced !== pending.from) return
    this.#native.attachTexts(pending.bytes)
    this.#synced = pending.to
  }

  /** Hand every pending event's text to the native log. */
  #sync() {
    this.#attach(this.#pending())
  }

  append(type, data, opts) {
    if (typeof type !== 'string') throw fail('session event type must be a string', 'INVALID_ARGUMENT')
    const dataCopy = snapshot(data, true)
    if (dataCopy === FAIL) {
      throw fail(`session event "${type}" carries non-JSON-serializable data`, 'NOT_LOSSLESS_JSON')
    }
    const native = this.#native
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
        metaJson = JSON.stringify(metaCopy)
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
    // Only surface events and headers need the native fold now; every other
    // event reaches the native log with the next batch of texts (#sync).
    const needsNative = metaJson !== null || dataText !== null || SURFACE_TYPES.has(type)
    const attachments = this.#attachments
    let effect = 0
    if (attachments.length === 0) {
      if (needsNative) effect = native.append(type, seq, metaJson, dataText)
    } else {
      if (needsNative) effect = native.prepare(type, seq, metaJson, dataText)
      this.#appending = true
      try {
        for (const a of attachments.slice()) {
          if (typeof a.beforeCommit === 'function') a.beforeCommit(event, this)
        }
      } catch (error) {
        if (needsNative) native.discardPrepared()
        if (trace !== undefined) trace.discard()
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

  #commit(event, effect) {
    const seq = event.seq
    if (effect === 1) {
      this.#nodes.push(seq)
    } else if (effect === 2) {
      const [startIdx, endIdx] = this.#native.lastReplace()
      this.#nodes.splice(startIdx, endIdx - startIdx + 1, seq)
      this.#generation += 1
    }
    this.#objs.push(event)
    this.#seq = seq + 1
    this.#eventsCache = undefined
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
    if (this.#derivedGeneration !== this.#generation) {
      this.#derived = []
      this.#derivedNodes = 0
      this.#derivedGeneration = this.#generation
    }
    const count = this.#nodes.length
    if (this.#derivedNodes < count) {
      this.#sync()
      const fresh = JSON.parse(this.#native.deriveJson(this.#derivedNodes))
      const derived = this.#derived
      for (let i = 0; i < fresh.length; i++) derived.push(deepFreeze(fresh[i]))
      this.#derivedNodes = count
    }
    return this.#derived.slice()
  }

  deriveEventMessage(event) {
    return deriveEventMessage(event)
  }

  requestHeader() {
    const generation = this.#native.requestHeaderGeneration
    if (generation === 0) return undefined
    if (generation !== this.#headerGeneration) {
      this.#headerCache = parseFrozen(this.#native.requestHeaderJson())
      this.#headerGeneration = generation
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

  /** The native log and the texts it does not hold yet (a store flush). */
  static #unsynced(session) {
    return { native: session.#native, pending: session.#pending() }
  }

  static {
    internal.unsynced = (session) => Session.#unsynced(session)
    internal.attachPending = (session, pending) => session.#attach(pending)
    internal.wrapNative = (native) => new Session(INTERNAL, native)
  }
}

// ---------------------------------------------------------------- free functions

function isSurfaceEligibleType(type) {
  return typeof type === 'string' && binding.isSurfaceEligibleType(type)
}

function isSurfaceEvent(event) {
  return event !== null && typeof event === 'object' && isSurfaceEligibleType(event.type)
    && event.surfaceOp !== undefined
}

function foldSurface(events) {
  const rows = new Array(events.length)
  for (let i = 0; i < events.length; i++) {
    const e = events[i]
    rows[i] = { type: e.type, seq: e.seq, surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }
  }
  return JSON.parse(binding.foldSurfaceJson(JSON.stringify(rows)))
}

function deriveEventMessage(event) {
  const text = binding.deriveEventJson(JSON.stringify(event))
  return text === null || text === undefined ? null : parseFrozen(text)
}

function renderContextContent(content, source, envelope) {
  const text = binding.renderContextContentJson(JSON.stringify(content), JSON.stringify(source), envelope ?? null)
  return text === null || text === undefined ? [] : JSON.parse(text)
}

function canonicalHeader(header) {
  return JSON.parse(binding.canonicalHeaderJson(JSON.stringify(header)))
}

function headerEquals(a, b) {
  return binding.headerEqualsJson(JSON.stringify(a), JSON.stringify(b))
}

function foldRequestHeader(events, from) {
  for (let i = events.length - 1; i >= 0; i--) {
    const e = events[i]
    if (e.type === 'request/header') return canonicalHeader(e.data.header)
  }
  return from
}

function interruptedTurnClosers(events) {
  // Each turn boundary resets the scan, so only the events from the last one matter.
  let from = 0
  for (let i = events.length - 1; i >= 0; i--) {
    const type = events[i].type
    if (type === 'turn/start' || type === 'turn/end') {
      from = i
      break
    }
  }
  return JSON.parse(binding.interruptedTurnClosersJson(JSON.stringify(events.slice(from))))
}

function checkSessionInvariants(events) {
  if (!isArray(events)) throw fail('events must be an array', 'INVALID_ARGUMENT')
  binding.checkSessionInvariantsJson(JSON.stringify(events))
}

module.exports = {
  Session,
  SessionId,
  SESSION_FORMAT_VERSION,
  isJsonValue,
  snapshotJsonValue,
  isSurfaceEligibleType,
  isSurfaceEvent,
  foldSurface,
  deriveEventMessage,
  renderContextContent,
  canonicalHeader,
  headerEquals,
  foldRequestHeader,
  interruptedTurnClosers,
  checkSessionInvariants,
}

defineProperty(module.exports, Symbol.for('dsh-session-native.internal'), { value: internal })

// The durable stores (SPEC 11). They are handed this module's exports, so a
// store and the sessions it flushes share one Session class even when a
// loader evaluates index.js twice.
const stores = require('./lib/stores.js')
stores.useCore(module.exports)
module.exports.JsonlSessionStore = stores.JsonlSessionStore
module.exports.SqliteSessionStore = stores.SqliteSessionStore
