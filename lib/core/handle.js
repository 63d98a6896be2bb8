'use strict'
// What the stores, the service and the CLI of this package take from a
// session, by name (not public API): each function reads the session's
// parts (lib/core/events.js, lib/core/derived.js), which stay theirs. They
// `require` this module; index.js also shows it under
// Symbol.for('dsh-session-native.internal') for the tests, which lower its
// `limits`.

const binding = require('../../binding.js')
const { snapshotEvents } = require('./json.js')
const { limits, takeBatch } = require('./events.js')
const { Session, partsOf, forkOf, build } = require('./session.js')

module.exports = {
  Session,
  binding,
  limits,
  snapshotEvents,
  takeBatch,
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
   * `session`'s events `0..end` (none of its objects), and the type of its
   * event `seq`, without reading `events`.
   */
  detachedPrefix: (session, end) => forkOf(session, end, true),
  typeAt: (session, seq) => partsOf(session).events.typeAt(seq),
  /**
   * Derive the messages of the surface a run of payloads at a time,
   * yielding to the event loop between runs: a store's `open` runs this
   * before it resolves, so that the first `deriveMessages()` only copies
   * an array. Each run (at most 256 KiB of payload text, or one longer
   * payload) is read on the libuv pool, its long strings decoded there,
   * while this thread parses the run before it.
   */
  async warm(session, parsed) {
    const { events, derived } = partsOf(session)
    const { nodes } = derived
    const { native, payloads, objsFrom: from } = events
    // What the load handed over and is still on the surface.
    if (parsed !== undefined && parsed.size > 0) events.materialize(nodes, parsed)
    const ends = from > 0 ? native.runEnds(Uint32Array.from(nodes), 256 << 10) : []
    const read = (run) => {
      const seqs = nodes.slice(run === 0 ? 0 : ends[run - 1], ends[run]).filter((seq) => seq < from && !payloads.has(seq))
      const batch = native.payloadsLifted(Uint32Array.from(seqs), limits.liftMin)
      // If this thread throws before awaiting it, its failure is not unhandled.
      batch.catch(() => {})
      return batch
    }
    let next = ends.length > 0 ? read(0) : undefined
    for (let run = 0; run < ends.length; run++) {
      const batch = await next
      if (run + 1 < ends.length) next = read(run + 1)
      takeBatch(batch, payloads)
      derived.upTo(ends[run])
    }
    derived.upTo(nodes.length)
  },
}
