// An agent loop's turns and compactions as fast-check draws them, for the
// fork tests (session-fork-shares, service-12-fork-copies).

import fc from 'fast-check'
import type { Session } from '../index.js'
import { replaceSomeNodes, USER } from './spec-helpers.js'

const PROV = { provider: 'p', model: 'm' }
const txt = (t: string) => [{ type: 'text', text: t }] as never

export type Op = { kind: 'turn'; pad: number } | { kind: 'compact'; a: number; b: number } | { kind: 'derive' }

export const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('turn' as const), pad: fc.nat({ max: 90_000 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('compact' as const), a: fc.nat(), b: fc.nat() }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'derive' as const }) },
)

/** Apply `op` to `s` (turn `n`): a turn of a user message, a reply with a tool call and its result; or a compaction in a turn of its own. */
export function apply(s: Session, o: Op, n: number): void {
  if (o.kind === 'derive') {
    s.deriveMessages()
    return
  }
  s.append('turn/start', { turn: n, trigger: { kind: 'message', source: USER } })
  if (o.kind === 'compact') {
    replaceSomeNodes(s, o.a, o.b)
  } else {
    s.append('user/message', { content: txt(`q${n} ${'é'.repeat(o.pad % 7)}${'x'.repeat(o.pad)}`), source: USER }, { surfaceOp: 'append' })
    s.append('step/start', { turn: n, step: 1 })
    s.append(
      'assistant/message',
      { turn: n, step: 1, content: [...(txt(`a${n}`) as unknown[]), { type: 'tool-call', id: `c${n}`, name: 'r', arguments: '{}' }] as never, provenance: PROV },
      { surfaceOp: 'append' },
    )
    s.append('tool/result', { turn: n, step: 1, callId: `c${n}`, content: txt(`out ${n} ${'y'.repeat(o.pad >> 1)}`), isError: false } as never, { surfaceOp: 'append' })
    s.append('step/end', { turn: n, step: 1, reason: 'stop' } as never)
  }
  s.append('turn/end', { turn: n, reason: { kind: 'completed' } })
}

