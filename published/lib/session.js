// The published line's Session (docs/PUBLISHED.md, PUB 4-8): the log as the
// events' own frozen objects, over the one native core in its `published`
// vocabulary.
//
// Who owns what (one owner each):
// - the event objects: this class (`#events`), for the session's life; a
//   restore's events are the caller's own objects, frozen in place (PUB 4.1);
// - the surface (order, `replaceGeneration`, every transition rule, the seed
//   and header checks): the native log. `#nodes` is a view of its order,
//   changed only by the effect an append returns;
// - the derived messages, the request header and context folds: this class,
//   each event folded once (PUB 7, 8).
// A live event reaches native code only when it may touch the surface (an
// eligible type, or one that carries surface metadata). The publication seam
// (SPEC 10) is the one store entry a session is attached to (lib/service.js).

import { NativeSession, binding, fail } from './native.js'
import { snapshotFrozenJsonValue, deepFreezeFresh } from './json.js'
import { deriveEventMessage } from './surface.js'
import { foldRequestHeader } from './request-header.js'

const VOCABULARY = 'published'
/** Bits of the effect `NativeSession.append` returns. */
const EFFECT_SURFACE = 3
const EFFECT_APPEND = 1
const EFFECT_REPLACE = 2
/** A seed reaches the native checks in slices of this many events. */
const SEED_SLICE = 4096
const RESTORE = Symbol('restore')
const { freeze, getPrototypeOf } = Object

/** Set by the class's static block: attach the store entry `hooks` to `session` (see lib/service.js). */
export let attachSeam

/**
 * The types whose `data` the native seed checks read (the surface's, and the
 * request header's provider/model checks, PUB 4.2). Every other seed event
 * reaches them as its envelope with a stand-in `data`: its payload is the
 * session's own object, never written from the native log, and is not turned
 * into text (a 20,000-deep payload has no JSON text JSON.stringify can make).
 */
const SURFACE_TYPES = new Set(NativeSession.surfaceEligibleTypes(VOCABULARY))
const READS_DATA = new Set([...SURFACE_TYPES, 'request/header'])

/** The keys, in order, of an envelope whose text `checkedText` writes directly. */
const ENVELOPE_KEYS = ['type', 'seq', 'time', 'data']
/** `{"type":<type>,"seq":` by type: the start of an envelope's text. */
const envelopeStarts = new Map()

/** The JSON text of seed event `event` that the native checks read. */
function checkedText(event) {
  const type = event?.type
  if (READS_DATA.has(type)) return JSON.stringify(event)
  // An event of exactly the keys `type, seq, time, data`, in that order, is
  // written directly (most of a log: chunks, steps, turns); the text is the
  // same JSON.stringify gives the envelope below.
  let keys = 0
  for (const key in event) {
    if (key !== ENVELOPE_KEYS[keys]) {
      keys = -1
      break
    }
    keys++
  }
  if (keys === 4 && typeof type === 'string' && event.data !== undefined) {
    let start = envelopeStarts.get(type)
    if (start === undefined) envelopeStarts.set(type, (start = `{"type":${JSON.stringify(type)},"seq":`))
    return `${start}${JSON.stringify(event.seq)},"time":${JSON.stringify(event.time)},"data":0}`
  }
  const { data, ...envelope } = event
  if (data !== undefined) envelope.data = 0
  return JSON.stringify(envelope)
}

/** The TypeError the TypeScript core throws on reading `type` of a null seed entry. */
const nullEntry = () => new TypeError("Cannot read properties of null (reading 'type')")

export class Session {
  #native
  #events = []
  #snapshot = undefined
  #nodes = []
  #surface
  #seam = undefined
  #appending = false
  #headerFold = undefined
  #headerSeq = 0
  #contextFold = undefined
  #contextSeq = 0
  #derived = []
  #derivedNodes = 0
  #derivedGeneration = 0

  /** PUB 4.1: validates and snapshots the borrowed seed and header. */
  static create(id, seed, header) {
    return new Session(id, seed, header)
  }

  /** PUB 4.1: takes ownership of fresh graphs; validates the header, then the seed, and freezes them in place. */
  static fromRestore(id, seed, header) {
    return new Session(id, seed, header, RESTORE)
  }

  constructor(id, seed, header, mode) {
    const now = Date.now()
    const native = NativeSession.create(id, now, VOCABULARY)
    this.#native = native
    if (mode === RESTORE) {
      this.header = this.#restoreHeader(header)
      if (seed !== undefined) this.#seed(seed, true)
    } else {
      if (seed !== undefined) this.#seed(seed, false)
      this.header = header === undefined ? freeze({ version: 0, id, createdAt: now }) : this.#createHeader(header)
    }
    const nodes = this.#nodes
    for (const seq of native.surfaceNodes()) nodes.push(seq)
    this.#surface = freeze({
      get nodes() { return nodes },
      get replaceGeneration() { return native.replaceGeneration },
    })
    this.firstLiveSeq = this.#events.length
    if (seed !== undefined && this.#events.at(-1)?.type !== 'session/end-seed') this.append('session/end-seed', {})
  }

  #createHeader(header) {
    const copy = snapshotFrozenJsonValue(header)
    if (copy === undefined) throw fail('session header is not losslessly JSON-serializable', 'NOT_LOSSLESS_JSON')
    this.#native.setHeader(JSON.stringify(copy))
    return copy
  }

  #restoreHeader(header) {
    const proto = header !== null && typeof header === 'object' ? getPrototypeOf(header) : undefined
    if (proto !== Object.prototype && proto !== null) {
      throw fail('session header is not a plain JSON record', 'INVALID_HEADER')
    }
    this.#native.setHeader(JSON.stringify(header))
    return deepFreezeFresh(header)
  }

  /**
   * Check the seed (PUB 4.2) in order: each entry's own checks come before
   * any later entry's, so an entry JS refuses (not lossless, or null) is
   * reported only after the native checks of the entries before it passed.
   */
  #seed(seed, restore) {
    const events = []
    let refused
    // `entries()`, as the TypeScript core reads a seed: a hole is an undefined entry.
    for (const [, entry] of seed.entries()) {
      const copy = restore ? entry : snapshotFrozenJsonValue(entry)
      if (copy === undefined || copy === null) {
        const index = events.length
        refused = copy === null
          ? nullEntry
          : () => fail(`seed event at index ${index} is not losslessly JSON-serializable`, 'NOT_LOSSLESS_JSON')
        break
      }
      events.push(copy)
    }
    const native = this.#native
    // A long seed is checked on the native seed helper, a slice while JS
    // writes the text of the next; `finishSeed` waits and throws the first error.
    const helped = events.length > SEED_SLICE
    for (let from = 0; from < events.length; from += SEED_SLICE) {
      native.seedJson(`[${events.slice(from, from + SEED_SLICE).map(checkedText).join(',')}]`, helped)
    }
    native.finishSeed()
    if (refused !== undefined) throw refused()
    const log = this.#events
    // A restored graph is the caller's, handed over fresh (as JSON.parse
    // makes it): frozen in place, down to any part that is frozen already.
    for (const event of events) log.push(restore ? deepFreezeFresh(event) : event)
  }

  get id() { return this.header.id }
  get seq() { return this.#events.length }
  get surface() { return this.#surface }

  /** A frozen array of the log, reused until the next append. */
  get events() {
    this.#snapshot ??= freeze(this.#events.slice())
    return this.#snapshot
  }

  /** PUB 5 (SPEC 4 steps 1-7). */
  append(type, data, opts) {
    const meta = {}
    if (opts?.sourceEventSeqs !== undefined) meta.sourceEventSeqs = opts.sourceEventSeqs
    if (opts?.surfaceOp !== undefined) meta.surfaceOp = opts.surfaceOp
    const copy = snapshotFrozenJsonValue(data)
    if (copy === undefined) throw fail(`session event "${type}" carries non-JSON-serializable data`, 'NOT_LOSSLESS_JSON')
    if (type === 'request/header' || type === 'request/header-delta') binding.checkLegacy(type, JSON.stringify(copy))
    const metaCopy = snapshotFrozenJsonValue(meta)
    if (metaCopy === undefined) {
      throw fail(`session event "${type}" carries non-JSON-serializable surface metadata`, 'NOT_LOSSLESS_JSON')
    }
    if (this.#appending) {
      throw fail('session append cannot reenter while another append is being published', 'REENTRANT_APPEND')
    }
    const seq = this.#events.length
    const event = freeze({ type, seq, time: Date.now(), data: copy, ...metaCopy })
    const hasMeta = metaCopy.sourceEventSeqs !== undefined || metaCopy.surfaceOp !== undefined
    const native = this.#native
    const needsNative = hasMeta || SURFACE_TYPES.has(type)
    const seam = this.#seam
    const held = seam !== undefined
    // Of a live event's payload the native log reads only a tool/result's
    // (the replacement rule compares it with the node it replaces, PUB 6).
    const effect = needsNative
      ? native.append(type, seq, hasMeta ? JSON.stringify(metaCopy) : null, type === 'tool/result' ? JSON.stringify(copy) : null, held)
      : 0
    if (held) {
      this.#appending = true
      try {
        seam.beforeCommit(event)
      } catch (error) {
        if (needsNative) native.release(false)
        this.#appending = false
        seam.onVeto(error, event)
        throw error
      }
      if (needsNative) native.release(true)
    }
    this.#commit(event, effect)
    if (held) {
      try {
        seam.afterCommit(event)
      } finally {
        this.#appending = false
      }
    }
    return event
  }

  #commit(event, effect) {
    const surface = effect & EFFECT_SURFACE
    if (surface === EFFECT_APPEND) {
      this.#nodes.push(event.seq)
    } else if (surface === EFFECT_REPLACE) {
      const [start, end] = this.#native.lastReplace()
      this.#nodes.splice(start, end - start + 1, event.seq)
    }
    this.#events.push(event)
    this.#snapshot = undefined
  }

  /** PUB 8: the header in force after the last `request/header`, folded once per event. */
  requestHeader() {
    const log = this.#events
    if (this.#headerSeq < log.length) {
      this.#headerFold = deepFreezeFresh(foldRequestHeader(log.slice(this.#headerSeq), this.#headerFold))
      this.#headerSeq = log.length
    }
    return this.#headerFold
  }

  /** PUB 8: a frozen shallow copy of the latest `request/context` payload. */
  requestContext() {
    const log = this.#events
    for (; this.#contextSeq < log.length; this.#contextSeq++) {
      const event = log[this.#contextSeq]
      if (event.type === 'request/context') this.#contextFold = deepFreezeFresh({ ...event.data })
    }
    return this.#contextFold
  }

  /** PUB 7: the log's own message objects, one projection per surface node, rebuilt after a replace. */
  deriveMessages() {
    const nodes = this.#nodes
    const generation = this.#native.replaceGeneration
    if (generation !== this.#derivedGeneration) {
      this.#derived = []
      this.#derivedNodes = 0
      this.#derivedGeneration = generation
    }
    const log = this.#events
    for (let at = this.#derivedNodes; at < nodes.length; at++) {
      const message = deriveEventMessage(log[nodes[at]])
      if (message) this.#derived.push(message)
    }
    this.#derivedNodes = nodes.length
    return this.#derived.slice()
  }

  deriveEventMessage(event) {
    return deriveEventMessage(event)
  }

  static {
    attachSeam = (session, hooks) => {
      session.#seam = hooks
      return () => {
        if (session.#seam === hooks) session.#seam = undefined
      }
    }
  }
}
