// store.append checks SPEC 5 against the stored session's surface (issue 10):
// a batch a load would reject (a surface type without surfaceOp, a replace
// of a seq not on the surface, surfaceOp on turn/end, ...) is refused up
// front with INVALID_SURFACE, and nothing of it is stored.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { asEvents, header, pgDump, rejection, Session, sqliteTool, STORES, T0, tempDir, turns, type AnyEvent, type SessionStore } from './fixtures-crash/stores.js'

const cleanup: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

const USER = { kind: 'user' }
const start = (seq: number): AnyEvent => ({ type: 'turn/start', seq, time: T0 + seq, data: { turn: 2, trigger: { kind: 'message', source: USER } } })
const user = (seq: number, extra: Record<string, unknown>): AnyEvent =>
  ({ type: 'user/message', seq, time: T0 + seq, data: { content: [{ type: 'text', text: 'summary' }], source: USER }, ...extra }) as AnyEvent
const replace = (seq: number, from: number, to: number, sources: number[]) =>
  user(seq, { surfaceOp: { op: 'replace', start: from, end: to }, sourceEventSeqs: sources })

// After turns(1) the surface is [1, 4, 6] (the prompt, the reply, the tool result).
const BAD: [string, AnyEvent[], string][] = [
  ['a surface type without surfaceOp', [start(9), user(10, {})], 'event at index 1 (seq 10): session event "user/message" is surface-eligible and requires a surfaceOp marker'],
  ['a replace of a seq not on the surface', [start(9), replace(10, 99, 6, [6])], 'event at index 1 (seq 10): surface replace: start seq 99 not found in surface'],
  ['surfaceOp on turn/end', [start(9), { type: 'turn/end', seq: 10, time: T0, data: { turn: 2, reason: { kind: 'completed' } }, surfaceOp: 'append' } as AnyEvent], 'event at index 1 (seq 10): session event "turn/end" is not surface-eligible and cannot carry surfaceOp'],
  ['a replace that leaves a shadowed node out of sourceEventSeqs', [start(9), replace(10, 1, 6, [1, 4])], 'event at index 1 (seq 10): surface replace: sourceEventSeqs must include every shadowed surface node; missing 6'],
  ['a replace of a node an earlier event of the batch replaced', [start(9), replace(10, 1, 6, [1, 4, 6]), replace(11, 4, 4, [4])], 'event at index 2 (seq 11): surface replace: start seq 4 not found in surface'],
]

function stored(kind: string, dir: string): unknown {
  if (kind === 'jsonl') return fs.readFileSync(path.join(dir, '_no-cwd', 's.jsonl'), 'utf8')
  if (kind === 'postgres') return pgDump(dir, 's').rows
  return sqliteTool(path.join(dir, 'sessions.db'), { op: 'dump', id: 's' })
}

for (const { kind, make } of STORES) {
  describe(`${kind} store: append checks the surface (SPEC 5)`, () => {
    function storeIn(dir: string): SessionStore {
      const s = make(dir)
      cleanup.push(() => s.close())
      return s
    }
    function fresh(label: string): string {
      const dir = tempDir(label)
      cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
      return dir
    }

    for (const [what, batch, message] of BAD) {
      it(`rejects ${what} and stores nothing of the batch`, async () => {
        const dir = fresh(`${kind}-surface`)
        const store = storeIn(dir)
        await store.create(header('s'))
        await store.append('s', asEvents(turns(1)))
        const before = stored(kind, dir)
        expect(await rejection(store.append('s', asEvents(batch)))).toEqual({
          code: 'INVALID_SURFACE',
          message: `invalid append batch for session "s": ${message}`,
        })
        expect(stored(kind, dir)).toEqual(before)
        // The log stays loadable and continues where it was.
        const good = [start(9), replace(10, 1, 6, [1, 4, 6])]
        await store.append('s', asEvents(good))
        expect((await storeIn(dir).load('s')).events.slice(0, 11)).toEqual([...turns(1), ...good])
      })
    }

    it('checks against the stored surface after a restart and after a flush', async () => {
      const dir = fresh(`${kind}-surface-stored`)
      const first = storeIn(dir)
      await first.create(header('s'))
      const end = { type: 'turn/end', seq: 11, time: T0, data: { turn: 2, reason: { kind: 'completed' } } } as AnyEvent
      await first.append('s', asEvents([...turns(1), start(9), replace(10, 1, 6, [1, 4, 6]), end]))
      await first.close()
      // A new store reads the surface [10] from storage.
      const second = storeIn(dir)
      const before = stored(kind, dir)
      expect((await rejection(second.append('s', asEvents([replace(12, 1, 1, [1])])))).message).toBe(
        'invalid append batch for session "s": event at index 0 (seq 12): surface replace: start seq 1 not found in surface',
      )
      expect(stored(kind, dir)).toEqual(before)
      // A flush from a live session, then an append checked against the surface it left.
      const live = await second.open('s')
      live.append('user/message', { content: [{ type: 'text', text: 'more' }], source: USER }, { surfaceOp: 'append' })
      expect(await second.flush(live)).toBe(1)
      const afterFlush = stored(kind, dir)
      expect((await rejection(second.append('s', asEvents([replace(13, 10, 99, [10])])))).message).toBe(
        'invalid append batch for session "s": event at index 0 (seq 13): surface replace: end seq 99 not found in surface',
      )
      expect(stored(kind, dir)).toEqual(afterFlush)
      await second.append('s', asEvents([replace(13, 10, 12, [10, 12])]))
      const loaded = await storeIn(dir).load('s')
      expect(loaded.events).toHaveLength(14)
      expect(new Session('s', loaded.events).deriveMessages()).toHaveLength(1)
    })
  })
}
