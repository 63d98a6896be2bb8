// PUB 3: lossless JSON of the published line. Every case runs against this
// package's walk and against the reference 0.1.1-rc.2 module, so both must agree.
import { runInNewContext } from 'node:vm'
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import * as ours from '../published/lib/json.js'
// @ts-ignore -- the reference's own declarations import .ts paths
import * as ref from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/json.js'

type JsonValue = ours.JsonValue
type Impl = { isJsonValue(v: unknown): boolean; snapshotJsonValue<T>(v: T): T | undefined }

function forgedIntrinsicObject(revoked = false): Record<string, unknown> {
  const prototype = Object.create(null) as Record<string, unknown>
  const Forged = function Forged(): void {}
  Object.defineProperty(Forged, 'name', { value: 'Object' })
  Forged.prototype = prototype
  const proxy = revoked ? Proxy.revocable(Forged, {}) : undefined
  proxy?.revoke()
  Object.defineProperty(prototype, 'constructor', { value: proxy?.proxy ?? Forged })
  return Object.assign(Object.create(prototype) as Record<string, unknown>, { value: 1 })
}

function rejected(): [string, unknown][] {
  class Exotic { readonly value = 1 }
  class ExoticArray extends Array<number> {}
  const sparse = new Array<number>(1)
  const compensatedSparse = new Array<number>(1)
  Object.defineProperty(compensatedSparse, 'extra', { value: true })
  const decorated = Object.assign([1], { extra: true })
  const hiddenDecorated = [1]
  Object.defineProperty(hiddenDecorated, 'extra', { value: true })
  const symbolDecorated = [1]
  Object.defineProperty(symbolDecorated, Symbol('extra'), { value: true })
  const forgedPrototype: unknown[] = []
  Object.setPrototypeOf(forgedPrototype, null)
  const forgedArray = [1]
  Object.setPrototypeOf(forgedArray, forgedPrototype)
  const cyclic: Record<string, unknown> = {}
  cyclic.self = cyclic
  const cyclicArray: unknown[] = []
  cyclicArray.push([cyclicArray])
  const [foreignBox, foreignList] = runInNewContext(`(() => {
    class Box { constructor() { this.value = 1 } }
    class List extends Array {}
    return [new Box(), new List(1)]
  })()`) as [object, unknown[]]
  return [
    ['-0', -0], ['NaN', Number.NaN], ['Infinity', Number.POSITIVE_INFINITY], ['bigint', 1n],
    ['function', () => {}], ['symbol', Symbol('v')], ['undefined', undefined],
    ['class instance', new Exotic()], ['Map', new Map([['v', 1]])], ['Set', new Set([1])],
    ['Date', new Date(0)], ['typed array', new Uint8Array(1)], ['array subclass', new ExoticArray(1)],
    ['foreign class instance', foreignBox], ['foreign array subclass', foreignList],
    ['sparse', sparse], ['sparse plus an extra key', compensatedSparse], ['decorated', decorated],
    ['non-enumerable decorated', hiddenDecorated], ['symbol decorated', symbolDecorated],
    ['hidden key', Object.defineProperty({}, 'hidden', { value: true })],
    ['symbol key', { [Symbol('extra')]: true }],
    ['custom prototype', Object.assign(Object.create(Object.create(null)) as object, { value: 1 })],
    ['forged Object.prototype', forgedIntrinsicObject()],
    ['revoked forged constructor', forgedIntrinsicObject(true)],
    ['forged array prototype', forgedArray], ['cycle', cyclic], ['array cycle', cyclicArray],
    ['undefined element', [undefined]], ['undefined value', { value: undefined }],
    ['nested -0', { a: [1, { b: -0 }] }],
  ]
}

const impls: [string, Impl][] = [['native-published', ours], ['reference 0.1.1-rc.2', ref as Impl]]

describe.each(impls)('PUB 3 lossless JSON (%s)', (_name, { isJsonValue, snapshotJsonValue }) => {
  it('PUB 3: scalars', () => {
    for (const v of [null, true, false, 'text', 1.25, 0, -1]) {
      expect(isJsonValue(v)).toBe(true)
      expect(snapshotJsonValue(v)).toBe(v)
    }
  })

  it.each(rejected())('PUB 3: rejects %s', (_label, value) => {
    expect(isJsonValue(value)).toBe(false)
    expect(snapshotJsonValue(value)).toBeUndefined()
  })

  it('PUB 3: detaches dense arrays and plain or null-prototype objects; shared (acyclic) references are copies', () => {
    const shared = { value: 1 }
    const nullProto = Object.assign(Object.create(null) as Record<string, unknown>, { shared })
    const source = { list: [nullProto, shared], alias: shared }
    const snap = snapshotJsonValue(source)!
    shared.value = 2
    expect(snap).toEqual({ list: [{ shared: { value: 1 } }, { value: 1 }], alias: { value: 1 } })
    expect(snap.alias).not.toBe(snap.list[1])
    expect(Object.getPrototypeOf(snap.list[0])).toBe(Object.prototype)
  })

  it('PUB 3: accepts intrinsic containers of another realm; the snapshot is in this realm', () => {
    const foreign = runInNewContext('({ object: { nested: [1] }, array: [2, { ok: true }] })') as {
      object: { nested: number[] }; array: JsonValue[]
    }
    expect(isJsonValue(foreign.object)).toBe(true)
    expect(isJsonValue(foreign.array)).toBe(true)
    const o = snapshotJsonValue(foreign.object)!
    const a = snapshotJsonValue(foreign.array)!
    expect(o).toEqual({ nested: [1] })
    expect(Object.getPrototypeOf(o)).toBe(Object.prototype)
    expect(Object.getPrototypeOf(o.nested)).toBe(Array.prototype)
    expect(Object.getPrototypeOf(a)).toBe(Array.prototype)
    expect(Object.getPrototypeOf(a[1])).toBe(Object.prototype)
  })

  it('PUB 3: reads each property and array slot once while materializing', () => {
    let objectReads = 0
    let arrayReads = 0
    const nested = Object.defineProperty({}, 'value', {
      enumerable: true,
      get: () => (++objectReads === 1 ? { accepted: true } : new Map()),
    })
    const array = new Array<unknown>(1)
    Object.defineProperty(array, 0, { enumerable: true, get: () => (++arrayReads === 1 ? nested : new Map()) })
    expect(snapshotJsonValue(array)).toEqual([{ value: { accepted: true } }])
    expect([objectReads, arrayReads]).toEqual([1, 1])
  })

  it('PUB 3: reads in key order, depth first', () => {
    const order: string[] = []
    const getter = (name: string, value: unknown) => ({ enumerable: true, get: () => { order.push(name); return value } })
    const inner = Object.defineProperties({}, { x: getter('a.x', 1), y: getter('a.y', 2) })
    const source = Object.defineProperties({}, { a: getter('a', inner), b: getter('b', 3) })
    snapshotJsonValue(source)
    expect(order).toEqual(['a', 'a.x', 'a.y', 'b'])
  })

  it('PUB 3: accepts deeply nested valid JSON without using the JavaScript call stack', () => {
    let value: JsonValue = 'leaf'
    for (let depth = 0; depth < 20_000; depth++) value = depth % 2 === 0 ? [value] : { k: value }
    expect(isJsonValue(value)).toBe(true)
    let cursor: JsonValue | undefined = snapshotJsonValue(value)
    for (let depth = 20_000 - 1; depth >= 0; depth--) {
      cursor = depth % 2 === 0 ? (cursor as JsonValue[])[0] : (cursor as { k: JsonValue }).k
    }
    expect(cursor).toBe('leaf')
  })

  it('PUB 3: a literal __proto__ key stays data', () => {
    const source = Object.create(null) as Record<string, unknown>
    source.__proto__ = { safe: true }
    const snap = snapshotJsonValue(source)!
    expect(Object.getPrototypeOf(snap)).toBe(Object.prototype)
    expect(Object.hasOwn(snap, '__proto__')).toBe(true)
    expect(snap.__proto__).toEqual({ safe: true })
    expect(isJsonValue(JSON.parse('{"__proto__": [1]}'))).toBe(true)
  })

  it('PUB 3: a throwing getter propagates after one read', () => {
    const failure = new Error('getter failed')
    let reads = 0
    const source = Object.defineProperty({}, 'value', { enumerable: true, get: () => { reads++; throw failure } })
    expect(() => snapshotJsonValue(source)).toThrow(failure)
    expect(() => isJsonValue(source)).toThrow(failure)
    expect(reads).toBe(2)
  })

  it('PUB 3: toJSON is ignored', () => {
    expect(isJsonValue({ toJSON: () => 1 })).toBe(false)
    expect(isJsonValue(new Date(0))).toBe(false)
  })
})

describe('PUB 3 differential: random values', () => {
  it('isJsonValue and snapshotJsonValue agree with the reference', () => {
    const leaf = fc.oneof(fc.constant(-0), fc.double(), fc.integer(), fc.string(), fc.boolean(), fc.constant(null),
      fc.constant(undefined), fc.constant(Number.NaN))
    const value = fc.letrec(tie => ({
      v: fc.oneof({ depthSize: 'small' }, leaf, fc.array(tie('v'), { maxLength: 4 }),
        fc.dictionary(fc.oneof(fc.string(), fc.constant('__proto__')), tie('v'), { maxKeys: 4 })),
    })).v
    fc.assert(fc.property(value, v => {
      expect(ours.isJsonValue(v)).toBe(ref.isJsonValue(v))
      const a = ours.snapshotJsonValue(v)
      const b = ref.snapshotJsonValue(v)
      expect(a === undefined).toBe(b === undefined)
      if (a !== undefined) expect(JSON.stringify(a)).toBe(JSON.stringify(b))
    }), { numRuns: 500 })
  })
})

describe('deepFreezeInPlace (PUB 4.1 fromRestore freezing)', () => {
  it('freezes every container in place, iteratively, and returns the same value', () => {
    let value: unknown = { leaf: [1] }
    for (let depth = 0; depth < 50_000; depth++) value = depth % 2 ? [value] : { k: value }
    expect(ours.deepFreezeInPlace(value)).toBe(value)
    let cursor: any = value
    let frozen = 0
    while (typeof cursor === 'object' && cursor !== null) {
      if (Object.isFrozen(cursor)) frozen++
      cursor = Array.isArray(cursor) ? cursor[0] : (cursor.k ?? cursor.leaf)
    }
    expect(frozen).toBe(50_002)
  })

  it('descends into an already frozen shell; scalars pass through', () => {
    const inner = { a: 1 }
    const shell = Object.freeze({ inner })
    ours.deepFreezeInPlace(shell)
    expect(Object.isFrozen(inner)).toBe(true)
    expect(ours.deepFreezeInPlace(3)).toBe(3)
    expect(ours.deepFreezeInPlace(null)).toBe(null)
  })
})

describe('PUB 3 proxies behave as 0.1.1-rc.2', () => {
  it('a live proxy of a plain container is read through; a revoked proxy as a value throws TypeError in both', () => {
    const revoked = Proxy.revocable({}, {})
    revoked.revoke()
    const outcome = (impl: Impl, v: unknown) => { try { return JSON.stringify([impl.isJsonValue(v), impl.snapshotJsonValue(v)]) } catch (e) { return `${(e as Error).constructor.name}: ${(e as Error).message}` } }
    for (const v of [new Proxy({ a: 1 }, {}), new Proxy([1], {}), revoked.proxy, { x: revoked.proxy }, (function () { return arguments })()]) {
      expect(outcome(ours, v)).toBe(outcome(ref as Impl, v))
    }
    expect(outcome(ours, revoked.proxy)).toMatch(/^TypeError/)
  })
})

describe('internal helpers: snapshotFrozenJsonValue and deepFreezeFresh', () => {
  it('snapshotFrozenJsonValue equals snapshotJsonValue, with every container frozen, at any depth', () => {
    fc.assert(fc.property(fc.jsonValue(), v => {
      const a = ours.snapshotFrozenJsonValue(v)
      expect(JSON.stringify(a)).toBe(JSON.stringify(ours.snapshotJsonValue(v)))
      const stack: unknown[] = [a]
      while (stack.length) {
        const c = stack.pop()
        if (typeof c === 'object' && c !== null) { expect(Object.isFrozen(c)).toBe(true); stack.push(...Object.values(c)) }
      }
    }), { numRuns: 300 })
    let deep: unknown = 1
    for (let i = 0; i < 30_000; i++) deep = [deep]
    let cursor = ours.snapshotFrozenJsonValue(deep) as unknown
    for (let i = 0; i < 30_000; i++) { expect(Object.isFrozen(cursor)).toBe(true); cursor = (cursor as unknown[])[0] }
    expect(cursor).toBe(1)
    expect(ours.snapshotFrozenJsonValue({ a: -0 })).toBeUndefined()
  })

  it('a snapshot defines keys the prototype chain knows, so no inherited setter runs', () => {
    let ran = 0
    Object.defineProperty(Object.prototype, 'x-setter-probe', { set() { ran++ }, configurable: true })
    try {
      const snap = ours.snapshotJsonValue({ 'x-setter-probe': 1, constructor: 2, toString: 3 }) as Record<string, unknown>
      expect(ran).toBe(0)
      expect(Object.keys(snap)).toEqual(['x-setter-probe', 'constructor', 'toString'])
      expect(snap['x-setter-probe']).toBe(1)
    } finally {
      delete (Object.prototype as Record<string, unknown>)['x-setter-probe']
    }
  })

  it('deepFreezeFresh freezes fresh parts in place, stops at frozen subtrees, ends cycles', () => {
    const frozenShell = Object.freeze({ inner: { a: 1 } })
    const tree = { a: [{ b: 1 }], shell: frozenShell }
    expect(ours.deepFreezeFresh(tree)).toBe(tree)
    expect(Object.isFrozen(tree) && Object.isFrozen(tree.a) && Object.isFrozen(tree.a[0])).toBe(true)
    expect(Object.isFrozen(frozenShell.inner)).toBe(false)
    const cyclic: Record<string, unknown> = { list: [] }
    ;(cyclic.list as unknown[]).push(cyclic)
    expect(ours.deepFreezeFresh(cyclic)).toBe(cyclic)
    expect(Object.isFrozen(cyclic.list)).toBe(true)
    let deep: unknown = {}
    for (let i = 0; i < 50_000; i++) deep = { k: deep }
    ours.deepFreezeFresh(deep)
    let c = deep as { k?: unknown }
    while (c.k !== undefined) { expect(Object.isFrozen(c)).toBe(true); c = c.k as { k?: unknown } }
  })
})
