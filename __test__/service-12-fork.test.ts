// SPEC 12.6: `ctx.sessions.fork(source, boundary?, childSessionId?)`, its
// checks in order, each a SessionForkError with its exact message and code,
// and the child it creates.

import { describe, expect, it } from 'vitest'
import { Session, SessionForkError, type SessionEvent } from '../index.js'
import { closedTurn, completed, fiber, mount, turnStart, userMessage } from './service-helpers.js'

function forkError(fn: () => unknown): SessionForkError {
  try {
    fn()
  } catch (error) {
    expect(error).toBeInstanceOf(SessionForkError)
    return error as SessionForkError
  }
  throw new Error('expected a SessionForkError')
}

describe('SessionForkError', () => {
  it('extends Error with the given message, name SessionForkError and a read-only own code', () => {
    const error = new SessionForkError('bad', 'OPEN_TURN')
    expect(error).toBeInstanceOf(Error)
    expect(error.message).toBe('bad')
    expect(error.name).toBe('SessionForkError')
    expect(Object.hasOwn(error, 'code')).toBe(true)
    expect(error.code).toBe('OPEN_TURN')
    expect(() => {
      ;(error as { code: string }).code = 'OTHER'
    }).toThrow(TypeError)
    expect(String(error)).toBe('SessionForkError: bad')
  })
})

describe('fork', () => {
  it('an empty source gives an empty child with cwd, parentSession and seedLength 0', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('empty', { meta: { cwd: '/proj' } })
    const child = ctx.sessions.fork(source)
    expect(child.events).toEqual([])
    expect(child.header).toMatchObject({ version: 0, cwd: '/proj', parentSession: 'empty', seedLength: 0 })
    expect(Object.keys(child.header)).toEqual(['version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength'])
  })

  it('the default boundary takes the whole closed log as equal but distinct frozen events', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('whole')
    closedTurn(source)
    const before = source.events
    const child = ctx.sessions.fork(source)
    expect(child.events).toEqual(source.events)
    for (let i = 0; i < child.events.length; i++) {
      expect(child.events[i]).not.toBe(source.events[i])
      expect(Object.isFrozen(child.events[i])).toBe(true)
      expect(() => {
        ;(child.events[i] as { seq: number }).seq = 99
      }).toThrow(TypeError)
    }
    expect(source.events).toBe(before)
    expect(child.header.seedLength).toBe(3)
    expect(child.header.parentSession).toBe('whole')
    expect('cwd' in child.header).toBe(false)
  })

  it('an earlier boundary with an open tail works (seedLength = boundary + 1)', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('tail')
    closedTurn(source)
    source.append('turn/start', turnStart(2))
    const child = ctx.sessions.fork(source, 2)
    expect(child.events.map((e) => e.seq)).toEqual([0, 1, 2])
    expect(child.header.seedLength).toBe(3)
  })

  it('creates the child on the calling fiber: session/created fires, a minted id, owned by that fiber', async () => {
    const { ctx } = await mount()
    const created: string[] = []
    ctx.on('session/created', (s) => void created.push(s.id))
    const source = ctx.sessions.create('parent')
    closedTurn(source)
    const inner = await fiber(ctx)
    const child = inner.ctx.sessions.fork('parent')
    expect(child.id).toBe('session-1')
    expect(created).toEqual(['parent', 'session-1'])
    expect(ctx.sessions.get(child.id)).toBe(child)
    await inner.dispose()
    expect(ctx.sessions.get(child.id)).toBeUndefined()
    expect(ctx.sessions.get('parent')).toBe(source)
  })

  it('uses the given child id and createdAt now', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('p', { meta: { createdAt: 1 } })
    closedTurn(source)
    const before = Date.now()
    const child = ctx.sessions.fork(source, undefined, 'kid')
    expect(child.id).toBe('kid')
    expect(child.header.createdAt).toBeGreaterThanOrEqual(before)
  })

  const reasons = [
    { kind: 'completed' },
    { kind: 'aborted', reason: 'user' },
    { kind: 'error', step: 1, message: 'x' },
    { kind: 'disposed' },
    { kind: 'max-tokens' },
    { kind: 'rejected', reason: 'no' },
    { kind: 'interrupted' },
  ] as const
  for (const reason of reasons) {
    it(`accepts a turn/end with reason ${reason.kind}`, async () => {
      const { ctx } = await mount()
      const source = ctx.sessions.create('r')
      source.append('turn/start', turnStart())
      source.append('turn/end', { turn: 1, reason })
      expect(ctx.sessions.fork(source).events.length).toBe(2)
    })
  }

  describe('errors (each registers no child)', () => {
    async function withSource() {
      const mounted = await mount()
      const source = mounted.ctx.sessions.create('src')
      closedTurn(source)
      source.append('turn/start', turnStart(2))
      source.append('step/start', { turn: 2, step: 1 })
      source.append('user/message', userMessage('q'), { surfaceOp: 'append' })
      source.append('assistant/message', {
        turn: 2,
        step: 1,
        content: [{ type: 'text', text: 'a' }],
        provenance: { provider: 'p', model: 'm' },
      }, { surfaceOp: 'append' })
      source.append('tool/call', { turn: 2, step: 1, callId: 'c', name: 'n', arguments: '{}' })
      return { ...mounted, source }
    }

    const cases: [string, (s: Session) => [unknown, unknown?, unknown?], string, string][] = [
      ['a live child id', (s) => [s, 2, 'src'], 'session "src" already exists', 'SESSION_ALREADY_EXISTS'],
      ['an unknown string source', () => ['nobody'], 'session "nobody" not found', 'SESSION_NOT_FOUND'],
      ['a source object whose id is not live', () => [new Session('ghost')], 'session "ghost" not found', 'SESSION_NOT_FOUND'],
      ['a source object that is not the live instance', () => [new Session('src'), 2], 'session "src" is not the live store instance', 'SESSION_NOT_LIVE'],
      ['a negative boundary', (s) => [s, -1], 'fork boundary for session "src" must be a non-negative safe integer, got -1', 'INVALID_BOUNDARY'],
      ['a fractional boundary', (s) => [s, 1.5], 'fork boundary for session "src" must be a non-negative safe integer, got 1.5', 'INVALID_BOUNDARY'],
      ['a string boundary', (s) => [s, '2'], 'fork boundary for session "src" must be a non-negative safe integer, got 2', 'INVALID_BOUNDARY'],
      ['a null boundary', (s) => [s, null], 'fork boundary for session "src" must be a non-negative safe integer, got null', 'INVALID_BOUNDARY'],
      ['an unsafe boundary', (s) => [s, 2 ** 53], `fork boundary for session "src" must be a non-negative safe integer, got ${2 ** 53}`, 'INVALID_BOUNDARY'],
      ['a boundary past the log', (s) => [s, 8], 'fork boundary 8 does not exist in session "src" (last seq: 7)', 'INVALID_BOUNDARY'],
      ['turn/start', (s) => [s, 3], 'fork boundary 3 in session "src" must be turn/end, got turn/start', 'OPEN_TURN'],
      ['step/start', (s) => [s, 4], 'fork boundary 4 in session "src" must be turn/end, got step/start', 'OPEN_TURN'],
      ['user/message', (s) => [s, 5], 'fork boundary 5 in session "src" must be turn/end, got user/message', 'OPEN_TURN'],
      ['assistant/message', (s) => [s, 6], 'fork boundary 6 in session "src" must be turn/end, got assistant/message', 'OPEN_TURN'],
      ['tool/call', (s) => [s, 7], 'fork boundary 7 in session "src" must be turn/end, got tool/call', 'OPEN_TURN'],
      ['the default boundary of an open log', (s) => [s], 'fork boundary 7 in session "src" must be turn/end, got tool/call', 'OPEN_TURN'],
    ]
    for (const [what, args, message, code] of cases) {
      it(`rejects ${what}: ${code}`, async () => {
        const { ctx, source } = await withSource()
        const created: string[] = []
        ctx.on('session/created', (s) => void created.push(s.id))
        const before = ctx.sessions.list()
        const error = forkError(() => ctx.sessions.fork(...(args(source) as [Session, number?, string?])))
        expect(error.message).toBe(message)
        expect(error.code).toBe(code)
        expect(ctx.sessions.list()).toEqual(before)
        expect(created).toEqual([])
      })
    }

    it('a boundary on an empty log names no last seq', async () => {
      const { ctx } = await mount()
      const empty = ctx.sessions.create('e')
      const error = forkError(() => ctx.sessions.fork(empty, 0))
      expect(error.message).toBe('fork boundary 0 does not exist in session "e" (last seq: none)')
      expect(error.code).toBe('INVALID_BOUNDARY')
    })

    it('a log whose index and seq disagree is not a contiguous boundary', async () => {
      const { ctx } = await mount()
      // The native Session never holds such a log; an own getter can show one.
      const corrupt = new Session('corrupt')
      corrupt.append('turn/start', turnStart())
      corrupt.append('turn/end', completed())
      const real = corrupt.events
      Object.defineProperty(corrupt, 'events', { get: () => real.map((event, index) => (index === 1 ? { ...event, seq: 5 } : event)) })
      ctx.sessions.enter(corrupt)
      const error = forkError(() => ctx.sessions.fork(corrupt, 1))
      expect(error.message).toBe('fork boundary 1 does not match a contiguous event seq in session "corrupt"')
      expect(error.code).toBe('INVALID_BOUNDARY')
    })

    it('reads such a log as JS would: its last seq names the default boundary, and what its events throw is thrown as it is', async () => {
      const { ctx } = await mount()
      const shifted = new Session('shifted-end')
      shifted.append('turn/start', turnStart())
      shifted.append('turn/end', completed())
      const real = shifted.events
      let events: unknown[] = real.map((event) => ({ ...event, seq: event.seq + 1 }))
      Object.defineProperty(shifted, 'events', { get: () => events })
      ctx.sessions.enter(shifted)
      const error = forkError(() => ctx.sessions.fork(shifted))
      expect(error.message).toBe('fork boundary 2 does not exist in session "shifted-end" (last seq: 2)')
      expect(error.code).toBe('INVALID_BOUNDARY')
      const thrown = new RangeError('no seq here')
      events = [real[0], { get seq(): number { throw thrown } }]
      expect(() => ctx.sessions.fork(shifted, 1)).toThrow(thrown)
    })

    it('a duplicate child id wins over a bad boundary and a missing source', async () => {
      const { ctx, source } = await withSource()
      expect(forkError(() => ctx.sessions.fork(source, -1, 'src')).code).toBe('SESSION_ALREADY_EXISTS')
      expect(forkError(() => ctx.sessions.fork('nobody', -1, 'src')).code).toBe('SESSION_ALREADY_EXISTS')
    })

    it('a source check wins over a bad boundary', async () => {
      const { ctx } = await withSource()
      expect(forkError(() => ctx.sessions.fork('nobody', -1)).code).toBe('SESSION_NOT_FOUND')
    })

    it("create's own errors propagate unwrapped", async () => {
      const { ctx, source } = await withSource()
      ctx.on('session/created', (s) => {
        if (s.id === 'child') throw new Error('created listener failed')
      })
      let error: unknown
      try {
        ctx.sessions.fork(source, 2, 'child')
      } catch (e) {
        error = e
      }
      expect(error).not.toBeInstanceOf(SessionForkError)
      expect((error as Error).message).toBe('created listener failed')
      expect(ctx.sessions.get('child')).toBeUndefined()
    })
  })

  it('a child of a child records its own parent', async () => {
    const { ctx } = await mount()
    const source = ctx.sessions.create('a')
    const events: SessionEvent[] = closedTurn(source)
    const child = ctx.sessions.fork(source, undefined, 'b')
    child.append('turn/start', turnStart(2))
    child.append('turn/end', completed(2))
    const grandchild = ctx.sessions.fork('b', 4, 'c')
    expect(grandchild.header.parentSession).toBe('b')
    expect(grandchild.events.slice(0, 3)).toEqual(events)
  })
})
