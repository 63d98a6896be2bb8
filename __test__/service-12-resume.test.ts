// Resuming a stored session through the service (issue 20): the obvious
// path, `ctx.sessions.create(id, { from: await store.open(id), meta })`,
// takes the opened log as it is (nothing checked event by event again), and
// keeps every publication rule of `create` (SPEC 12.3, 12.4); a persistence
// plugin's first flush of the resumed session writes only what it appends.

import { createRequire } from 'node:module'
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { asEvents, header, rejection, testCleanup, turnBatches, turns, type AnyEvent } from './fixtures-crash/stores.js'

// One module instance for the session core, the stores and the service.
const nodeRequire = createRequire(__filename)
const index = nodeRequire('../index.js') as typeof import('../index.js')
const { Session, SessionStore, JsonlSessionStore } = index
type Live = InstanceType<typeof Session>

const { cleanup, dirFor } = testCleanup()

function appendAll(s: Live, events: AnyEvent[]): void {
  for (const e of events) {
    const opts = e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
    ;(s.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
  }
}

async function storedSession(id: string, n: number): Promise<{ store: InstanceType<typeof JsonlSessionStore>; dir: string }> {
  const dir = dirFor('resume')
  const store = new JsonlSessionStore({ root: dir })
  cleanup.push(() => store.close())
  await store.create(header(id, { cwd: '/work' }))
  await store.append(id, asEvents(turns(n)))
  return { store, dir }
}

async function mount() {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const heard: string[] = []
  ctx.on('session/created', (s: Live) => void heard.push(`created ${s.id}`))
  ctx.on('session/event', (s: Live, e: { type: string; seq: number }) => void heard.push(`event ${s.id} ${e.seq} ${e.type}`))
  ctx.on('session/disposed', (s: Live) => void heard.push(`disposed ${s.id}`))
  return { ctx, heard }
}

describe('resume through ctx.sessions', () => {
  it('create(id, { from: await store.open(id), meta }) continues the stored log and publishes like create', async () => {
    const { store } = await storedSession('r', 3)
    const { ctx, heard } = await mount()
    const opened = await store.open('r')
    const session = ctx.sessions.create('r', { from: opened, meta: opened.header })
    expect(session).not.toBe(opened)
    expect(session.header).toEqual(header('r', { cwd: '/work' }))
    expect(session.events).toEqual(turns(3))
    expect(session.surface.nodes).toEqual(opened.surface.nodes)
    expect(session.deriveMessages()).toEqual(opened.deriveMessages())
    expect(session.requestHeader()).toEqual(opened.requestHeader())
    expect(ctx.sessions.get('r')).toBe(session)
    appendAll(session, turnBatches(4, session.seq)[0])
    expect(heard).toEqual(['created r', 'event r 27 turn/start', 'event r 28 user/message'])
  })

  it('a persistence plugin\'s first flush of the resumed session writes only what it appended', async () => {
    const { store, dir } = await storedSession('p', 3)
    const { ctx } = await mount()
    const written: number[] = []
    ctx.on('session/flush', async (s: Live) => void written.push(await store.flush(s)))
    const opened = await store.open('p')
    const session = ctx.sessions.create('p', { from: opened, meta: opened.header })
    appendAll(session, turnBatches(4, session.seq).flat())
    await ctx.sessions.flush(session)
    expect(written).toEqual([9])
    await store.close()
    expect((await new JsonlSessionStore({ root: dir }).load('p')).events).toEqual(session.events)
  })

  it('the opened session, once continued, is a stranger to the store: a different history is refused', async () => {
    const { store } = await storedSession('s', 1)
    const { ctx } = await mount()
    const opened = await store.open('s')
    const session = ctx.sessions.create('s', { from: opened, meta: opened.header })
    appendAll(session, turnBatches(2, session.seq).flat())
    expect(await store.flush(session)).toBe(9)
    // Another turn number: the first event already differs from the stored
    // one, whatever the clock (the same turn/start a millisecond apart would
    // only differ in its time).
    appendAll(opened, turnBatches(3, opened.seq, 'another question').flat())
    const r = await rejection(store.flush(opened))
    expect(r.code).toBe('SESSION_ALREADY_EXISTS')
    expect(r.message).toContain('the histories differ (the stored event at seq 9 is not this session\'s)')
  })

  it('a live session continued by new Session(id, session) shares its frozen events and equals a fresh seed', () => {
    const live = new Session('live', [], header('live'))
    appendAll(live, turns(2))
    const held = live.events[5]
    const next = new Session('next', live)
    expect(next.events[5]).toBe(held)
    expect(next.events).toEqual(live.events)
    expect(next.header).toEqual({ version: 0, id: 'next', createdAt: next.header.createdAt })
    expect(next.deriveMessages()).toEqual(new Session('x', live.events).deriveMessages())
    appendAll(next, turnBatches(3, next.seq).flat())
    expect(live.seq).toBe(18)
    expect(Session.fromJsonl(next.toJsonl()).events).toEqual(next.events)
  })

  it('refuses from with seed, and a from that is not a Session, with INVALID_ARGUMENT', async () => {
    const { ctx } = await mount()
    const s = new Session('a')
    expect(() => ctx.sessions.create('x', { from: s, seed: [] })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'sessions.prepare takes options.seed or options.from, not both' }),
    )
    expect(() => ctx.sessions.create('y', { from: { events: [] } as never })).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', message: 'sessions.prepare: options.from must be a Session of dsh-session-native' }),
    )
    expect(ctx.sessions.list()).toEqual([])
  })
})
