import { describe, expect, it } from 'vitest'
import {
  canonicalHeader,
  foldRequestHeader,
  headerEquals,
  Session,
  type EpochHeader,
  type JsonValue,
  type SessionEvent,
} from '../index.js'
import {
  appendAny,
  catchError,
  basicLog,
  ev,
  expectError,
  expectRejectedWithoutChange,
  isDeepFrozen,
  newSession,
  sessionWithUsers,
  text,
  USER,
} from './spec-helpers.js'

const config = { provider: 'deepseek', model: 'deepseek-chat' }
const tool = (name: string, parameters: JsonValue = { type: 'object', properties: { a: { type: 'string' } } }) => ({
  name,
  description: `${name} tool`,
  parameters,
})
const prefix = [{ role: 'user' as const, content: text('prefix') }]

function headerEvent(seq: number, header: unknown, reason = 'initial'): SessionEvent {
  return ev(seq, 'request/header', { header, reason }) as never
}

describe('SPEC 7 canonicalHeader', () => {
  it('drops an empty system, empty tools and empty messagePrefix', () => {
    expect(canonicalHeader({ config, system: '', tools: [], messagePrefix: [] })).toStrictEqual({ config })
  })

  it('keeps non-empty fields as they are', () => {
    const h: EpochHeader = { config: { ...config, temperature: 0, stop: [] }, system: 'S', tools: [tool('a')], messagePrefix: prefix }
    expect(canonicalHeader(h)).toEqual(h)
  })

  it('leaves the config alone (an empty stop list stays)', () => {
    expect(canonicalHeader({ config: { ...config, stop: [], maxTokens: 0 }, system: '' })).toStrictEqual({
      config: { ...config, stop: [], maxTokens: 0 },
    })
  })

  it('does not modify its argument', () => {
    const h = { config, system: '', tools: [] }
    canonicalHeader(h)
    expect(h).toEqual({ config, system: '', tools: [] })
  })
})

describe('SPEC 7 headerEquals', () => {
  const base: EpochHeader = {
    config: { ...config, temperature: 0.5, maxTokens: 100, stop: ['a', 'b'] },
    system: 'S',
    tools: [tool('read'), tool('write')],
    messagePrefix: prefix,
  }

  it('is true for equal headers, whatever the key order', () => {
    const reordered: EpochHeader = {
      messagePrefix: [{ content: text('prefix'), role: 'user' }],
      tools: [
        { parameters: { properties: { a: { type: 'string' } }, type: 'object' }, description: 'read tool', name: 'read' },
        tool('write'),
      ],
      system: 'S',
      config: { stop: ['a', 'b'], maxTokens: 100, model: 'deepseek-chat', temperature: 0.5, provider: 'deepseek' },
    }
    expect(headerEquals(base, reordered)).toBe(true)
    expect(headerEquals(base, base)).toBe(true)
  })

  it('compares config field-wise', () => {
    expect(headerEquals(base, { ...base, config: { ...base.config, model: 'other' } })).toBe(false)
    expect(headerEquals(base, { ...base, config: { ...base.config, provider: 'other' } })).toBe(false)
    expect(headerEquals(base, { ...base, config: { ...base.config, temperature: 0.7 } })).toBe(false)
    expect(headerEquals(base, { ...base, config: { ...base.config, maxTokens: 101 } })).toBe(false)
  })

  it('compares extra config fields too', () => {
    expect(headerEquals(base, { ...base, config: { ...base.config, topP: 0.9 } })).toBe(false)
    expect(headerEquals({ ...base, config: { ...base.config, topP: 0.9 } }, { ...base, config: { ...base.config, topP: 0.9 } })).toBe(
      true,
    )
  })

  it('treats an absent config field as equal to absent only', () => {
    const { temperature: _t, ...noTemperature } = base.config
    expect(headerEquals({ ...base, config: noTemperature }, base)).toBe(false)
    expect(headerEquals({ ...base, config: noTemperature }, { ...base, config: { ...noTemperature, temperature: 0 } })).toBe(false)
    expect(headerEquals({ ...base, config: noTemperature }, { ...base, config: { ...noTemperature } })).toBe(true)
  })

  it('compares stop element-wise', () => {
    expect(headerEquals(base, { ...base, config: { ...base.config, stop: ['a', 'b'] } })).toBe(true)
    expect(headerEquals(base, { ...base, config: { ...base.config, stop: ['b', 'a'] } })).toBe(false)
    expect(headerEquals(base, { ...base, config: { ...base.config, stop: ['a'] } })).toBe(false)
    expect(headerEquals(base, { ...base, config: { ...base.config, stop: ['a', 'b', 'c'] } })).toBe(false)
    const { stop: _s, ...noStop } = base.config
    expect(headerEquals({ ...base, config: noStop }, { ...base, config: { ...noStop, stop: [] } })).toBe(false)
  })

  it('compares system; an empty system equals an absent one', () => {
    expect(headerEquals(base, { ...base, system: 'T' })).toBe(false)
    const { system: _s, ...noSystem } = base
    expect(headerEquals(base, noSystem)).toBe(false)
    expect(headerEquals(noSystem, { ...noSystem, system: '' })).toBe(true)
  })

  it('compares messagePrefix by canonical JSON; absent equals empty', () => {
    const { messagePrefix: _p, ...noPrefix } = base
    expect(headerEquals(noPrefix, { ...noPrefix, messagePrefix: [] })).toBe(true)
    expect(headerEquals(base, noPrefix)).toBe(false)
    expect(headerEquals(base, { ...base, messagePrefix: [{ role: 'user', content: text('other') }] })).toBe(false)
    expect(headerEquals(base, { ...base, messagePrefix: [...prefix, ...prefix] })).toBe(false)
  })

  it('compares tools in order by canonical JSON; absent equals empty', () => {
    expect(headerEquals(base, { ...base, tools: [tool('write'), tool('read')] })).toBe(false)
    expect(headerEquals(base, { ...base, tools: [tool('read')] })).toBe(false)
    expect(headerEquals(base, { ...base, tools: [tool('read', { type: 'object' }), tool('write')] })).toBe(false)
    const { tools: _t, ...noTools } = base
    expect(headerEquals(noTools, { ...noTools, tools: [] })).toBe(true)
    expect(headerEquals(base, noTools)).toBe(false)
  })

  it('is symmetric', () => {
    const variants: EpochHeader[] = [
      base,
      { config },
      { config, system: '' },
      { config, tools: [] },
      { ...base, tools: [tool('write'), tool('read')] },
      { ...base, config: { ...base.config, stop: ['a'] } },
    ]
    for (const a of variants) for (const b of variants) expect(headerEquals(a, b)).toBe(headerEquals(b, a))
  })

  it('agrees with canonicalHeader: a header equals its canonical form', () => {
    const h: EpochHeader = { config, system: '', tools: [], messagePrefix: [] }
    expect(headerEquals(h, canonicalHeader(h))).toBe(true)
  })
})

describe('SPEC 7 foldRequestHeader', () => {
  const h1 = { config, system: 'one', tools: [] }
  const h2 = { config: { ...config, model: 'deepseek-reasoner' }, system: '', messagePrefix: prefix }

  it('is the canonical header of the latest request/header', () => {
    const events = [headerEvent(0, h1), ev(1, 'plugin/x', {}) as never, headerEvent(2, h2, 'change'), ev(3, 'plugin/y', {}) as never]
    expect(foldRequestHeader(events)).toStrictEqual({ config: h2.config, messagePrefix: prefix })
    expect(foldRequestHeader(events.slice(0, 2))).toStrictEqual({ config, system: 'one' })
  })

  it('is undefined without a request/header and without from', () => {
    expect(foldRequestHeader([])).toBeUndefined()
    expect(foldRequestHeader(basicLog().filter((e) => e.type !== 'request/header') as never)).toBeUndefined()
  })

  it('is from without a request/header', () => {
    const from: EpochHeader = { config, system: 'from' }
    expect(foldRequestHeader([], from)).toEqual(from)
    expect(foldRequestHeader([ev(0, 'plugin/x', {}) as never], from)).toEqual(from)
  })

  it('prefers any request/header over from', () => {
    expect(foldRequestHeader([headerEvent(0, h1)], { config, system: 'from' })).toStrictEqual({ config, system: 'one' })
  })
})

describe('SPEC 7 session.requestHeader()', () => {
  it('is undefined before the first request/header', () => {
    const s = sessionWithUsers(2)
    expect(s.requestHeader()).toBeUndefined()
  })

  it('folds the live log incrementally', () => {
    const s = sessionWithUsers(1)
    s.append('request/header', { header: { config, system: '', tools: [tool('a')] }, reason: 'initial' })
    expect(s.requestHeader()).toStrictEqual({ config, tools: [tool('a')] })
    s.append('step/start', { turn: 1, step: 1 })
    expect(s.requestHeader()).toStrictEqual({ config, tools: [tool('a')] })
    s.append('request/header', { header: { config: { ...config, maxTokens: 5 }, system: 'S' }, reason: 'change' })
    expect(s.requestHeader()).toStrictEqual({ config: { ...config, maxTokens: 5 }, system: 'S' })
    s.append('request/header', { header: { config }, reason: 'resume' })
    expect(s.requestHeader()).toStrictEqual({ config })
  })

  it('is deep-frozen', () => {
    const s = sessionWithUsers(1)
    s.append('request/header', { header: { config: { ...config, stop: ['x'] }, tools: [tool('a')], messagePrefix: prefix }, reason: 'initial' })
    const h = s.requestHeader()!
    expect(isDeepFrozen(h)).toBe(true)
  })

  it('is detached from the appended data', () => {
    const s = sessionWithUsers(1)
    const header = { config: { ...config }, system: 'S' }
    s.append('request/header', { header, reason: 'initial' })
    header.system = 'changed'
    header.config.model = 'changed'
    expect(s.requestHeader()).toStrictEqual({ config, system: 'S' })
  })

  it('returns the same object until the next request/header', () => {
    const s = sessionWithUsers(1)
    s.append('request/header', { header: { config }, reason: 'initial' })
    const a = s.requestHeader()
    s.append('user/message', { content: text('x'), source: USER }, { surfaceOp: 'append' })
    expect(s.requestHeader()).toBe(a)
    s.append('request/header', { header: { config }, reason: 'change' })
    expect(s.requestHeader()).toEqual(a)
  })

  it('agrees with foldRequestHeader over the log, seeded and live', () => {
    const s = newSession('s', basicLog())
    expect(s.requestHeader()).toEqual(foldRequestHeader(s.events))
    expect(s.requestHeader()).toStrictEqual({ config })
  })
})

describe('SPEC 7 legacy vocabulary', () => {
  it('rejects request/header-delta on append', () => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'request/header-delta', { set: { system: 'x' } }),
      'session event "request/header-delta" uses unsupported legacy request/header-delta format',
      'LEGACY_VOCABULARY',
    )
  })

  it('rejects request/header with reason "fallback" on append', () => {
    const s = sessionWithUsers(1)
    s.append('request/header', { header: { config }, reason: 'initial' })
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'request/header', { header: { config: { ...config, model: 'fb' } }, reason: 'fallback' }),
      'session event "request/header" uses unsupported legacy request/header reason "fallback"',
      'LEGACY_VOCABULARY',
    )
    expect(s.requestHeader()).toStrictEqual({ config })
  })

  it('accepts the three current reasons', () => {
    const s = new Session('s')
    for (const reason of ['initial', 'resume', 'change'] as const) s.append('request/header', { header: { config }, reason })
    expect(s.seq).toBe(3)
  })

  it('rejects request/header-delta in a seed, naming the index', () => {
    const log: unknown[] = basicLog().slice(0, 3)
    log.push({ type: 'request/header-delta', seq: 3, time: 1, data: { set: {} } })
    expectError(
      () => newSession('s', log),
      'seed event at index 3 uses unsupported legacy request/header-delta format',
      'LEGACY_VOCABULARY',
    )
  })

  it('rejects a fallback reason in a seed, naming the index', () => {
    const log: unknown[] = basicLog().slice(0, 3)
    log.push({ type: 'request/header', seq: 3, time: 1, data: { header: { config }, reason: 'fallback' } })
    expectError(
      () => newSession('s', log),
      'seed event at index 3 uses unsupported legacy request/header reason "fallback"',
      'LEGACY_VOCABULARY',
    )
  })

  it('rejects request/header-delta on a JSONL load', () => {
    const text =
      [
        JSON.stringify({ type: 'session', version: 0, id: 'old', createdAt: 1 }),
        JSON.stringify({ type: 'turn/start', seq: 0, time: 1, data: { turn: 1, trigger: { kind: 'message', source: USER } } }),
        JSON.stringify({ type: 'request/header-delta', seq: 1, time: 2, data: { set: {} } }),
      ].join('\n') + '\n'
    const error = expectError(
      () => Session.fromJsonl(text),
      // the seed wording or the load wording of SPEC 7; both name where
      /^(seed event at index 1 uses unsupported legacy request\/header-delta format|session "old" contains unsupported legacy request\/header-delta event at seq 1)$/,
      'LEGACY_VOCABULARY',
    )
    expect(error.line).toBe(3)
  })

  it('rejects a fallback reason on a JSONL load', () => {
    const text =
      [
        JSON.stringify({ type: 'session', version: 0, id: 'old', createdAt: 1 }),
        JSON.stringify({ type: 'request/header', seq: 0, time: 2, data: { header: { config }, reason: 'fallback' } }),
      ].join('\n') + '\n'
    const error = expectError(
      () => Session.fromJsonl(text),
      /^(seed event at index 0 uses unsupported legacy request\/header reason "fallback"|session "old" contains unsupported legacy request\/header reason "fallback" at seq 0)$/,
      'LEGACY_VOCABULARY',
    )
    expect(error.line).toBe(2)
  })
})

describe('SPEC 7 header functions: arguments that are not headers', () => {
  const call = (f: (...a: unknown[]) => unknown, ...args: unknown[]) => catchError(() => f(...args)) as Error & { code?: string }

  it('headerEquals refuses non-objects with INVALID_ARGUMENT naming what it got', () => {
    const e = call(headerEquals as never, null, undefined)
    expect(e).toBeInstanceOf(TypeError)
    expect(e.code).toBe('INVALID_ARGUMENT')
    expect(e.message).toBe('headerEquals expects two request header objects, got null and undefined')
    expect(call(headerEquals as never, { config: {} }, 'x').message).toBe('headerEquals expects two request header objects, got object and string')
    expect(call(headerEquals as never, [], { config: {} }).message).toBe('headerEquals expects two request header objects, got an array and object')
  })

  it('canonicalHeader refuses a non-object with INVALID_ARGUMENT', () => {
    const e = call(canonicalHeader as never, 7)
    expect(e.code).toBe('INVALID_ARGUMENT')
    expect(e.message).toBe('canonicalHeader expects a request header object, got number')
  })

  it('headerEquals of an object with itself is true without comparing', () => {
    const h = { config: { provider: 'p', model: 'm' }, tools: [{ name: 't' }] }
    expect(headerEquals(h as never, h as never)).toBe(true)
  })
})
