import { describe, expect, it, vi } from 'vitest'
import { isJsonValue, Session, snapshotJsonValue } from '../index.js'
import { appendAny, expectError, expectRejectedWithoutChange, sessionWithUsers, text, USER } from './spec-helpers.js'

class Point {
  constructor(
    public x = 1,
    public y = 2,
  ) {}
}

function nullProto(entries: Record<string, unknown>): Record<string, unknown> {
  return Object.assign(Object.create(null), entries)
}

const cyclicObject = (): unknown => {
  const o: Record<string, unknown> = { a: 1 }
  o.self = o
  return o
}
const cyclicArray = (): unknown => {
  const a: unknown[] = [1]
  a.push(a)
  return a
}
const deepCycle = (): unknown => {
  const root: Record<string, unknown> = {}
  let node = root
  for (let i = 0; i < 40; i++) {
    const next: Record<string, unknown> = {}
    node.child = next
    node = next
  }
  node.back = root
  return root
}

const accepted: [string, unknown][] = [
  ['null', null],
  ['true', true],
  ['false', false],
  ['zero', 0],
  ['a negative number', -3],
  ['a fraction', 1.5],
  ['the largest finite number', Number.MAX_VALUE],
  ['the smallest subnormal', Number.MIN_VALUE],
  ['an empty string', ''],
  ['a string with quotes, NUL and emoji', 'a"b\u0000😀'],
  ['a string with a lone surrogate', 'x\ud800y'],
  ['an empty array', []],
  ['an empty object', {}],
  ['nested arrays', [[1, [2, [3, []]]], 'x']],
  ['a nested plain record', { a: { b: { c: [null, true, 'x', 2] } } }],
  ['a null-prototype object', nullProto({ a: 1, b: [nullProto({ c: 'd' })] })],
  ['an own "__proto__" key', JSON.parse('{"__proto__": {"polluted": true}, "a": 1}')],
]

const rejected: [string, () => unknown][] = [
  ['undefined', () => undefined],
  ['a bigint', () => 1n],
  ['a function', () => () => 1],
  ['a symbol', () => Symbol('s')],
  ['NaN', () => NaN],
  ['Infinity', () => Infinity],
  ['-Infinity', () => -Infinity],
  ['-0', () => -0],
  ['a sparse array', () => [1, , 3]], // eslint-disable-line no-sparse-arrays
  ['an array of holes', () => new Array(3)],
  ['a cyclic object', cyclicObject],
  ['a cyclic array', cyclicArray],
  ['a cycle 40 levels deep', deepCycle],
  ['a Map', () => new Map([['a', 1]])],
  ['a Set', () => new Set([1])],
  ['a Date', () => new Date(0)],
  ['a class instance', () => new Point()],
  ['a Uint8Array', () => new Uint8Array([1, 2])],
  ['a Float64Array', () => new Float64Array(2)],
  ['an ArrayBuffer', () => new ArrayBuffer(4)],
  ['a RegExp', () => /x/],
  ['an Error', () => new Error('x')],
  ['a boxed string', () => new String('x')],
  ['a boxed number', () => new Number(1)],
  ['an object with a symbol key', () => ({ a: 1, [Symbol('k')]: 2 })],
  ['undefined inside an object', () => ({ a: undefined })],
  ['undefined inside an array', () => [1, undefined]],
  ['NaN deep inside', () => ({ a: [{ b: [NaN] }] })],
  ['-0 deep inside', () => ({ a: { b: -0 } })],
  ['a Map deep inside', () => ({ a: [new Map()] })],
  ['a function value beside data', () => ({ a: 1, f() {} })],
]

describe('SPEC 2 lossless JSON: isJsonValue', () => {
  it.each(accepted)('accepts %s', (_name, value) => {
    expect(isJsonValue(value)).toBe(true)
  })

  it.each(rejected)('rejects %s', (_name, make) => {
    expect(isJsonValue(make())).toBe(false)
  })

  it('accepts shared references that do not form a cycle', () => {
    const shared = { x: [1, 2] }
    expect(isJsonValue({ a: shared, b: shared, c: [shared, shared] })).toBe(true)
    const copy = snapshotJsonValue({ a: shared, b: shared }) as { a: { x: number[] }; b: { x: number[] } }
    expect(copy).toEqual({ a: { x: [1, 2] }, b: { x: [1, 2] } })
  })

  it('accepts a deep but acyclic chain', () => {
    let v: unknown = 'leaf'
    for (let i = 0; i < 200; i++) v = i % 2 ? [v] : { v }
    expect(isJsonValue(v)).toBe(true)
    expect(snapshotJsonValue(v)).toEqual(v)
  })
})

describe('SPEC 2 lossless JSON: snapshotJsonValue', () => {
  it.each(accepted)('copies %s to an equal value', (_name, value) => {
    const copy = snapshotJsonValue(value)
    expect(JSON.stringify(copy)).toBe(JSON.stringify(value))
    expect(copy).toEqual(value)
  })

  it.each(rejected)('returns undefined for %s', (_name, make) => {
    expect(snapshotJsonValue(make())).toBeUndefined()
  })

  it('returns a detached copy: later mutation of the original does not reach it', () => {
    const original = { a: { b: [1, { c: 'x' }] }, d: 'y' }
    const copy = snapshotJsonValue(original)!
    expect(copy).not.toBe(original)
    expect(copy.a).not.toBe(original.a)
    expect(copy.a.b).not.toBe(original.a.b)
    ;(original.a.b[1] as { c: string }).c = 'changed'
    original.a.b.push(2)
    original.d = 'changed'
    expect(copy).toEqual({ a: { b: [1, { c: 'x' }] }, d: 'y' })
  })

  it('keeps "__proto__" as ordinary data in the copy, without touching any prototype', () => {
    const original = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}')
    const copy = snapshotJsonValue(original) as Record<string, unknown>
    expect(Object.prototype.hasOwnProperty.call(copy, '__proto__')).toBe(true)
    expect(Object.getOwnPropertyDescriptor(copy, '__proto__')?.value).toEqual({ polluted: true })
    expect(Object.keys(copy)).toEqual(['__proto__', 'a'])
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined()
    const proto = Object.getPrototypeOf(copy)
    expect(proto === Object.prototype || proto === null).toBe(true)
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined()
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"polluted":true},"a":1}')
  })

  it('ignores toJSON: it is never called and does not make a value lossless', () => {
    const toJSON = vi.fn(() => ({ b: 2 }))
    const value = { a: 1, toJSON }
    expect(isJsonValue(value)).toBe(false)
    expect(snapshotJsonValue(value)).toBeUndefined()
    expect(toJSON).not.toHaveBeenCalled()
    const dateToJSON = vi.spyOn(Date.prototype, 'toJSON')
    try {
      expect(isJsonValue(new Date(0))).toBe(false)
      expect(snapshotJsonValue({ d: new Date(0) })).toBeUndefined()
      expect(dateToJSON).not.toHaveBeenCalled()
    } finally {
      dateToJSON.mockRestore()
    }
  })

  it('reads a getter exactly once and copies what it read', () => {
    let reads = 0
    const value = {
      get a() {
        reads += 1
        return reads
      },
      b: [1],
    }
    const copy = snapshotJsonValue(value) as { a: number }
    expect(reads).toBe(1)
    expect(copy).toEqual({ a: 1, b: [1] })
    expect(Object.getOwnPropertyDescriptor(copy, 'a')?.get).toBeUndefined()
    reads = 0
    expect(isJsonValue(value)).toBe(true)
    expect(reads).toBe(1)
  })

  it('reads a getter on an array element exactly once', () => {
    let reads = 0
    const arr: unknown[] = [0]
    Object.defineProperty(arr, 0, {
      get() {
        reads += 1
        return 'x'
      },
      enumerable: true,
    })
    expect(snapshotJsonValue(arr)).toEqual(['x'])
    expect(reads).toBe(1)
  })

  it('propagates a throwing getter', () => {
    const boom = new Error('boom')
    const value = {
      get a(): number {
        throw boom
      },
    }
    expect(() => snapshotJsonValue(value)).toThrow(boom)
    expect(() => isJsonValue({ nested: value })).toThrow(boom)
  })
})

describe('SPEC 2 lossless JSON on append', () => {
  it.each(rejected)('rejects %s inside data, and nothing changes', (_name, make) => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'todo/write', { todos: [{ content: make(), status: 'pending' }] }),
      'session event "todo/write" carries non-JSON-serializable data',
      'NOT_LOSSLESS_JSON',
    )
  })

  it('rejects non-lossless data of a surface type before looking at the intent', () => {
    const s = sessionWithUsers(1)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'user/message', { content: text('x'), source: USER, n: NaN }),
      'session event "user/message" carries non-JSON-serializable data',
      'NOT_LOSSLESS_JSON',
    )
  })

  it('rejects data that is itself not lossless', () => {
    const s = new Session('s')
    expectError(() => appendAny(s, 'plugin/x', undefined), 'session event "plugin/x" carries non-JSON-serializable data')
    expectError(() => appendAny(s, 'plugin/x', new Map()), 'session event "plugin/x" carries non-JSON-serializable data')
    expect(s.seq).toBe(0)
  })

  const badMeta: [string, () => unknown][] = [
    ['NaN in sourceEventSeqs', () => ({ surfaceOp: 'append', sourceEventSeqs: [NaN] })],
    ['a sparse sourceEventSeqs', () => ({ surfaceOp: 'append', sourceEventSeqs: [0, , 1] })], // eslint-disable-line no-sparse-arrays
    ['a bigint replace bound', () => ({ surfaceOp: { op: 'replace', start: 1n, end: 1 }, sourceEventSeqs: [1] })],
    ['a function surfaceOp', () => ({ surfaceOp: () => 'append' })],
    ['a Set of sources', () => ({ surfaceOp: 'append', sourceEventSeqs: new Set([0]) })],
    ['-0 as a source', () => ({ surfaceOp: 'append', sourceEventSeqs: [-0] })],
  ]

  it.each(badMeta)('rejects %s as non-lossless surface metadata, and nothing changes', (_name, make) => {
    const s = sessionWithUsers(2)
    expectRejectedWithoutChange(
      s,
      () => appendAny(s, 'user/message', { content: text('x'), source: USER }, make()),
      'session event "user/message" carries non-JSON-serializable surface metadata',
      'NOT_LOSSLESS_JSON',
    )
  })

  it('reads each getter of the data once on append', () => {
    const s = sessionWithUsers(1)
    let reads = 0
    const data = {
      get content() {
        reads += 1
        return text(`read ${reads}`)
      },
      source: USER,
    }
    const e = appendAny(s, 'user/message', data, { surfaceOp: 'append' })
    expect(reads).toBe(1)
    expect(e.data).toEqual({ content: text('read 1'), source: USER })
    expect(s.deriveMessages().at(-1)).toEqual({ role: 'user', content: text('read 1') })
  })

  it('propagates a throwing getter of the data, and nothing changes', () => {
    const s = sessionWithUsers(1)
    const boom = new Error('getter failed')
    const error = expectRejectedWithoutChange(s, () =>
      appendAny(
        s,
        'user/message',
        {
          get content(): never {
            throw boom
          },
          source: USER,
        },
        { surfaceOp: 'append' },
      ),
    )
    expect(error).toBe(boom)
  })

  it('logs and derives a lone surrogate and a NUL unchanged', () => {
    const s = sessionWithUsers(1)
    const odd = 'a\ud800b\u0000c\udfffd'
    const e = s.append('user/message', { content: text(odd), source: USER }, { surfaceOp: 'append' })
    expect(e.data.content).toEqual(text(odd))
    expect(s.deriveMessages().at(-1)).toEqual({ role: 'user', content: text(odd) })
  })

  it('replays a log holding a lone surrogate through seed and JSONL', () => {
    const s = sessionWithUsers(1)
    const odd = 'a\ud800b\u0000c\udfffd'
    s.append('user/message', { content: text(odd), source: USER }, { surfaceOp: 'append' })
    const seeded = new Session(s.id, s.events)
    expect(seeded.deriveMessages()).toEqual(s.deriveMessages())
    const replay = Session.fromJsonl(s.toJsonl())
    expect(replay.deriveMessages()).toEqual(s.deriveMessages())
    expect(replay.events).toEqual(s.events)
  })
})
