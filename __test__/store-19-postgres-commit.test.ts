// Issue 19: an ambiguous COMMIT. A proxy between the store and the server
// loses the answer to a flush's COMMIT (the server committed), or the
// COMMIT itself (it did not). The flush fails with PG saying the outcome is
// unknown, within its bound; nothing acknowledged is lost; and the store
// is not wedged: its next flush writes only what the database is missing.

import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  PG_URL,
  pgDump,
  pgSchema,
  PostgresSessionStore,
  rejection,
  Session,
  testCleanup,
  turnBatches,
  turns,
  type SessionStore,
} from './fixtures-crash/stores.js'

const nodeRequire = createRequire(__filename)
const { startProxy } = nodeRequire('./fixtures-pg/proxy.cjs') as typeof import('./fixtures-pg/proxy.cjs')

const { cleanup, dirFor } = testCleanup()

const STATEMENT_MS = 1000

async function proxied(label: string) {
  const url = new URL(PG_URL!)
  const proxy = await startProxy(Number(url.port), url.hostname)
  cleanup.push(() => proxy.close())
  url.port = String(proxy.port)
  url.searchParams.set('sslmode', 'disable')
  const dir = dirFor(label)
  const store: SessionStore = new PostgresSessionStore({ connectionString: url.toString(), schema: pgSchema(dir), statementTimeoutMs: STATEMENT_MS, poolSize: 1 })
  cleanup.push(() => store.close())
  return { proxy, store, dir }
}

function append(session: InstanceType<typeof Session>, events: ReturnType<typeof turns>): void {
  for (const e of events) {
    const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined ? { surfaceOp: e.surfaceOp } : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
    ;(session.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
  }
}

const CASES = [
  { mode: 'answer-lost', committed: true, what: 'the answer to COMMIT is lost with the connection (the server committed)' },
  { mode: 'answer-late', committed: true, what: 'the answer to COMMIT never comes (the server committed; the deadline ends the wait)' },
  { mode: 'commit-lost', committed: false, what: 'the COMMIT is lost with the connection (the server rolled back)' },
] as const

describe.skipIf(PG_URL === undefined)('issue 19: an ambiguous COMMIT', () => {
  for (const { mode, committed, what } of CASES) {
    it(`${what}: the flush fails with PG naming the unknown outcome, within its bound; nothing acknowledged is lost`, async () => {
      const { proxy, store, dir } = await proxied(`pg19-commit-${mode}`)
      const session = new Session('s', [], header('s'))
      append(session, turns(1))
      expect(await store.flush(session)).toBe(9)
      append(session, turnBatches(2, 9).flat())
      const fired = proxy.arm(mode)
      const started = performance.now()
      const failed = await rejection(store.flush(session))
      const ms = performance.now() - started
      await fired
      expect(failed.code).toBe('PG')
      expect(failed.message).toContain(': the outcome of COMMIT is unknown (')
      expect(failed.message).toContain('the write may or may not be stored')
      expect(ms).toBeLessThan(STATEMENT_MS + 500 + 2000)
      console.log(`issue 19, ${mode}: flush rejected PG after ${ms.toFixed(0)} ms: ${failed.message}`)
      // What the database holds: every acknowledged event, and the lost
      // COMMIT's batch exactly when the server committed it.
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(pgDump(dir, 's').rows).toHaveLength(committed ? 18 : 9)
      const fresh = new PostgresSessionStore({ connectionString: PG_URL!, schema: pgSchema(dir) })
      cleanup.push(() => fresh.close())
      expect((await fresh.load('s')).events).toEqual(session.events.slice(0, committed ? 18 : 9))
    })

    it(
      `${what}: the same store's retried flush succeeds and writes only what is missing; the log loads back equal`,
      async () => {
        const { proxy, store, dir } = await proxied(`pg19-retry-${mode}`)
        const session = new Session('s', [], header('s'))
        append(session, turns(1))
        expect(await store.flush(session)).toBe(9)
        append(session, turnBatches(2, 9).flat())
        const fired = proxy.arm(mode)
        expect((await rejection(store.flush(session))).code).toBe('PG')
        await fired
        expect(await store.flush(session)).toBe(committed ? 0 : 9)
        append(session, turnBatches(3, 18).flat())
        expect(await store.flush(session)).toBe(9)
        const rows = pgDump(dir, 's').rows
        expect(rows.map((r) => Number(r.seq))).toEqual(session.events.map((e) => e.seq))
        expect((await store.load('s')).events).toEqual(session.events)
      },
    )
  }
})
