// SPEC 8 and 11 as properties: any crash point of a realistic agent log is
// repaired into a balanced log that keeps every complete event, satisfies the
// SPEC 9 checks and derives like a live session would.

import fc from 'fast-check'
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  checkSessionInvariants,
  interruptedTurnClosers,
  JsonlSessionStore,
  Session,
  type SessionEvent,
} from '../index.js'

// The shared workload generator: a tool-using agent's exact append sequence.
const workload = path.resolve(__dirname, '../test-data/bench/workload.mjs')
type Op = { type: string; data: unknown; opts?: unknown }
type Workload = {
  generateOps(n: number, p?: Record<string, unknown>): { ops: Op[] }
  toEvents(ops: Op[], t0?: number): SessionEvent[]
}
let generateOps: Workload['generateOps']
let toEvents: Workload['toEvents']
beforeAll(async () => {
  ;({ generateOps, toEvents } = (await import(workload)) as Workload)
})

/** Index of the last event of one of `types`, or -1. */
function lastIndexOf(events: readonly SessionEvent[], ...types: string[]): number {
  for (let i = events.length - 1; i >= 0; i--) if (types.includes(events[i].type)) return i
  return -1
}

/** A complete log of `turns` turns (small payloads), as stored events. */
function agentLog(seed: number, events: number): SessionEvent[] {
  const { ops } = generateOps(events, {
    seed,
    stepsPerTurn: 1 + (seed % 3),
    reasoningDeltas: 2,
    textDeltas: 2,
    argDeltas: 2,
    deltaChars: 4,
    userChars: 10,
    toolResultChars: 10,
    systemChars: 10,
    tools: 2,
    headerChangeEvery: 2,
  })
  return toEvents(ops, 1_760_000_000_000)
}

const root = mkdtempSync(path.join(tmpdir(), 'dsh-repair-prop-'))
afterAll(() => rmSync(root, { recursive: true, force: true }))

const crashPoint = fc.record({
  seed: fc.integer({ min: 1, max: 1_000_000 }),
  length: fc.integer({ min: 1, max: 160 }),
  cutFraction: fc.double({ min: 0, max: 1, noNaN: true }),
})

function cut({ seed, length, cutFraction }: { seed: number; length: number; cutFraction: number }) {
  const log = agentLog(seed, length)
  const keep = Math.floor(cutFraction * log.length)
  return { log, prefix: log.slice(0, keep) }
}

describe('SPEC 8 interruptedTurnClosers over every crash point', () => {
  it('closes exactly the open turn: the repaired log is balanced, valid and keeps the prefix', () => {
    fc.assert(
      fc.property(crashPoint, (point) => {
        const { prefix } = cut(point)
        const closers = interruptedTurnClosers(prefix)
        const lastBoundary = prefix[lastIndexOf(prefix, 'turn/start', 'turn/end')]
        // Closers exist exactly when a turn is open at the end.
        expect(closers.length > 0).toBe(lastBoundary?.type === 'turn/start')
        const repaired = [...prefix, ...closers]
        // Seqs continue the log, with the last event's time.
        closers.forEach((c, i) => {
          expect(c.seq).toBe(prefix.length + i)
          expect(c.time).toBe(prefix.at(-1)?.time)
        })
        // Balanced, surface-valid, and SPEC 9-clean.
        expect(interruptedTurnClosers(repaired)).toEqual([])
        expect(() => checkSessionInvariants(repaired)).not.toThrow()
        const session = new Session('r', repaired)
        expect(session.seq).toBe(repaired.length)
        // Every assistant tool call of the closed turn has a result before the turn ends.
        const open = new Set<string>()
        for (const e of repaired.slice(Math.max(0, lastIndexOf(prefix, 'turn/start')))) {
          if (e.type === 'assistant/message') {
            for (const b of e.data.content) if (b.type === 'tool-call') open.add(b.id)
          }
          if (e.type === 'tool/result') open.delete(e.data.callId)
          if (e.type === 'step/end') open.clear()
        }
        expect(open.size).toBe(0)
      }),
      { numRuns: 150 },
    )
  })
})

describe('SPEC 11 JSONL load repairs any torn crash point durably', () => {
  it('keeps every complete event, drops the torn line, appends the closers and loads the same twice', async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(crashPoint, fc.integer({ min: 1, max: 40 }), async (point, tornBytes) => {
        const { log, prefix } = cut(point)
        const id = `prop-${run++}`
        const dir = path.join(root, `r${run}`)
        const store = new JsonlSessionStore({ root: dir })
        const header = { version: 0, id, createdAt: 1_760_000_000_000 }
        // What a writer killed mid-line leaves: complete lines, then part of the next one.
        const next = log[prefix.length]
        const torn = next === undefined ? '' : JSON.stringify(next).slice(0, tornBytes)
        const text = [JSON.stringify({ type: 'session', ...header }), ...prefix.map((e) => JSON.stringify(e))].join('\n') + '\n' + torn
        const file = store.locate(header as never).path
        mkdirSync(path.dirname(file), { recursive: true })
        writeFileSync(file, text)

        const first = await store.load(id)
        const closers = interruptedTurnClosers(prefix)
        expect(first.events).toEqual([...prefix, ...closers])
        // The repair is on disk: complete lines, then the closers; nothing torn.
        const onDisk = readFileSync(file, 'utf8')
        expect(onDisk.endsWith('\n')).toBe(true)
        expect(onDisk.split('\n').slice(1, -1).map((l) => JSON.parse(l))).toEqual([...prefix, ...closers])
        const second = await store.load(id)
        expect(second.events).toEqual(first.events)
        expect(readFileSync(file, 'utf8')).toBe(onDisk)
        // The repaired session derives as a live replay of the same events does.
        const opened = await store.open(id)
        expect(opened.deriveMessages()).toEqual(new Session(id, first.events).deriveMessages())
        await store.close()
      }),
      { numRuns: 40 },
    )
  })
})

describe('SPEC 11 JSONL load of a log longer than its read pieces', () => {
  // Past 1 MiB a load folds the file in pieces as it reads them
  // (src/store/jsonl.rs `read_folding`): a crash point anywhere in a long
  // log, and so in any piece, is repaired as in a short one.
  it('keeps every complete event, drops the torn line and appends the closers', async () => {
    const log = agentLog(7, 14_000)
    const lines = log.map((e) => JSON.stringify(e))
    const header = { version: 0, id: 'long', createdAt: 1_760_000_000_000 }
    const head = JSON.stringify({ type: 'session', ...header })
    expect(lines.reduce((n, l) => n + l.length + 1, 0)).toBeGreaterThan(2 << 20)
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: log.length }),
        fc.integer({ min: 0, max: 60 }),
        async (keep, tornBytes) => {
          const prefix = log.slice(0, keep)
          const dir = path.join(root, `long-${run++}`)
          const store = new JsonlSessionStore({ root: dir })
          const torn = (lines[keep] ?? '').slice(0, tornBytes)
          const file = store.locate(header as never).path
          mkdirSync(path.dirname(file), { recursive: true })
          writeFileSync(file, `${head}\n${lines.slice(0, keep).join('\n')}\n${torn}`)

          const closers = interruptedTurnClosers(prefix)
          const loaded = await store.load('long')
          expect(loaded.events.length).toBe(prefix.length + closers.length)
          expect(loaded.events).toEqual([...prefix, ...closers])
          const onDisk = readFileSync(file, 'utf8')
          expect(onDisk).toBe(`${head}\n${[...lines.slice(0, keep), ...closers.map((c) => JSON.stringify(c))].join('\n')}\n`)
          await store.close()
          rmSync(dir, { recursive: true, force: true })
        },
      ),
      { numRuns: 25 },
    )
  })
})
