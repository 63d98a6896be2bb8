'use strict'
// A session's events (SPEC 3-4): who holds which. Owned by one Session
// (its `#events`); lib/core/handle.js reads it for the stores and service.
//
// - Events given as text (a seed, a read, a fork's copy), seqs `0..prefix`:
//   the native log (`NativeSession`) owns their texts, kinds, times and
//   surface ops, and with them the surface, the header fold and the session
//   header. JS parses a payload only when a derive or the header fold reads
//   it (`payloads`), and every event when `events` is first read (then
//   `objsFrom` is 0, and the payloads parsed before keep their identities).
// - Events appended here (live), seqs `prefix..seq`: JS owns the frozen
//   objects `append` returned (`objs`). Their texts are built only when
//   written (a store's flush, `toJsonl`), a line each, and not kept.
// An event is never edited, so every object parsed here is a cache of a text.

const binding = require('../../binding.js')
const { NativeSession, InvariantTrace } = binding
const { FAIL, fail, snapshot, snapshotEvent, deepFreeze, parseFrozen, copyFrozen } = require('./json.js')
const { forkEnd } = require('./fork-end.js')

const { freeze } = Object
/** Types whose appends the native surface fold must see (the list lives in Rust). */
const SURFACE_TYPES = new Set(NativeSession.surfaceEligibleTypes())
/** Whether a derive or the header fold reads events of this type (JS keeps their objects). */
const readByFolds = (type) => SURFACE_TYPES.has(type) || type === 'request/header'
/** Seed events checked and handed over per native call. */
const SEED_SLICE = 2048
/** Events parsed per native call when `events` is first read. */
const EVENTS_SLICE = 8192
/** Live events whose texts are built per event-loop turn: a few ms of `JSON.stringify` (why this many: benchmark/README.md). */
const LIVE_PART_EVENTS = 1024
const nextTurn = () => new Promise((resolve) => setImmediate(resolve))
/** `stringLimit`: the longest string `toJsonl()` makes (V8's limit; tests lower it). */
const limits = { stringLimit: 0x1fffffe8 }

/** The native form of an event's surface fields (`{surfaceOp?, sourceEventSeqs?}`), or null. */
function surfaceMetaJson(meta) {
  if (meta.sourceEventSeqs === undefined && meta.surfaceOp === undefined) return null
  if (meta.sourceEventSeqs === undefined && meta.surfaceOp === 'append') return '{"surfaceOp":"append"}'
  const out = {}
  if (meta.sourceEventSeqs !== undefined) out.sourceEventSeqs = meta.sourceEventSeqs
  if (meta.surfaceOp !== undefined) out.surfaceOp = meta.surfaceOp
  return JSON.stringify(out)
}

/** A lossless frozen copy of a session header, or INVALID_HEADER. */
function headerCopy(header) {
  const copy = snapshot(header, true)
  if (copy === FAIL) throw fail('session header is not losslessly JSON-serializable', 'INVALID_HEADER')
  return copy
}

/**
 * The parts of a session built from a seed (`new Session(id, seed, header,
 * options)`): a native log holding the seed's texts, the payloads the folds
 * read (frozen), the header, and the SPEC 9 trace when `invariants`. The
 * seed is checked and handed over in slices: each slice's copies die young,
 * no transient holds the whole seed, and a long seed's slices are checked on
 * a native helper thread while this one copies the next.
 */
function seedParts(id, seed, header, invariants) {
  if (seed !== undefined && seed !== null && !Array.isArray(seed)) {
    throw fail('session seed must be an array of events', 'INVALID_ARGUMENT')
  }
  const native = NativeSession.create(id, Date.now())
  const length = seed?.length ?? 0
  const payloads = new Map()
  const traced = invariants ? [] : undefined
  const helped = length > SEED_SLICE
  try {
    for (let from = 0; from < length; from += SEED_SLICE) {
      const to = Math.min(length, from + SEED_SLICE)
      const copies = []
      for (let i = from; i < to; i++) {
        const copy = snapshotEvent(seed[i], false)
        if (copy === FAIL) {
          // An earlier event's error wins, as in a one-event-at-a-time check.
          native.seedJson(JSON.stringify(copies), helped)
          throw fail(`seed event at index ${i} is not losslessly JSON-serializable`, 'NOT_LOSSLESS_JSON')
        }
        copies.push(copy)
      }
      const text = JSON.stringify(copies)
      native.seedJson(text, helped)
      if (traced !== undefined) traced.push(text)
      for (let k = 0; k < copies.length; k++) {
        const e = copies[k]
        if (readByFolds(e.type)) payloads.set(from + k, { type: e.type, data: deepFreeze(e.data) })
      }
    }
  } catch (error) {
    // While the helper still checks earlier slices (a copy refused, a
    // throwing getter): an earlier event's error wins, and no helper
    // thread is left waiting.
    native.finishSeed()
    throw error
  }
  native.finishSeed()
  // The seed is checked first: its error wins over the header's.
  const headerObj = header === undefined ? undefined : headerCopy(header)
  if (headerObj !== undefined) native.setHeader(JSON.stringify(headerObj))
  let trace
  if (traced !== undefined) {
    trace = InvariantTrace.fromEventsJson('[]')
    for (const text of traced) trace.extend(text)
  }
  return { native, payloads, header: headerObj ?? parseFrozen(native.headerJson()), trace }
}

class Events {
  /**
   * `native`: the native log, holding texts of events `0..prefix` (fixed
   * once built), then `live` (frozen events after them, whose effects the
   * log already applied: a fork). `objs`: the frozen events JS holds, seqs
   * `objsFrom..seq` (`objsFrom` is `prefix`, or 0 once all are held: given
   * `cached`, the objects a fork's parent parsed of the texts). `payloads`:
   * those of events below `objsFrom` that a derive or the header fold read
   * (seq -> { type, data }, data frozen); when `events` is read, the parsed
   * events take their `data`, so messages keep sharing them. `list`: the
   * frozen `events` array, until the next append.
   */
  constructor(native, live = [], cached = undefined, payloads = new Map()) {
    this.native = native
    this.prefix = native.length
    const all = cached !== undefined && cached.length === this.prefix
    this.objs = all ? cached.concat(live) : live
    this.objsFrom = all ? 0 : this.prefix
    this.seq = this.prefix + live.length
    this.payloads = payloads
    this.list = undefined
  }

  /** `{ type, data }` of the event at `seq`, data frozen (materialized: see `materialize`). */
  payloadAt(seq) {
    return seq >= this.objsFrom ? this.objs[seq - this.objsFrom] : this.payloads.get(seq)
  }

  /** `forkEnd` of this session's events. */
  forkEnd(id, boundary, service) {
    const typeAt = (seq) => {
      if (seq >= this.objsFrom) return this.objs[seq - this.objsFrom].type
      // A text's type, read without its payload (held: `data` null).
      return JSON.parse(this.native.eventsJson(seq, seq + 1, Uint32Array.of(seq)))[0].type
    }
    return forkEnd(id, boundary, this.seq, (seq) => seq, typeAt, service)
  }

  /** Keep an appended event. */
  push(event) {
    this.objs.push(event)
    this.seq += 1
    this.list = undefined
  }

  /** Parse, in one native call, the payloads of the events at `seqs` that JS does not hold yet. */
  materialize(seqs) {
    const from = this.objsFrom
    const payloads = this.payloads
    const missing = []
    for (let i = 0; i < seqs.length; i++) {
      const seq = seqs[i]
      if (seq < from && !payloads.has(seq)) missing.push(seq)
    }
    if (missing.length === 0) return
    // The native log gives `[type, data, type, data, ...]` of them.
    const flat = JSON.parse(this.native.payloads(Uint32Array.from(missing)))
    for (let i = 0; i < missing.length; i++) payloads.set(missing[i], { type: flat[2 * i], data: deepFreeze(flat[2 * i + 1]) })
  }

  /** Every event, frozen (`Session#events`). */
  all() {
    if (this.list !== undefined) return this.list
    if (this.objsFrom > 0) {
      // In slices: the JSON text of a whole long log at once would be a
      // transient as large as the log, twice (native and JS).
      // A payload already parsed (for a message or the header) keeps its
      // identity, and its text crosses without it (`data` null).
      const payloads = this.payloads
      const held = Uint32Array.from(payloads.keys()).sort()
      const head = []
      for (let from = 0; from < this.objsFrom; from += EVENTS_SLICE) {
        const slice = JSON.parse(this.native.eventsJson(from, Math.min(from + EVENTS_SLICE, this.objsFrom), held))
        for (let i = 0; i < slice.length; i++) {
          const e = slice[i]
          const known = payloads.get(from + i)
          if (known !== undefined) e.data = known.data
          head.push(deepFreeze(e))
        }
      }
      this.objs = head.concat(this.objs)
      this.objsFrom = 0
      payloads.clear()
    }
    this.list = freeze(this.objs.slice())
    return this.list
  }

  /** The texts of live events `from..to` (`from` at least `prefix`), a line each. */
  liveLines(from, to) {
    if (to <= from) return ''
    // One join, not `+=`: a flat string, which UTF-8 encodes at twice the
    // speed of a rope of concatenations (benchmark/README.md).
    const objs = this.objs
    const lines = []
    for (let i = from - this.objsFrom; i < to - this.objsFrom; i++) lines.push(JSON.stringify(objs[i]))
    lines.push('')
    return lines.join('\n')
  }

  /**
   * The texts of live events `from..to`, as UTF-8 parts built a part per
   * event-loop turn (a live session of a million events would otherwise
   * stringify them all at once on the main thread).
   */
  async liveParts(from, to) {
    const parts = []
    for (let a = from; a < to; a += LIVE_PART_EVENTS) {
      if (a > from) await nextTurn()
      parts.push(Buffer.from(this.liveLines(a, Math.min(to, a + LIVE_PART_EVENTS)), 'utf8'))
    }
    return parts
  }

  /**
   * What a session holding events `0..end` under `id` is built from: a
   * native log (the texts it holds, shared when all, then the live events'
   * surface and header effects replayed), the live events up to `end`, and
   * the objects parsed of the texts when all are held; `detached` (the
   * service's fork, SPEC 12.6), copies of the live events and none of the
   * objects parsed.
   */
  forkParts(end, id, detached) {
    const prefix = Math.min(end, this.prefix)
    const native = this.native.forkPrefix(prefix, id, Date.now(), end)
    for (let seq = prefix; seq < end; seq++) {
      const e = this.objs[seq - this.objsFrom]
      if (readByFolds(e.type)) native.append(e.type, seq, surfaceMetaJson(e), null)
    }
    const live = this.objs.slice(prefix - this.objsFrom, end - this.objsFrom)
    if (detached) return { native, live: live.map(copyFrozen), detached }
    return { native, live, cached: this.objsFrom === 0 ? this.objs.slice(0, prefix) : undefined }
  }

  /** Take the payloads `parent` parsed of the texts this one holds too (the same frozen values). */
  sharePayloads(parent) {
    // (None once the parent parsed every event: `all` cleared them.)
    const end = this.objsFrom
    parent.payloads.forEach((payload, seq) => {
      if (seq < end) this.payloads.set(seq, payload)
    })
  }
}

module.exports = { Events, SURFACE_TYPES, limits, nextTurn, surfaceMetaJson, headerCopy, seedParts }
