// SPEC 11 and 11.1: a batch is written whole, in one transaction, however
// many statements it takes. The SQLite store inserts a statement's rows at
// a time (32 a statement), the PostgreSQL store at most 8 MiB of event text
// an INSERT (src/store/postgres.rs `INSERT_BYTES`), so that a
// million-event flush never holds the columns of the whole batch. Whatever
// the cut, what a store acknowledges it loads back unchanged.

import { describe, expect, it } from 'vitest'
import {
  asEvents, header, POOLER_STORES, Session, STORES, testCleanup, turnBatches, type AnyEvent, type SessionStore,
} from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()

/** `n` turns from seq 0; every third turn's prompt carries `big` characters (a multi-byte one among them). */
function turnsWith(n: number, big: number): AnyEvent[] {
  const out: AnyEvent[] = []
  for (let t = 1; t <= n; t++) {
    const text = t % 3 === 0 ? `turn ${t} ${'é'.repeat(7)}${'x'.repeat(big)}` : `question ${t}`
    out.push(...turnBatches(t, out.length, text).flat())
  }
  return out
}

/** `store`, closed after the test. */
const opened = (store: SessionStore): SessionStore => {
  cleanup.push(() => store.close())
  return store
}

for (const { kind, make } of [...STORES, ...POOLER_STORES]) {
  describe(`${kind} store: a batch of many statements`, () => {
    it('appends a batch of any row count and over 8 MiB whole, and loads it back unchanged', async () => {
      const dir = dirFor(`${kind}-large`)
      const store = opened(make(dir))
      // 33 turns: 297 events (not a multiple of 32), eleven prompts of 1 MiB.
      const events = turnsWith(33, 1 << 20)
      expect(events.length % 32).not.toBe(0)
      await store.create(header('big'))
      await store.append('big', asEvents(events.slice(0, 5)))
      await store.append('big', asEvents(events.slice(5)))
      const loaded = await store.load('big')
      expect(loaded.events).toEqual(events)
    })

    it('flushes a session read from text (its log holds the texts) whole, and opens it back unchanged', async () => {
      const dir = dirFor(`${kind}-flush-large`)
      const store = opened(make(dir))
      const source = new Session('read', asEvents(turnsWith(30, 3 << 20)))
      const read = Session.fromJsonl(source.toJsonl())
      expect(await store.flush(read)).toBe(read.seq)
      const back = await store.open('read')
      expect(back.toJsonl()).toBe(read.toJsonl())
      expect(back.deriveMessages()).toEqual(read.deriveMessages())
      await store.close()
      // A second store reads what the first acknowledged.
      const again = opened(make(dir))
      expect((await again.load('read')).events).toEqual(source.events)
    })
  })
}
