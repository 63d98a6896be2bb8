// A load of a log another process is writing, once the log is longer than
// the pieces a load reads and folds as it goes (1 MiB; src/store/jsonl.rs
// `read_folding`, src/store/rows.rs `read_spliced`): every load, by a
// reader store that never writes (SPEC 11), returns the events the writer
// had acknowledged when the load began, unchanged, then at most what it
// acknowledged meanwhile, closed as SPEC 8 closes an interrupted turn;
// never an error and never a torn event.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { describe, expect, it } from 'vitest'
import { interruptedTurnClosers, spawnChild, STORES, tempDir, type AnyEvent } from './fixtures-crash/stores.js'

const WRITER = path.join(__dirname, 'fixtures-crash', 'writer.cjs')
const ID = 'written'

describe('SPEC 11: a load while another process writes a long log', () => {
  for (const { kind, make } of STORES.filter((s) => s.kind !== 'postgres')) {
    it(`${kind}: each load is a prefix of what the writer acknowledged, closed`, async () => {
      const dir = tempDir(`written-${kind}`)
      // Turns of up to 60 KB: the log passes 3 MiB after about a hundred.
      const writer = spawnChild(WRITER, [kind, dir, ID, 'append', '5', '60000'])
      const { acked } = writer
      let exited = false
      writer.exit.then(() => (exited = true))
      const reader = make(dir)
      let loads = 0
      const seen: { before: number; events: AnyEvent[] }[] = []
      const size = (events: AnyEvent[]) => events.reduce((n, e) => n + JSON.stringify(e).length + 1, 0)
      try {
        while (loads < 12 || size(acked) < 3 << 20) {
          if (exited) throw new Error(`writer exited: ${writer.stderr}`)
          if (acked.length === 0) {
            await new Promise((resolve) => setTimeout(resolve, 20))
            continue
          }
          const before = acked.length
          const events = (await reader.load(ID)).events as unknown as AnyEvent[]
          loads += 1
          seen.push({ before, events })
        }
        // A load may have read a batch the writer made durable but had not
        // acknowledged yet: let the writer go on until its acknowledgements
        // pass every load (a load's few closers included) before it is killed.
        const longest = Math.max(...seen.map((l) => l.events.length))
        const bound = Date.now() + 20_000
        while (acked.length < longest && !exited && Date.now() < bound) {
          await new Promise((resolve) => setTimeout(resolve, 20))
        }
      } finally {
        writer.kill()
        await writer.exit
        await reader.close()
        fs.rmSync(dir, { recursive: true, force: true })
      }
      // Checked against everything the writer acknowledged before it was
      // killed (which passes what every load read: above).
      expect(loads).toBeGreaterThanOrEqual(12)
      for (const { before, events } of seen) {
        let kept = 0
        while (kept < events.length && kept < acked.length && isDeepStrictEqual(events[kept], acked[kept])) kept++
        // What was acknowledged before the load began is there, unchanged;
        // after the stored events, only the closers of the turn they leave open.
        expect(kept).toBeGreaterThanOrEqual(before)
        expect(events.slice(kept), `after ${kept} of ${acked.length} acknowledged`).toEqual(interruptedTurnClosers(events.slice(0, kept) as never))
        expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i))
      }
      // The later loads read logs of several pieces.
      expect(seen.filter((l) => size(l.events) > 2 << 20).length).toBeGreaterThanOrEqual(2)
    }, 120_000)
  }
})
