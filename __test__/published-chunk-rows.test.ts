// PUB 14.2: the packed chunk-row codec, by rule and differentially against the
// reference 0.1.1-rc.2 module (rows byte-identical, same messages in check order).
import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { decodeStorageRecord, packChunkRuns } from '../published/lib/chunk-rows.js'
// @ts-ignore -- the reference's own declarations import .ts paths
import * as ref from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/types/chunk-rows.js'

type Ev = Record<string, any>
const text = (seq: number, time: number, t: string, extra: Ev = {}): Ev =>
  ({ type: 'assistant/chunk', seq, time, data: { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: t, ...extra } } })
const tool = (seq: number, time: number, a: string, name?: string): Ev =>
  ({ type: 'assistant/chunk', seq, time, data: { turn: 1, step: 2, chunk: { type: 'tool-call-delta', index: 1, id: 'c1', ...(name === undefined ? {} : { name }), argumentsDelta: a } } })
const errOf = (f: () => unknown) => { try { f(); return undefined } catch (e) { return (e as Error).message } }

describe('PUB 14.2 packChunkRuns', () => {
  it('PUB 14.2: a run of 3 packs, key order exact; shorter runs pass through as the same objects', () => {
    const events = [text(0, 10, 'a'), text(1, 12, 'b'), text(2, 11, 'c'), { type: 'turn/end', seq: 3, time: 20, data: {} }, text(4, 30, 'd'), text(5, 31, 'e')]
    const rows = packChunkRuns(events as any)
    expect(JSON.stringify(rows[0])).toBe('{"type":"text-chunks","seq0":0,"time0":10,"data":{"turn":1,"step":1,"index":0,"dt":[2,-1],"texts":["a","b","c"]}}')
    expect(rows[1]).toBe(events[3])
    expect(rows[2]).toBe(events[4])
    expect(rows[3]).toBe(events[5])
    expect(rows).toHaveLength(4)
  })

  it('PUB 14.2: tool-call rows with and without name; mixed name presence does not pack together', () => {
    expect(JSON.stringify(packChunkRuns([tool(0, 0, '{'), tool(1, 1, '"a"'), tool(2, 3, '}')] as any)))
      .toBe('[{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":2,"index":1,"dt":[1,2],"id":"c1","args":["{","\\"a\\"","}"]}}]')
    expect(JSON.stringify(packChunkRuns([tool(0, 0, 'x', 'n'), tool(1, 0, 'y', 'n'), tool(2, 0, 'z', 'n')] as any)))
      .toBe('[{"type":"tool-call-chunks","seq0":0,"time0":0,"data":{"turn":1,"step":2,"index":1,"dt":[0,0],"id":"c1","name":"n","args":["x","y","z"]}}]')
    const mixed = [tool(0, 0, 'x', 'n'), tool(1, 0, 'y'), tool(2, 0, 'z')]
    expect(packChunkRuns(mixed as any)).toEqual(mixed)
  })

  it('PUB 14.2: whitelist: extra keys, ignorable, fractional time, non-string text, other chunk kinds never pack', () => {
    const variants: Ev[][] = [
      [text(0, 0, 'a'), { ...text(1, 0, 'b'), ignorable: true }, text(2, 0, 'c')],
      [text(0, 0, 'a'), text(1, 0.5, 'b'), text(2, 1, 'c')],
      [text(0, 0, 'a'), text(1, 0, 'b', { extra: 1 }), text(2, 0, 'c')],
      [text(0, 0, 'a'), text(1, 0, 3 as any), text(2, 0, 'c')],
      [text(0, 0, 'a'), text(2, 0, 'b'), text(3, 0, 'c')],
      [text(0, -Number.MAX_SAFE_INTEGER, 'a'), text(1, Number.MAX_SAFE_INTEGER, 'b'), text(2, Number.MAX_SAFE_INTEGER, 'c')],
      [{ type: 'assistant/chunk', seq: 0, time: 0, data: { turn: 1, step: 1, chunk: { type: 'block-end', index: 0 } } }, text(1, 0, 'b'), text(2, 0, 'c')],
    ]
    for (const v of variants) {
      const rows = packChunkRuns(v as any)
      expect(rows.every(r => r.type === 'assistant/chunk')).toBe(true)
      expect(JSON.stringify(rows)).toBe(JSON.stringify(ref.packChunkRuns(v)))
    }
  })
})

describe('PUB 14.2 degenerate batch entries behave as 0.1.1-rc.2', () => {
  it('a primitive passes through; a null entry throws TypeError in both', () => {
    expect(packChunkRuns([1, 'x'] as any)).toEqual([1, 'x'])
    expect(ref.packChunkRuns([1, 'x'])).toEqual([1, 'x'])
    expect(() => packChunkRuns([null] as any)).toThrow(TypeError)
    expect(() => ref.packChunkRuns([null])).toThrow(TypeError)
  })
})

describe('PUB 14.2 decodeStorageRecord', () => {
  it('PUB 14.2: non-rows pass through unvalidated', () => {
    for (const v of [1, 'x', null, [1], { type: 'user/message', anything: true }, { type: 'text-chunk' }]) {
      const out = decodeStorageRecord(v)
      expect(out).toHaveLength(1)
      expect(out[0]).toBe(v)
    }
  })

  const row = (over: Ev = {}, data: Ev = {}): Ev => ({ type: 'text-chunks', seq0: 0, time0: 0, data: { turn: 1, step: 1, index: 0, dt: [1], texts: ['a', 'b'], ...data }, ...over })
  const toolRow = (data: Ev = {}): Ev => ({ type: 'tool-call-chunks', seq0: 0, time0: 0, data: { turn: 1, step: 1, index: 0, dt: [], id: 'c', args: ['a'], ...data } })
  const cases: [string, Ev, string][] = [
    ['envelope', row({ extra: 1 }), 'envelope must be exactly {type, seq0, time0, data}'],
    ['seq0', row({ seq0: -1 }), 'seq0 must be a non-negative safe integer'],
    ['time0', row({ time0: 0.5 }), 'time0 must be a safe integer'],
    ['data object', row({ data: null }), 'data must be an object'],
    ['text data keys', row({}, { id: 'x' }), 'data must be exactly {turn, step, index, dt, texts}'],
    ['tool data keys', toolRow({ texts: [] }), 'data must be exactly {turn, step, index, id, name?, dt, args}'],
    ['tool id', toolRow({ id: 1 }), 'id (and name when present) must be strings'],
    ['tool name', toolRow({ name: null }), 'id (and name when present) must be strings'],
    ['numbers', row({}, { turn: '1' }), 'turn/step/index must be numbers'],
    ['texts', row({}, { texts: [] }), 'texts must be a non-empty string array'],
    ['args', toolRow({ args: ['a', 1] }), 'args must be a non-empty string array'],
    ['dt', row({}, { dt: [0.5] }), 'dt must be an array of safe integers'],
    ['dt length', row({}, { dt: [] }), 'dt length 0 does not match 2 members'],
    ['member seqs', row({ seq0: Number.MAX_SAFE_INTEGER }, { dt: [1, 1], texts: ['a', 'b', 'c'] }), 'member seqs must stay safe integers'],
    ['member times', row({ time0: Number.MAX_SAFE_INTEGER }), 'member times must stay safe integers'],
    ['order: numbers before texts', row({}, { turn: null, texts: 3 }), 'turn/step/index must be numbers'],
    ['order: texts before dt', row({}, { texts: 3, dt: 'x' }), 'texts must be a non-empty string array'],
    ['order: envelope before seq0', row({ seq0: -1, x: 1 }), 'envelope must be exactly {type, seq0, time0, data}'],
  ]
  it.each(cases)('PUB 14.2: %s', (_n, value, why) => {
    const tag = value.type
    expect(errOf(() => decodeStorageRecord(value))).toBe(`malformed ${tag} storage row: ${why}`)
    expect(errOf(() => ref.decodeStorageRecord(value))).toBe(`malformed ${tag} storage row: ${why}`)
  })

  it('PUB 14.2: the seq bound is computed as upstream does (seq0 + n - 1 in doubles), so the same rows pass', () => {
    // Upstream's check rounds: seq0 = MAX_SAFE_INTEGER - 1 with 3 members passes and decodes a last seq of 2^53.
    // A drop-in must accept exactly what 0.1.1-rc.2 accepts, so this quirk is kept and pinned here.
    const quirk = row({ seq0: Number.MAX_SAFE_INTEGER - 1 }, { dt: [1, 1], texts: ['a', 'b', 'c'] })
    expect(JSON.stringify(decodeStorageRecord(quirk))).toBe(JSON.stringify(ref.decodeStorageRecord(quirk)))
    expect(decodeStorageRecord(quirk).map(e => e.seq)).toEqual([2 ** 53 - 2, 2 ** 53 - 1, 2 ** 53])
  })

  it('PUB 14.2: a row expands with exact keys; name only when present', () => {
    expect(JSON.stringify(decodeStorageRecord(toolRow({ name: 'n', dt: [3, -1], args: ['a', 'b', 'c'] }) as any)))
      .toBe(JSON.stringify([0, 1, 2].map((k, i) => ({ type: 'assistant/chunk', seq: k, time: [0, 3, 2][i], data: { turn: 1, step: 1, chunk: { type: 'tool-call-delta', index: 0, id: 'c', name: 'n', argumentsDelta: 'abc'[k] } } }))))
    expect(decodeStorageRecord({ type: 'reasoning-chunks', seq0: 5, time0: 7, data: { turn: 2, step: 3, index: 4, dt: [], texts: ['r'] } }))
      .toEqual([{ type: 'assistant/chunk', seq: 5, time: 7, data: { turn: 2, step: 3, chunk: { type: 'reasoning-delta', index: 4, text: 'r' } } }])
  })
})

// ---- differential: random batches ----

const chunkArb = fc.oneof(
  { weight: 4, arbitrary: fc.record({ type: fc.constantFrom('text-delta', 'reasoning-delta'), index: fc.constantFrom(0, 1), text: fc.string({ maxLength: 3 }) }) },
  { weight: 3, arbitrary: fc.record({ type: fc.constant('tool-call-delta'), index: fc.constantFrom(0, 1), id: fc.constantFrom('a', 'b'), name: fc.constantFrom('n', 'm'), argumentsDelta: fc.string({ maxLength: 3 }) }, { requiredKeys: ['type', 'index', 'id', 'argumentsDelta'] }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>({ type: 'block-end', index: 0 }, { type: 'text-delta', index: '0', text: 'x' }, { type: 'text-delta', index: 0, text: 'x', extra: 1 }) },
)
const stepArb = fc.record({
  chunk: chunkArb,
  other: fc.oneof({ weight: 12, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
  turn: fc.oneof({ weight: 8, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(2) }),
  dt: fc.oneof({ weight: 10, arbitrary: fc.integer({ min: -3, max: 50 }) }, { weight: 1, arbitrary: fc.constantFrom(0.5, Number.MAX_SAFE_INTEGER) }),
  gap: fc.oneof({ weight: 15, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constant(2) }),
})
const segmentArb = fc.record({ step: stepArb, len: fc.integer({ min: 1, max: 7 }), texts: fc.array(fc.string({ maxLength: 3 }), { minLength: 7, maxLength: 7 }) })
const batchArb = fc.tuple(fc.integer({ min: 0, max: 1e6 }), fc.integer({ min: -1e12, max: 1e13 }), fc.array(segmentArb, { maxLength: 8 })).map(([seq0, time0, segments]) => {
  let seq = seq0
  let time = time0
  const out: Ev[] = []
  for (const { step: s, len, texts } of segments) {
    for (let k = 0; k < len; k++) {
      const chunk: any = typeof s.chunk === 'object' && s.chunk !== null && 'text' in s.chunk ? { ...s.chunk, text: texts[k] }
        : typeof s.chunk === 'object' && s.chunk !== null && 'argumentsDelta' in s.chunk ? { ...s.chunk, argumentsDelta: texts[k] } : s.chunk
      out.push(s.other
        ? { type: 'step/end', seq, time, data: { turn: s.turn, step: 1 } }
        : { type: 'assistant/chunk', seq, time, data: { turn: s.turn, step: 1, chunk } })
      seq += k === len - 1 ? s.gap : 1
      time += k % 3 === 2 ? s.dt : (k % 2 === 0 ? 1 : -1)
    }
  }
  return out
})

function corrupt(rows: any[], pick: number, how: number): any[] {
  const out = JSON.parse(JSON.stringify(rows))
  const targets = out.filter((r: any) => r.type.endsWith('-chunks'))
  if (targets.length === 0) return out
  const r = targets[pick % targets.length]
  const d = r.data
  const edits: (() => void)[] = [
    () => { r.extra = 1 }, () => { r.seq0 = -1 }, () => { r.time0 = 1.5 }, () => { r.data = [] }, () => { r.data = 'x' },
    () => { d.more = 1 }, () => { delete d.dt }, () => { d.turn = null }, () => { d.index = '0' },
    () => { if (d.texts) d.texts = [] ; else d.args = [1] }, () => { d.dt = [...d.dt, 1] }, () => { d.dt = [0.5, ...d.dt.slice(1)] },
    () => { r.seq0 = Number.MAX_SAFE_INTEGER - 1 }, () => { r.time0 = Number.MAX_SAFE_INTEGER - 1; d.dt = d.dt.map(() => 2) },
    () => { if ('id' in d) d.id = 5; else d.id = 'x' }, () => { if ('id' in d) d.name = 3; else d.texts = 'abc' },
    () => { delete r.type }, () => { r.type = 'user/message' },
  ]
  edits[how % edits.length]()
  return out
}

describe('PUB 14.2 differential against 0.1.1-rc.2', () => {
  it('rows byte-identical; JSON → pack → JSON → decode round-trips byte for byte', () => {
    let packed = 0
    fc.assert(fc.property(batchArb, batch => {
      const ours = packChunkRuns(batch as any)
      const theirs = ref.packChunkRuns(batch)
      const text = JSON.stringify(ours)
      expect(text).toBe(JSON.stringify(theirs))
      if (ours.length < batch.length) packed++
      const decoded = (JSON.parse(text) as unknown[]).flatMap(v => decodeStorageRecord(v))
      expect(JSON.stringify(decoded)).toBe(JSON.stringify(batch))
      expect(JSON.stringify(decoded)).toBe(JSON.stringify((JSON.parse(text) as unknown[]).flatMap(v => ref.decodeStorageRecord(v))))
    }), { numRuns: 2000 })
    expect(packed).toBeGreaterThan(200)
  })

  it('passed-through events keep their identity', () => {
    fc.assert(fc.property(batchArb, batch => {
      const out = packChunkRuns(batch as any)
      const kept = new Set(batch)
      for (const r of out) if (!(r.type as string).endsWith('-chunks')) expect(kept.has(r as Ev)).toBe(true)
    }), { numRuns: 300 })
  })

  it('malformed rows: the same message (or the same success) as the reference', () => {
    const seen = new Set<string>()
    fc.assert(fc.property(batchArb, fc.nat(), fc.nat(), (batch, pick, how) => {
      const rows = corrupt(ref.packChunkRuns(batch), pick, how)
      for (const v of rows) {
        const a = (() => { try { return { ok: JSON.stringify(decodeStorageRecord(v)) } } catch (e) { return { err: (e as Error).message } } })()
        const b = (() => { try { return { ok: JSON.stringify(ref.decodeStorageRecord(v)) } } catch (e) { return { err: (e as Error).message } } })()
        expect(a).toEqual(b)
        if ('err' in a) seen.add(a.err!.replace(/^malformed \S+ storage row: /, '').replace(/\d+/g, 'N'))
      }
    }), { numRuns: 3000 })
    expect(seen.size).toBeGreaterThanOrEqual(8)
  })
})
