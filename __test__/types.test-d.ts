// Type-level contract of the hand-written index.d.ts (SPEC 4 "TypeScript").

import { describe, expectTypeOf, it } from 'vitest'
import {
  foldSurface,
  isSurfaceEvent,
  SESSION_FORMAT_VERSION,
  Session,
  SessionId,
  type EpochHeader,
  type Message,
  type SessionError,
  type SessionErrorCode,
  type SessionEvent,
  type SessionHeader,
  type SurfaceFoldResult,
  type SurfaceIntent,
  type SurfaceOp,
} from '../index.js'

declare module '../index.js' {
  interface SessionEventMap {
    'plugin/ping': { n: number }
  }
}

const s = new Session('s')
const source = { kind: 'user' }
const content = [{ type: 'text' as const, text: 'hi' }]

describe('append overloads', () => {
  it('requires the surface intent on surface types', () => {
    // @ts-expect-error a surface event without the intent does not compile
    s.append('user/message', { content, source })
    // @ts-expect-error nor does one for tool/result
    s.append('tool/result', { turn: 1, step: 1, callId: 'c', content, isError: false })
    s.append('user/message', { content, source }, { surfaceOp: 'append' })
    s.append('context/message', { content, source }, { surfaceOp: { op: 'replace', start: 1, end: 2 }, sourceEventSeqs: [1, 2] })
  })

  it('forbids an intent on log-only types', () => {
    // @ts-expect-error a log-only event with an intent does not compile
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source } }, { surfaceOp: 'append' })
    // @ts-expect-error not even an empty intent
    s.append('step/start', { turn: 1, step: 1 }, {})
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source } })
  })

  it('rejects an intent without a surfaceOp', () => {
    // @ts-expect-error surfaceOp is required
    s.append('user/message', { content, source }, { sourceEventSeqs: [0] })
    // @ts-expect-error and must be 'append' or a replace
    s.append('user/message', { content, source }, { surfaceOp: 'prepend' })
  })

  it('returns the typed event', () => {
    const e = s.append('tool/result', { turn: 1, step: 1, callId: 'c', content, isError: false }, { surfaceOp: 'append' })
    expectTypeOf(e).toEqualTypeOf<SessionEvent<'tool/result'>>()
    expectTypeOf(e.type).toEqualTypeOf<'tool/result'>()
    expectTypeOf(e.data.callId).toEqualTypeOf<string>()
    expectTypeOf(e.data.isError).toEqualTypeOf<boolean>()
    expectTypeOf(e.seq).toEqualTypeOf<number>()
    expectTypeOf(e.surfaceOp).toEqualTypeOf<SurfaceOp | undefined>()
    expectTypeOf(e.sourceEventSeqs).toEqualTypeOf<number[] | undefined>()
  })

  it('checks core payloads', () => {
    // @ts-expect-error turn must be a number
    s.append('turn/start', { turn: '1', trigger: { kind: 'message', source } })
    // @ts-expect-error the trigger kind is a closed vocabulary
    s.append('turn/start', { turn: 1, trigger: { kind: 'timer', source } })
    // @ts-expect-error the header reason is 'initial' | 'resume' | 'change'
    s.append('request/header', { header: { config: { provider: 'p', model: 'm' } }, reason: 'fallback' })
    s.append('request/header', { header: { config: { provider: 'p', model: 'm' } }, reason: 'change' })
  })

  it('rejects unknown types', () => {
    // @ts-expect-error not in SessionEventMap
    s.append('nope/x', {})
    // @ts-expect-error the legacy delta is not in the vocabulary
    s.append('request/header-delta', {})
  })
})

describe('plugin vocabulary by declaration merging', () => {
  it('accepts the merged type with its payload', () => {
    const e = s.append('plugin/ping', { n: 1 })
    expectTypeOf(e).toEqualTypeOf<SessionEvent<'plugin/ping'>>()
    expectTypeOf(e.data).toEqualTypeOf<{ n: number }>()
    expectTypeOf(e.data.n).toBeNumber()
  })

  it('rejects the wrong payload', () => {
    // @ts-expect-error n must be a number
    s.append('plugin/ping', { n: 'one' })
    // @ts-expect-error n is required
    s.append('plugin/ping', {})
  })

  it('treats the merged type as log-only', () => {
    // @ts-expect-error plugin types are not surface types
    s.append('plugin/ping', { n: 1 }, { surfaceOp: 'append' })
  })
})

describe('the rest of the surface', () => {
  it('types the session properties', () => {
    expectTypeOf(s.id).toEqualTypeOf<SessionId>()
    expectTypeOf(s.header).toEqualTypeOf<SessionHeader>()
    expectTypeOf(s.seq).toEqualTypeOf<number>()
    expectTypeOf(s.events).toEqualTypeOf<readonly SessionEvent[]>()
    expectTypeOf(s.surface.nodes).toEqualTypeOf<readonly number[]>()
    expectTypeOf(s.deriveMessages()).toEqualTypeOf<Message[]>()
    expectTypeOf(s.requestHeader()).toEqualTypeOf<EpochHeader | undefined>()
    expectTypeOf(s.toJsonl()).toEqualTypeOf<string>()
    expectTypeOf(s.fork()).toEqualTypeOf<Session>()
    expectTypeOf(s.attach({})).toEqualTypeOf<() => void>()
    expectTypeOf(foldSurface(s.events)).toEqualTypeOf<SurfaceFoldResult>()
    expectTypeOf(SESSION_FORMAT_VERSION).toEqualTypeOf<0>()
  })

  it('takes a string or bytes in fromJsonl', () => {
    expectTypeOf(Session.fromJsonl('')).toEqualTypeOf<Session>()
    expectTypeOf(Session.fromJsonl(Buffer.from(''))).toEqualTypeOf<Session>()
    expectTypeOf(Session.fromJsonl(new Uint8Array())).toEqualTypeOf<Session>()
    // @ts-expect-error not a number
    Session.fromJsonl(1)
  })

  it('brands SessionId', () => {
    const id = SessionId('x')
    expectTypeOf(id).toEqualTypeOf<SessionId>()
    expectTypeOf(id).toMatchTypeOf<string>()
    // @ts-expect-error a plain string is not a SessionId
    const plain: SessionId = 'x'
    void plain
  })

  it('narrows with isSurfaceEvent', () => {
    const e = s.events[0]
    // @ts-expect-error not narrowed: it may be absent
    const absent: SurfaceOp = 'surfaceOp' in e ? e.surfaceOp : 'append'
    void absent
    if (isSurfaceEvent(e)) {
      // narrowed: the surfaceOp is present
      const op: SurfaceOp = e.surfaceOp
      expectTypeOf(op).toEqualTypeOf<SurfaceOp>()
      expectTypeOf(e.type).toEqualTypeOf<'user/message' | 'assistant/message' | 'tool/result' | 'context/message' | 'steering/message'>()
    }
  })

  it('types the publication seam', () => {
    s.attach({
      beforeCommit: (event, session) => {
        expectTypeOf(event).toEqualTypeOf<SessionEvent>()
        expectTypeOf(session).toEqualTypeOf<Session>()
      },
      afterCommit: async () => {},
      onObserverError: (error) => {
        expectTypeOf(error).toBeUnknown()
      },
    })
    const intent: SurfaceIntent = { surfaceOp: 'append' }
    expectTypeOf(intent.sourceEventSeqs).toEqualTypeOf<number[] | undefined>()
  })
})

describe('errors (issue 18)', () => {
  it('SessionError carries a code from the union, an optional line and errno', () => {
    expectTypeOf<SessionError>().toMatchTypeOf<Error>()
    expectTypeOf<SessionError['code']>().toEqualTypeOf<SessionErrorCode>()
    expectTypeOf<SessionError['line']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<SessionError['errno']>().toEqualTypeOf<number | undefined>()
    expectTypeOf<'CORRUPT_LOG'>().toMatchTypeOf<SessionErrorCode>()
    expectTypeOf<'INTERNAL'>().toMatchTypeOf<SessionErrorCode>()
    expectTypeOf<'NOT_A_CODE'>().not.toMatchTypeOf<SessionErrorCode>()
  })
})
