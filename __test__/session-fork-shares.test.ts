// A fork (`session.fork`) starts from what its parent already holds: the
// messages the parent derived for the surface nodes the two share (a node's
// message is its event's alone, SPEC 6), and the texts of its events as the
// parent's log keeps them, the blocks before the boundary's copied as they
// are (src/log/texts.rs, `Texts::prefix`). Neither may show: the fork's first
// `deriveMessages()` is what a fresh read of its log derives, its log is
// the parent's up to the boundary line for line, and it goes on as a fresh
// copy would, whatever the parent was (live, read from JSONL as a string or
// a Buffer, its messages derived or not, a compaction since).

import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'
import { apply, op } from './fork-helpers.js'
import { expectEqualsFreshCopies } from './spec-helpers.js'

const eventLines = (s: Session) => s.toJsonl().trimEnd().split('\n').slice(1)

describe('a fork starts from what its parent holds', () => {
  it('derives what a fresh read of its log derives, and holds the parent log up to the boundary', () => {
    fc.assert(
      fc.property(
        fc.array(op, { minLength: 1, maxLength: 36 }),
        fc.constantFrom('live', 'string', 'buffer'),
        fc.array(op, { maxLength: 4 }),
        fc.nat(),
        (ops, how, after, pick) => {
          const live = new Session('p')
          ops.forEach((o, n) => apply(live, o, n))
          const parent = how === 'live' ? live : Session.fromJsonl(how === 'string' ? live.toJsonl() : Buffer.from(live.toJsonl()))
          // The parent goes on: its messages derived (or not), compacted since.
          after.forEach((o, n) => apply(parent, o, ops.length + n))
          const ends = eventLines(parent).flatMap((line, seq) => (JSON.parse(line).type === 'turn/end' ? [seq] : []))
          const boundary = pick % (ends.length + 1) === ends.length ? undefined : ends[pick % (ends.length + 1)]
          const parentLines = eventLines(parent)
          const child = parent.fork(boundary, 'c')
          // Its first derive, before anything else reads it.
          const messages = child.deriveMessages()
          const fresh = Session.fromJsonl(child.toJsonl())
          expect(messages).toEqual(fresh.deriveMessages())
          // Its messages share the frozen values of its own events (SPEC 6;
          // a user or assistant message's content is its event's).
          const events = child.events as readonly { type: string; data: { content?: unknown } }[]
          child.surface.nodes.forEach((seq, i) => {
            if (events[seq].type === 'user/message' || events[seq].type === 'assistant/message') {
              expect(messages[i].content).toBe(events[seq].data.content)
            }
          })
          expect(eventLines(child)).toEqual(parentLines.slice(0, boundary === undefined ? undefined : boundary + 1))
          expectEqualsFreshCopies(child)
          // It goes on as a fresh copy would.
          apply(child, { kind: 'turn', pad: 3 }, 1_000)
          apply(child, { kind: 'compact', a: pick, b: pick >> 1 }, 1_001)
          expectEqualsFreshCopies(child)
          expect(eventLines(parent)).toEqual(parentLines)
        },
      ),
      { numRuns: 60 },
    )
  })

  it("shares the parent's frozen messages for the nodes they share", () => {
    const parent = new Session('p')
    for (let n = 0; n < 6; n++) apply(parent, { kind: 'turn', pad: 10 }, n)
    apply(parent, { kind: 'compact', a: 12, b: 1 }, 6)
    const read = Session.fromJsonl(parent.toJsonl())
    for (const p of [parent, read]) {
      const theirs = p.deriveMessages()
      const whole = p.fork(undefined, 'c').deriveMessages()
      expect(whole).toHaveLength(theirs.length)
      whole.forEach((m, i) => expect(m).toBe(theirs[i]))
      // Up to the third turn's end: its surface is the parent's first nodes.
      const part = p.fork(20, 'c2').deriveMessages()
      expect(part.length).toBeGreaterThan(0)
      part.forEach((m, i) => expect(m).toBe(theirs[i]))
    }
  })
})
