import { afterEach, describe, expect, it, vi } from 'vitest'
import { Session, type SessionEvent } from '../index.js'
import { catchError, expectRejectedWithoutChange, sessionWithUsers, stateOf, text, USER } from './spec-helpers.js'

const userMessage = { content: text('x'), source: USER }

function flush(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0))
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('SPEC 10 attach', () => {
  it('returns a detach function', () => {
    const s = new Session('s')
    expect(typeof s.attach({})).toBe('function')
  })

  it('accepts an attachment with no callbacks', () => {
    const s = new Session('s')
    s.attach({})
    const e = s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(s.events).toEqual([e])
  })
})

describe('SPEC 10 beforeCommit', () => {
  it('runs after validation, before the event enters the log', () => {
    const s = sessionWithUsers(1)
    const seen: { event: SessionEvent; session: Session; seq: number; length: number; nodes: number[] }[] = []
    s.attach({
      beforeCommit: (event, session) => {
        seen.push({ event, session, seq: session.seq, length: session.events.length, nodes: [...session.surface.nodes] })
      },
    })
    const e = s.append('user/message', userMessage, { surfaceOp: 'append' })
    expect(seen).toHaveLength(1)
    expect(seen[0].session).toBe(s)
    expect(seen[0].event).toEqual(e)
    expect(seen[0].seq).toBe(2)
    expect(seen[0].length).toBe(2)
    expect(seen[0].nodes).toEqual([1])
  })

  it('is not called for an append that fails validation', () => {
    const s = sessionWithUsers(1)
    const beforeCommit = vi.fn()
    s.attach({ beforeCommit })
    catchError(() => (s.append as (...a: unknown[]) => unknown)('user/message', userMessage))
    catchError(() => s.append('todo/write', { todos: [{ content: 'x', status: NaN as never }] }))
    expect(beforeCommit).not.toHaveBeenCalled()
  })

  it('vetoes by throwing: the error propagates and the log stays unchanged', () => {
    const s = sessionWithUsers(2)
    const veto = new Error('store is read-only')
    const afterCommit = vi.fn()
    s.attach({
      beforeCommit: () => {
        throw veto
      },
      afterCommit,
    })
    const error = expectRejectedWithoutChange(s, () => s.append('user/message', userMessage, { surfaceOp: 'append' }))
    expect(error).toBe(veto)
    expect(afterCommit).not.toHaveBeenCalled()
  })

  it('vetoes a replace without touching the surface', () => {
    const s = sessionWithUsers(3)
    s.attach({
      beforeCommit: () => {
        throw new Error('no')
      },
    })
    const generation = s.surface.replaceGeneration
    expectRejectedWithoutChange(s, () =>
      s.append('context/message', { content: text('sum'), source: { kind: 'compaction' } }, {
        surfaceOp: { op: 'replace', start: 1, end: 3 },
        sourceEventSeqs: [1, 2, 3],
      }),
    )
    expect(s.surface.replaceGeneration).toBe(generation)
    expect(s.surface.nodes).toEqual([1, 2, 3])
  })

  it('vetoes a request/header without changing requestHeader()', () => {
    const s = sessionWithUsers(1)
    s.append('request/header', { header: { config: { provider: 'p', model: 'm1' } }, reason: 'initial' })
    s.attach({
      beforeCommit: () => {
        throw new Error('no')
      },
    })
    catchError(() => s.append('request/header', { header: { config: { provider: 'p', model: 'm2' } }, reason: 'change' }))
    expect(s.requestHeader()).toEqual({ config: { provider: 'p', model: 'm1' } })
  })

  it('stops at the first veto: later beforeCommit hooks do not run', () => {
    const s = sessionWithUsers(1)
    const calls: string[] = []
    s.attach({ beforeCommit: () => void calls.push('a') })
    s.attach({
      beforeCommit: () => {
        calls.push('b')
        throw new Error('veto b')
      },
    })
    s.attach({ beforeCommit: () => void calls.push('c') })
    expect(catchError(() => s.append('step/start', { turn: 1, step: 1 })).message).toBe('veto b')
    expect(calls).toEqual(['a', 'b'])
  })

  it('lets a vetoed seq be used by the next append', () => {
    const s = sessionWithUsers(1)
    let veto = true
    s.attach({
      beforeCommit: () => {
        if (veto) throw new Error('no')
      },
    })
    catchError(() => s.append('step/start', { turn: 1, step: 1 }))
    veto = false
    const e = s.append('step/start', { turn: 1, step: 1 })
    expect(e.seq).toBe(2)
    expect(s.events.map((x) => x.seq)).toEqual([0, 1, 2])
  })

  it('lets an attachment detach itself from its own beforeCommit: the append stands, the next one runs', () => {
    const s = sessionWithUsers(1)
    const detach = s.attach({ beforeCommit: () => detach() })
    s.append('step/start', { turn: 1, step: 1 })
    const e = s.append('step/start', { turn: 1, step: 2 })
    expect(e.seq).toBe(3)
    expect(s.events.map((x) => x.seq)).toEqual([0, 1, 2, 3])
  })
})

describe('SPEC 10 afterCommit', () => {
  it('runs after commit, with the logged event and the session', () => {
    const s = sessionWithUsers(1)
    const seen: { event: SessionEvent; session: Session; seq: number; last: SessionEvent | undefined; messages: number }[] = []
    s.attach({
      afterCommit: (event, session) => {
        seen.push({ event, session, seq: session.seq, last: session.events.at(-1), messages: session.deriveMessages().length })
      },
    })
    const e = s.append('user/message', userMessage, { surfaceOp: 'append' })
    expect(seen).toHaveLength(1)
    expect(seen[0].event).toEqual(e)
    expect(Object.isFrozen(seen[0].event)).toBe(true)
    expect(seen[0].session).toBe(s)
    expect(seen[0].seq).toBe(3)
    expect(seen[0].last).toEqual(e)
    expect(seen[0].messages).toBe(2)
  })

  it('runs observers in attach order, each once per append', () => {
    const s = new Session('s')
    const calls: string[] = []
    s.attach({ beforeCommit: () => void calls.push('before a'), afterCommit: () => void calls.push('after a') })
    s.attach({ beforeCommit: () => void calls.push('before b'), afterCommit: () => void calls.push('after b') })
    s.attach({ afterCommit: () => void calls.push('after c') })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(calls).toEqual(['before a', 'before b', 'after a', 'after b', 'after c'])
  })

  it('runs observers before append returns', () => {
    const s = new Session('s')
    const afterCommit = vi.fn()
    s.attach({ afterCommit })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(afterCommit).toHaveBeenCalledTimes(1)
  })

  it('reports a throwing observer and keeps going: the others run, the append stands', () => {
    const s = sessionWithUsers(1)
    const boom = new Error('observer boom')
    const reported: unknown[][] = []
    const later = vi.fn()
    s.attach({
      afterCommit: () => {
        throw boom
      },
      onObserverError: (...args) => void reported.push(args),
    })
    s.attach({ afterCommit: later })
    const e = s.append('user/message', userMessage, { surfaceOp: 'append' })
    expect(s.events.at(-1)).toEqual(e)
    expect(s.seq).toBe(3)
    expect(s.surface.nodes).toEqual([1, 2])
    expect(later).toHaveBeenCalledTimes(1)
    expect(reported).toHaveLength(1)
    expect(reported[0][0]).toBe(boom)
    expect(reported[0][1]).toEqual(e)
    expect(reported[0][2]).toBe(s)
  })

  it('reports a rejecting observer without undoing the append', async () => {
    const s = sessionWithUsers(1)
    const failure = new Error('async boom')
    const reported: unknown[][] = []
    const later = vi.fn()
    s.attach({
      afterCommit: async () => {
        await flush()
        throw failure
      },
      onObserverError: (...args) => void reported.push(args),
    })
    s.attach({ afterCommit: later })
    const before = stateOf(s)
    const e = s.append('user/message', userMessage, { surfaceOp: 'append' })
    expect(later).toHaveBeenCalledTimes(1)
    await vi.waitFor(() => expect(reported).toHaveLength(1))
    expect(reported[0][0]).toBe(failure)
    expect(reported[0][1]).toEqual(e)
    expect(reported[0][2]).toBe(s)
    expect(s.seq).toBe(before.seq + 1)
    expect(s.events.at(-1)).toEqual(e)
  })

  it('reports a promise that rejects immediately', async () => {
    const s = new Session('s')
    const reported: unknown[] = []
    s.attach({ afterCommit: () => Promise.reject(new Error('nope')), onObserverError: (error) => void reported.push(error) })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    await vi.waitFor(() => expect(reported).toHaveLength(1))
    expect((reported[0] as Error).message).toBe('nope')
    expect(s.seq).toBe(1)
  })

  it('reports to console.error when the attachment has no onObserverError', () => {
    const consoleError = vi.spyOn(console, 'error').mockImplementation(() => {})
    const s = new Session('s')
    const boom = new Error('unhandled observer')
    s.attach({
      afterCommit: () => {
        throw boom
      },
    })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(s.seq).toBe(1)
    expect(consoleError).toHaveBeenCalled()
    expect(consoleError.mock.calls.some((args) => args.includes(boom))).toBe(true)
  })

  it('does not let a failing onObserverError undo the append or escape it', () => {
    vi.spyOn(console, 'error').mockImplementation(() => {})
    const s = new Session('s')
    const later = vi.fn()
    s.attach({
      afterCommit: () => {
        throw new Error('a')
      },
      onObserverError: () => {
        throw new Error('reporter failed')
      },
    })
    s.attach({ afterCommit: later })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(s.seq).toBe(1)
    expect(later).toHaveBeenCalledTimes(1)
  })
})

describe('SPEC 10 detach', () => {
  it('stops both hooks', () => {
    const s = new Session('s')
    const beforeCommit = vi.fn()
    const afterCommit = vi.fn()
    const detach = s.attach({ beforeCommit, afterCommit })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    detach()
    s.append('step/start', { turn: 1, step: 1 })
    expect(beforeCommit).toHaveBeenCalledTimes(1)
    expect(afterCommit).toHaveBeenCalledTimes(1)
  })

  it('removes a vetoing hook', () => {
    const s = new Session('s')
    const detach = s.attach({
      beforeCommit: () => {
        throw new Error('no')
      },
    })
    catchError(() => s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }))
    detach()
    expect(s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }).seq).toBe(0)
  })

  it('detaches only its own attachment, and is harmless when called twice', () => {
    const s = new Session('s')
    const a = vi.fn()
    const b = vi.fn()
    const detachA = s.attach({ afterCommit: a })
    s.attach({ afterCommit: b })
    detachA()
    detachA()
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    expect(a).not.toHaveBeenCalled()
    expect(b).toHaveBeenCalledTimes(1)
  })

  it('can detach from inside an observer', () => {
    const s = new Session('s')
    const calls: number[] = []
    const detach = s.attach({
      afterCommit: (event) => {
        calls.push(event.seq)
        detach()
      },
    })
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    s.append('step/start', { turn: 1, step: 1 })
    expect(calls).toEqual([0])
  })
})
