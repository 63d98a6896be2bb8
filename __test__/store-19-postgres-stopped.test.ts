// Issue 19: every promise settles within its bound whatever the server does.
// A throwaway server's postmaster and backends are stopped with SIGSTOP (a
// frozen VM or a partition looks the same to the client: TCP is accepted
// and acknowledged, nothing answers). Each call then fails with a code
// within its bound, close() settles, and the process keeps moving: the
// stuck PostgreSQL calls run on threads of their own, so `fs` and a JSONL
// store (libuv's pool) are not held up by them.

import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  JsonlSessionStore,
  PostgresSessionStore,
  rejection,
  Session,
  testCleanup,
  turnBatches,
  turns,
} from './fixtures-crash/stores.js'

const nodeRequire = createRequire(__filename)
const { available, startServer } = nodeRequire('./fixtures-pg/server.cjs') as typeof import('./fixtures-pg/server.cjs')

const { cleanup, dirFor } = testCleanup()

const STATEMENT_MS = 3000
const CONNECT_MS = 2000
/** The margin a bound allows on a loaded machine (the client's own is 500 ms). */
const SLACK_MS = 2000

/** How long `promise` took to settle, and how it settled. */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; code: string; message: string }> {
  const started = performance.now()
  const out = await rejection(promise)
  return { ms: performance.now() - started, ...out }
}

function liveSession(id: string, events: ReturnType<typeof turns>): InstanceType<typeof Session> {
  return new Session(id, asEvents(events), header(id))
}

describe.skipIf(!available())('issue 19: a PostgreSQL server that stops answering (SIGSTOP)', () => {
  it('fails each stuck call with PG within statementTimeoutMs plus a margin, while fs and a JSONL store keep moving; close() settles', async () => {
    const server = await startServer()
    cleanup.push(() => server.stop())
    const store = new PostgresSessionStore({
      connectionString: server.url(),
      schema: 'stopped',
      poolSize: 4,
      statementTimeoutMs: STATEMENT_MS,
      connectTimeoutMs: CONNECT_MS,
    })
    const ids = ['a', 'b', 'c', 'd']
    for (const id of ids) await store.create(header(id))
    // Four connections open and just used (no idle check before the next use).
    await Promise.all(ids.map((id) => store.append(id, asEvents(turns(1)))))
    const acknowledged = turns(1)

    server.signal('SIGSTOP')
    const started = performance.now()
    const settled = new Set<string>()
    const watch = (name: string, p: Promise<unknown>) => {
      const t = timed(p)
      void t.then(() => settled.add(name))
      return t
    }
    // Four calls, one per pooled connection: a flush, an append, a load, a list.
    const stuck = [
      watch('flush', store.flush(liveSession('a', turns(2)))),
      watch('append', store.append('b', asEvents(turnBatches(2, 9).flat()))),
      watch('load', store.load('c')),
      watch('list', store.list()),
    ]
    // Meanwhile the rest of the process works: fs on libuv's pool, and a
    // JSONL store's flush (its own work on that pool too).
    const dir = dirFor('pg19-stopped-jsonl')
    const file = path.join(dir, 'f.txt')
    fs.writeFileSync(file, 'x'.repeat(1 << 16))
    expect((await fs.promises.readFile(file)).length).toBe(1 << 16)
    const jsonl = new JsonlSessionStore({ root: dir })
    cleanup.push(() => jsonl.close())
    expect(await jsonl.flush(liveSession('j', turns(2)))).toBe(18)
    expect((await jsonl.load('j')).events).toEqual(turns(2))
    const othersMs = performance.now() - started
    expect([...settled]).toEqual([])

    const outcomes = await Promise.all(stuck)
    for (const o of outcomes) {
      if (o.code === 'PG_CONNECT') {
        // On a loaded machine a pooled connection may have idled past its
        // check (one second) before the call: the check found no answer and
        // a new connection was tried, bounded by connectTimeoutMs as well.
        expect(o.message).toContain(`no answer within ${CONNECT_MS} ms`)
        expect(o.ms).toBeLessThan(STATEMENT_MS + CONNECT_MS + SLACK_MS)
        continue
      }
      expect(o.code).toBe('PG')
      expect(o.message).toContain(`no answer from the server within ${STATEMENT_MS + 500} ms (statementTimeoutMs ${STATEMENT_MS} plus 500 ms); the connection was dropped`)
      expect(o.ms).toBeLessThan(STATEMENT_MS + SLACK_MS)
    }
    // A call that needs a new connection: TCP is accepted, nothing answers.
    const fresh = new PostgresSessionStore({ connectionString: server.url(), schema: 'stopped', statementTimeoutMs: STATEMENT_MS, connectTimeoutMs: CONNECT_MS })
    const first = await timed(fresh.list())
    expect(first.code).toBe('PG_CONNECT')
    expect(first.message).toContain(`no answer within ${CONNECT_MS} ms (connectTimeoutMs covers TCP, TLS, authentication and a first query)`)
    expect(first.ms).toBeLessThan(CONNECT_MS + SLACK_MS)
    // close() releases the leases if it can reach the server: bounded by a
    // connect and a statement.
    const closeStarted = performance.now()
    await store.close()
    await fresh.close()
    const closeMs = performance.now() - closeStarted
    expect(closeMs).toBeLessThan(2 * (CONNECT_MS + STATEMENT_MS) + SLACK_MS)
    console.log(
      `issue 19, server stopped: fs + JSONL flush done in ${othersMs.toFixed(0)} ms while the PG calls waited; ` +
        `${outcomes.map((o, i) => `${['flush', 'append', 'load', 'list'][i]} PG after ${o.ms.toFixed(0)} ms`).join(', ')}; ` +
        `first list() of a new store PG_CONNECT after ${first.ms.toFixed(0)} ms; both close() in ${closeMs.toFixed(0)} ms`,
    )

    // Resumed: nothing acknowledged is lost, and a new store works.
    server.signal('SIGCONT')
    const after = new PostgresSessionStore({ connectionString: server.url(), schema: 'stopped', statementTimeoutMs: STATEMENT_MS })
    cleanup.push(() => after.close())
    for (const id of ids) {
      const events = (await after.load(id)).events
      expect(events.slice(0, acknowledged.length)).toEqual(acknowledged)
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
    }
  })
})
