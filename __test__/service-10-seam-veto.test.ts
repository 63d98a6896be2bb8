// The publication seam's veto callback (SPEC 10, extended for 12.4): an
// attachment learns that its own or a later attachment's beforeCommit vetoed
// the append, after the log is restored and before append rethrows.

import { describe, expect, it, vi } from 'vitest'
import { Session, type SessionEvent } from '../index.js'

const start = { turn: 1, trigger: { kind: 'message' as const, source: { kind: 'user' } } }

describe('session.attach onVeto', () => {
  it('is called, in attach order, on every attachment the append reached, the vetoing one included', () => {
    const session = new Session('v')
    const log: string[] = []
    const veto = new Error('vetoed')
    let candidate: SessionEvent | undefined
    session.attach({
      beforeCommit: (event) => {
        candidate = event
        log.push('first before')
      },
      onVeto: (error, event, s) => {
        expect(error).toBe(veto)
        expect(event).toBe(candidate)
        expect(s).toBe(session)
        log.push(`first veto seq=${s.seq} events=${s.events.length}`)
      },
    })
    session.attach({ onVeto: () => void log.push('second (no beforeCommit) veto') })
    session.attach({
      beforeCommit: () => {
        log.push('third before')
        throw veto
      },
      onVeto: () => void log.push('third veto'),
    })
    session.attach({
      beforeCommit: () => void log.push('fourth before'),
      onVeto: () => void log.push('fourth veto'),
    })
    expect(() => session.append('turn/start', start)).toThrow(veto)
    expect(log).toEqual(['first before', 'third before', 'first veto seq=0 events=0', 'second (no beforeCommit) veto', 'third veto'])
  })

  it('is not called for a committed append', () => {
    const session = new Session('c')
    const onVeto = vi.fn()
    session.attach({ beforeCommit: () => {}, onVeto })
    session.append('turn/start', start)
    expect(onVeto).not.toHaveBeenCalled()
  })

  it('rejects an append from inside onVeto as re-entrant', () => {
    const session = new Session('r')
    let inner: unknown
    session.attach({
      onVeto: (_e, _ev, s) => {
        try {
          s.append('turn/start', start)
        } catch (error) {
          inner = error
        }
      },
    })
    session.attach({
      beforeCommit: () => {
        throw new Error('no')
      },
    })
    expect(() => session.append('turn/start', start)).toThrow('no')
    expect((inner as Error).message).toBe('session append cannot reenter while another append is being published')
  })

  it('a throwing onVeto is reported and neither replaces the veto nor stops the others', () => {
    const session = new Session('t')
    const spy = vi.spyOn(console, 'error').mockImplementation(() => {})
    const log: string[] = []
    session.attach({
      onVeto: () => {
        throw new Error('veto handler failed')
      },
    })
    session.attach({ onVeto: () => void log.push('second veto') })
    session.attach({
      beforeCommit: () => {
        throw new Error('the veto')
      },
    })
    try {
      expect(() => session.append('turn/start', start)).toThrow('the veto')
      expect(log).toEqual(['second veto'])
      expect(spy).toHaveBeenCalledTimes(1)
      expect(String(spy.mock.calls[0][1])).toBe('Error: veto handler failed')
    } finally {
      spy.mockRestore()
    }
  })

  it('leaves the session appendable after the veto', () => {
    const session = new Session('a')
    let veto = true
    session.attach({
      beforeCommit: () => {
        if (veto) throw new Error('once')
      },
      onVeto: () => {
        veto = false
      },
    })
    expect(() => session.append('turn/start', start)).toThrow('once')
    expect(session.append('turn/start', start).seq).toBe(0)
  })
})
