// One writer per session (issue 10): a store takes the session's write lease
// before it writes, and a second writer, in another process or in this one,
// is refused at once with SESSION_IN_USE; nothing it sent is stored.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { type Holder, spawnHolder } from './fixtures-crash/holder.js'
import {
  asEvents,
  header,
  interruptedTurnClosers,
  rejection,
  Session,
  pgDump,
  sqliteTool,
  STORES,
  POOLER_STORES,
  isPostgres,
  type StoreKind,
  turnBatches,
  turns,
  type SessionStore,
  testCleanup,
} from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()

async function holder(kind: StoreKind, dir: string, id: string): Promise<Holder> {
  const h = await spawnHolder(kind, dir, id)
  cleanup.push(() => {
    if (h.child.exitCode === null && h.child.signalCode === null) return h.kill()
  })
  return h
}

function storeIn(make: (dir: string) => SessionStore, dir: string): SessionStore {
  const s = make(dir)
  cleanup.push(() => s.close())
  return s
}

/** A live session holding `events`, appended through its own API. */
function liveSession(id: string, events: ReturnType<typeof turns>): InstanceType<typeof Session> {
  const s = new Session(id, [], header(id))
  for (const e of events) {
    const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined ? { surfaceOp: e.surfaceOp } : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
    ;(s.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
  }
  return s
}

for (const { kind, make } of [...STORES, ...POOLER_STORES]) {
  describe(`${kind} store: one writer per session across processes`, () => {
    it('refuses a second process with SESSION_IN_USE naming the session and the holder, and stores none of it', async () => {
      const dir = dirFor(`${kind}-lease-proc`)
      const h = await holder(kind, dir, 'shared')
      expect((await h.order('turn')).error).toBeUndefined()
      const store = storeIn(make, dir)
      const refused = await rejection(store.append('shared', asEvents(turnBatches(2, 9).flat())))
      expect(refused.code).toBe('SESSION_IN_USE')
      expect(refused.message).toContain('session "shared" is in use')
      expect(refused.message).toContain(`held by process ${h.pid}`)
      expect(refused.message).toContain('nothing was written')
      // A flush of a live session with the same history is refused the same way.
      const live = liveSession('shared', turns(2))
      expect((await rejection(store.flush(live))).code).toBe('SESSION_IN_USE')
      // The holder is not disturbed: its next turn is acknowledged.
      expect((await h.order('turn')).error).toBeUndefined()
      await h.order('close')
      // Every acknowledged event loads back, nothing of the refused party.
      const after = storeIn(make, dir)
      expect((await after.load('shared')).events).toEqual(h.acked)
      expect(h.acked).toEqual(turns(2))
    })

    it('lets exactly one of two racing processes write; the other is refused at once', async () => {
      const dir = dirFor(`${kind}-lease-race`)
      const [a, b] = await Promise.all([holder(kind, dir, 'race'), holder(kind, dir, 'race')])
      const answers = await Promise.all([a.order('turn'), b.order('turn')])
      const refused = answers.filter((x) => x.error !== undefined)
      expect(refused).toHaveLength(1)
      expect(refused[0]!.error!.code).toBe('SESSION_IN_USE')
      expect(refused[0]!.acked).toEqual([])
      const winner = answers[0]!.error === undefined ? a : b
      expect((await winner.order('turn')).error).toBeUndefined()
      await Promise.all([a.order('close'), b.order('close')])
      const loaded = await storeIn(make, dir).load('race')
      expect(loaded.events).toEqual(winner.acked)
      expect(loaded.events).toEqual(turns(2))
    })

    it('is released by the OS when the holder is killed: the next writer takes it and makes the repair durable', async () => {
      const dir = dirFor(`${kind}-lease-kill`)
      const h = await holder(kind, dir, 'k')
      await h.order('turn')
      await h.order('open-turn')
      const store = storeIn(make, dir)
      expect((await rejection(store.append('k', asEvents(turnBatches(3, h.acked.length).flat())))).code).toBe('SESSION_IN_USE')
      await h.kill()
      // The lease died with the process: this store loads as the writer.
      const closers = interruptedTurnClosers(asEvents(h.acked))
      const loaded = await store.load('k')
      expect(loaded.events).toEqual([...h.acked, ...closers])
      // ...and the repair is durable: a raw read of storage holds the closers.
      if (kind === 'jsonl') {
        const file = path.join(dir, '_no-cwd', 'k.jsonl')
        const lines = fs.readFileSync(file, 'utf8').trimEnd().split('\n')
        expect(lines.slice(1).map((l) => JSON.parse(l))).toEqual(loaded.events)
      } else if (isPostgres(kind)) {
        expect(pgDump(dir, 'k').rows).toHaveLength(loaded.events.length)
      } else {
        const dump = sqliteTool(path.join(dir, 'sessions.db'), { op: 'dump', id: 'k' })
        expect(dump.rows).toHaveLength(loaded.events.length)
      }
      const next = turnBatches(3, loaded.events.length).flat()
      await store.append('k', asEvents(next))
      expect((await storeIn(make, dir).load('k')).events).toEqual([...loaded.events, ...next])
    })
  })

  describe(`${kind} store: one writer per session within a process`, () => {
    it('refuses a second store object with SESSION_IN_USE until the first closes', async () => {
      const dir = dirFor(`${kind}-lease-objects`)
      const first = storeIn(make, dir)
      const second = storeIn(make, dir)
      await first.create(header('s'))
      await first.append('s', asEvents(turns(1)))
      const next = turnBatches(2, 9).flat()
      const refused = await rejection(second.append('s', asEvents(next)))
      expect(refused.code).toBe('SESSION_IN_USE')
      expect(refused.message).toContain(`held by another store of this process (pid ${process.pid})`)
      expect((await rejection(second.flush(liveSession('s', turns(2))))).code).toBe('SESSION_IN_USE')
      // Creating the id again is refused as before (it has a stored log).
      expect((await rejection(second.create(header('s')))).code).toBe('SESSION_ALREADY_EXISTS')
      // Two intents for a new id: the first to write wins the lease.
      await first.create(header('n'))
      await second.create(header('n'))
      await second.append('n', asEvents(turns(1)))
      expect((await rejection(first.append('n', asEvents(turns(1))))).code).toBe('SESSION_IN_USE')
      // The first store keeps writing; nothing of the refused calls was stored.
      await first.append('s', asEvents(next))
      expect((await second.load('s')).events).toEqual([...turns(1), ...next])
      await first.close()
      // Released by close(): the second store now writes, after reading the log again.
      const third = turnBatches(3, 18).flat()
      await second.append('s', asEvents(third))
      expect((await storeIn(make, dir).load('s')).events).toEqual([...turns(1), ...next, ...third])
    })

    it('a second store that loaded a session while it was held reads it again before it writes', async () => {
      const dir = dirFor(`${kind}-lease-stale`)
      const first = storeIn(make, dir)
      const second = storeIn(make, dir)
      await first.create(header('s'))
      await first.append('s', asEvents(turnBatches(1, 0)[0]!))
      // The second store's view closes the open turn in memory only.
      const view = await second.load('s')
      expect(view.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
      // The holder finishes its turn, then releases the session.
      const [, b, c] = turnBatches(1, 0)
      await first.append('s', asEvents([...b!, ...c!]))
      await first.close()
      // The second store's stale view (3 events) must not decide where it
      // writes: the stored log holds 9, so seq 3 does not continue it.
      expect((await rejection(second.append('s', asEvents(turnBatches(2, 3).flat())))).code).toBe('SEQ_MISMATCH')
      await second.append('s', asEvents(turnBatches(2, 9).flat()))
      expect((await storeIn(make, dir).load('s')).events).toEqual(turns(2))
    })
  })
}
