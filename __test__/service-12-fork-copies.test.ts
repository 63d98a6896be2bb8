// SPEC 12.6, step 4: the service's fork creates the child from copies of
// the source's events `0..=b`. For a session of this package it neither
// reads `source.events` nor seeds the child from objects: it hands `create`
// a session of this package holding copies of those events (`options.from`).
// None of it may show: the child is what a seed of `source.events[0..=b]`
// gives (events, surface, messages, header), every event and payload a
// distinct frozen object, and the source is left as it was, whatever the
// source was (live, read from JSONL, opened by a store, compacted).

import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import fc from 'fast-check'
import { afterAll, describe, expect, it } from 'vitest'
import { JsonlSessionStore, Session, type SessionEvent } from '../index.js'
import { apply, op } from './fork-helpers.js'
import { mount } from './service-helpers.js'
import { expectEqualsFreshCopies, isDeepFrozen, newSession } from './spec-helpers.js'

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-fork-copies-'))
afterAll(() => fs.rmSync(root, { recursive: true, force: true }))

/** Every object reachable from `value`. */
function objects(value: unknown, out = new Set<object>()): Set<object> {
  if (typeof value === 'object' && value !== null && !out.has(value)) {
    out.add(value)
    for (const v of Object.values(value)) objects(v, out)
  }
  return out
}

const nodeRequire = createRequire(__filename)
const { copyFrozen, deepFreeze } = nodeRequire('../lib/core/json.js') as {
  copyFrozen: <T>(value: T) => T
  deepFreeze: <T>(value: T) => T
}

describe('copyFrozen, the copy the child takes of what the source derived', () => {
  it('copies any parsed JSON value whole, deep-frozen, with no object in common', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('{"__proto__":{"a":1}}', '[{"__proto__":null}]', '"s"'), (value, odd) => {
        const text = JSON.stringify([value, JSON.parse(odd)])
        const parsed = deepFreeze(JSON.parse(text))
        const copy = copyFrozen(parsed)
        expect(JSON.stringify(copy)).toBe(text)
        expect(copy).toEqual(parsed)
        expect(isDeepFrozen(copy)).toBe(true)
        const theirs = objects(parsed)
        for (const o of objects(copy)) expect(theirs.has(o)).toBe(false)
      }),
      { numRuns: 300 },
    )
  })
})

describe('sessions.fork of a session of this package', () => {
  it('gives the child a seed of source.events[0..=b] would give, all of it copies', async () => {
    let run = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 24 }),
        fc.constantFrom('live', 'jsonl', 'store'),
        fc.array(op, { maxLength: 3 }),
        fc.nat(),
        fc.boolean(),
        fc.boolean(),
        fc.constantFrom('nothing', 'derive', 'events'),
        async (ops, how, after, pick, deriveFirst, readFirst, then) => {
          const { ctx } = await mount()
          const built = new Session(`s${run}`, [], { version: 0, id: `s${run}` as never, createdAt: 1, cwd: '/w' })
          run += 1
          // A store holds a session once it has an event.
          ;[{ kind: 'turn', pad: 0 } as const, ...ops].forEach((o, n) => apply(built, o, n))
          let source = built
          if (how === 'jsonl') source = Session.fromJsonl(built.toJsonl())
          if (how === 'store') {
            const store = new JsonlSessionStore({ root })
            await store.flush(built)
            source = await store.open(built.id)
            await store.close()
          }
          const live = ctx.sessions.create(`${source.id}-live`, { from: source, meta: { cwd: '/w' } })
          after.forEach((o, n) => apply(live, o, ops.length + 1 + n))
          const before = live.toJsonl()
          // The child starts from the messages the source derived, copied:
          // derived or not, events read or not.
          if (deriveFirst) live.deriveMessages()
          const ends = (readFirst ? live : Session.fromJsonl(before)).events.flatMap((e) => (e.type === 'turn/end' ? [e.seq] : []))
          const b = pick % (ends.length + 1) === ends.length ? undefined : ends[pick % (ends.length + 1)]
          const child = ctx.sessions.fork(live, b)
          // A session continued from the child before it derives starts
          // from the same copies to make.
          const next = new Session('next', child)
          // What the source derives or reads next changes what it holds, not the child.
          if (then === 'derive') live.deriveMessages()
          if (then === 'events') void live.events
          const seed = live.events.slice(0, (b ?? live.seq - 1) + 1)
          const seeded = newSession('seeded', seed as SessionEvent[])
          expect(next.deriveMessages()).toEqual(seeded.deriveMessages())
          expect(child.deriveMessages()).toEqual(seeded.deriveMessages())
          expect(child.events).toEqual(seed)
          expect(child.surface.nodes).toEqual(seeded.surface.nodes)
          expect(child.surface.replaceGeneration).toBe(seeded.surface.replaceGeneration)
          expect(child.requestHeader()).toEqual(seeded.requestHeader())
          expect(Object.keys(child.header)).toEqual(['version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength'])
          expect(child.header).toMatchObject({ cwd: '/w', parentSession: live.id, seedLength: seed.length })
          expect(isDeepFrozen(child.events)).toBe(true)
          // Copies: no object of the source's events or messages is the child's.
          const theirs = objects([live.events, live.deriveMessages()])
          for (const o of objects([child.events, child.deriveMessages(), next.deriveMessages()])) expect(theirs.has(o)).toBe(false)
          expect(live.toJsonl()).toBe(before)
          expectEqualsFreshCopies(child)
          apply(child, { kind: 'turn', pad: 5 }, 1_000)
          expectEqualsFreshCopies(child)
          expect(live.toJsonl()).toBe(before)
        },
      ),
      { numRuns: 40 },
    )
  })

  it('copies a payload key named __proto__ as data, as a seed does', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('proto', { meta: { cwd: '/p' } })
    apply(source, { kind: 'turn', pad: 1 }, 0)
    // JSON.parse makes `__proto__` an own key; an assignment would set the prototype instead.
    const data = JSON.parse('{"content":[{"type":"text","text":"hi","__proto__":{"x":1}}],"source":{"kind":"user"},"__proto__":[2]}')
    source.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } } as never)
    source.append('user/message', data, { surfaceOp: 'append' })
    source.append('turn/end', { turn: 1, reason: { kind: 'completed' } } as never)
    for (const parent of [source, Session.fromJsonl(source.toJsonl())]) {
      const live = ctx.sessions.create(`${parent === source ? 'a' : 'b'}`, { from: parent })
      live.deriveMessages()
      const child = ctx.sessions.fork(live)
      const seeded = newSession('seeded', live.events as SessionEvent[])
      expect(child.deriveMessages()).toEqual(seeded.deriveMessages())
      const copied = child.events[8].data as Record<string, unknown>
      expect(Object.getPrototypeOf(copied)).toBe(Object.prototype)
      expect(Object.getOwnPropertyDescriptor(copied, '__proto__')?.value).toEqual([2])
      expect(JSON.stringify(copied)).toBe(JSON.stringify(data))
      const lines = (session: Session) => session.toJsonl().split('\n').slice(1)
      expect(lines(child)).toEqual(lines(live))
    }
  })

  it('passes create the copies as options.from, with the meta a seed would have', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('src', { meta: { cwd: '/p' } })
    apply(source, { kind: 'turn', pad: 1 }, 0)
    apply(source, { kind: 'turn', pad: 2 }, 1)
    const calls: unknown[][] = []
    const create = ctx.sessions.create.bind(ctx.sessions)
    ctx.sessions.create = ((...args: Parameters<typeof create>) => {
      calls.push(args)
      return create(...args)
    }) as typeof create
    const child = ctx.sessions.fork(source, 6, 'kid')
    expect(calls).toHaveLength(1)
    const [id, options] = calls[0] as [string, { from: Session; meta: unknown; seed?: unknown }]
    expect(id).toBe('kid')
    expect(options.seed).toBeUndefined()
    expect(options.meta).toEqual({ cwd: '/p', parentSession: 'src', seedLength: 7 })
    expect(options.from).toBeInstanceOf(Session)
    expect(options.from.events).toEqual(source.events.slice(0, 7))
    expect(child.events).toEqual(source.events.slice(0, 7))
  })

  it("reads a subclass's own events, as the SPEC's fork does", async () => {
    const { ctx } = await mount()
    const events = Object.getOwnPropertyDescriptor(Session.prototype, 'events')?.get as (this: Session) => readonly SessionEvent[]
    // Subclasses whose prototype redefines `events` (typed as a property, so defined here).
    class Shifted extends Session {}
    Object.defineProperty(Shifted.prototype, 'events', {
      get(this: Session) {
        return events.call(this).map((event, index) => (index === 1 ? { ...event, seq: 5 } : event))
      },
    })
    const source = new Shifted('shifted')
    apply(source, { kind: 'turn', pad: 1 }, 0)
    ctx.sessions.enter(source)
    expect(() => ctx.sessions.fork(source, 1)).toThrow('fork boundary 1 does not match a contiguous event seq in session "shifted"')
    class Counted extends Session {
      reads = 0
    }
    Object.defineProperty(Counted.prototype, 'events', {
      get(this: Counted) {
        this.reads += 1
        return events.call(this)
      },
    })
    const counted = new Counted('counted')
    apply(counted, { kind: 'turn', pad: 1 }, 0)
    ctx.sessions.enter(counted)
    const child = ctx.sessions.fork(counted, 6, 'kid')
    expect(counted.reads).toBe(1)
    expect(child.events).toEqual(counted.events)
  })

  it('names the type of a boundary event the log holds as text', async () => {
    const { ctx } = await mount()
    const built = new Session('b')
    apply(built, { kind: 'turn', pad: 1 }, 0)
    const read = ctx.sessions.create('read', { from: Session.fromJsonl(built.toJsonl()) })
    apply(read, { kind: 'turn', pad: 1 }, 1)
    // Seq 3 is in the text the log was read from, seq 10 an append of this process.
    for (const [b, type] of [[3, 'assistant/message'], [10, 'assistant/message'], [0, 'turn/start']] as const) {
      let error: (Error & { code?: string }) | undefined
      try {
        ctx.sessions.fork(read, b)
      } catch (e) {
        error = e as Error & { code?: string }
      }
      expect(error?.message).toBe(`fork boundary ${b} in session "read" must be turn/end, got ${type}`)
      expect(error?.code).toBe('OPEN_TURN')
    }
    expect(ctx.sessions.list().map((s) => s.id)).toEqual(['read'])
  })
})
