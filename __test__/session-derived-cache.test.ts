// The derived-messages cache (lib/core/derived.js) and its states: 'fresh'
// (a derive lists only the new nodes), 'stale' (a replace forgot messages,
// or they came from a parent: the next derive lists them again) and
// 'borrowed' (a detached fork holds its parent's frozen messages, and
// copies them at its first derive). Through the public API: what each state
// must give (the same message objects kept, or copies); through the module:
// the transitions themselves.

import { createRequire } from 'node:module'
import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'
import { mount } from './service-helpers.js'
import { USER } from './spec-helpers.js'

type Message = { role: string; content: unknown }
type Payload = { type: string; data: unknown }
type EventsLike = { objsFrom: number; materialize(seqs: number[]): void; payloadAt(seq: number): Payload }
interface DerivedCache {
  state: 'fresh' | 'stale' | 'borrowed'
  list: Message[]
  nodes: number[]
  upTo(end: number): void
  forget(start: number, end: number): void
  shareFrom(parent: DerivedCache, detached: boolean): void
}
const nodeRequire = createRequire(__filename)
const { Derived } = nodeRequire('../lib/core/derived.js') as { Derived: new (nodes: number[], events: EventsLike) => DerivedCache }

const say = (text: string) => ({ content: [{ type: 'text', text }], source: USER })
/** Events all held in JS (as a live session's are): seq -> a user message saying `m<seq>`. */
function eventsOf(count: number): EventsLike & { payloads: Payload[] } {
  const payloads = Array.from({ length: count }, (_, seq) => ({ type: 'user/message', data: say(`m${seq}`) }))
  return { payloads, objsFrom: 0, materialize: () => {}, payloadAt: (seq) => payloads[seq] }
}
const texts = (messages: Message[]) => messages.map((m) => (m.content as { text: string }[])[0].text)

function session(id: string, count: number): Session {
  const s = new Session(id)
  s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } } as never)
  for (let i = 0; i < count; i++) s.append('user/message', say(`m${i}`) as never, { surfaceOp: 'append' })
  s.append('turn/end', { turn: 1, reason: { kind: 'completed' } } as never)
  return s
}
/** Replace surface nodes `i..j` (positions) by one summary message. */
function replace(s: Session, i: number, j: number): void {
  const nodes = s.surface.nodes
  s.append('user/message', say('summary') as never, {
    surfaceOp: { op: 'replace', start: nodes[i], end: nodes[j] },
    sourceEventSeqs: nodes.slice(i, j + 1),
  } as never)
}

describe('the derived cache through the public API', () => {
  it('a replace forgets only the messages of the nodes it removed; the others stay the same objects', () => {
    const s = session('r', 6)
    const before = s.deriveMessages() as unknown as Message[]
    replace(s, 1, 3)
    const after = s.deriveMessages() as unknown as Message[]
    expect(texts(after)).toEqual(['m0', 'summary', 'm4', 'm5'])
    expect(after[0]).toBe(before[0])
    expect(after[2]).toBe(before[4])
    expect(after[3]).toBe(before[5])
    // Fresh again: the next step appends to the same list.
    s.append('user/message', say('m6') as never, { surfaceOp: 'append' })
    const next = s.deriveMessages() as unknown as Message[]
    expect(texts(next)).toEqual(['m0', 'summary', 'm4', 'm5', 'm6'])
    expect(next.slice(0, 4).every((m, i) => m === after[i])).toBe(true)
  })

  it("a shared fork lists its parent's message objects; a detached fork (the service's) its own copies", async () => {
    const { ctx } = await mount()
    const parent = ctx.sessions.create('p')
    parent.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } } as never)
    for (let i = 0; i < 4; i++) parent.append('user/message', say(`m${i}`) as never, { surfaceOp: 'append' })
    parent.append('turn/end', { turn: 1, reason: { kind: 'completed' } } as never)
    const theirs = parent.deriveMessages() as unknown as Message[]
    const shared = parent.fork(undefined, 'shared').deriveMessages() as unknown as Message[]
    expect(shared.every((m, i) => m === theirs[i])).toBe(true)
    const detached = ctx.sessions.fork(parent, undefined, 'detached')
    const copies = detached.deriveMessages() as unknown as Message[]
    expect(copies).toEqual(theirs)
    expect(copies.some((m, i) => m === theirs[i] || m.content === theirs[i].content)).toBe(false)
    // The parent's messages are untouched, and the copies stay the child's.
    expect((parent.deriveMessages() as unknown as Message[]).every((m, i) => m === theirs[i])).toBe(true)
    expect((detached.deriveMessages() as unknown as Message[]).every((m, i) => m === copies[i])).toBe(true)
  })
})

describe('the derived cache states', () => {
  it('fresh -> stale on a replace -> fresh on the next derive, the pending node derived then', () => {
    const events = eventsOf(6)
    const nodes = [0, 1, 2, 3, 4]
    const cache = new Derived(nodes, events)
    expect(cache.state).toBe('fresh')
    cache.upTo(nodes.length)
    expect(cache.state).toBe('fresh')
    const kept = cache.list.slice()
    // Nodes 1..3 replaced by event 5.
    nodes.splice(1, 3, 5)
    cache.forget(1, 3)
    expect(cache.state).toBe('stale')
    cache.upTo(nodes.length)
    expect(cache.state).toBe('fresh')
    expect(texts(cache.list)).toEqual(['m0', 'm5', 'm4'])
    expect(cache.list[0]).toBe(kept[0])
    expect(cache.list[2]).toBe(kept[4])
  })

  it('a replace of nodes not derived yet leaves the cache fresh', () => {
    const events = eventsOf(5)
    const nodes = [0, 1, 2, 3]
    const cache = new Derived(nodes, events)
    cache.upTo(2)
    nodes.splice(2, 2, 4)
    cache.forget(2, 3)
    expect(cache.state).toBe('fresh')
    cache.upTo(nodes.length)
    expect(texts(cache.list)).toEqual(['m0', 'm1', 'm4'])
  })

  it('shared from a parent: stale, listing the same objects; borrowed (detached): copies at the first derive', () => {
    const events = eventsOf(4)
    const parent = new Derived([0, 1, 2, 3], events)
    parent.upTo(4)
    const shared = new Derived([0, 1, 2], events)
    shared.shareFrom(parent, false)
    expect(shared.state).toBe('stale')
    shared.upTo(3)
    expect(shared.state).toBe('fresh')
    expect(shared.list.every((m, i) => m === parent.list[i])).toBe(true)

    const borrowed = new Derived([0, 1, 2], events)
    borrowed.shareFrom(parent, true)
    expect(borrowed.state).toBe('borrowed')
    // A replace while borrowed keeps it borrowed: the copies are still due.
    borrowed.nodes.splice(2, 1, 3)
    borrowed.forget(2, 2)
    expect(borrowed.state).toBe('borrowed')
    borrowed.upTo(3)
    expect(borrowed.state).toBe('fresh')
    expect(texts(borrowed.list)).toEqual(['m0', 'm1', 'm3'])
    expect(borrowed.list.slice(0, 2)).toEqual(parent.list.slice(0, 2))
    expect(borrowed.list.some((m) => parent.list.includes(m))).toBe(false)

    // A fork of a borrowing session borrows too; with no node in common, it starts fresh and empty.
    const again = new Derived([0, 1, 2], events)
    const source = new Derived([0, 1, 2], events)
    source.shareFrom(parent, true)
    again.shareFrom(source, false)
    expect(again.state).toBe('borrowed')
    const unrelated = new Derived([3], events)
    unrelated.shareFrom(parent, true)
    expect(unrelated.state).toBe('fresh')
    unrelated.upTo(1)
    expect(texts(unrelated.list)).toEqual(['m3'])
  })
})
