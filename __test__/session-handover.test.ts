// A live session hands its events' texts to the native log (which keeps
// full blocks of them compressed) and lets go of the events' objects: after
// a store flush, toJsonl or fork, and on idle turns of the event loop once
// 4,096 are pending at a model step (lib/core/session.js, "one owner").
// None of it may show: the session stays equal to a fresh seed of its log
// (SPEC 3: `events` is the log, frozen), what it derives still shares the
// frozen values of the events it handed out (SPEC 6), and an event a
// caller still holds is the one `events` gives.

import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import v8 from 'node:v8'
import vm from 'node:vm'
import fc from 'fast-check'
import { describe, expect, it, vi } from 'vitest'
import * as api from '../index.js'
import { JsonlSessionStore, Session, type SessionEvent } from '../index.js'
import { expectEqualsFreshCopies, replaceSomeNodes, USER } from './spec-helpers.js'

type Internal = {
  handOver(s: Session): void
  holdHandOver(s: Session): () => void
  pendingRange(s: Session): { from: number; to: number; native: { textsLength: number; compressTexts(): boolean } }
}
const internal = (api as unknown as Record<symbol, Internal>)[Symbol.for('dsh-session-native.internal')]

v8.setFlagsFromString('--expose-gc')
const gc = vm.runInNewContext('gc') as () => void

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

const waitFor = async (ready: () => boolean, ms = 5000) => {
  const until = Date.now() + ms
  while (!ready()) {
    if (Date.now() > until) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 5))
  }
}

describe('the hand-over of a live session\'s events', () => {
  it('after any mix of turns, hand-overs, reads and compactions, the session equals a fresh seed and keeps identities', () => {
    type Step = { k: 'turn'; chunks: number } | { k: 'handover' } | { k: 'read'; which: number } | { k: 'compact'; a: number; b: number }
    const stepArb: fc.Arbitrary<Step> = fc.oneof(
      fc.record({ k: fc.constant('turn' as const), chunks: fc.nat({ max: 40 }) }),
      fc.record({ k: fc.constant('handover' as const) }),
      fc.record({ k: fc.constant('read' as const), which: fc.nat({ max: 4 }) }),
      fc.record({ k: fc.constant('compact' as const), a: fc.nat(), b: fc.nat() }),
    )
    fc.assert(
      fc.property(fc.array(stepArb, { maxLength: 25 }), fc.nat(), (steps, pick) => {
        const s = new Session('live')
        const held: SessionEvent[] = []
        let messagesBefore: ReturnType<Session['deriveMessages']> = []
        let n = 0
        let last = ''
        for (const step of steps) {
          last = step.k === 'turn' ? 'turn/end' : step.k === 'compact' && s.surface.nodes.length > 0 ? 'user/message' : last
          if (step.k === 'turn') {
            const events = turn(s, ++n, step.chunks, (i) => `δ${i}\n`)
            // The caller keeps some of what append returned.
            held.push(events[(pick + n) % events.length])
          } else if (step.k === 'handover') {
            messagesBefore = s.deriveMessages()
            internal.handOver(s)
            expect(internal.pendingRange(s).from).toBe(s.seq)
            // What was derived before is what is derived after, object for object.
            const after = s.deriveMessages()
            for (let i = 0; i < messagesBefore.length; i++) expect(after[i]).toBe(messagesBefore[i])
          } else if (step.k === 'read') {
            if (step.which === 0) s.deriveMessages()
            else if (step.which === 1) s.requestHeader()
            else if (step.which === 2) void s.events
            else if (step.which === 3) s.toJsonl()
            else if (s.seq > 0 && last === 'turn/end') s.fork()
          } else {
            replaceSomeNodes(s, step.a, step.b)
          }
        }
        const events = s.events
        for (const e of held) expect(events[e.seq]).toBe(e)
        // Messages share the content of the events the session handed out.
        const messages = s.deriveMessages()
        // (A user or assistant message's content is its event's content.)
        const bySeq = new Map(held.filter((e) => e.type === 'user/message' || e.type === 'assistant/message').map((e) => [e.seq, e]))
        s.surface.nodes.forEach((seq, k) => {
          const e = bySeq.get(seq) as { data: { content?: unknown } } | undefined
          if (e !== undefined && e.data.content !== undefined && messages[k] !== undefined && messages.length === s.surface.nodes.length) {
            expect(messages[k].content).toBe(e.data.content)
          }
        })
        expectEqualsFreshCopies(s)
      }),
      { numRuns: 60 },
    )
  })

  it('happens on idle turns after a model step finds 4,096 events pending, and lets go of the objects nobody holds', async () => {
    const s = new Session('idle')
    const kept: SessionEvent[] = []
    let dropped: WeakRef<SessionEvent> | undefined
    let firstMessage: unknown
    for (let n = 1; n <= 60; n++) {
      const events = turn(s, n, 120, (i) => `chunk ${n}.${i} ü\n`)
      if (n === 2) {
        kept.push(events[10], events[events.length - 1])
        dropped = new WeakRef(events[11])
        firstMessage = (events[1].data as { content: unknown }).content
      }
    }
    expect(s.seq).toBeGreaterThan(4096)
    // Nothing is handed over during the appends themselves, nor after them
    // until a model step (`deriveMessages()`).
    expect(internal.pendingRange(s).from).toBe(0)
    await new Promise((r) => setTimeout(r, 10))
    expect(internal.pendingRange(s).from).toBe(0)
    s.deriveMessages()
    await waitFor(() => s.seq - internal.pendingRange(s).from < 4096)
    expect(internal.pendingRange(s).native.textsLength).toBe(internal.pendingRange(s).from)
    await new Promise((r) => setTimeout(r, 0))
    gc()
    expect(dropped!.deref()).toBeUndefined()
    // The held ones come back as themselves; the dropped one as an equal frozen copy.
    const events = s.events
    for (const e of kept) expect(events[e.seq]).toBe(e)
    const again = events[kept[0].seq + 1]
    expect(Object.isFrozen(again) && Object.isFrozen(again.data)).toBe(true)
    expect(again).toEqual({ type: 'assistant/chunk', seq: kept[0].seq + 1, time: again.time, data: { turn: 2, step: 1, chunk: { type: 'text-delta', text: 'chunk 2.8 ü\n' } } })
    // Derived messages still share the surface events' values.
    const second = s.deriveMessages().find((m) => m.role === 'user' && JSON.stringify(m.content).includes('question 2'))
    expect(second?.content).toBe(firstMessage)
    expect(s.requestHeader()).toEqual({ config: { provider: 'p', model: 'm58' }, system: 'S58' })
    expectEqualsFreshCopies(s)
  })

  it('lets go again, at the next model step, of the objects reading `events` brought back', async () => {
    const s = new Session('reread')
    for (let n = 1; n <= 60; n++) turn(s, n, 120, (i) => `r${i}`)
    internal.handOver(s)
    await new Promise((r) => setTimeout(r, 5)) // the hand-over the appends scheduled finds nothing left
    const kept = s.events[100]
    const back = (() => new WeakRef(s.events[101]))()
    s.append('assistant/chunk', { turn: 60, step: 1, chunk: { type: 'text-delta', text: 'last' } as never })
    s.deriveMessages()
    await waitFor(() => internal.pendingRange(s).from === s.seq)
    await new Promise((r) => setTimeout(r, 0))
    gc()
    expect(back.deref()).toBeUndefined()
    expect(s.events[100]).toBe(kept)
  })

  it('waits while a flush hands the same texts over, and goes on after it', async () => {
    const s = new Session('held')
    for (let n = 1; n <= 40; n++) turn(s, n, 120, (i) => `h${i}`)
    const resume = internal.holdHandOver(s)
    s.deriveMessages() // a model step: the hand-over is due
    await new Promise((r) => setTimeout(r, 30))
    expect(internal.pendingRange(s).from).toBe(0)
    resume()
    resume() // a second call releases nothing more
    await waitFor(() => s.seq - internal.pendingRange(s).from < 4096)
    // A flush holds it from the call on: the idle turns that run while the
    // flush builds its parts hand nothing over (the flush attaches its parts
    // in order, each where the last one ended).
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-held-'))
    const store = new JsonlSessionStore({ root })
    try {
      const t = new Session('flush-held')
      for (let n = 1; n <= 160; n++) turn(t, n, 120, (i) => `f${i}`)
      t.deriveMessages() // the idle hand-over is due when the flush starts
      // Watch every hand-over of texts to the native log: how many events.
      const native = internal.pendingRange(t).native as unknown as { attachTexts(lines: Buffer | string): void }
      const attach = native.attachTexts.bind(native)
      const counts: number[] = []
      native.attachTexts = (lines) => {
        counts.push(lines.toString().split('\n').length - 1)
        attach(lines)
      }
      expect(await store.flush(t)).toBe(t.seq)
      expect(internal.pendingRange(t).from).toBe(t.seq)
      // Every hand-over during the flush was one of its parts (4,096 events,
      // the last one shorter): never an idle slice (2,048), nor what was
      // left built at once.
      expect(counts.length).toBeGreaterThan(2)
      expect(counts.slice(0, -1).every((n) => n === 4096)).toBe(true)
      expect(counts.at(-1)).toBeLessThanOrEqual(4096)
      expect(JSON.stringify((await store.load('flush-held' as never)).events)).toBe(JSON.stringify(t.events))
    } finally {
      await store.close()
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it('a store flush after a hand-over writes the same log, and the stored log loads back equal', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-handover-'))
    const store = new JsonlSessionStore({ root })
    try {
      const s = new Session('flushed')
      for (let n = 1; n <= 10; n++) turn(s, n, 50, (i) => `c${i}`)
      await store.flush(s)
      const flushed = s.seq
      for (let n = 11; n <= 20; n++) turn(s, n, 50, (i) => `d${i}`)
      internal.handOver(s) // texts not yet flushed are in the native log only
      for (let n = 21; n <= 22; n++) turn(s, n, 5, (i) => `e${i}`)
      expect(await store.flush(s)).toBe(s.seq - flushed)
      const loaded = await store.load('flushed' as never)
      expect(JSON.stringify(loaded.events)).toBe(JSON.stringify(s.events))
      const text = fs.readFileSync(path.join(root, '_no-cwd', 'flushed.jsonl'), 'utf8')
      expect(text.slice(text.indexOf('\n') + 1)).toBe(s.toJsonl().slice(s.toJsonl().indexOf('\n') + 1))
    } finally {
      await store.close()
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it('a long seeded session reads back every text exactly from compressed blocks (any order, forks, JSONL)', () => {
    const origin = new Session('origin')
    for (let n = 1; n <= 150; n++) turn(origin, n, 150, (i) => (i % 17 === 0 ? `ü€${'x'.repeat(i)}\ud800` : `t${n}-${i} `))
    const seeded = new Session('seeded', origin.events)
    const parsed = Session.fromJsonl(origin.toJsonl())
    for (const s of [seeded, parsed]) {
      // Random reads before `events`: the payloads a derive needs.
      expect(JSON.stringify(s.deriveMessages())).toBe(JSON.stringify(origin.deriveMessages()))
      expect(s.requestHeader()).toEqual(origin.requestHeader())
      const boundary = origin.events.findIndex((e, i) => e.type === 'turn/end' && i > origin.seq / 2)
      const child = s.fork(boundary, 'child')
      expect(JSON.stringify(child.events)).toBe(JSON.stringify(origin.events.slice(0, boundary + 1)))
      expect(JSON.stringify(s.events)).toBe(JSON.stringify(origin.events))
    }
    expect(seeded.toJsonl().slice(seeded.toJsonl().indexOf('\n'))).toBe(origin.toJsonl().slice(origin.toJsonl().indexOf('\n')))
  })

  it('a resumed log (fromJsonl, a store open) is compressed on a helper thread and reads back the same', async () => {
    const origin = new Session('resumed')
    for (let n = 1; n <= 60; n++) turn(origin, n, 120, (i) => `chunk ${n}.${i} ü€\n`)
    const jsonl = origin.toJsonl()
    expect(jsonl.length).toBeGreaterThan(1 << 20)
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-compress-'))
    const store = new JsonlSessionStore({ root })
    try {
      await store.flush(origin)
      for (const s of [Session.fromJsonl(jsonl), Session.fromJsonl(Buffer.from(jsonl)), await store.open('resumed' as never)]) {
        const native = internal.pendingRange(s).native
        // Reads and appends while the helper works.
        expect(JSON.stringify(s.deriveMessages())).toBe(JSON.stringify(origin.deriveMessages()))
        await waitFor(() => native.compressTexts())
        expect(s.toJsonl().slice(s.toJsonl().indexOf('\n'))).toBe(jsonl.slice(jsonl.indexOf('\n')))
        expect(JSON.stringify(s.events)).toBe(JSON.stringify(origin.events))
        turn(s, 61, 3, (i) => `after ${i}`)
        expectEqualsFreshCopies(s)
      }
    } finally {
      await store.close()
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it('schedules no timer (which would keep the session reachable until it fires) when there is nothing to do', async () => {
    const timers = vi.spyOn(globalThis, 'setTimeout')
    try {
      // A short session, seeded, live or resumed: nothing to hand over or compress.
      const live = new Session('quiet')
      for (let n = 1; n <= 20; n++) turn(live, n, 50, (i) => `q${i}`)
      live.deriveMessages()
      live.requestHeader()
      void new Session('quiet-seed', live.events).deriveMessages()
      void Session.fromJsonl(live.toJsonl()).deriveMessages()
      expect(timers).not.toHaveBeenCalled()
      // Appends alone schedule nothing either, however many; a model step
      // with 4,096 pending schedules the hand-over.
      const long = new Session('long')
      for (let n = 1; n <= 40; n++) turn(long, n, 120, (i) => `l${i}`)
      expect(timers).not.toHaveBeenCalled()
      long.deriveMessages()
      expect(timers).toHaveBeenCalledTimes(1)
      long.deriveMessages()
      expect(timers).toHaveBeenCalledTimes(1)
    } finally {
      timers.mockRestore()
    }
  })
})
