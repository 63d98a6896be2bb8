// SPEC 12.4 and its rules in 12.7: how the store resolves and delivers
// session/created, session/event and session/disposed (containment, veto
// through internal/dispatch, re-entrant appends, deferred detach, scopes).

import InvariantRegistry from '@deepseek-ai/dsh-invariants'
import * as scopeInvariant from '@deepseek-ai/dsh-scope/invariant'
import { describe, expect, it } from 'vitest'
import { Session, type SessionEvent } from '../index.js'
import { completed, mount, scope, ticks, turnStart, userMessage } from './service-helpers.js'

describe('session/event delivery', () => {
  it('throwing, rejecting and normal listeners: append returns and each failure is logged exactly', async () => {
    const { ctx, warnings } = await mount()
    const session = ctx.sessions.create('e')
    let sawLast: SessionEvent | undefined
    const normal: SessionEvent[] = []
    ctx.on('session/event', (s) => {
      sawLast = s.events[s.events.length - 1]
      throw new Error('sync boom')
    })
    ctx.on('session/event', async () => {
      throw new Error('async boom')
    })
    ctx.on('session/event', (_s, e) => void normal.push(e))
    const event = session.append('turn/start', turnStart())
    expect(session.events).toEqual([event])
    expect(sawLast).toBe(event)
    expect(normal).toEqual([event])
    await ticks()
    expect(warnings).toEqual([
      'session "e": session/event listener threw: Error: sync boom',
      'session "e": session/event listener rejected: Error: async boom',
    ])
  })

  it('listeners find the event last in session.events and the session still live', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('l')
    const seen: [number, boolean][] = []
    ctx.on('session/event', (s, e) => void seen.push([s.events.indexOf(e), ctx.sessions.get(s.id) === s]))
    session.append('turn/start', turnStart())
    session.append('turn/end', completed())
    expect(seen).toEqual([
      [0, true],
      [1, true],
    ])
  })

  it('an internal/dispatch throw on the first candidate vetoes the append; the retry commits', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('v')
    const delivered: SessionEvent[] = []
    ctx.on('session/event', (_s, e) => void delivered.push(e))
    const candidates: { seq: number; frozen: boolean; dataFrozen: boolean; length: number; event: SessionEvent }[] = []
    let veto = true
    ctx.on('internal/dispatch', (_mode, name, args) => {
      if (name !== 'session/event') return
      const [s, e] = args as [Session, SessionEvent]
      candidates.push({ seq: e.seq, frozen: Object.isFrozen(e), dataFrozen: Object.isFrozen(e.data), length: s.events.length, event: e })
      if (veto) {
        veto = false
        throw new Error('vetoed')
      }
    })
    expect(() => session.append('turn/start', turnStart())).toThrow('vetoed')
    expect(session.events).toEqual([])
    expect(session.seq).toBe(0)
    expect(delivered).toEqual([])
    const event = session.append('turn/start', turnStart())
    expect(session.events).toEqual([event])
    expect(delivered).toEqual([event])
    expect(candidates.map(({ event: _e, ...rest }) => rest)).toEqual([
      { seq: 0, frozen: true, dataFrozen: true, length: 0 },
      { seq: 0, frozen: true, dataFrozen: true, length: 0 },
    ])
    expect(candidates[1].event).toBe(event)
  })

  it('internal/dispatch sees the mode emit and (session, candidate) as args', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('m')
    const seen: unknown[] = []
    ctx.on('internal/dispatch', (mode, name, args) => {
      if (name.startsWith('session/')) seen.push([mode, name, args.length, args[0] === session])
    })
    session.append('turn/start', turnStart())
    await ctx.sessions.flush(session)
    expect(seen).toEqual([
      ['emit', 'session/event', 2, true],
      ['emit', 'session/flush', 1, true],
    ])
  })

  it('a vetoed replace leaves surface.nodes and replaceGeneration as they were', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('r')
    session.append('turn/start', turnStart())
    session.append('user/message', userMessage('one'), { surfaceOp: 'append' })
    session.append('user/message', userMessage('two'), { surfaceOp: 'append' })
    const nodes = [...session.surface.nodes]
    const generation = session.surface.replaceGeneration
    ctx.on('internal/dispatch', (_mode, name) => {
      if (name === 'session/event') throw new Error('no replace')
    })
    expect(() =>
      session.append('context/message', userMessage('summary'), {
        surfaceOp: { op: 'replace', start: 1, end: 2 },
        sourceEventSeqs: [1, 2],
      }),
    ).toThrow('no replace')
    expect([...session.surface.nodes]).toEqual(nodes)
    expect(session.surface.replaceGeneration).toBe(generation)
    expect(session.seq).toBe(3)
  })

  it('a re-entrant append from an observer logs the exact warning; the next observer still hears the event', async () => {
    const { ctx, warnings } = await mount()
    const session = ctx.sessions.create('re')
    const heard: SessionEvent[] = []
    ctx.on('session/event', (s) => {
      s.append('turn/end', completed())
    })
    ctx.on('session/event', (_s, e) => void heard.push(e))
    const event = session.append('turn/start', turnStart())
    expect(heard).toEqual([event])
    expect(session.seq).toBe(1)
    expect(warnings).toEqual([
      'session "re": session/event listener threw: Error: session append cannot reenter while another append is being published',
    ])
  })

  it('a re-entrant append from internal/dispatch throws and vetoes', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('rd')
    let inner: unknown
    ctx.on('internal/dispatch', (_mode, name, args) => {
      if (name !== 'session/event') return
      try {
        ;(args[0] as Session).append('turn/end', completed())
      } catch (error) {
        inner = error
        throw error
      }
    })
    expect(() => session.append('turn/start', turnStart())).toThrow(
      'session append cannot reenter while another append is being published',
    )
    expect((inner as Error).message).toBe('session append cannot reenter while another append is being published')
    expect(session.seq).toBe(0)
  })

  it('the snapshot is fixed: a listener added during delivery misses it, one removed still gets it', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('snap')
    const log: string[] = []
    let offLater: () => boolean = () => false
    ctx.on('session/event', (_s, e) => {
      log.push(`first ${e.seq}`)
      offLater()
      ctx.on('session/event', (_s2, e2) => void log.push(`added ${e2.seq}`))
    })
    offLater = ctx.on('session/event', (_s, e) => void log.push(`removed ${e.seq}`))
    session.append('turn/start', turnStart())
    expect(log).toEqual(['first 0', 'removed 0'])
  })

  it('detach from internal/dispatch mid-append: resolve (live), observe (live), dispose (detached)', async () => {
    const { ctx } = await mount()
    const inner = await (async () => {
      let detach: () => void = () => {}
      const session = ctx.sessions.prepare('mid')
      detach = ctx.sessions.enter(session)
      ctx.sessions.announce(session)
      return { session, detach }
    })()
    const log: string[] = []
    ctx.on('internal/dispatch', (_mode, name, args) => {
      if (name !== 'session/event') return
      log.push(`resolve live=${ctx.sessions.get('mid') === args[0]}`)
      inner.detach()
    })
    ctx.on('session/event', (s) => void log.push(`observe live=${ctx.sessions.get('mid') === s}`))
    ctx.on('session/disposed', (s) => void log.push(`dispose get=${String(ctx.sessions.get(s.id))}`))
    inner.session.append('turn/start', turnStart())
    expect(log).toEqual(['resolve live=true', 'observe live=true', 'dispose get=undefined'])
    inner.session.append('turn/end', completed())
    expect(log.length).toBe(3)
  })

  it('a detach requested during a vetoed append runs when the veto closes the window', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.prepare('vd')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    const log: string[] = []
    ctx.on('session/disposed', (s) => void log.push(`disposed ${s.id}`))
    ctx.on('internal/dispatch', (_mode, name) => {
      if (name !== 'session/event') return
      detach()
      log.push('vetoing')
      throw new Error('veto')
    })
    expect(() => session.append('turn/start', turnStart())).toThrow('veto')
    expect(log).toEqual(['vetoing', 'disposed vd'])
    expect(ctx.sessions.get('vd')).toBeUndefined()
  })

  it('another attachment vetoing after the store hook leaves no window open', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.prepare('av')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    const heard: number[] = []
    ctx.on('session/event', (_s, e) => void heard.push(e.seq))
    const off = session.attach({
      beforeCommit() {
        throw new Error('later attachment vetoes')
      },
    })
    expect(() => session.append('turn/start', turnStart())).toThrow('later attachment vetoes')
    off()
    // The window closed: detach acts at once, and the next append is delivered normally.
    const event = session.append('turn/start', turnStart())
    expect(heard).toEqual([event.seq])
    const disposed: string[] = []
    ctx.on('session/disposed', (s) => void disposed.push(s.id))
    detach()
    expect(disposed).toEqual(['av'])
    expect(heard).toEqual([0])
  })

  it('a detach requested while another attachment vetoes runs at the veto', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.prepare('dv')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    session.attach({
      beforeCommit() {
        detach()
        throw new Error('veto after detach')
      },
    })
    expect(() => session.append('turn/start', turnStart())).toThrow('veto after detach')
    expect(ctx.sessions.get('dv')).toBeUndefined()
  })

  it('listener this is the scope carrier, not the session', async () => {
    const { ctx } = await mount()
    const session = ctx.sessions.create('c')
    let self: unknown
    ctx.on('session/event', function (this: unknown) {
      self = this
    })
    session.append('turn/start', turnStart())
    expect(self).not.toBe(session)
    expect(typeof self).toBe('object')
  })
})

describe('session/disposed delivery', () => {
  it('throwing and rejecting listeners give both exact warnings and peers still run', async () => {
    const { ctx, warnings } = await mount()
    const heard: string[] = []
    ctx.on('session/disposed', () => {
      throw new Error('dispose sync')
    })
    ctx.on('session/disposed', async () => {
      throw new Error('dispose async')
    })
    ctx.on('session/disposed', (s) => void heard.push(s.id))
    const session = ctx.sessions.prepare('x')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    detach()
    await ticks()
    expect(heard).toEqual(['x'])
    expect(warnings).toEqual([
      'session "x": session/disposed listener threw: Error: dispose sync',
      'session "x": session/disposed listener rejected: Error: dispose async',
    ])
  })

  it('an internal/dispatch throw: nobody is called, detach does not throw, the session is gone, one warning', async () => {
    const { ctx, warnings } = await mount()
    const heard: string[] = []
    ctx.on('session/disposed', (s) => void heard.push(s.id))
    ctx.on('internal/dispatch', (_mode, name) => {
      if (name === 'session/disposed') throw new Error('no dispose')
    })
    const session = ctx.sessions.prepare('y')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    expect(() => detach()).not.toThrow()
    expect(heard).toEqual([])
    expect(ctx.sessions.get('y')).toBeUndefined()
    expect(warnings).toEqual(['session "y": session/disposed dispatch threw: Error: no dispose'])
  })

  it('replacing args[0] in internal/dispatch does not change what listeners get', async () => {
    const { ctx } = await mount()
    const got: unknown[] = []
    ctx.on('session/disposed', (s) => void got.push(s))
    ctx.on('session/event', (s) => void got.push(s))
    ctx.on('internal/dispatch', (_mode, name, args) => {
      if (name.startsWith('session/')) args[0] = 'swapped'
    })
    const session = ctx.sessions.prepare('z')
    const detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    session.append('turn/start', turnStart())
    detach()
    expect(got).toEqual([session, session])
  })

  it('a session/created dispatch throw propagates from announce and still pairs with disposal', async () => {
    const { ctx } = await mount()
    const disposed: string[] = []
    ctx.on('session/disposed', (s) => void disposed.push(s.id))
    const off = ctx.on('internal/dispatch', (_mode, name) => {
      if (name === 'session/created') throw new Error('no created')
    })
    const session = ctx.sessions.prepare('cd')
    const detach = ctx.sessions.enter(session)
    expect(() => ctx.sessions.announce(session)).toThrow('no created')
    off()
    expect(() => ctx.sessions.announce(session)).toThrow('session "cd" was already announced')
    detach()
    expect(disposed).toEqual(['cd'])
  })
})

describe('scoped delivery', () => {
  it('a session created through scope A is heard by global and A listeners in registration order, never by B', async () => {
    const { ctx } = await mount()
    const A = {}
    const B = {}
    const a = await scope(ctx, A)
    const b = await scope(ctx, B)
    const log: string[] = []
    for (const [name, where, options] of [
      ['root', ctx, undefined],
      ['a-global', a.ctx, { global: true }],
      ['A', a.ctx, undefined],
      ['B', b.ctx, undefined],
    ] as const) {
      where.on('session/created', (s) => void log.push(`${name} created ${s.id}`), options)
      where.on('session/event', (s, e) => void log.push(`${name} event ${s.id} ${e.seq}`), options)
      where.on('session/disposed', (s) => void log.push(`${name} disposed ${s.id}`), options)
    }
    const session = a.ctx.sessions.create('sa')
    session.append('turn/start', turnStart())
    await a.dispose()
    expect(log).toEqual([
      'root created sa',
      'a-global created sa',
      'A created sa',
      'root event sa 0',
      'a-global event sa 0',
      'A event sa 0',
      'root disposed sa',
      'a-global disposed sa',
      'A disposed sa',
    ])
  })

  it('a session created through the root is never heard by scoped listeners', async () => {
    const { ctx } = await mount()
    const A = {}
    const a = await scope(ctx, A)
    const log: string[] = []
    a.ctx.on('session/created', (s) => void log.push(`A created ${s.id}`))
    a.ctx.on('session/event', (s) => void log.push(`A event ${s.id}`))
    a.ctx.on('session/created', (s) => void log.push(`global created ${s.id}`), { global: true })
    const session = ctx.sessions.create('root-owned')
    session.append('turn/start', turnStart())
    expect(log).toEqual(['global created root-owned'])
  })

  it('events use the owner carrier whatever context the append comes from; disposal reaches the owner scope', async () => {
    const { ctx } = await mount()
    const A = {}
    const a = await scope(ctx, A)
    const log: string[] = []
    a.ctx.on('session/event', (s, e) => void log.push(`A event ${s.id} ${e.seq}`))
    a.ctx.on('session/disposed', (s) => void log.push(`A disposed ${s.id}`))
    const session = ctx.sessions.prepare('entered-in-a')
    const detach = a.ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    session.append('turn/start', turnStart())
    detach()
    expect(log).toEqual(['A event entered-in-a 0', 'A disposed entered-in-a'])
  })

  it("dispatches through carriers the consumer's dsh-scope recognizes (its scope invariant passes)", async () => {
    const { ctx, warnings } = await mount()
    await ctx.plugin(InvariantRegistry)
    await ctx.plugin(scopeInvariant)
    // The invariant is live: a dispatch without a carrier is refused.
    expect(() => ctx.emit('session/created', new Session('forged'))).toThrow('dispatched without a scope carrier')
    const A = {}
    const a = await scope(ctx, A)
    const heard: string[] = []
    a.ctx.on('session/event', (s, e) => void heard.push(`${s.id} ${e.seq}`))
    const session = a.ctx.sessions.create('checked')
    session.append('turn/start', turnStart())
    session.append('turn/end', completed())
    await ctx.sessions.flush(session)
    const child = ctx.sessions.fork(session, undefined, 'unscoped-child')
    child.append('turn/start', turnStart(2))
    await a.dispose()
    expect(heard).toEqual(['checked 0', 'checked 1'])
    expect(warnings).toEqual([])
  })

  it('a session/event warning uses the owner context logger, read at call time', async () => {
    const { ctx, warnings } = await mount()
    const session = ctx.sessions.create('lg')
    ctx.on('session/event', () => {
      throw new Error('x')
    })
    const later: string[] = []
    ctx.logger.warn = ((text: string) => void later.push(text)) as typeof ctx.logger.warn
    session.append('turn/start', turnStart())
    expect(warnings).toEqual([])
    expect(later).toEqual(['session "lg": session/event listener threw: Error: x'])
  })
})
