'use strict'
// The SessionStore service (SPEC 12): the in-memory registry of live
// sessions that agent loops reach as `ctx.sessions`, and the only publisher
// of the four `session/*` events. It stores nothing durably.
//
// Cordis calls service methods with `this` set to a proxy whose `ctx` is
// the calling context, so every method reads `this.ctx` when called; state
// lives in ordinary properties (no `#private` members: reading one through
// the proxy throws). Appends reach the store through the session's
// publication seam (SPEC 10, `session.attach`).
//
// The class exists without its peers (so `require('dsh-session-native')`
// works without cordis); the first construction loads them (lib/peers.js)
// and links the class under the consumer's cordis `Service`.

const { loadPeers } = require('./peers.js')
const { SessionError, fail } = require('./errors.js')
const handle = require('./core/handle.js')

const SERVICE_NAME = 'sessions'

/** Which entry, of any store of this module, holds a session. */
const holders = new WeakMap()

// ---------------------------------------------------------------- errors

/** A `fork` failure (SPEC 12.6), with a stable read-only `code`. */
class SessionForkError extends SessionError {
  constructor(message, code) {
    super(message, code)
    Object.defineProperty(this, 'code', { value: code, enumerable: true, writable: false, configurable: false })
  }
}
Object.defineProperty(SessionForkError.prototype, 'name', { value: 'SessionForkError', writable: true, configurable: true })

const quote = (id) => `session "${id}"`

// ---------------------------------------------------------------- delivery (SPEC 12.4)

/** Resolve the listeners of `name` for `carrier`: a fixed snapshot (may throw). */
function resolve(ctx, carrier, name, args) {
  return Array.from(ctx.events.dispatch('emit', [carrier, name, ...args]))
}

/** Log a listener's rejection, attached at once. */
function watch(result, ctx, id, name) {
  Promise.resolve(result).then(undefined, (reason) => {
    ctx.logger.warn(`${quote(id)}: ${name} listener rejected: ${String(reason)}`)
  })
}

/** Call each listener in its own `try`: throws and rejections are logged, never raised. */
function deliver(callbacks, args, ctx, id, name) {
  for (const callback of callbacks) {
    let result
    try {
      result = callback(...args)
    } catch (error) {
      ctx.logger.warn(`${quote(id)}: ${name} listener threw: ${String(error)}`)
      continue
    }
    watch(result, ctx, id, name)
  }
}

// ---------------------------------------------------------------- entries (SPEC 12.3)

/** The entry of `session`, which must be live in the store whose map is `entries`. */
function liveEntry(entries, session) {
  const entry = session !== null && typeof session === 'object' ? holders.get(session) : undefined
  if (entry === undefined || entries.get(entry.id) !== entry) throw fail(`${quote(session?.id)} is not live in this store`, 'SESSION_NOT_LIVE')
  return entry
}

/** Remove an entry now (immediate or deferred detach). Never throws. */
function remove(entry) {
  entry.detachRequested = false
  if (entry.entries.get(entry.id) !== entry) return
  entry.entries.delete(entry.id)
  if (holders.get(entry.session) === entry) holders.delete(entry.session)
  entry.detachSeam()
  if (!entry.announced) return
  const { ctx, session } = entry
  let callbacks
  try {
    callbacks = resolve(ctx, entry.carrier, 'session/disposed', [session])
  } catch (error) {
    ctx.logger.warn(`${quote(entry.id)}: session/disposed dispatch threw: ${String(error)}`)
    return
  }
  deliver(callbacks, [session], ctx, entry.id, 'session/disposed')
}

/** A deferred removal runs when the last publication window closes. */
function settle(entry) {
  if (entry.detachRequested && !entry.announcing && !entry.appending) remove(entry)
}

/** The section-10 attachment through which an entry publishes `session/event`. */
function seam(entry) {
  return {
    beforeCommit(event, session) {
      entry.appending = true
      entry.pending = undefined
      entry.pending = resolve(entry.ctx, entry.carrier, 'session/event', [session, event])
    },
    afterCommit(event, session) {
      const callbacks = entry.pending
      entry.pending = undefined
      if (!entry.appending) return
      try {
        if (callbacks !== undefined) deliver(callbacks, [session, event], entry.ctx, entry.id, 'session/event')
      } finally {
        entry.appending = false
        settle(entry)
      }
    },
    onVeto() {
      entry.pending = undefined
      if (!entry.appending) return
      entry.appending = false
      settle(entry)
    },
  }
}

// ---------------------------------------------------------------- the service

/**
 * `ctx.plugin(SessionStore)`: registers the store as `ctx.sessions`.
 * A subclass of the consumer's cordis `Service` from its first construction.
 */
class SessionStore {
  constructor(ctx) {
    const { Service } = loadPeers()
    if (Object.getPrototypeOf(SessionStore) !== Service) {
      Object.setPrototypeOf(SessionStore.prototype, Service.prototype)
      Object.setPrototypeOf(SessionStore, Service)
    }
    // The Service base registers the instance (`ctx.reflect.provide`).
    const self = Reflect.construct(Service, [ctx, SERVICE_NAME], new.target)
    /** Entries by id, in insertion order. */
    self.entries = new Map()
    /** The id counter of `prepare` (never reset). */
    self.counter = 0
    return self
  }

  prepare(id, options) {
    const entries = this.entries
    let sessionId = id
    if (sessionId === undefined) {
      do {
        this.counter += 1
        sessionId = `session-${this.counter}`
      } while (entries.has(sessionId))
    }
    if (entries.has(sessionId)) throw fail(`${quote(sessionId)} already exists`, 'SESSION_ALREADY_EXISTS')
    const meta = options?.meta ?? {}
    const header = { version: 0, id: sessionId, createdAt: meta.createdAt ?? Date.now() }
    for (const key of ['cwd', 'parentSession', 'seedLength']) if (meta[key] !== undefined) header[key] = meta[key]
    const { Session } = handle
    const from = options?.from
    if (from !== undefined) {
      // A resume: the log of a session of this package (one a store opened),
      // taken as it is (see `new Session(id, session)`).
      if (!(from instanceof Session)) {
        throw fail('sessions.prepare: options.from must be a Session of dsh-session-native', 'INVALID_ARGUMENT', { Type: TypeError })
      }
      if (options.seed !== undefined) {
        throw fail('sessions.prepare takes options.seed or options.from, not both', 'INVALID_ARGUMENT', { Type: TypeError })
      }
      return new Session(sessionId, from, header)
    }
    return new Session(sessionId, options?.seed, header)
  }

  enter(session) {
    const ctx = this.ctx
    const { scopeOf, scopeTarget } = loadPeers()
    if (session === null || typeof session !== 'object' || typeof session.attach !== 'function') {
      throw fail('sessions.enter expects a Session of dsh-session-native', 'INVALID_ARGUMENT', { Type: TypeError })
    }
    const carrier = scopeTarget(session, scopeOf(ctx))
    const entries = this.entries
    const id = session.id
    if (entries.has(id)) throw fail(`${quote(id)} already exists`, 'SESSION_ALREADY_EXISTS')
    if (holders.has(session)) throw fail(`${quote(id)} is already attached to a store`, 'SESSION_ALREADY_ATTACHED')
    const entry = {
      id, session, carrier, ctx, entries,
      announced: false, announcing: false, appending: false, detachRequested: false,
      pending: undefined, detachSeam: undefined,
    }
    entries.set(id, entry)
    holders.set(session, entry)
    entry.detachSeam = session.attach(seam(entry))
    let detached = false
    return () => {
      if (detached) return
      detached = true
      if (entry.announcing || entry.appending) entry.detachRequested = true
      else remove(entry)
    }
  }

  announce(session) {
    const ctx = this.ctx
    const entry = liveEntry(this.entries, session)
    if (entry.announced || entry.announcing) throw fail(`${quote(entry.id)} was already announced`, 'SESSION_ALREADY_ANNOUNCED')
    // Announced before delivery: even a partial delivery pairs with disposal.
    entry.announced = true
    entry.announcing = true
    try {
      const callbacks = resolve(ctx, entry.carrier, 'session/created', [session])
      for (const callback of callbacks) watch(callback(session), ctx, entry.id, 'session/created')
    } finally {
      entry.announcing = false
      settle(entry)
    }
  }

  create(id, options) {
    const session = this.prepare(id, options)
    const store = this
    this.ctx.effect(function* () {
      yield store.enter(session)
      store.announce(session)
    }, 'sessions.create()')
    return session
  }

  async flush(session) {
    const ctx = this.ctx
    const entry = liveEntry(this.entries, session)
    const callbacks = resolve(ctx, entry.carrier, 'session/flush', [session])
    const settled = await Promise.allSettled(callbacks.map(async (callback) => callback(session)))
    for (const result of settled) {
      if (result.status === 'rejected') throw result.reason
    }
  }

  get(id) {
    return this.entries.get(id)?.session
  }

  list() {
    return Array.from(this.entries.values(), (entry) => entry.session)
  }

  fork(source, boundary, childSessionId) {
    const entries = this.entries
    if (childSessionId !== undefined && entries.has(childSessionId)) {
      throw new SessionForkError(`${quote(childSessionId)} already exists`, 'SESSION_ALREADY_EXISTS')
    }
    const sourceId = typeof source === 'string' ? source : source?.id
    const entry = entries.get(sourceId)
    if (entry === undefined) throw new SessionForkError(`${quote(sourceId)} not found`, 'SESSION_NOT_FOUND')
    if (typeof source !== 'string' && entry.session !== source) {
      throw new SessionForkError(`${quote(sourceId)} is not the live store instance`, 'SESSION_NOT_LIVE')
    }
    const parent = entry.session
    // A session of this package answers the checks without its `events`
    // (at a million events, reading them holds the thread for seconds),
    // unless `events` may have been redefined (on it, or by a subclass).
    const own = Object.getPrototypeOf(parent) === handle.Session.prototype && !Object.hasOwn(parent, 'events')
    const events = own ? undefined : parent.events
    let end
    try {
      end = own ? handle.forkEnd(parent, boundary) : handle.forkEndOf(String(sourceId), boundary, events)
    } catch (error) {
      if (error?.code === 'INVALID_BOUNDARY' || error?.code === 'OPEN_TURN') throw new SessionForkError(error.message, error.code)
      throw error
    }
    const meta = { cwd: parent.header.cwd, parentSession: parent.id, seedLength: end }
    // A session of this package: copies of its events `0..=b` as one, which
    // `create` takes as it is (`options.from`): what a seed of them gives,
    // without each event copied, stringified and checked again.
    if (own && end > 0) return this.create(childSessionId, { from: handle.detachedPrefix(parent, end), meta })
    return this.create(childSessionId, { seed: own ? [] : events.slice(0, end), meta })
  }
}

module.exports = { SessionStore, SessionForkError }
