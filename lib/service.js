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

/** Which entry, of any store of this module, holds a session. */
const holders = new WeakMap()

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

/** The listeners of `name` for `carrier`: a fixed snapshot (may throw). */
function resolve(ctx, carrier, name, args) {
  return Array.from(ctx.events.dispatch('emit', [carrier, name, ...args]))
}

/**
 * Call each listener with `args`: a throw is logged and the next one still
 * runs (`session/created` raises it instead), a rejection is logged.
 */
function deliver(callbacks, args, ctx, id, name) {
  const warn = (what, reason) => ctx.logger.warn(`${quote(id)}: ${name} listener ${what}: ${String(reason)}`)
  for (const callback of callbacks) {
    try {
      Promise.resolve(callback(...args)).then(undefined, (reason) => warn('rejected', reason))
    } catch (error) {
      if (name === 'session/created') throw error
      warn('threw', error)
    }
  }
}

// ---------------------------------------------------------------- entries (SPEC 12.3)

/** The entry of `session`, which must be live in the store whose map is `entries`. */
function liveEntry(entries, session) {
  const entry = holders.get(session)
  if (entry?.entries !== entries) throw fail(`${quote(session?.id)} is not live in this store`, 'SESSION_NOT_LIVE')
  return entry
}

/**
 * Remove a detached entry once no window (`announce`, an append's
 * publication) holds it open, then deliver `session/disposed` if it was
 * announced. A stale detach never removes a same-id successor. Never throws.
 */
function settle(entry) {
  const { entries, id, session, ctx } = entry
  if (!entry.detachRequested || entry.announcing || entry.appending || entries.get(id) !== entry) return
  entries.delete(id)
  holders.delete(session)
  entry.detachSeam()
  if (!entry.announced) return
  try {
    deliver(resolve(ctx, entry.carrier, 'session/disposed', [session]), [session], ctx, id, 'session/disposed')
  } catch (error) {
    ctx.logger.warn(`${quote(id)}: session/disposed dispatch threw: ${String(error)}`)
  }
}

// ---------------------------------------------------------------- the service

/**
 * The store class of one line (`line`: what differs between v0 and the
 * published line, below; everything else here is the same for both).
 * `ctx.plugin(SessionStore)`: registers the store as `ctx.sessions`.
 * A subclass of the consumer's cordis `Service` from its first construction.
 */
function defineSessionStore(line) {
  return class SessionStore {
    constructor(ctx) {
      const { Service } = loadPeers()
      if (Object.getPrototypeOf(SessionStore) !== Service) {
        Object.setPrototypeOf(SessionStore.prototype, Service.prototype)
        Object.setPrototypeOf(SessionStore, Service)
      }
      // The Service base registers the instance (`ctx.reflect.provide`).
      const self = Reflect.construct(Service, [ctx, 'sessions'], new.target)
      /** Entries by id, in insertion order. */
      self.entries = new Map()
      /** The id counter of `prepare` (never reset). */
      self.counter = 0
      line.constructed?.(self, ctx)
      return self
    }

    prepare(id, options) {
      let sessionId = id
      if (sessionId === undefined) {
        do {
          this.counter += 1
          sessionId = `session-${this.counter}`
        } while (this.entries.has(sessionId))
      }
      if (this.entries.has(sessionId)) throw fail(`${quote(sessionId)} already exists`, 'SESSION_ALREADY_EXISTS')
      return line.prepare(sessionId, options)
    }

    enter(session) {
      const { scopeOf, scopeTarget } = loadPeers()
      if (!line.isSession(session)) {
        throw fail(`sessions.enter expects a Session of ${line.name}`, 'INVALID_ARGUMENT', { Type: TypeError })
      }
      const ctx = this.ctx
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
      // The section-10 attachment through which the entry publishes
      // `session/event`: listeners resolved before commit (a throw vetoes),
      // called after it.
      const close = () => {
        entry.pending = undefined
        entry.appending = false
        settle(entry)
      }
      entry.detachSeam = line.attach(session, {
        beforeCommit(event) {
          entry.appending = true
          entry.pending = resolve(ctx, carrier, 'session/event', [session, event])
        },
        afterCommit(event) {
          try {
            if (entry.pending !== undefined) deliver(entry.pending, [session, event], ctx, id, 'session/event')
          } finally {
            close()
          }
        },
        onVeto: close,
      })
      // A later call finds the entry gone, or its removal already requested.
      return () => {
        entry.detachRequested = true
        settle(entry)
      }
    }

    announce(session) {
      const entry = liveEntry(this.entries, session)
      if (entry.announced) throw fail(`${quote(entry.id)} was already announced`, 'SESSION_ALREADY_ANNOUNCED')
      // Announced before delivery: even a partial delivery pairs with disposal.
      entry.announced = true
      entry.announcing = true
      try {
        deliver(resolve(this.ctx, entry.carrier, 'session/created', [session]), [session], this.ctx, entry.id, 'session/created')
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
      const entry = liveEntry(this.entries, session)
      const callbacks = resolve(this.ctx, entry.carrier, 'session/flush', [session])
      const settled = await Promise.allSettled(callbacks.map(async (callback) => callback(session)))
      const failed = settled.find((result) => result.status === 'rejected')
      if (failed !== undefined) throw failed.reason
      return line.flushed(callbacks.length)
    }

    get(id) {
      return this.entries.get(id)?.session
    }

    list() {
      return Array.from(this.entries.values(), (entry) => entry.session)
    }

    fork(source, boundary, childSessionId) {
      if (childSessionId !== undefined && this.entries.has(childSessionId)) {
        throw new SessionForkError(`${quote(childSessionId)} already exists`, 'SESSION_ALREADY_EXISTS')
      }
      const sourceId = typeof source === 'string' ? source : source?.id
      const parent = this.entries.get(sourceId)?.session
      if (parent === undefined) throw new SessionForkError(`${quote(sourceId)} not found`, 'SESSION_NOT_FOUND')
      if (typeof source !== 'string' && parent !== source) {
        throw new SessionForkError(`${quote(sourceId)} is not the live store instance`, 'SESSION_NOT_LIVE')
      }
      let options
      try {
        options = line.forkOptions(String(sourceId), boundary, parent)
      } catch (error) {
        if (error?.code === 'INVALID_BOUNDARY' || error?.code === 'OPEN_TURN') throw new SessionForkError(error.message, error.code)
        throw error
      }
      return this.create(childSessionId, options)
    }
  }
}

// ---------------------------------------------------------------- v0 (SPEC 12)

/** Loaded on first use: the published line's package carries this file without v0's session. */
const handle = () => require('./core/handle.js')

const SessionStore = defineSessionStore({
  name: 'dsh-session-native',
  isSession: (session) => typeof session?.attach === 'function',
  attach: (session, hooks) => session.attach(hooks),
  flushed: () => undefined,
  prepare(sessionId, options) {
    const { Session } = handle()
    const meta = options?.meta ?? {}
    const header = { version: 0, id: sessionId, createdAt: meta.createdAt ?? Date.now() }
    for (const key of ['cwd', 'parentSession', 'seedLength']) if (meta[key] !== undefined) header[key] = meta[key]
    // A resume: `from` is a session of this package (one a store opened),
    // whose log the new one continues as it is (see `new Session(id, session)`).
    const from = options?.from
    if (from !== undefined && !(from instanceof Session)) {
      throw fail('sessions.prepare: options.from must be a Session of dsh-session-native', 'INVALID_ARGUMENT', { Type: TypeError })
    }
    if (from !== undefined && options.seed !== undefined) {
      throw fail('sessions.prepare takes options.seed or options.from, not both', 'INVALID_ARGUMENT', { Type: TypeError })
    }
    return new Session(sessionId, from ?? options?.seed, header)
  },
  forkOptions(id, boundary, parent) {
    const h = handle()
    // A session of this package whose `events` neither it nor a subclass
    // redefines is forked without reading them (at a million events that
    // holds the thread for seconds): the checks read the session, and
    // `create` takes copies of its events `0..=b` as one (`options.from`),
    // what a seed of them gives without each copied and checked again.
    const own = Object.getPrototypeOf(parent) === h.Session.prototype && !Object.hasOwn(parent, 'events')
    const events = own ? undefined : parent.events
    const end = h.forkEnd(id, boundary, parent, events)
    const prefix = own ? { from: h.detachedPrefix(parent, end) } : { seed: events.slice(0, end) }
    return { ...prefix, meta: { cwd: parent.header.cwd, parentSession: parent.id, seedLength: end } }
  },
})

module.exports = { SessionStore, SessionForkError, defineSessionStore }
