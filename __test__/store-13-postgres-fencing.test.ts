// Issue 13: one writer per session across hosts for the PostgreSQL store. A
// writer holds a lease row (holder, epoch, expiry); every append renews it
// in its own transaction only while the epoch is still the writer's, so a
// writer whose lease was taken over never writes again (LEASE_LOST), a
// second writer of a live lease is refused (SESSION_IN_USE), and readers
// never write.

import * as os from 'node:os'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  interruptedTurnClosers,
  PG_URL,
  PGBOUNCER_URL,
  pgDump,
  pgSchema,
  pgStore,
  psqlExec,
  rejection,
  Session,
  spawnChild,
  turnBatches,
  turns,
  type AnyEvent,
  type Child,
  type SessionStore,
  testCleanup,
} from './fixtures-crash/stores.js'

const WRITER = path.join(__dirname, 'fixtures-crash', 'writer.cjs')
const READER = path.join(__dirname, 'fixtures-crash', 'reader.cjs')

const { cleanup, dirFor } = testCleanup()

function storeIn(dir: string, options: Record<string, unknown> = {}): SessionStore {
  const s = pgStore(dir, options)
  cleanup.push(() => s.close())
  return s
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function liveSession(id: string, events: AnyEvent[]): InstanceType<typeof Session> {
  const s = new Session(id, [], header(id))
  for (const e of events) {
    const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined ? { surfaceOp: e.surfaceOp } : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
    ;(s.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
  }
  return s
}

/** A fixture child (`spawnChild`), killed after the test if still running. */
function child(script: string, args: string[]): Child {
  const out = spawnChild(script, args)
  cleanup.push(out.kill)
  return out
}

describe.skipIf(PG_URL === undefined)('issue 13: PostgreSQL single-writer fencing', () => {
  it('a writer whose expired lease was taken over can never append again (LEASE_LOST), and nothing of it is stored', async () => {
    const dir = dirFor('pg-fence-lost')
    const old = storeIn(dir, { leaseMs: 200 })
    await old.create(header('s'))
    await old.append('s', asEvents(turns(1)))
    // Idle past its lease: another store takes the session over.
    await sleep(400)
    const next = storeIn(dir)
    const second = turnBatches(2, 9).flat()
    await next.append('s', asEvents(second))
    expect(pgDump(dir, 's').lease).toMatchObject({ epoch: 2, pid: process.pid })
    const lost = await rejection(old.append('s', asEvents(second)))
    expect(lost.code).toBe('LEASE_LOST')
    expect(lost.message).toContain('session "s": this store\'s write lease (epoch 1) was taken over')
    expect(lost.message).toContain('nothing was written')
    // Never again: not by a flush, not after the new holder closes.
    const live = new Session('s', asEvents([...turns(1), ...second]), header('s'))
    expect((await rejection(old.flush(live))).code).toBe('LEASE_LOST')
    await next.close()
    expect((await rejection(old.append('s', asEvents(second)))).code).toBe('LEASE_LOST')
    const rows = pgDump(dir, 's').rows
    expect(rows.map((r) => r.seq)).toEqual([...turns(2)].map((e) => e.seq))
    expect((await storeIn(dir).load('s')).events).toEqual([...turns(1), ...second])
  })

  it('a writer renews its lease with every append: one that keeps writing is never taken over', async () => {
    const dir = dirFor('pg-fence-renew')
    const writer = storeIn(dir, { leaseMs: 400 })
    await writer.create(header('s'))
    let seq = 0
    const other = storeIn(dir)
    for (let turn = 1; turn <= 4; turn++) {
      for (const batch of turnBatches(turn, seq)) {
        await writer.append('s', asEvents(batch))
        seq += batch.length
      }
      await sleep(150)
      expect((await rejection(other.append('s', asEvents(turnBatches(9, seq).flat())))).code).toBe('SESSION_IN_USE')
    }
    expect(pgDump(dir, 's').lease).toMatchObject({ epoch: 1 })
  })

  it("refuses a live lease of another host naming it, writes nothing while it lasts, and takes it over with a new epoch once expired", async () => {
    const dir = dirFor('pg-fence-host')
    const setup = storeIn(dir)
    await setup.create(header('h'))
    await setup.append('h', asEvents(turnBatches(1, 0)[0]!))
    await setup.close()
    const s = pgSchema(dir)
    psqlExec(`UPDATE ${s}.leases SET holder = 'elsewhere/4242/x', host = 'elsewhere', pid = 4242, epoch = 7,
      expires_at = now() + interval '1 hour' WHERE session_id = 'h'`)
    const before = pgDump(dir, 'h')
    const store = storeIn(dir)
    const refused = await rejection(store.append('h', asEvents(turnBatches(1, 0)[1]!)))
    expect(refused.code).toBe('SESSION_IN_USE')
    expect(refused.message).toContain('session "h" is in use: its write lease is held by process 4242 on host "elsewhere", epoch 7')
    expect(refused.message).toContain('nothing was written')
    // A reader gets the open turn closed in memory; storage is untouched.
    const view = await store.load('h')
    expect(view.events).toEqual([...turnBatches(1, 0)[0]!, ...interruptedTurnClosers(asEvents(turnBatches(1, 0)[0]!))])
    expect(pgDump(dir, 'h')).toEqual(before)
    // Expired: the next writer's load takes it over (the repair becomes durable).
    psqlExec(`UPDATE ${s}.leases SET expires_at = now() - interval '1 second' WHERE session_id = 'h'`)
    const taken = await store.load('h', { write: true })
    expect(pgDump(dir, 'h').lease).toMatchObject({ epoch: 8, host: os.hostname(), pid: process.pid })
    expect(pgDump(dir, 'h').rows).toHaveLength(taken.events.length)
    await store.append('h', asEvents(turnBatches(2, taken.events.length).flat()))
    // The old holder's epoch no longer fences anything in: its write would update no lease row.
    expect(pgDump(dir, 'h').lease).toMatchObject({ epoch: 8 })
  })

  // Directly, and through PgBouncer in transaction mode (issue 19) where .ci/run started one.
  for (const kind of PGBOUNCER_URL === undefined ? ['postgres'] : ['postgres', 'pgbouncer']) {
  it(`two processes writing one session at once${kind === 'pgbouncer' ? ' (through PgBouncer)' : ''}: one is refused with a code, every acknowledged event is stored, contiguous`, async () => {
    const dir = dirFor(`pg-fence-two-${kind}`)
    const a = child(WRITER, [kind, dir, 'two', 'append', '1', '200'])
    const b = child(WRITER, [kind, dir, 'two', 'append', '2', '200'])
    // The loser exits on its refusal; the winner writes until it is killed.
    const first = await Promise.race([a.exit.then(() => a), b.exit.then(() => b)])
    const loser = first
    const winner = loser === a ? b : a
    expect(await loser.exit).toEqual({ code: 1, signal: null })
    // Refused by the lease while the winner holds it, or, when the winner's
    // first batch is already stored, by create (the session exists): either
    // way with a code and nothing written.
    expect(loser.stderr).toMatch(
      /^(SESSION_IN_USE Error: session "two" is in use: its write lease is held by process \d+ on host|SESSION_ALREADY_EXISTS Error: session "two" already has a persisted log)/,
    )
    expect(loser.acked).toEqual([])
    await sleep(300)
    winner.kill()
    expect((await winner.exit).signal).toBe('SIGKILL')
    expect(winner.acked.length).toBeGreaterThan(0)
    const loaded = (await storeIn(dir).load('two')).events as unknown as AnyEvent[]
    expect(loaded.map((e) => e.seq)).toEqual(loaded.map((_, i) => i))
    expect(loaded.slice(0, winner.acked.length)).toEqual(winner.acked)
  })
  }

  it('a reader in a third process sees consistent prefixes of a session being written, and writes nothing', async () => {
    const dir = dirFor('pg-fence-reader')
    const writer = child(WRITER, ['postgres', dir, 'r', 'append', '3', '200'])
    // Wait for the first acknowledged batch, then read while it writes.
    for (let i = 0; i < 200 && writer.acked.length === 0; i++) await sleep(10)
    expect(writer.acked.length).toBeGreaterThan(0)
    const reader = child(READER, [dir, 'r', '15'])
    expect(await reader.exit).toEqual({ code: 0, signal: null })
    writer.kill()
    expect((await writer.exit).signal).toBe('SIGKILL')
    expect(reader.views).toHaveLength(15)
    // Storage holds only the writer's events: no reader closed a turn there.
    const rows = pgDump(dir, 'r').rows
    expect(rows.slice(0, writer.acked.length).map((r) => r.seq)).toEqual(writer.acked.map((e) => e.seq))
    expect(rows.every((r) => !(r.type === 'turn/end' && r.data.includes('"interrupted"')))).toBe(true)
    expect(pgDump(dir, 'r').lease).toMatchObject({ epoch: 1 })
    // Each view: contiguous, the stored rows up to some point, then the
    // closers of what it kept (in memory only); views only grow.
    const stored = rows.map((r) => ({
      type: r.type,
      seq: Number(r.seq),
      time: Number(r.time),
      data: JSON.parse(r.data),
      ...(r.source_event_seqs === null ? {} : { sourceEventSeqs: JSON.parse(r.source_event_seqs) }),
      ...(r.surface_op === null ? {} : { surfaceOp: JSON.parse(r.surface_op) }),
    }))
    const storedJson = stored.map((e) => JSON.stringify(e))
    let previous = 0
    for (const view of reader.views) {
      expect(view.map((e) => e.seq)).toEqual(view.map((_, i) => i))
      let kept = 0
      while (kept < view.length && kept < stored.length && JSON.stringify(view[kept]) === storedJson[kept]) kept++
      expect(view.slice(kept)).toEqual(interruptedTurnClosers(asEvents(view.slice(0, kept))))
      expect(interruptedTurnClosers(asEvents(view))).toEqual([])
      expect(kept).toBeGreaterThanOrEqual(previous)
      previous = kept
    }
    expect(previous).toBeGreaterThan(0)
  })
})
