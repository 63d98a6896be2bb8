// A flush of a long live session builds its batch a part per event-loop turn
// (so the event loop is not held while 100k events are stringified), yet
// stays one batch: whatever runs on the session between the parts (appends,
// toJsonl, another flush) never loses, repeats or reorders an event.

import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { JsonlSessionStore, Session, SqliteSessionStore } from '../index.js'

const dirs: string[] = []
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

function temp(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-flush-parts-'))
  dirs.push(d)
  return d
}

const USER = { kind: 'user' } as const

function longLive(id: string, n: number): Session {
  const s = new Session(id, [], { version: 0, id: id as never, createdAt: 1 })
  s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
  for (let i = 1; i < n - 1; i++) {
    if (i % 9 === 0) s.append('user/message', { content: [{ type: 'text', text: `u${i}` }] as never, source: USER }, { surfaceOp: 'append' })
    else s.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', text: `c${i}` } as never })
  }
  s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
  return s
}

const STORES = {
  jsonl: (dir: string) => new JsonlSessionStore({ root: dir }),
  sqlite: (dir: string) => new SqliteSessionStore({ path: path.join(dir, 'sessions.db') }),
}

for (const [kind, make] of Object.entries(STORES)) {
  describe(`${kind} store: a long flush built in parts`, () => {
    it('writes every pending event of a long live session as one batch', async () => {
      const dir = temp()
      const s = longLive('long', 10_000)
      const store = make(dir)
      expect(await store.flush(s)).toBe(10_000)
      await store.close()
      const again = make(dir)
      expect((await again.load('long')).events).toEqual(s.events)
      await again.close()
    })

    it('loses, repeats and reorders nothing when the session appends and serializes while the flush builds its parts', async () => {
      const dir = temp()
      const s = longLive('busy', 9_000)
      const store = make(dir)
      const flushing = store.flush(s)
      // Between the flush's parts: more appends, and a toJsonl that hands
      // every pending text to the native log itself.
      await new Promise((r) => setImmediate(r))
      s.append('turn/start', { turn: 2, trigger: { kind: 'message', source: USER } })
      for (let i = 0; i < 50; i++) s.append('assistant/chunk', { turn: 2, step: 1, chunk: { type: 'text-delta', text: `late${i}` } as never })
      s.append('turn/end', { turn: 2, reason: { kind: 'completed' } })
      const jsonl = s.toJsonl()
      const first = await flushing
      expect(first).toBeGreaterThan(0)
      expect(first + (await store.flush(s))).toBe(s.seq)
      expect(await store.flush(s)).toBe(0)
      await store.close()
      const again = make(dir)
      const loaded = await again.load('busy')
      expect(loaded.events).toEqual(s.events)
      expect(Session.fromJsonl(jsonl).events).toEqual(s.events)
      await again.close()
    })
  })
}
