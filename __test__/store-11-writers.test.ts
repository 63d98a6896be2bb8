// One writer per session, whatever the count; readers never hold a writer
// up (issue 29, cases 1 and 2; SPEC 11.1 "A read never wedges a writer").
// A store keeps the write lease of every session it writes until it
// closes: a second process is refused each of them however many there are,
// under a descriptor limit below their number too. A load or open that is
// not a writer's takes no lease and keeps none.

import { type ChildProcess, spawn } from 'node:child_process'
import * as path from 'node:path'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { type Holder, spawnHolder } from './fixtures-crash/holder.js'
import { asEvents, header, rejection, Session, STORES, testCleanup, turnBatches, turns, type SessionStore } from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()
const MANY_WRITER = path.join(__dirname, 'fixtures-live', 'many-writer.cjs')
const FILE_STORES = STORES.filter((s) => s.kind !== 'postgres')

/** A child writing `count` sessions through one store, under `ulimit -n` `fds`. */
interface ManyWriter {
  pid: number
  /** Descriptors the child held after writing them, beyond those before. */
  held: number
  order(name: 'flush' | 'close'): Promise<string>
}

async function manyWriter(kind: string, dir: string, count: number, fds = 256): Promise<ManyWriter> {
  const script = `ulimit -n ${fds} && exec "${process.execPath}" "${MANY_WRITER}" ${kind} "${dir}" ${count}`
  const child: ChildProcess = spawn('bash', ['-c', script], { stdio: ['pipe', 'pipe', 'pipe'] })
  cleanup.push(() => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      return new Promise<void>((resolve) => child.on('exit', () => resolve()))
    }
  })
  let stderr = ''
  child.stderr!.on('data', (c) => (stderr += c))
  const lines: string[] = []
  const waiting: ((line: string) => void)[] = []
  let buffered = ''
  child.stdout!.setEncoding('utf8')
  child.stdout!.on('data', (chunk: string) => {
    buffered += chunk
    for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
      const line = buffered.slice(0, nl)
      buffered = buffered.slice(nl + 1)
      const next = waiting.shift()
      if (next) next(line)
      else lines.push(line)
    }
  })
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()))
  const next = () =>
    new Promise<string>((resolve, reject) => {
      const line = lines.shift()
      if (line !== undefined) return resolve(line)
      waiting.push(resolve)
      exited.then(() => reject(new Error(`writer exited: ${stderr}`)))
    })
  const ready = await next()
  const [word, pid, held] = ready.split(' ')
  if (word !== 'READY') throw new Error(`writer did not start: ${ready} ${stderr}`)
  return {
    pid: Number(pid),
    held: Number(held),
    order(name) {
      child.stdin!.write(`${name}\n`)
      return next()
    },
  }
}

function storeIn(make: (dir: string) => SessionStore, dir: string): SessionStore {
  const s = make(dir)
  cleanup.push(() => s.close())
  return s
}

/** A live session holding `events`, appended through its own API. */
function liveSession(id: string, events: ReturnType<typeof turns>): InstanceType<typeof Session> {
  const s = new Session(id, [], header(id, { createdAt: 1 }))
  for (const e of events) {
    const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined ? { surfaceOp: e.surfaceOp } : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
    ;(s.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
  }
  return s
}

/** Try to write every session `s0..s<count-1>` through `store`: the codes it answered. */
async function tryEach(store: SessionStore, count: number): Promise<Map<string, number>> {
  const codes = new Map<string, number>()
  for (let i = 0; i < count; i++) {
    // The next turn of a session holding one (seq 7 on).
    const error = await rejection(store.append(`s${i}`, asEvents(turnBatches(2, 7)[0]!))).catch(() => ({ code: 'RESOLVED' }))
    codes.set(error.code, (codes.get(error.code) ?? 0) + 1)
  }
  return codes
}

for (const { kind, make } of STORES) {
  describe(`${kind} store: a writer keeps every session it writes (issue 29, case 1)`, () => {
    it('a second process is refused each of 300 sessions (more than a 256-descriptor limit), and the writer keeps writing them', async () => {
      const dir = dirFor(`${kind}-many`)
      const w = await manyWriter(kind, dir, 300)
      if (process.platform === 'linux' && kind !== 'postgres') expect(w.held).toBeLessThanOrEqual(8)
      const other = storeIn(make, dir)
      expect(await tryEach(other, 300)).toEqual(new Map([['SESSION_IN_USE', 300]]))
      // A flush of a session with the same history is refused the same way.
      expect((await rejection(other.flush(liveSession('s0', turns(1))))).code).toBe('SESSION_IN_USE')
      // A reader reads them meanwhile (the writer's events, timed by its own appends).
      const shape = (events: readonly { type: string; seq: number }[]) => events.map((e) => `${e.seq}:${e.type}`)
      expect(shape((await other.load('s0')).events)).toEqual(shape(turns(1)))
      expect((await other.open('s299')).seq).toBe(turns(1).length)
      // The writer's oldest and newest sessions still take its writes.
      expect(await w.order('flush')).toBe(`FLUSHED ${2 * turns(1).length}`)
      expect(await w.order('close')).toBe('CLOSED')
      const after = storeIn(make, dir)
      expect((await after.load('s0')).events).toHaveLength(2 * turns(1).length)
      expect(shape((await after.load('s150')).events)).toEqual(shape(turns(1)))
    }, 120_000)
  })
}

for (const { kind, make } of FILE_STORES) {
  describe(`${kind} store: one store writing N sessions across the descriptor limit (property, issue 29)`, () => {
    it('every attempt of a second process on a live writer\'s session is refused', async () => {
      let run = 0
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: 2000 }), async (count) => {
          const dir = dirFor(`${kind}-prop-${run++}`)
          const w = await manyWriter(kind, dir, count)
          const other = make(dir)
          try {
            expect(await tryEach(other, count)).toEqual(new Map([['SESSION_IN_USE', count]]))
          } finally {
            await other.close()
          }
          expect(await w.order('flush')).toMatch(/^FLUSHED \d+$/)
          expect(await w.order('close')).toBe('CLOSED')
        }),
        { numRuns: 2, examples: [[2000]] },
      )
    }, 600_000)
  })
}

async function holder(kind: Parameters<typeof spawnHolder>[0], dir: string, id: string): Promise<Holder> {
  const h = await spawnHolder(kind, dir, id)
  cleanup.push(() => {
    if (h.child.exitCode === null && h.child.signalCode === null) return h.kill()
  })
  return h
}

for (const { kind, make } of STORES) {
  describe(`${kind} store: readers take no lease (issue 29, case 2)`, () => {
    it('a store that loaded and opened a session never holds up the process that writes it next', async () => {
      const dir = dirFor(`${kind}-reader-first`)
      const seed = storeIn(make, dir)
      await seed.create(header('r'))
      for (const batch of turnBatches(1, 0)) await seed.append('r', asEvents(batch))
      await seed.close()
      // A dashboard reads the session while nobody writes it, and stays open.
      const dashboard = storeIn(make, dir)
      expect((await dashboard.load('r')).events).toEqual(turns(1))
      expect((await dashboard.open('r')).seq).toBe(turns(1).length)
      // The agent writes it from another process: nothing refuses it.
      const agent = await holder(kind, dir, 'r')
      expect((await agent.order('turn')).error).toBeUndefined()
      // The dashboard reads what the agent wrote, and still holds nothing.
      expect((await dashboard.load('r')).events).toHaveLength(2 * turns(1).length)
      expect((await agent.order('turn')).error).toBeUndefined()
      // A writer that wants to fail fast says so, and is refused at once.
      const started = Date.now()
      const refused = await rejection(dashboard.open('r', { write: true }))
      expect(refused.code).toBe('SESSION_IN_USE')
      expect(Date.now() - started).toBeLessThan(5_000)
      expect((await rejection(dashboard.load('r', { write: true }))).code).toBe('SESSION_IN_USE')
      await agent.order('close')
      const after = storeIn(make, dir)
      expect(agent.acked).toHaveLength(2 * turns(1).length)
      expect((await after.load('r')).events).toEqual([...turns(1), ...agent.acked])
    })

    it('a writer\'s open keeps the lease until close, and its first flush writes only what was appended', async () => {
      const dir = dirFor(`${kind}-writer-open`)
      const seed = storeIn(make, dir)
      await seed.create(header('w'))
      for (const batch of turnBatches(1, 0)) await seed.append('w', asEvents(batch))
      await seed.close()
      const writer = storeIn(make, dir)
      const session = await writer.open('w', { write: true })
      const other = storeIn(make, dir)
      expect((await rejection(other.append('w', asEvents(turnBatches(2, session.seq)[0]!)))).code).toBe('SESSION_IN_USE')
      for (const e of turnBatches(2, session.seq).flat()) {
        const opts = e.surfaceOp === undefined ? [] : [e.sourceEventSeqs === undefined ? { surfaceOp: e.surfaceOp } : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
        ;(session.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
      }
      expect(await writer.flush(session)).toBe(turns(1).length)
      await writer.close()
      expect((await other.load('w')).events).toHaveLength(2 * turns(1).length)
      // Now free: the other store's append takes it.
      await other.append('w', asEvents(turnBatches(3, 2 * turns(1).length)[0]!))
    })

    it('a reader makes an interrupted turn\'s repair durable when the lease is free, and keeps no lease', async () => {
      const dir = dirFor(`${kind}-reader-repair`)
      const seed = storeIn(make, dir)
      await seed.create(header('i'))
      const [prompt] = turnBatches(1, 0)
      await seed.append('i', asEvents(prompt!))
      await seed.close()
      const reader = storeIn(make, dir)
      const loaded = await reader.load('i')
      expect(loaded.events.length).toBeGreaterThan(prompt!.length)
      // Durable: a fresh store reads the closers as stored, and the
      // reader holds nothing, so another process writes next.
      const fresh = storeIn(make, dir)
      expect((await fresh.load('i')).events).toEqual(loaded.events)
      const agent = await holder(kind, dir, 'i')
      expect(agent.loaded).toBe(loaded.events.length)
      expect((await agent.order('turn')).error).toBeUndefined()
      await agent.order('close')
    })

    it('load and open refuse options that are not { write?: boolean }', async () => {
      const store = storeIn(make, dirFor(`${kind}-options`))
      for (const bad of [null, 1, 'w', { write: 1 }, { write: 'yes' }]) {
        expect((await rejection(store.load('x', bad as never))).code).toBe('INVALID_ARGUMENT')
        expect((await rejection(store.open('x', bad as never))).code).toBe('INVALID_ARGUMENT')
      }
      expect((await rejection(store.load('x', { write: false }))).code).toBe('SESSION_NOT_FOUND')
    })
  })
}
