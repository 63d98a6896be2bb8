// SPEC 11: the persistence contract, run against both stores from one suite.

import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { Worker } from 'node:worker_threads'
import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import {
  asEvents,
  header,
  interruptedTurnClosers,
  JsonlSessionStore,
  Session,
  SqliteSessionStore,
  type SessionStore,
  rejection,
  sqliteTool,
  STORES,
  POOLER_STORES,
  isPostgres,
  T0,
  tempDir,
  turnBatches,
  turns,
  type AnyEvent,
} from './fixtures-crash/stores.js'
import { catchError } from './spec-helpers.js'

/** The file holding a store's leases as byte ranges (Linux; elsewhere each `.lock` file is its lease). */
const LEASE_FILES = process.platform === 'linux' ? ['leases'] : []

const WORKLOAD = path.resolve(__dirname, '../test-data/bench/workload.mjs')

const cleanup: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0)) await f()
})

/**
 * A store in a fresh directory. `reopen()` adds another store on the same
 * directory beside the open ones (a reader of sessions they write);
 * `restart()` closes every open store first (their write leases with
 * them), as a process restart does.
 */
function setup(
  make: (dir: string) => SessionStore,
  label: string,
): { dir: string; store: SessionStore; reopen: () => SessionStore; restart: () => Promise<SessionStore> } {
  const dir = tempDir(label)
  const opened: SessionStore[] = []
  const reopen = () => {
    const s = make(dir)
    opened.push(s)
    return s
  }
  const restart = async () => {
    for (const s of opened) await s.close()
    return reopen()
  }
  const store = reopen()
  cleanup.push(async () => {
    for (const s of opened) await s.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
  return { dir, store, reopen, restart }
}

for (const { kind, make } of [...STORES, ...POOLER_STORES]) {
  describe(`${kind} store: lazy materialization`, () => {
    it('create records intent only: nothing is listed or loadable before the first append', async () => {
      const { store, dir } = setup(make, `${kind}-lazy`)
      await store.create(header('s'))
      expect(await store.list()).toEqual([])
      expect(await rejection(store.load('s'))).toEqual({ code: 'SESSION_NOT_FOUND', message: 'session "s" not found' })
      if (kind === 'jsonl') expect(fs.readdirSync(dir)).toEqual([])
      await store.append('s', asEvents([]))
      expect(await store.list()).toEqual([])
      await store.append('s', asEvents(turns(1)))
      expect(await store.list()).toEqual([header('s')])
    })

    it('rejects creating an id it tracks or that has a stored log', async () => {
      const { store, reopen } = setup(make, `${kind}-dup`)
      await store.create(header('s'))
      expect(await rejection(store.create(header('s')))).toEqual({
        code: 'SESSION_ALREADY_EXISTS',
        message: 'session "s" already exists in this backend',
      })
      await store.append('s', asEvents(turns(1)))
      expect(await rejection(reopen().create(header('s')))).toEqual({
        code: 'SESSION_ALREADY_EXISTS',
        message: 'session "s" already has a persisted log on disk; load/resume it instead of creating',
      })
    })

    it('rejects appending to a session that is neither created nor stored', async () => {
      const { store } = setup(make, `${kind}-unknown`)
      expect(await rejection(store.append('ghost', asEvents(turns(1))))).toEqual({
        code: 'SESSION_NOT_FOUND',
        message: 'session "ghost" not found',
      })
    })

    it('rejects a header it cannot store', async () => {
      const { store } = setup(make, `${kind}-badheader`)
      expect((await rejection(store.create({ ...header('s'), version: 1 } as never))).code).toBe('INVALID_HEADER')
      expect(await rejection(store.create({ ...header('s'), createdAt: 1.5 }))).toEqual({
        code: 'INVALID_HEADER',
        message: 'session header createdAt must be a non-negative safe integer to be persisted, got 1.5',
      })
      expect((await rejection(store.create({ ...header('s'), cwd: 'relative' }))).code).toBe('INVALID_HEADER')
      expect((await rejection(store.create(null as never))).code).toBe('INVALID_HEADER')
    })
  })

  describe(`${kind} store: contiguity and atomic batches`, () => {
    it('requires each batch to continue the stored log', async () => {
      const { store } = setup(make, `${kind}-contig`)
      await store.create(header('s'))
      const [a, b, c] = turnBatches(1, 0)
      expect(await rejection(store.append('s', asEvents(b!)))).toEqual({
        code: 'SEQ_MISMATCH',
        message: 'append seq mismatch for "s": expected 0 at index 0, got 2',
      })
      await store.append('s', asEvents(a!))
      const gappy = [b![0]!, { ...b![1]!, seq: 9 }]
      expect(await rejection(store.append('s', asEvents(gappy)))).toEqual({
        code: 'SEQ_MISMATCH',
        message: 'append seq mismatch for "s": expected 3 at index 1, got 9',
      })
      // Nothing of a rejected batch was stored.
      await store.append('s', asEvents(b!))
      await store.append('s', asEvents(c!))
      expect((await store.load('s')).events).toEqual([...a!, ...b!, ...c!])
    })

    it('continues a stored log after a restart', async () => {
      const { store, restart } = setup(make, `${kind}-restart`)
      await store.create(header('s'))
      await store.append('s', asEvents(turns(1)))
      const again = await restart()
      const next = turnBatches(2, 9).flat()
      await again.append('s', asEvents(next))
      expect((await again.load('s')).events).toEqual([...turns(1), ...next])
    })
  })

  describe(`${kind} store: lossless JSON, envelopes and legacy vocabulary`, () => {
    it('rejects a batch that is not lossless JSON and stores none of it', async () => {
      const { store } = setup(make, `${kind}-lossless`)
      await store.create(header('s'))
      const [a] = turnBatches(1, 0)
      for (const bad of [Number.NaN, -0, undefined, new Date(0), 10n]) {
        const batch = [a![0]!, { ...a![1]!, data: { content: [], source: { kind: 'user' }, bad } }]
        const r = await rejection(store.append('s', asEvents(batch)))
        expect(r).toEqual({ code: 'NOT_LOSSLESS_JSON', message: 'event at index 1 is not losslessly JSON-serializable' })
      }
      expect(await store.list()).toEqual([])
    })

    it('rejects an invalid envelope', async () => {
      const { store } = setup(make, `${kind}-envelope`)
      await store.create(header('s'))
      const r = await rejection(store.append('s', asEvents([{ type: 'x', seq: 0, time: 1, data: {}, extra: 1 } as never])))
      expect(r).toEqual({
        code: 'INVALID_EVENT',
        message: 'invalid append batch for session "s": event at index 0 has an invalid event envelope',
      })
    })

    it('rejects legacy request-header vocabulary, naming the session and seq', async () => {
      const { store } = setup(make, `${kind}-legacy`)
      await store.create(header('s'))
      const [a] = turnBatches(1, 0)
      const delta = { type: 'request/header-delta', seq: 2, time: T0, data: { changes: {} } }
      expect(await rejection(store.append('s', asEvents([...a!, delta])))).toEqual({
        code: 'LEGACY_VOCABULARY',
        message: 'session "s" contains unsupported legacy request/header-delta event at seq 2',
      })
      const fallback = {
        type: 'request/header',
        seq: 2,
        time: T0,
        data: { header: { config: { provider: 'p', model: 'm' } }, reason: 'fallback' },
      }
      expect(await rejection(store.append('s', asEvents([...a!, fallback])))).toEqual({
        code: 'LEGACY_VOCABULARY',
        message: 'session "s" contains unsupported legacy request/header reason "fallback" at seq 2',
      })
      expect(await store.list()).toEqual([])
    })
  })

  describe(`${kind} store: round trips`, () => {
    it('loads and opens exactly what was appended (realistic workload)', async () => {
      const { generateOps, toEvents } = await import(WORKLOAD)
      const { ops } = generateOps(3000)
      const events: AnyEvent[] = toEvents(ops)
      const { store, reopen } = setup(make, `${kind}-rt`)
      const meta = header('work', { cwd: '/home/dev/project', parentSession: 'parent' as never, seedLength: 0 })
      await store.create(meta)
      let from = 0
      for (let i = 0; i < events.length; i++) {
        if (events[i]!.type === 'turn/end' || i === events.length - 1) {
          await store.append('work', asEvents(events.slice(from, i + 1)))
          from = i + 1
        }
      }
      const fresh = reopen()
      const loaded = await fresh.load('work')
      expect(loaded.meta).toEqual(meta)
      // The workload's last turn is cut short: the load closes it.
      const closers = interruptedTurnClosers(asEvents(events))
      expect(closers.length).toBeGreaterThan(0)
      expect(loaded.events).toEqual([...events, ...closers])
      const session = await fresh.open('work')
      expect(session.header).toEqual(meta)
      expect(session.events).toEqual(loaded.events)
      expect(session.deriveMessages()).toEqual(new Session('work', loaded.events).deriveMessages())
      expect(session.requestHeader()).toEqual(new Session('work', loaded.events).requestHeader())
    })

    it('keeps unicode, NUL, __proto__ keys and hostile strings exactly', async () => {
      const { store } = setup(make, `${kind}-payload`)
      await store.create(header('p'))
      const hostile = ["'); DROP TABLE events; --", '"\\\u0000\n\r\u2028 😀 é', '</context>', '\ud800'.normalize()]
      const [a, b, c] = turnBatches(1, 0, hostile.join(' | '))
      const odd = JSON.parse('{"__proto__":{"x":1},"n":1e300,"m":-1.5e-7}')
      const plugin = { type: 'plugin/odd', seq: 9, time: T0, data: odd }
      const events = [...a!, ...b!, ...c!, plugin]
      await store.append('p', asEvents(events))
      const loaded = await store.load('p')
      expect(loaded.events).toEqual(events)
      expect(Object.keys(loaded.events[9]!.data as object)).toEqual(['__proto__', 'n', 'm'])
      expect(JSON.stringify(loaded.events)).toBe(JSON.stringify(events))
    })
  })

  describe(`${kind} store: crash repair on load`, () => {
    it('keeps the complete events of an interrupted turn, closes it, and makes that durable', async () => {
      const { store, restart } = setup(make, `${kind}-repair`)
      await store.create(header('r'))
      const [a, b] = turnBatches(1, 0)
      await store.append('r', asEvents([...a!, ...b!]))
      const loaded = await (await restart()).load('r')
      const closers = interruptedTurnClosers(asEvents([...a!, ...b!]))
      expect(closers.map((e) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end'])
      expect(loaded.events).toEqual([...a!, ...b!, ...closers])
      // Durable and idempotent: a third store sees the same, balanced log.
      const third = await restart()
      expect(await third.load('r')).toEqual(loaded)
      // The log continues after the closers.
      const next = turnBatches(2, loaded.events.length).flat()
      await third.append('r', asEvents(next))
      expect((await third.load('r')).events).toEqual([...loaded.events, ...next])
    })

    it('opens an interrupted log as a balanced session', async () => {
      const { store, reopen } = setup(make, `${kind}-open-repair`)
      await store.create(header('o'))
      await store.append('o', asEvents(turnBatches(1, 0)[0]!))
      const session = await reopen().open('o')
      expect(session.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
      expect(session.events[2]!.data).toEqual({ turn: 1, reason: { kind: 'interrupted' } })
    })
  })

  describe(`${kind} store: flush`, () => {
    it('persists the events a session has that the store lacks, creating the log on first use', async () => {
      const { store, reopen } = setup(make, `${kind}-flush`)
      const session = new Session('f', [], header('f'))
      expect(await store.flush(session)).toBe(0)
      expect(await store.list()).toEqual([])
      for (const batch of turnBatches(1, 0)) {
        for (const e of batch) {
          const opts = e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
          ;(session.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts.map((o) => JSON.parse(JSON.stringify(o))))
        }
        expect(await store.flush(session)).toBe(batch.length)
      }
      expect(await store.flush(session)).toBe(0)
      const loaded = await reopen().load('f')
      expect(loaded.meta).toEqual(header('f'))
      expect(loaded.events).toEqual(session.events)
    })

    it('continues an opened session from its stored length', async () => {
      const { store, reopen, restart } = setup(make, `${kind}-flush-open`)
      await store.create(header('c'))
      await store.append('c', asEvents(turns(2)))
      const s2 = await restart()
      const session = await s2.open('c')
      session.append('turn/start', { turn: 3, trigger: { kind: 'message', source: { kind: 'user' } } })
      session.append('turn/end', { turn: 3, reason: { kind: 'completed' } })
      expect(await s2.flush(session)).toBe(2)
      expect((await reopen().load('c')).events).toEqual(session.events)
    })

    it('flushes a large backlog in one batch (staged in chunks)', async () => {
      const { store, reopen } = setup(make, `${kind}-flush-big`)
      const events = turns(400)
      const session = new Session('big', asEvents(events), header('big'))
      expect(await store.flush(session)).toBe(events.length)
      expect((await reopen().load('big')).events).toEqual(events)
    })

    it('stores exactly the session\'s events however its texts reached the native log (property)', async () => {
      // Each step appends turns (some with a payload over the 1 MB staging
      // step), may derive (handing texts to the native log), then flushes,
      // awaited or not: later steps run while an earlier flush is staged or
      // written. Whatever mix of handed-over and pending texts a flush sees,
      // the stored log is the session's log.
      const step = fc.record({
        turns: fc.integer({ min: 0, max: 2 }),
        big: fc.boolean(),
        derive: fc.boolean(),
        after: fc.boolean(),
        wait: fc.boolean(),
      })
      let run = 0
      await fc.assert(
        fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 5 }), async (steps) => {
          const id = `p${run++}`
          const { store, reopen } = setup(make, `${kind}-flush-prop`)
          const session = new Session(id, [], header(id))
          const inflight: Promise<number>[] = []
          let turn = 0
          const appendTurn = (text?: string) => {
            turn += 1
            for (const e of turnBatches(turn, session.seq, text ?? `question ${turn}`).flat()) {
              const opts = e.surfaceOp === undefined ? undefined : { surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }
              ;(session.append as (...a: unknown[]) => unknown)(e.type, e.data, ...(opts === undefined ? [] : [opts]))
            }
          }
          for (const s of steps) {
            if (s.big) appendTurn('x'.repeat(1_200_000))
            for (let t = 0; t < s.turns; t++) appendTurn()
            if (s.derive) session.deriveMessages()
            // Handed-over texts over a staging step, then pending ones.
            if (s.after) appendTurn()
            const flushed = store.flush(session)
            if (s.wait) await flushed
            else inflight.push(flushed)
          }
          const counts = await Promise.all(inflight)
          expect(counts.every((n) => n >= 0)).toBe(true)
          await store.flush(session)
          if (session.seq === 0) {
            // Nothing to store: the log is never created.
            expect(await reopen().list()).toEqual([])
            return
          }
          const loaded = await reopen().load(id)
          expect(loaded.events).toEqual(session.events)
        }),
        { numRuns: 12 },
      )
    }, 120_000)

    it('never stores an event the session refuses (a type with a lone surrogate)', async () => {
      // Stores keep types as UTF-8 text, which cannot hold a lone surrogate:
      // the append refuses it up front, so no flush ever sees it.
      const { store, reopen } = setup(make, `${kind}-flush-refused`)
      const session = new Session('u', [], header('u'))
      session.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
      expect(await store.flush(session)).toBe(1)
      const refused = catchError(() => (session.append as (...a: unknown[]) => unknown)('x\uD800', {}))
      expect((refused as { code?: string }).code).toBe('INVALID_EVENT')
      expect(session.seq).toBe(1)
      session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
      expect(await store.flush(session)).toBe(1)
      const loaded = await reopen().load('u')
      expect(loaded.events).toEqual(session.events)
    })

    it('rejects a live session whose id has another stored history', async () => {
      const { store, restart } = setup(make, `${kind}-collide`)
      await store.create(header('x'))
      await store.append('x', asEvents(turns(1)))
      const other = turns(2).map((e) => ({ ...e, time: e.time + 1 }))
      const second = await restart()
      const r = await rejection(second.flush(new Session('x', asEvents(other))))
      // SPEC 11.1: the stored events are compared with the session's, not only the last one.
      expect(r).toEqual({
        code: 'SESSION_ALREADY_EXISTS',
        message: 'session "x" already has a persisted log on disk that does not match this live session: '
          + 'the histories differ (the stored event at seq 0 is not this session\'s); nothing was written',
      })
      // The same history (a longer copy of it) is adopted and extended.
      const same = new Session('x', asEvents(turns(2)), header('x'))
      expect(await second.flush(same)).toBe(9)
      expect(await rejection(second.flush(new Session('x')))).toEqual({
        code: 'SESSION_ALREADY_EXISTS',
        message: 'session "x" already has a persisted log on disk that does not match this live session: '
          + 'the histories differ (the stored log holds 18 events, this session 0); nothing was written',
      })
    })

    it('rejects what is not a Session', async () => {
      const { store } = setup(make, `${kind}-flush-bad`)
      expect(await rejection(store.flush({ id: 'x' } as never))).toEqual({
        code: 'INVALID_ARGUMENT',
        message: 'flush expects a Session',
      })
    })
  })

  describe(`${kind} store: listing`, () => {
    it('lists stored headers only, by createdAt then id', async () => {
      const { store } = setup(make, `${kind}-list`)
      const metas = [
        header('b', { createdAt: T0 + 2 }),
        header('a', { createdAt: T0 + 2, cwd: '/srv/a' }),
        header('c', { createdAt: T0 + 1, parentSession: 'a' as never, seedLength: 3 }),
        header('never', { createdAt: T0 }),
      ]
      for (const m of metas) await store.create(m)
      for (const m of metas.slice(0, 3)) await store.append(m.id, asEvents(turns(1)))
      expect(await store.list()).toEqual([metas[2], metas[1], metas[0]])
    })
  })

  describe(`${kind} store: ids`, () => {
    const HOSTILE = ['../x', '/', 'a/b', 'a\\b', '.', '..', '...', '~', '~002E', 'a\u0000b', "x'); DROP TABLE sessions; --", '"', '😀', 'é', ' ']
      // PostgreSQL text cannot hold U+0000: that store refuses such ids (store-13-postgres-schema).
      .filter((id) => !isPostgres(kind) || !id.includes('\u0000'))

    it('stores, loads and lists hostile ids without escaping the store', async () => {
      const { store, dir } = setup(make, `${kind}-ids`)
      for (const [i, id] of HOSTILE.entries()) {
        await store.create(header(id, { createdAt: T0 + i }))
        await store.append(id, asEvents(turns(1)))
      }
      for (const id of HOSTILE) expect((await store.load(id)).meta.id).toBe(id)
      expect((await store.list()).map((h) => h.id)).toEqual(HOSTILE)
      if (kind === 'jsonl') {
        const files = fs.readdirSync(path.join(dir, '_no-cwd'))
        expect(files).toHaveLength(HOSTILE.length)
        // Beside the bucket, only the write leases' lock files: a pid hint
        // per session, and on Linux the one file whose byte ranges are the leases.
        expect(fs.readdirSync(dir).sort()).toEqual(['.locks', '_no-cwd'])
        expect(fs.readdirSync(path.join(dir, '.locks'))).toHaveLength(HOSTILE.length + LEASE_FILES.length)
      }
    })

    it('rejects an empty id and ids with lone surrogates', async () => {
      const { store } = setup(make, `${kind}-badids`)
      expect(await rejection(store.load(''))).toEqual({ code: 'INVALID_ARGUMENT', message: 'session id must be a non-empty string' })
      expect(await rejection(store.load(5 as never))).toEqual({ code: 'INVALID_ARGUMENT', message: 'session id must be a non-empty string' })
      for (const [id, unit, index] of [['a\ud800', 'D800', 1], ['\udc00b', 'DC00', 0], ['\ude00\ud83d', 'DE00', 0]] as const) {
        const r = await rejection(store.create(header(id)))
        expect(r.code).toBe('INVALID_ARGUMENT')
        expect(r.message).toBe(
          `session id ${JSON.stringify(id)} contains a lone UTF-16 surrogate (U+${unit} at index ${index}); the native core holds ids as UTF-8, so it cannot be stored faithfully`,
        )
      }
    })
  })

  describe(`${kind} store: ordering and closing`, () => {
    it('runs one session\'s operations in call order and others in parallel', async () => {
      const { store } = setup(make, `${kind}-order`)
      const ids = ['p1', 'p2', 'p3']
      const all: Promise<unknown>[] = []
      for (const id of ids) {
        all.push(store.create(header(id)))
        for (const batch of turnBatches(1, 0)) all.push(store.append(id, asEvents(batch)))
        for (const batch of turnBatches(2, 9)) all.push(store.append(id, asEvents(batch)))
      }
      const loads = ids.map((id) => store.load(id))
      await Promise.all(all)
      for (const l of await Promise.all(loads)) expect(l.events).toEqual(turns(2))
    })

    it('close waits for work in flight, then rejects later calls', async () => {
      const { store } = setup(make, `${kind}-close`)
      const created = store.create(header('z'))
      const appended = store.append('z', asEvents(turns(3)))
      const closed = store.close()
      await expect(created).resolves.toBeUndefined()
      await expect(appended).resolves.toBeUndefined()
      await closed
      expect(await rejection(store.load('z'))).toEqual({ code: 'STORE_CLOSED', message: 'session store is closed' })
      expect(await rejection(store.list())).toEqual({ code: 'STORE_CLOSED', message: 'session store is closed' })
      await store.close()
    })
  })
}

describe('jsonl store: layout (SPEC 11)', () => {
  it('places logs by cwd bucket and an injective id encoding', async () => {
    const { store, dir } = setup(STORES[0]!.make, 'layout')
    const bucket = `cwd-${createHash('sha256').update('/home/dev/é').digest('hex').slice(0, 12)}`
    const jsonl = store as JsonlSessionStore
    expect(jsonl.locate(header('a.b_c-D9', { cwd: '/home/dev/é' }))).toEqual({
      kind: 'jsonl',
      path: path.join(dir, bucket, 'a.b_c-D9.jsonl'),
    })
    const name = (id: string) => path.basename(jsonl.locate(header(id)).path)
    expect(name('~')).toBe('~007E.jsonl')
    expect(name('.')).toBe('~002E.jsonl')
    expect(name('..')).toBe('~002E~002E.jsonl')
    expect(name('~002E')).toBe('~007E002E.jsonl')
    expect(name('a/b')).toBe('a~002Fb.jsonl')
    expect(name('😀')).toBe('~D83D~DE00.jsonl')
    expect(name('a\u0000')).toBe('a~0000.jsonl')
    expect(path.dirname(jsonl.locate(header('x')).path)).toBe(path.join(dir, '_no-cwd'))
  })

  it('writes the header line, then each event verbatim, and leaves no temporary file', async () => {
    const { store, dir } = setup(STORES[0]!.make, 'verbatim')
    const meta = header('v', { cwd: '/w' })
    await store.create(meta)
    // Key order as received, chunks included.
    const [a] = turnBatches(1, 0)
    const reordered = a!.map(({ seq, data, time, type, ...rest }) => ({ data, seq, ...rest, type, time }))
    await store.append('v', asEvents(reordered))
    const file = (store as JsonlSessionStore).locate(meta).path
    expect(fs.readFileSync(file, 'utf8')).toBe(
      `{"type":"session","version":0,"id":"v","createdAt":${T0},"cwd":"/w"}\n${reordered.map((e) => JSON.stringify(e)).join('\n')}\n`,
    )
    expect(fs.readdirSync(path.dirname(file))).toEqual(['v.jsonl'])
    expect(fs.readdirSync(dir).sort()).toEqual(['.locks', path.basename(path.dirname(file))])
    expect(fs.readdirSync(path.join(dir, '.locks')).sort()).toEqual([...LEASE_FILES, 'v.lock'])
  })

  it('never overwrites a log that appeared after create', async () => {
    const { store } = setup(STORES[0]!.make, 'nooverwrite')
    await store.create(header('n'))
    const file = (store as JsonlSessionStore).locate(header('n')).path
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, 'someone else\n')
    expect(await rejection(store.append('n', asEvents(turns(1))))).toEqual({
      code: 'SESSION_ALREADY_EXISTS',
      message: 'session "n" already has a persisted log on disk; load/resume it instead of creating',
    })
    expect(fs.readFileSync(file, 'utf8')).toBe('someone else\n')
    expect(fs.readdirSync(path.dirname(file))).toEqual(['n.jsonl'])
  })

  it('finds a log in any bucket and reads the cwd back from its header', async () => {
    const { store, dir, reopen, restart } = setup(STORES[0]!.make, 'anybucket')
    const meta = header('m', { cwd: '/first' })
    await store.create(meta)
    await store.append('m', asEvents(turns(1)))
    const from = (store as JsonlSessionStore).locate(meta).path
    const to = path.join(dir, 'cwd-000000000000', 'm.jsonl')
    fs.mkdirSync(path.dirname(to))
    fs.renameSync(from, to)
    const again = await restart()
    expect((await again.load('m')).meta).toEqual(meta)
    await again.append('m', asEvents(turnBatches(2, 9).flat()))
    expect(fs.readFileSync(to, 'utf8').trim().split('\n')).toHaveLength(1 + 18)
    expect(await rejection(reopen().create(header('m')))).toEqual({
      code: 'SESSION_ALREADY_EXISTS',
      message: 'session "m" already has a persisted log on disk; load/resume it instead of creating',
    })
  })

  it('lists only files whose first line is a v0 header under the name their id encodes to', async () => {
    const { store, dir } = setup(STORES[0]!.make, 'listjunk')
    await store.create(header('ok'))
    await store.append('ok', asEvents(turns(1)))
    const bucket = path.join(dir, '_no-cwd')
    fs.writeFileSync(path.join(bucket, 'junk.jsonl'), 'not a header\n')
    fs.writeFileSync(path.join(bucket, 'torn.jsonl'), '{"type":"session","version":0,"id":"torn","createdAt":1}')
    fs.writeFileSync(path.join(bucket, 'future.jsonl'), '{"type":"session","version":1,"id":"future","createdAt":1}\n')
    fs.writeFileSync(path.join(bucket, 'renamed.jsonl'), '{"type":"session","version":0,"id":"other","createdAt":1}\n')
    // A corrupt body does not matter to list: it reads headers only.
    fs.writeFileSync(path.join(bucket, 'body.jsonl'), '{"type":"session","version":0,"id":"body","createdAt":2}\n{garbage\n')
    expect((await store.list()).map((h) => h.id)).toEqual(['body', 'ok'])
  })
})

describe('sqlite store: database (SPEC 11)', () => {
  it('creates the documented schema, stamps version 4 and uses WAL by default', async () => {
    const { store, dir } = setup(STORES[1]!.make, 'schema')
    await store.create(header('s'))
    await store.append('s', asEvents(turns(1)))
    await store.close()
    const db = path.join(dir, 'sessions.db')
    const tables = sqliteTool(db, { op: 'exec', sql: "SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name" })
    expect(tables.map((t: string[]) => t[0])).toEqual(['events', 'sessions'])
    expect(tables[0][1]).toContain('PRIMARY KEY (session_id, seq)) STRICT')
    expect(sqliteTool(db, { op: 'exec', sql: 'PRAGMA journal_mode' })).toEqual([['wal']])
    expect(sqliteTool(db, { op: 'dump', id: 's' }).userVersion).toBe(4)
  })

  it('takes another journal mode, and an in-memory database', async () => {
    const dir = tempDir('journal')
    const db = path.join(dir, 'd.db')
    const store = new SqliteSessionStore({ path: db, journalMode: 'delete' })
    await store.create(header('s'))
    await store.append('s', asEvents(turns(1)))
    await store.close()
    expect(sqliteTool(db, { op: 'exec', sql: 'PRAGMA journal_mode' })).toEqual([['delete']])
    const memory = new SqliteSessionStore({ path: ':memory:' })
    await memory.create(header('m'))
    await memory.append('m', asEvents(turns(1)))
    expect((await memory.load('m')).events).toEqual(turns(1))
    expect(memory.locate(header('m'))).toBeUndefined()
    await memory.close()
    expect(() => new SqliteSessionStore({ path: db, journalMode: 'off' as never })).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: "journalMode must be one of 'wal', 'delete', 'truncate', 'persist', got \"off\"",
      }),
    )
    fs.rmSync(dir, { recursive: true, force: true })
  })

  it('rejects a database of another schema version', async () => {
    const dir = tempDir('version')
    const db = path.join(dir, 'old.db')
    sqliteTool(db, { op: 'exec', sql: 'PRAGMA user_version = 3' })
    const store = new SqliteSessionStore({ path: db })
    expect(await rejection(store.list())).toEqual({
      code: 'UNSUPPORTED_VERSION',
      message: `session database at "${db}" has schema version 3, incompatible with this build (4)`,
    })
    await store.close()
    fs.rmSync(dir, { recursive: true, force: true })
  })
})

describe('stores in a worker thread', () => {
  it('run their operations from a worker_threads worker', async () => {
    const dir = tempDir('worker')
    const source = `
      const { parentPort, workerData } = require('node:worker_threads')
      const { JsonlSessionStore, SqliteSessionStore } = require(workerData.stores)
      ;(async () => {
        const out = []
        for (const store of [new JsonlSessionStore({ root: workerData.dir }), new SqliteSessionStore({ path: workerData.dir + '/w.db' })]) {
          await store.create({ version: 0, id: 'w', createdAt: 1 })
          await store.append('w', workerData.events)
          const s = await store.open('w')
          out.push([s.seq, (await store.list()).length])
          await store.close()
        }
        parentPort.postMessage(out)
      })().catch((e) => parentPort.postMessage(String(e)))
    `
    const result = await new Promise((resolve, reject) => {
      const worker = new Worker(source, {
        eval: true,
        workerData: { stores: path.resolve(__dirname, '../lib/stores.js'), dir, events: turns(1) },
      })
      worker.once('message', (m) => {
        resolve(m)
        void worker.terminate()
      })
      worker.once('error', reject)
    })
    expect(result).toEqual([[9, 1], [9, 1]])
    fs.rmSync(dir, { recursive: true, force: true })
  })
})
