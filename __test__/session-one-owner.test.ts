// One owner per event (lib/core/session.js, docs/ARCHITECTURE.md): the native
// log owns the events it was given as text (a seed, a read, a fork's copy);
// the JS session owns every event appended to it, as the frozen object
// `append` returned, for the session's life. Nothing moves an event from one
// owner to the other: no idle hand-over, no timer, no text of a live event
// kept natively. None of it may show: the session stays equal to a fresh seed
// of its log (SPEC 3), derived messages share the frozen values of the events
// (SPEC 6), and an event `append` returned is the one `events` gives.

import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import * as api from '../index.js'
import { JsonlSessionStore, Session, type SessionEvent } from '../index.js'
import { expectEqualsFreshCopies, replaceSomeNodes, USER } from './spec-helpers.js'

type Internal = { flushSource(s: Session): { prefix: number; to: number; native: { length: number } } }
const internal = (api as unknown as Record<symbol, Internal>)[Symbol.for('dsh-session-native.internal')]

const PROV = { provider: 'p', model: 'm' }
const txt = (t: string) => [{ type: 'text', text: t }]

/** A turn of an agent loop: user message, `chunks` streamed chunks, the reply, a tool round. */
function turn(s: Session, n: number, chunks: number, text: (i: number) => string): SessionEvent[] {
  const out: SessionEvent[] = []
  out.push(s.append('turn/start', { turn: n, trigger: { kind: 'message', source: USER } }))
  out.push(s.append('user/message', { content: txt(`question ${n}`) as never, source: USER }, { surfaceOp: 'append' }))
  out.push(s.append('step/start', { turn: n, step: 1 }))
  if (n % 3 === 1) {
    out.push(s.append('request/header', { header: { config: { provider: 'p', model: `m${n}` }, system: `S${n}` }, reason: 'change' }))
  }
  for (let i = 0; i < chunks; i++) {
    out.push(s.append('assistant/chunk', { turn: n, step: 1, chunk: { type: 'text-delta', text: text(i) } as never }))
  }
  out.push(
    s.append(
      'assistant/message',
      { turn: n, step: 1, content: [...txt(`answer ${n}`), { type: 'tool-call', id: `c${n}`, name: 'r', arguments: '{}' }] as never, provenance: PROV },
      { surfaceOp: 'append', sourceEventSeqs: [] },
    ),
  )
  out.push(s.append('tool/call', { turn: n, step: 1, callId: `c${n}`, name: 'r', arguments: '{}' }))
  out.push(s.append('tool/result', { turn: n, step: 1, callId: `c${n}`, content: txt(`result ${n}`) as never, isError: false }, { surfaceOp: 'append' }))
  out.push(s.append('step/end', { turn: n, step: 1 }))
  out.push(s.append('turn/end', { turn: n, reason: { kind: 'completed' } }))
  return out
}

describe('one owner per event', () => {
  it('after any mix of turns, reads, forks, compactions and flushes, the session equals a fresh seed and keeps identities', async () => {
    type Step =
      | { k: 'turn'; chunks: number }
      | { k: 'read'; which: number }
      | { k: 'compact'; a: number; b: number }
      | { k: 'flush'; wait: boolean }
    const stepArb: fc.Arbitrary<Step> = fc.oneof(
      fc.record({ k: fc.constant('turn' as const), chunks: fc.nat({ max: 40 }) }),
      fc.record({ k: fc.constant('read' as const), which: fc.nat({ max: 4 }) }),
      fc.record({ k: fc.constant('compact' as const), a: fc.nat(), b: fc.nat() }),
      fc.record({ k: fc.constant('flush' as const), wait: fc.boolean() }),
    )
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-owner-'))
    const store = new JsonlSessionStore({ root })
    let run = 0
    try {
      await fc.assert(
        fc.asyncProperty(fc.array(stepArb, { maxLength: 25 }), fc.nat(), async (steps, pick) => {
          const s = new Session(`live-${run++}`)
          const held: SessionEvent[] = []
          const flushes: Promise<number>[] = []
          let n = 0
          let last = ''
          for (const step of steps) {
            last = step.k === 'turn' ? 'turn/end' : step.k === 'compact' && s.surface.nodes.length > 0 ? 'user/message' : last
            if (step.k === 'turn') {
              const events = turn(s, ++n, step.chunks, (i) => `δ${i}\n`)
              // The caller keeps some of what append returned.
              held.push(events[(pick + n) % events.length])
            } else if (step.k === 'read') {
              if (step.which === 0) s.deriveMessages()
              else if (step.which === 1) s.requestHeader()
              else if (step.which === 2) void s.events
              else if (step.which === 3) s.toJsonl()
              else if (s.seq > 0 && last === 'turn/end') {
                const child = s.fork()
                expect(child.events.every((e, i) => e === s.events[i])).toBe(true)
              }
            } else if (step.k === 'compact') {
              replaceSomeNodes(s, step.a, step.b)
            } else {
              const flushed = store.flush(s)
              if (step.wait) await flushed
              else flushes.push(flushed)
            }
            // The native log never holds the text of a live event.
            expect(internal.flushSource(s).prefix).toBe(0)
            expect(internal.flushSource(s).native.length).toBe(0)
          }
          await Promise.all(flushes)
          const events = s.events
          for (const e of held) expect(events[e.seq]).toBe(e)
          // Messages share the content of the events the session handed out.
          const messages = s.deriveMessages()
          const bySeq = new Map(held.filter((e) => e.type === 'user/message' || e.type === 'assistant/message').map((e) => [e.seq, e]))
          s.surface.nodes.forEach((seq, k) => {
            const e = bySeq.get(seq) as { data: { content?: unknown } } | undefined
            if (e !== undefined && e.data.content !== undefined && messages.length === s.surface.nodes.length) {
              expect(messages[k].content).toBe(e.data.content)
            }
          })
          expectEqualsFreshCopies(s)
        }),
        { numRuns: 40 },
      )
    } finally {
      await store.close()
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it('a fork keeps the live events as the same objects, and the texts it was given as text', () => {
    const origin = new Session('origin')
    for (let n = 1; n <= 5; n++) turn(origin, n, 3, (i) => `o${i}`)
    const resumed = Session.fromJsonl(origin.toJsonl())
    const live = turn(resumed, 6, 2, (i) => `l${i}`)
    const boundary = live[live.length - 1].seq
    const child = resumed.fork(boundary, 'child')
    expect(child.events[boundary]).toBe(live[live.length - 1])
    // The child holds the resumed texts natively and the live events as objects.
    expect(internal.flushSource(child).prefix).toBe(origin.seq)
    expect(child.seq).toBe(boundary + 1)
    expect(child.surface.nodes).toEqual(resumed.surface.nodes)
    expect(child.requestHeader()).toEqual(resumed.requestHeader())
    expectEqualsFreshCopies(child)
    // A fork inside the texts the child was given.
    const inner = child.fork(origin.events.findIndex((e) => e.type === 'turn/end'), 'inner')
    expect(JSON.stringify(inner.events)).toBe(JSON.stringify(origin.events.slice(0, inner.seq)))
  })

  it('a long seeded or resumed session reads back every text exactly from compressed blocks (any order, forks, JSONL)', async () => {
    const origin = new Session('origin')
    for (let n = 1; n <= 150; n++) turn(origin, n, 150, (i) => (i % 17 === 0 ? `ü€${'x'.repeat(i)}\ud800` : `t${n}-${i} `))
    const jsonl = origin.toJsonl()
    const seeded = new Session('seeded', origin.events)
    const parsed = Session.fromJsonl(jsonl)
    const fromBuffer = Session.fromJsonl(Buffer.from(jsonl))
    // The compressor thread a read starts finishes meanwhile; the next native
    // call takes what it compressed.
    await new Promise((r) => setTimeout(r, 200))
    for (const s of [seeded, parsed, fromBuffer]) {
      expect(JSON.stringify(s.deriveMessages())).toBe(JSON.stringify(origin.deriveMessages()))
      expect(s.requestHeader()).toEqual(origin.requestHeader())
      const boundary = origin.events.findIndex((e, i) => e.type === 'turn/end' && i > origin.seq / 2)
      const child = s.fork(boundary, 'child')
      expect(JSON.stringify(child.events)).toBe(JSON.stringify(origin.events.slice(0, boundary + 1)))
      expect(JSON.stringify(s.events)).toBe(JSON.stringify(origin.events))
      expect(s.toJsonl().slice(s.toJsonl().indexOf('\n'))).toBe(jsonl.slice(jsonl.indexOf('\n')))
    }
  })

  it('schedules no timer or immediate: a session does nothing between its callers\' calls', () => {
    const timeout = vi.spyOn(globalThis, 'setTimeout')
    const immediate = vi.spyOn(globalThis, 'setImmediate')
    try {
      const live = new Session('quiet')
      for (let n = 1; n <= 60; n++) turn(live, n, 120, (i) => `q${i}`)
      live.deriveMessages()
      live.requestHeader()
      void new Session('quiet-seed', live.events).deriveMessages()
      const resumed = Session.fromJsonl(live.toJsonl())
      resumed.deriveMessages()
      turn(resumed, 61, 3, (i) => `r${i}`)
      void resumed.events
      resumed.fork()
      expect(timeout).not.toHaveBeenCalled()
      expect(immediate).not.toHaveBeenCalled()
    } finally {
      timeout.mockRestore()
      immediate.mockRestore()
    }
  })
})
