// Issue 29: every file a store opens is checked to be a regular file
// without blocking (`O_NONBLOCK`, then `fstat`); anything else is refused
// with NOT_A_FILE, naming what is there. A JSONL log replaced by a FIFO used
// to hang the writer's next flush and `close()` (the open blocked a thread
// forever), and a fresh load said SESSION_NOT_FOUND.

import { execFileSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  JsonlSessionStore,
  rejection,
  Session,
  SqliteSessionStore,
  testCleanup,
  turnBatches,
  turns,
} from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()

/** What may hang settles within this bound, or the test fails. */
const BOUND_MS = 5_000

/** `promise`, or a rejection saying it did not settle within `BOUND_MS`. */
async function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${BOUND_MS} ms`)), BOUND_MS)
  })
  try {
    return await Promise.race([promise, hung])
  } finally {
    clearTimeout(timer)
  }
}

/** A FIFO at `file`; after the test, opened once from the other side so a thread blocked on it (an unfixed build) goes on. */
function mkfifo(file: string): void {
  execFileSync('mkfifo', [file])
  cleanup.push(() => {
    try {
      fs.closeSync(fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_NONBLOCK))
    } catch {
      // Gone already.
    }
  })
}

const NEXT = turnBatches(2, 9).flat()
const unix = process.platform !== 'win32'

describe('jsonl store: a log path that holds something other than a regular file', () => {
  it.skipIf(!unix)('refuses the next flush of a log replaced by a FIFO, and close, load and list settle', async () => {
    const dir = dirFor('fifo')
    const store = new JsonlSessionStore({ root: dir })
    cleanup.push(() => bounded(store.close(), 'close()').catch(() => {}))
    const live = new Session('s', asEvents(turns(1)))
    await store.flush(live)
    const file = store.locate(header('s')).path
    fs.unlinkSync(file)
    mkfifo(file)
    // The writer's next flush of the same session (its cursor is the stored length).
    live.append('user/message', { content: [{ type: 'text', text: 'next' }], source: { kind: 'user' } }, { surfaceOp: 'append' })
    const r = await bounded(rejection(store.flush(live)), 'the flush')
    expect(r.code).toBe('NOT_A_FILE')
    expect(r.message).toBe(`"${file}" is a FIFO, not a regular file; nothing was read or written`)
    await bounded(store.close(), 'close()')
    const fresh = new JsonlSessionStore({ root: dir })
    cleanup.push(() => bounded(fresh.close(), 'close()').catch(() => {}))
    const loaded = await bounded(rejection(fresh.load('s')), 'a fresh load')
    expect(loaded).toEqual({ code: 'NOT_A_FILE', message: r.message })
    expect((await bounded(rejection(fresh.append('s', asEvents(NEXT))), 'an append')).code).toBe('NOT_A_FILE')
    expect(await bounded(fresh.list(), 'list()')).toEqual([])
    expect(fs.statSync(file).isFIFO()).toBe(true)
  })

  it('refuses a directory at the log path instead of saying the session is not found', async () => {
    const dir = dirFor('directory')
    const store = new JsonlSessionStore({ root: dir })
    cleanup.push(() => store.close())
    const file = store.locate(header('s')).path
    fs.mkdirSync(file, { recursive: true })
    const r = await rejection(store.load('s'))
    expect(r.code).toBe('NOT_A_FILE')
    expect(r.message).toBe(`"${file}" is a directory, not a regular file; nothing was read or written`)
    expect((await rejection(store.flush(new Session('s', asEvents(turns(1)))))).code).toBe('NOT_A_FILE')
    expect(await store.list()).toEqual([])
    expect(fs.statSync(file).isDirectory()).toBe(true)
  })
})

describe('sqlite store: a database path that holds something other than a regular file', () => {
  it.skipIf(!unix)('refuses a FIFO at the database path rather than hanging SQLite', async () => {
    const dir = dirFor('sqlite-fifo')
    const db = path.join(dir, 'sessions.db')
    mkfifo(db)
    const store = new SqliteSessionStore({ path: db })
    cleanup.push(() => bounded(store.close(), 'close()').catch(() => {}))
    const r = await bounded(rejection(store.list()), 'list()')
    expect(r).toEqual({ code: 'NOT_A_FILE', message: `"${db}" is a FIFO, not a regular file; nothing was read or written` })
    expect((await bounded(rejection(store.load('s')), 'a load')).code).toBe('NOT_A_FILE')
    await bounded(store.close(), 'close()')
    expect(fs.statSync(db).isFIFO()).toBe(true)
  })
})
