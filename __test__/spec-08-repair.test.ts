import { describe, expect, it } from 'vitest'
import { interruptedTurnClosers, Session, type SessionEvent } from '../index.js'
import { basicLog, ev, newSession, PROV, text, USER, type RawEvent } from './spec-helpers.js'

const INTERRUPTED = 'Tool call interrupted by a crash; no result was recorded.'

function closersOf(events: RawEvent[]): SessionEvent[] {
  return interruptedTurnClosers(events as never)
}

function interruptedResult(seq: number, time: number, turn: number, step: number, callId: string, callSeq?: number) {
  return {
    type: 'tool/result',
    seq,
    time,
    data: {
      turn,
      step,
      callId,
      content: [{ type: 'text', text: INTERRUPTED }],
      isError: true,
      error: { name: 'InterruptedError', code: 'interrupted' },
    },
    surfaceOp: 'append',
    ...(callSeq === undefined ? {} : { sourceEventSeqs: [callSeq] }),
  }
}

const stepEnd = (seq: number, time: number, turn: number, step: number) => ({ type: 'step/end', seq, time, data: { turn, step } })
const turnEnd = (seq: number, time: number, turn: number) => ({
  type: 'turn/end',
  seq,
  time,
  data: { turn, reason: { kind: 'interrupted' } },
})

/** Turn 1 open: user message, step 1 open, an assistant message calling `calls` (ids in order). */
function openTurn(calls: string[]): RawEvent[] {
  return [
    ev(0, 'turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }),
    ev(1, 'user/message', { content: text('q'), source: USER }, { surfaceOp: 'append' }),
    ev(2, 'step/start', { turn: 1, step: 1 }),
    ev(
      3,
      'assistant/message',
      {
        turn: 1,
        step: 1,
        content: [...text('calling'), ...calls.map((id) => ({ type: 'tool-call', id, name: 'read', arguments: '{}' }))],
        provenance: PROV,
      },
      { surfaceOp: 'append' },
    ),
  ]
}

function push(log: RawEvent[], type: string, data: unknown, extra: Record<string, unknown> = {}): RawEvent[] {
  log.push(ev(log.length, type, data, extra))
  return log
}

describe('SPEC 8 interruptedTurnClosers', () => {
  it('returns [] for an empty log', () => {
    expect(closersOf([])).toEqual([])
  })

  it('returns [] for a balanced log', () => {
    expect(closersOf(basicLog())).toEqual([])
  })

  it('returns [] for a log of events outside any turn', () => {
    expect(closersOf([ev(0, 'plugin/x', {}), ev(1, 'todo/write', { todos: [] })])).toEqual([])
  })

  it('closes a turn open without a step with a turn/end only', () => {
    const log = basicLog()
    push(log, 'turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    push(log, 'user/message', { content: text('q'), source: USER }, { surfaceOp: 'append' })
    const last = log[log.length - 1]
    expect(closersOf(log)).toStrictEqual([turnEnd(17, last.time, 3)])
  })

  it('closes an open step then the turn', () => {
    const log = openTurn([])
    expect(closersOf(log)).toStrictEqual([stepEnd(4, log[3].time, 1, 1), turnEnd(5, log[3].time, 1)])
  })

  it('closes an open step whose assistant message has not arrived', () => {
    const log = openTurn([]).slice(0, 3)
    push(log, 'assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', text: 'x' } })
    expect(closersOf(log)).toStrictEqual([stepEnd(4, log[3].time, 1, 1), turnEnd(5, log[3].time, 1)])
  })

  it('closes a step that ended with the turn still open with a turn/end only', () => {
    const log = openTurn(['c1'])
    push(log, 'step/end', { turn: 1, step: 1 })
    expect(closersOf(log)).toStrictEqual([turnEnd(5, log[4].time, 1)])
  })

  it('answers a pending call without a logged tool/call, without sourceEventSeqs', () => {
    const log = openTurn(['c1'])
    const t = log[3].time
    expect(closersOf(log)).toStrictEqual([interruptedResult(4, t, 1, 1, 'c1'), stepEnd(5, t, 1, 1), turnEnd(6, t, 1)])
  })

  it('answers a pending call whose tool/call was logged, citing that seq', () => {
    const log = openTurn(['c1'])
    push(log, 'tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' })
    const t = log[4].time
    expect(closersOf(log)).toStrictEqual([interruptedResult(5, t, 1, 1, 'c1', 4), stepEnd(6, t, 1, 1), turnEnd(7, t, 1)])
  })

  it('answers every pending call in call order, skipping answered ones', () => {
    const log = openTurn(['c1', 'c2', 'c3', 'c4'])
    push(log, 'tool/call', { turn: 1, step: 1, callId: 'c3', name: 'read', arguments: '{}' }) // 4
    push(log, 'tool/call', { turn: 1, step: 1, callId: 'c2', name: 'read', arguments: '{}' }) // 5
    push(log, 'tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }) // 6
    push(log, 'tool/result', { turn: 1, step: 1, callId: 'c1', content: text('ok'), isError: false }, { surfaceOp: 'append', sourceEventSeqs: [6] }) // 7
    const t = log[7].time
    expect(closersOf(log)).toStrictEqual([
      interruptedResult(8, t, 1, 1, 'c2', 5),
      interruptedResult(9, t, 1, 1, 'c3', 4),
      interruptedResult(10, t, 1, 1, 'c4'),
      stepEnd(11, t, 1, 1),
      turnEnd(12, t, 1),
    ])
  })

  it('only answers calls of the open step', () => {
    const log = openTurn(['c1'])
    push(log, 'tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' }) // 4
    push(log, 'step/end', { turn: 1, step: 1 }) // 5: clears c1
    push(log, 'step/start', { turn: 1, step: 2 }) // 6
    push(log, 'assistant/message', { turn: 1, step: 2, content: [{ type: 'tool-call', id: 'c9', name: 'w', arguments: '{}' }], provenance: PROV }, { surfaceOp: 'append' }) // 7
    const t = log[7].time
    expect(closersOf(log)).toStrictEqual([interruptedResult(8, t, 1, 2, 'c9'), stepEnd(9, t, 1, 2), turnEnd(10, t, 1)])
  })

  it('uses the seq after the last event and the time of the last event', () => {
    const log = openTurn(['c1'])
    push(log, 'plugin/late', { n: 1 })
    log[4].time = T_LATE
    const closers = closersOf(log)
    expect(closers.map((c) => c.seq)).toEqual([5, 6, 7])
    expect(closers.every((c) => c.time === T_LATE)).toBe(true)
  })

  it('ignores turns that already ended', () => {
    const log = basicLog() // two balanced turns
    push(log, 'turn/start', { turn: 3, trigger: { kind: 'message', source: USER } })
    push(log, 'step/start', { turn: 3, step: 1 })
    const t = log[log.length - 1].time
    expect(closersOf(log)).toStrictEqual([stepEnd(17, t, 3, 1), turnEnd(18, t, 3)])
  })

  it('gives closers that seed after the log and balance it', () => {
    const log = openTurn(['c1', 'c2'])
    push(log, 'tool/call', { turn: 1, step: 1, callId: 'c2', name: 'read', arguments: '{}' })
    const closers = closersOf(log)
    const s = newSession('s', [...log, ...closers])
    expect(s.seq).toBe(log.length + closers.length)
    expect(interruptedTurnClosers(s.events)).toEqual([])
    expect(s.deriveMessages().slice(-2)).toEqual([
      { role: 'user', content: [{ type: 'tool-result', toolCallId: 'c1', content: text(INTERRUPTED), isError: true }] },
      { role: 'user', content: [{ type: 'tool-result', toolCallId: 'c2', content: text(INTERRUPTED), isError: true }] },
    ])
  })

  it('works on a live session\'s events', () => {
    const s = new Session('s')
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
    s.append('step/start', { turn: 1, step: 1 })
    const closers = interruptedTurnClosers(s.events)
    expect(closers.map((c) => c.type)).toEqual(['step/end', 'turn/end'])
    expect(closers[1].time).toBe(s.events[1].time)
  })

  it('does not modify its input', () => {
    const log = openTurn(['c1'])
    const before = JSON.stringify(log)
    closersOf(log)
    expect(JSON.stringify(log)).toBe(before)
  })
})

const T_LATE = 1_770_000_000_123
