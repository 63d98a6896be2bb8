'use strict'
// A session's derived messages (SPEC 6), cached per surface node so that a
// model step costs O(new surface nodes). Owned by one Session (`#derived`),
// which hands it its surface view (`nodes`, changed in place by appends)
// and its events (lib/core/events.js), where the payloads are read.
//
// `of[i]` is what surface node i derives to (a message or null) for the
// first `count` nodes; `list` is those messages alone, in order, which
// `deriveMessages()` copies out. `state` says what `list` is worth:
// - 'fresh': it lists `of`; a derive only derives and lists the new nodes.
// - 'stale': a replace forgot the messages of the nodes it removed
//   (`PENDING` marks the node it put in their place), or `of` was taken
//   from a parent: the next derive derives pending nodes, lists `of` again.
// - 'borrowed': stale, and `of` holds another session's frozen messages,
//   never handed out (a detached fork, whose messages must be its own):
//   the next derive first copies them (`copyFrozen`: new objects around the
//   same strings, a fifth of what parsing the payloads again costs).
// A fork starts from its parent's messages of the surface nodes the two
// share (a node's message is its event's alone, SPEC 6).

const { copyFrozen } = require('./json.js')
const { deriveFrozen } = require('./derive.js')

/** A surface node whose message is to be derived. */
const PENDING = Symbol('pending')

class Derived {
  state = 'fresh'
  of = []
  list = []
  count = 0

  constructor(nodes, events) {
    this.nodes = nodes
    this.events = events
  }

  /** Derive the messages of surface nodes up to position `end` (those not derived yet, and pending ones). */
  upTo(end) {
    if (this.state !== 'fresh') this.#rederive()
    const { nodes, events, of, list } = this
    const to = Math.min(end, nodes.length)
    const from = this.count
    if (from >= to) return
    if (events.objsFrom > 0) events.materialize(from === 0 && to === nodes.length ? nodes : nodes.slice(from, to))
    for (let i = from; i < to; i++) {
      const message = deriveFrozen(events.payloadAt(nodes[i]))
      of.push(message)
      if (message !== null) list.push(message)
    }
    this.count = to
  }

  /** Surface nodes `start..end` were replaced by one (`nodes` spliced): forget their messages. */
  forget(start, end) {
    if (start >= this.count) return
    if (end >= this.count) {
      this.of.length = start
      this.count = start
    } else {
      this.of.splice(start, end - start + 1, PENDING)
      this.count -= end - start
    }
    if (this.state === 'fresh') this.state = 'stale'
  }

  /** Own the messages if borrowed, derive the pending nodes, then list the messages again. */
  #rederive() {
    if (this.state === 'borrowed') this.of = this.of.map((m) => (m === null || m === PENDING ? m : copyFrozen(m)))
    const { of, nodes, events } = this
    const pending = []
    for (let i = 0; i < of.length; i++) if (of[i] === PENDING) pending.push(i)
    if (pending.length > 0) {
      if (events.objsFrom > 0) events.materialize(pending.map((i) => nodes[i]))
      for (const i of pending) of[i] = deriveFrozen(events.payloadAt(nodes[i]))
    }
    this.list = of.filter((message) => message !== null)
    this.state = 'fresh'
  }

  /**
   * Start from `parent`'s messages of the surface nodes this session's
   * surface starts with: its first derive then lists them instead of
   * parsing every payload again; `detached`, it copies them first.
   */
  shareFrom(parent, detached) {
    const nodes = this.nodes
    const theirs = parent.nodes
    const n = Math.min(nodes.length, parent.count)
    let k = 0
    while (k < n && nodes[k] === theirs[k]) k++
    if (k === 0) return
    this.of = parent.of.slice(0, k)
    this.count = k
    this.state = detached || parent.state === 'borrowed' ? 'borrowed' : 'stale'
  }
}

module.exports = { Derived }
