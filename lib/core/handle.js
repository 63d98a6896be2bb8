'use strict'
// What the stores, the service and the CLI of this package take from a
// session, by name (not public API): each function reads the session's
// parts (lib/core/events.js, lib/core/derived.js), which stay theirs. They
// `require` this module; index.js also shows it under
// Symbol.for('dsh-session-native.internal') for the tests, which lower its
// `limits`.

const { limits, nextTurn } = require('./events.js')
const { forkEnd } = require('./fork-end.js')
const { Session, partsOf, build } = require('./session.js')

module.exports = {
  Session,
  limits,
  /** What a store's flush reads, fixed at its call: the native log and its text count, and the session's length. */
  flushSource(session) {
    const { native, prefix, seq } = partsOf(session).events
    return { native, prefix, to: seq }
  },
  /** The texts of live events `from..to` as UTF-8 parts, a part per event-loop turn. */
  liveParts: (session, from, to) => partsOf(session).events.liveParts(from, to),
  /** A session over a native log (a store's open, the CLI's read). */
  fromNative: (native) => build({ native }),
  /**
   * For the service's fork (SPEC 12.6): a session holding copies of
   * `session`'s events `0..end` (none of its objects), without reading
   * `events`; `create` gives it its id (`options.from`).
   */
  detachedPrefix: (session, end) => build({ ...partsOf(session).events.forkParts(end, session.id, true), parent: session }),
  /** The service's fork boundary (SPEC 12.6): how many events its fork of `id` takes, read from `events` if given, else `session`. */
  forkEnd(id, boundary, session, events) {
    if (events === undefined) return partsOf(session).events.forkEnd(id, boundary, true)
    return forkEnd(id, boundary, events.length, (i) => events[i].seq, (i) => events[i].type, true)
  },
  /**
   * Derive the messages of the surface a run of payloads at a time,
   * yielding to the event loop between runs: a store's `open` runs this
   * before it resolves, so that the first `deriveMessages()` of a long log
   * only copies an array (the 50 ms pause bound at 1M events:
   * benchmark/pauses.mjs). A run is at most 256 KiB of payload text, or
   * one longer payload.
   */
  async warm(session) {
    const { events, derived } = partsOf(session)
    const ends = events.native.runEnds(Uint32Array.from(derived.nodes), 256 << 10)
    for (let run = 0; run < ends.length; run++) {
      if (run > 0) await nextTurn()
      derived.upTo(ends[run])
    }
  },
}
