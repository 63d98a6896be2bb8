// SPEC 12.2-12.3 and the lifecycle rules of 12.7: registration, prepare,
// enter, announce, create, detach, headers, against a real cordis Context.

import { Context, Service } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { Session, SessionStore, type SessionEvent } from '../index.js'
import { closedTurn, fiber, mount, ticks, turnStart } from './service-helpers.js'

describe('registration (SPEC 12.2)', () => {
  it('registers as ctx.sessions, a subclass of the consumer Service', async () => {
    const { ctx } = await mount()
    expect(ctx.sessions).toBeInstanceOf(Service)
    expect(ctx.sessions).toBeInstanceOf(SessionStore)
    expect(Object.getPrototypeOf(SessionStore)).toBe(Service)
  })

  it('unloading the plugin unregisters the service and detaches nothing', async () => {
    const ctx = new Context()
    const handle = ctx.plugin(SessionStore)
    await handle
    const store = ctx.sessions
    const session = store.create('s')
    await handle.dispose()
    expect(ctx.get('sessions')).toBeUndefined()
    expect(store.get('s')).toBe(session)
  })

  it('methods read this.ctx at call time: entering through a scope uses that scope', async () => {
    const { ctx } = await mount()
    const seen: string[] = []
    const inner = await fiber(ctx)
    inner.ctx.on('session/created', (s) => void seen.push(s.id))
    // The same store, reached through the inner fiber: create belongs to that fiber.
    inner.ctx.sessions.create('owned')
    expect(seen).toEqual(['owned'])
    await inner.dispose()
    expect(ctx.sessions.get('owned')).toBeUndefined()
  })
})

describe('create (SPEC 12.3)', () => {
  it('delivers session/created, then session/event per append; get and list return it', async () => {
    const { ctx } = await mount()
    const seen: unknown[] = []
    ctx.on('session/created', (s) => void seen.push(['created', s.id]))
    ctx.on('session/event', (s, e) => void seen.push(['event', s.id, e.seq, e.type]))
    const session = ctx.sessions.create('s1')
    expect(session).toBeInstanceOf(Session)
    expect(ctx.sessions.get('s1')).toBe(session)
    expect(ctx.sessions.list()).toEqual([session])
    session.append('turn/start', turnStart())
    ;(session as unknown as { onAppend: unknown }).onAppend = () => {}
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    expect(seen).toEqual([
      ['created', 's1'],
      ['event', 's1', 0, 'turn/start'],
      ['event', 's1', 1, 'turn/end'],
    ])
  })

  it('is one effect on the calling fiber, labelled sessions.create()', async () => {
    const { ctx } = await mount()
    const inner = await fiber(ctx)
    const labels = () => inner.ctx.fiber.getEffects().map((effect) => effect.label)
    const before = labels()
    inner.ctx.sessions.create('labelled')
    expect(labels()).toEqual([...before, 'sessions.create()'])
    await inner.dispose()
  })

  it('throws `already exists` for a live id', async () => {
    const { ctx } = await mount()
    ctx.sessions.create('dup')
    expect(() => ctx.sessions.create('dup')).toThrow('session "dup" already exists')
  })

  it('a seed copy of another log derives the same messages', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('src')
    closedTurn(source)
    const copy = ctx.sessions.create('copy', { seed: source.events })
    expect(copy.deriveMessages()).toEqual(source.deriveMessages())
    expect(copy.seq).toBe(source.seq)
  })

  it('mints session-<n> ids, skipping live ones, never reserving them', async () => {
    const { ctx } = await mount()
    ctx.sessions.create('session-1')
    expect(ctx.sessions.prepare().id).toBe('session-2')
    expect(ctx.sessions.prepare().id).toBe('session-3')
    expect(ctx.sessions.create().id).toBe('session-4')
    // Only an omitted (undefined) id is minted; null is a given id, and not a string.
    expect(() => ctx.sessions.prepare(null as never)).toThrow('session id must be a string')
    expect(ctx.sessions.prepare().id).toBe('session-5')
  })

  it('a session lives until its creating fiber unloads; later appends reach no listener', async () => {
    const { ctx } = await mount()
    const events: number[] = []
    const disposed: string[] = []
    ctx.on('session/event', (_s, e) => void events.push(e.seq))
    ctx.on('session/disposed', (s) => void disposed.push(s.id))
    const inner = await fiber(ctx)
    const session = inner.ctx.sessions.create('f')
    session.append('turn/start', turnStart())
    await inner.dispose()
    expect(ctx.sessions.get('f')).toBeUndefined()
    expect(disposed).toEqual(['f'])
    session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    expect(events).toEqual([0])
    expect(session.seq).toBe(2)
  })

  it('disposing the owner fiber from session/created leaves the session gone once awaited', async () => {
    const { ctx } = await mount()
    const inner = await fiber(ctx)
    let disposing: Promise<void> | undefined
    ctx.on('session/created', () => {
      disposing = inner.dispose()
    })
    inner.ctx.sessions.create('gone')
    await disposing
    expect(ctx.sessions.get('gone')).toBeUndefined()
  })

  it('a throwing session/created listener: create rethrows, nothing stays, disposed saw the id once', async () => {
    const { ctx } = await mount()
    const disposed: string[] = []
    ctx.on('session/disposed', (s) => void disposed.push(s.id))
    const off = ctx.on('session/created', () => {
      throw new Error('created failed')
    })
    expect(() => ctx.sessions.create('t')).toThrow('created failed')
    expect(ctx.sessions.get('t')).toBeUndefined()
    expect(ctx.sessions.list()).toEqual([])
    expect(disposed).toEqual(['t'])
    off()
    expect(ctx.sessions.create('t').id).toBe('t')
  })

  it('a rejecting session/created listener is logged; the session stays and peers hear it', async () => {
    const { ctx, warnings } = await mount()
    const heard: string[] = []
    ctx.on('session/created', async () => {
      throw new Error('async created')
    })
    ctx.on('session/created', (s) => void heard.push(s.id))
    const session = ctx.sessions.create('r')
    await ticks()
    expect(heard).toEqual(['r'])
    expect(ctx.sessions.get('r')).toBe(session)
    expect(warnings).toEqual(['session "r": session/created listener rejected: Error: async created'])
  })

  it('on an inactive fiber, ctx.effect throws before anything is entered', async () => {
    const { ctx } = await mount()
    const inner = await fiber(ctx)
    const sessions = inner.ctx.sessions
    await inner.dispose()
    expect(() => sessions.create('late')).toThrow('cannot create effect on inactive context')
    expect(ctx.sessions.get('late')).toBeUndefined()
  })
})

describe('prepare, enter, announce (SPEC 12.3)', () => {
  it('prepare does not register, enter does not announce, announce delivers; detach removes once', async () => {
    const { ctx } = await mount()
    const seen: string[] = []
    ctx.on('session/created', (s) => void seen.push(`created ${s.id}`))
    ctx.on('session/disposed', (s) => void seen.push(`disposed ${s.id}`))
    const session = ctx.sessions.prepare('p')
    expect(ctx.sessions.get('p')).toBeUndefined()
    const detach = ctx.sessions.enter(session)
    expect(ctx.sessions.get('p')).toBe(session)
    expect(seen).toEqual([])
    ctx.sessions.announce(session)
    expect(seen).toEqual(['created p'])
    detach()
    expect(ctx.sessions.get('p')).toBeUndefined()
    detach()
    expect(seen).toEqual(['created p', 'disposed p'])
  })

  it('enter of a stale prepared session throws `already exists`; the live one stays', async () => {
    const { ctx } = await mount()
    const stale = ctx.sessions.prepare('x')
    const live = ctx.sessions.create('x')
    expect(() => ctx.sessions.enter(stale)).toThrow('session "x" already exists')
    expect(ctx.sessions.get('x')).toBe(live)
  })

  it('prepare throws `already exists` for a live id', async () => {
    const { ctx } = await mount()
    ctx.sessions.create('x')
    expect(() => ctx.sessions.prepare('x')).toThrow('session "x" already exists')
  })

  it('one object across two root contexts: `already attached to a store` until the first detach', async () => {
    const a = await mount()
    const b = await mount()
    const session = new Session('shared')
    const detach = a.ctx.sessions.enter(session)
    expect(() => b.ctx.sessions.enter(session)).toThrow('session "shared" is already attached to a store')
    detach()
    const detachB = b.ctx.sessions.enter(session)
    expect(b.ctx.sessions.get('shared')).toBe(session)
    detachB()
  })

  it('an unannounced entry is removed without session/disposed', async () => {
    const { ctx } = await mount()
    const disposed: string[] = []
    ctx.on('session/disposed', (s) => void disposed.push(s.id))
    const detach = ctx.sessions.enter(ctx.sessions.prepare('u'))
    detach()
    expect(disposed).toEqual([])
  })

  it('a repeat announce, direct or from a session/created listener, throws `already announced`', async () => {
    const { ctx } = await mount()
    const seen: string[] = []
    ctx.on('session/created', (s) => void seen.push(`created ${s.id}`))
    ctx.on('session/disposed', (s) => void seen.push(`disposed ${s.id}`))
    const session = ctx.sessions.prepare('a')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    expect(() => ctx.sessions.announce(session)).toThrow('session "a" was already announced')

    let inner: unknown
    const off = ctx.on('session/created', (s) => {
      try {
        ctx.sessions.announce(s)
      } catch (error) {
        inner = error
      }
    })
    const other = ctx.sessions.prepare('b')
    const detachOther = ctx.sessions.enter(other)
    ctx.sessions.announce(other)
    off()
    expect((inner as Error).message).toBe('session "b" was already announced')
    detach()
    detachOther()
    expect(seen).toEqual(['created a', 'created b', 'disposed a', 'disposed b'])
  })

  it('announce of a session that is not live throws `not live in this store`', async () => {
    const { ctx } = await mount()
    const prepared = ctx.sessions.prepare('n')
    expect(() => ctx.sessions.announce(prepared)).toThrow('session "n" is not live in this store')
    const detach = ctx.sessions.enter(prepared)
    detach()
    expect(() => ctx.sessions.announce(prepared)).toThrow('session "n" is not live in this store')
  })

  it('detach inside the first session/created listener: the second runs, both see it live, then disposal', async () => {
    const { ctx } = await mount()
    const log: string[] = []
    const session = ctx.sessions.prepare('d')
    const detach = ctx.sessions.enter(session)
    ctx.on('session/created', (s) => {
      log.push(`first live=${ctx.sessions.get(s.id) === s}`)
      detach()
    })
    ctx.on('session/created', (s) => void log.push(`second live=${ctx.sessions.get(s.id) === s}`))
    ctx.on('session/disposed', (s) => void log.push(`disposed get=${String(ctx.sessions.get(s.id))}`))
    ctx.sessions.announce(session)
    expect(log).toEqual(['first live=true', 'second live=true', 'disposed get=undefined'])
    expect(ctx.sessions.get('d')).toBeUndefined()
  })

  it('a stale detach never removes a same-id successor', async () => {
    const { ctx } = await mount()
    const first = ctx.sessions.prepare('same')
    const detach = ctx.sessions.enter(first)
    detach()
    const second = ctx.sessions.create('same')
    detach()
    expect(ctx.sessions.get('same')).toBe(second)
  })

  it('a detached session may be entered again as a new lifecycle', async () => {
    const { ctx } = await mount()
    const seen: string[] = []
    ctx.on('session/created', (s) => void seen.push(`created ${s.id}`))
    ctx.on('session/disposed', (s) => void seen.push(`disposed ${s.id}`))
    const session = ctx.sessions.prepare('again')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    detach()
    const detach2 = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    detach2()
    expect(seen).toEqual(['created again', 'disposed again', 'created again', 'disposed again'])
  })

  it('enter accepts any Session of this package, not only prepared ones', async () => {
    const { ctx } = await mount()
    const events: SessionEvent[] = []
    ctx.on('session/event', (_s, e) => void events.push(e))
    const session = Session.fromJsonl(new Session('j').toJsonl())
    const detach = ctx.sessions.enter(session)
    const event = session.append('turn/start', turnStart())
    expect(events).toEqual([event])
    detach()
  })

  it('enter refuses what is not a Session (INVALID_ARGUMENT) and registers nothing', async () => {
    const { ctx } = await mount()
    for (const value of [{ id: 'fake' }, null, 'id']) {
      let error: unknown
      try {
        ctx.sessions.enter(value as never)
      } catch (e) {
        error = e
      }
      expect(error).toBeInstanceOf(TypeError)
      expect((error as { code?: string }).code).toBe('INVALID_ARGUMENT')
      expect((error as Error).message).toBe('sessions.enter expects a Session of dsh-session-native')
    }
    expect(ctx.sessions.list()).toEqual([])
  })

  it('list is a fresh array in entry order', async () => {
    const { ctx } = await mount()
    const a = ctx.sessions.create('a')
    const b = ctx.sessions.create('b')
    const list = ctx.sessions.list()
    expect(list).toEqual([a, b])
    list.pop()
    expect(ctx.sessions.list()).toEqual([a, b])
  })
})

describe('headers (SPEC 12.3 prepare)', () => {
  it('bare create(id) gives {version: 0, id, createdAt} and no cwd or parentSession', async () => {
    const { ctx } = await mount()
    const header = ctx.sessions.create('h').header
    expect(Object.keys(header)).toEqual(['version', 'id', 'createdAt'])
    expect(header.version).toBe(0)
    expect(header.id).toBe('h')
    expect(typeof header.createdAt).toBe('number')
  })

  it('copies meta cwd, parentSession, createdAt and seedLength in header order; ignores other keys', async () => {
    const { ctx } = await mount()
    const meta = { seedLength: 0, parentSession: 'p', cwd: '/work', createdAt: 5, other: 1 }
    const header = ctx.sessions.create('m', { meta: meta as never }).header
    expect(header).toEqual({ version: 0, id: 'm', createdAt: 5, cwd: '/work', parentSession: 'p', seedLength: 0 })
    expect(Object.keys(header)).toEqual(['version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength'])
  })

  it('a null createdAt means now', async () => {
    const { ctx } = await mount()
    const before = Date.now()
    const header = ctx.sessions.prepare('n', { meta: { createdAt: null as never } }).header
    expect(header.createdAt).toBeGreaterThanOrEqual(before)
  })

  const invalid: [string, Record<string, unknown>, string][] = [
    ['bigint parentSession', { parentSession: 1n }, 'session header is not losslessly JSON-serializable'],
    ['numeric cwd', { cwd: 1 }, 'session header cwd must be a string'],
    ['numeric parentSession', { parentSession: 1 }, 'session header parentSession must be a string'],
    ['string createdAt', { createdAt: '1' }, 'session header createdAt must be a finite number'],
    ["seedLength '1'", { seedLength: '1' }, 'session header seedLength must be a non-negative safe integer'],
    ['seedLength 0.5', { seedLength: 0.5 }, 'session header seedLength must be a non-negative safe integer'],
    ['seedLength -1', { seedLength: -1 }, 'session header seedLength must be a non-negative safe integer'],
    ['relative cwd', { cwd: 'rel/dir' }, 'session header cwd must be an absolute path, got "rel/dir"'],
    ['null cwd', { cwd: null }, 'session header cwd must be a string'],
  ]
  for (const [what, meta, message] of invalid) {
    it(`prepare throws the section-3 message for ${what} and registers nothing`, async () => {
      const { ctx } = await mount()
      expect(() => ctx.sessions.prepare('bad', { meta: meta as never })).toThrow(message)
      expect(() => ctx.sessions.create('bad', { meta: meta as never })).toThrow(message)
      expect(ctx.sessions.get('bad')).toBeUndefined()
    })
  }

  it('a bad seed fails before a bad header', async () => {
    const { ctx } = await mount()
    expect(() => ctx.sessions.prepare('s', { seed: [{ nope: 1 }] as never, meta: { cwd: 'rel' } })).toThrow(
      'seed event at index 0 has an invalid event envelope',
    )
  })
})
