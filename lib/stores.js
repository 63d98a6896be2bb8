'use strict'
// Durable session stores (SPEC 11): JSONL files or one SQLite database.
//
// What lives here and why: JS refuses ids the stores cannot hold (a lone
// UTF-16 surrogate, which the native core's UTF-8 cannot), snapshots values
// losslessly, and orders each session's operations on a promise chain.
// Every file and database operation runs natively off the JS thread
// (binding `NativeStore`, which also names each JSONL file after its id);
// results cross as JSON text or as a native session.

const path = require('node:path')
const { NativeStore } = require('../binding.js')
const { fail, callerFrames, withFrames } = require('./errors.js')

// The session core these stores work with, by name (lib/core/handle.js).
const handle = require('./core/handle.js')
const { snapshotJsonValue, snapshotEvents } = require('./core/json.js')

const noop = () => {}
/** Reject an id the stores cannot hold: not a string, empty, or not well-formed UTF-16. */
function checkId(id) {
  if (typeof id !== 'string' || id.length === 0) {
    throw fail('session id must be a non-empty string', 'INVALID_ARGUMENT')
  }
  if (id.isWellFormed()) return
  for (let i = 0; i < id.length; i++) {
    const unit = id.charCodeAt(i)
    if (unit < 0xd800 || unit > 0xdfff) continue
    if (unit <= 0xdbff && (id.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      i++
      continue
    }
    const hex = unit.toString(16).toUpperCase()
    throw fail(
      `session id ${JSON.stringify(id)} contains a lone UTF-16 surrogate (U+${hex} at index ${i}); `
        + 'the native core holds ids as UTF-8, so it cannot be stored faithfully',
      'INVALID_ARGUMENT',
    )
  }
}

/** `options.write` of `load` and `open`: a boolean, false when absent. */
function writeOption(options, method) {
  if (options === undefined) return false
  const write = options === null || typeof options !== 'object' ? null : (options.write ?? false)
  if (typeof write !== 'boolean') {
    throw fail(`${method} options must be { write?: boolean }, got ${options === null ? 'null' : typeof options === 'object' ? `write: ${String(options.write)}` : typeof options}`, 'INVALID_ARGUMENT')
  }
  return write
}

/** What both stores do; `jsonl` says whether ids name files. */
class SessionStoreBase {
  #native
  #jsonl
  /** Per-id tail of the operation chain (never rejects). */
  #chains = new Map()
  /** Every unsettled operation, for close(). */
  #pending = new Set()
  #closed = false
  #closing = undefined

  constructor(native, jsonl) {
    this.#native = native
    this.#jsonl = jsonl
  }

  /**
   * Start an operation: a rejected promise when closed or when `start`
   * throws. A rejection carries the caller's frames in its stack (the
   * native side makes its errors off the JS thread, with none).
   */
  #start(start) {
    const frames = callerFrames(this.#start)
    const rethrow = (error) => {
      throw withFrames(error, frames)
    }
    if (this.#closed) return Promise.reject(withFrames(fail('session store is closed', 'STORE_CLOSED'), frames))
    try {
      return start().catch(rethrow)
    } catch (error) {
      return Promise.reject(withFrames(error, frames))
    }
  }

  #track(promise) {
    const settled = promise.then(noop, noop)
    this.#pending.add(settled)
    settled.then(() => this.#pending.delete(settled))
    return settled
  }

  /** Run `op` after every earlier operation on `id`; ids proceed in parallel. */
  #chain(id, op) {
    const prior = this.#chains.get(id)
    let next
    if (prior === undefined) {
      try {
        next = Promise.resolve(op())
      } catch (error) {
        next = Promise.reject(error)
      }
    } else {
      next = prior.then(op)
    }
    const tail = this.#track(next)
    this.#chains.set(id, tail)
    tail.then(() => {
      if (this.#chains.get(id) === tail) this.#chains.delete(id)
    })
    return next
  }


  /**
   * Record the intent to create a session; nothing is stored until its first
   * append. Rejects an id this store tracks or that has a stored log.
   */
  create(header) {
    return this.#start(() => {
      const copy = header !== null && typeof header === 'object' && !Array.isArray(header)
        ? snapshotJsonValue(header)
        : undefined
      if (copy === undefined) {
        throw fail('session header must be a losslessly JSON-serializable record', 'INVALID_HEADER')
      }
      const id = copy.id
      checkId(id)
      const json = JSON.stringify(copy)
      return this.#chain(id, () => this.#native.create(id, json))
    })
  }

  /** Append one batch durably; `events[0].seq` must continue the stored log. */
  append(id, events) {
    return this.#start(() => {
      checkId(id)
      const json = snapshotEvents(events)
      return this.#chain(id, () => this.#native.append(id, json))
    })
  }

  /**
   * The stored session, crash-repaired (SPEC 11): `{ meta, events }`. A
   * reader takes no lease: the repair is durable when the session's lease
   * is free for that step. With `{ write: true }` the load is the writer's:
   * it takes the lease and keeps it until close(), or rejects with
   * SESSION_IN_USE when another store holds it.
   */
  load(id, options) {
    return this.#start(() => {
      checkId(id)
      const write = writeOption(options, 'load')
      return this.#chain(id, () => this.#native.load(id, write).then((text) => JSON.parse(text)))
    })
  }

  /**
   * The same load, straight into a `Session` (events stay native until
   * read). It resolves once the payloads the first `deriveMessages()` reads
   * are parsed, after the load, a run of them (256 KiB of text, or one
   * longer payload) per event-loop turn (`handle.warm`). `{ write: true }`: as `load`'s; the store then
   * knows the session holds the stored log, so its first flush writes only
   * what was appended (a reader's session is compared with storage first).
   */
  open(id, options) {
    return this.#start(() => {
      checkId(id)
      const write = writeOption(options, 'open')
      return this.#chain(id, async () => {
        const session = handle.fromNative(await this.#native.open(id, write))
        await handle.warm(session)
        return session
      })
    })
  }

  /**
   * Persist the events of `session` the store does not hold yet, up to its
   * length now, as one durable batch (creating the log on first use);
   * SPEC 11.1. Resolves to how many events were written.
   */
  flush(session) {
    return this.#start(() => {
      if (!(session instanceof handle.Session)) throw fail('flush expects a Session', 'INVALID_ARGUMENT')
      const id = session.id
      checkId(id)
      // The range ends here, at the call: later appends wait for the next flush.
      const source = handle.flushSource(session)
      return this.#chain(id, () => this.#flushRange(session, source, id))
    })
  }

  /**
   * One flush: from where this store knows the session's log is stored (its
   * own earlier flush), or from seq 0, which the store then compares with
   * what it holds. The texts the native log holds are read off the main
   * thread; the session's own events are stringified a part per turn.
   */
  async #flushRange(session, { native, prefix, to }, id) {
    let start = Math.min(Math.max(this.#native.cursor(id, native), 0), to)
    for (;;) {
      const liveFrom = Math.max(start, prefix)
      const parts = await handle.liveParts(session, liveFrom, to)
      const written = await this.#native.flush(native.flushSource(), id, start, to, liveFrom, parts)
      if (written >= 0 || start === 0) return Math.max(written, 0)
      start = 0
    }
  }

  /** Headers of every stored session (never-appended sessions are absent). */
  list() {
    return this.#start(() => {
      const listed = this.#native.list().then((text) => JSON.parse(text))
      this.#track(listed)
      return listed
    })
  }

  /** Where the log of `header` lives: `{ kind: 'jsonl', path }`, or `undefined` (SQLite). */
  locate(header) {
    if (header === null || typeof header !== 'object') {
      throw fail('locate expects a session header', 'INVALID_ARGUMENT')
    }
    checkId(header.id)
    if (!this.#jsonl) return undefined
    const cwd = typeof header.cwd === 'string' ? header.cwd : null
    return { kind: 'jsonl', path: this.#native.locate(cwd, header.id) }
  }

  /** Wait for every operation in flight, then release files; later calls reject. */
  close() {
    if (this.#closing === undefined) {
      this.#closed = true
      this.#closing = (async () => {
        while (this.#pending.size > 0) await Promise.all([...this.#pending])
        await this.#native.close()
      })()
    }
    return this.#closing
  }
}

/** Sessions as JSONL files under `root` (SPEC 11). */
class JsonlSessionStore extends SessionStoreBase {
  constructor(options) {
    const root = options?.root
    if (typeof root !== 'string' || root.length === 0) {
      throw fail('JsonlSessionStore needs { root: string }', 'INVALID_ARGUMENT')
    }
    super(NativeStore.jsonl(path.resolve(root)), true)
  }
}

/** Sessions in one SQLite database, schema version 4 (SPEC 11). */
class SqliteSessionStore extends SessionStoreBase {
  constructor(options) {
    const file = options?.path
    if (typeof file !== 'string' || file.length === 0) {
      throw fail("SqliteSessionStore needs { path: string } (a file or ':memory:')", 'INVALID_ARGUMENT')
    }
    // The native side checks the journal mode (wal, delete, truncate, persist).
    const journalMode = String(options.journalMode ?? 'wal')
    super(NativeStore.sqlite(file === ':memory:' ? file : path.resolve(file), journalMode), false)
  }
}

/** Milliseconds option `name` of PostgresSessionStore: a positive integer up to 2^31 - 1, or undefined (the native default). */
function millis(options, name) {
  const value = options[name]
  if (value === undefined) return undefined
  if (!Number.isInteger(value) || value <= 0 || value > 0x7fffffff) {
    throw fail(`PostgresSessionStore ${name} must be a positive integer of milliseconds, got ${String(value)}`, 'INVALID_ARGUMENT')
  }
  return value
}

/** The schema a PostgreSQL store uses when given none (its home: Rust's `PgOptions::SCHEMA`); the CLI's addresses take it too. */
const POSTGRES_DEFAULT_SCHEMA = NativeStore.postgresDefaultSchema()

/**
 * Sessions in the SPEC 11 tables of one PostgreSQL schema, one writer per
 * session across hosts (a lease row with an epoch fences every append).
 */
class PostgresSessionStore extends SessionStoreBase {
  constructor(options) {
    const url = options?.connectionString
    if (typeof url !== 'string' || url.length === 0) {
      throw fail('PostgresSessionStore needs { connectionString: string } (a libpq-style URL)', 'INVALID_ARGUMENT')
    }
    // Defaulted (undefined or null) and checked by the native store: one home for the name's rule and default.
    const schema = options.schema
    const poolSize = options.poolSize
    if (poolSize !== undefined && (!Number.isInteger(poolSize) || poolSize < 1 || poolSize > 1024)) {
      throw fail(`PostgresSessionStore poolSize must be an integer from 1 to 1024, got ${String(poolSize)}`, 'INVALID_ARGUMENT')
    }
    super(
      NativeStore.postgres(
        url,
        schema,
        poolSize,
        millis(options, 'leaseMs'),
        millis(options, 'statementTimeoutMs'),
        millis(options, 'connectTimeoutMs'),
      ),
      false,
    )
  }
}

module.exports = { JsonlSessionStore, SqliteSessionStore, PostgresSessionStore, POSTGRES_DEFAULT_SCHEMA }
// For bin/dsh-session.js: a repair loads as the session's writer, so it never
// writes (nor claims to) while another store holds the session.
Object.defineProperty(module.exports, 'loadAsWriter', { value: (store, id) => store.load(id, { write: true }) })
