// Session.fromJsonl(Buffer) reads the caller's bytes where they are: a long
// log's texts are taken compressed (src/log/texts.rs `adopt`), a short one's
// copied, and the Buffer is let go before fromJsonl returns. Whatever the
// caller then does with its Buffer, the session is the log it was given
// (SPEC 11: what is read is what was written; the log is the session's own).
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'
import { catchError, text, USER } from './spec-helpers.js'

/**
 * A log of `users` user messages with `pad` characters each (some not
 * Latin-1), ten to a turn (every twelfth event a turn/end), as JSONL.
 */
function logText(users: number, pad: number): string {
  const s = new Session('in-place')
  for (let i = 0; i < users; i++) {
    const turn = Math.floor(i / 10) + 1
    if (i % 10 === 0) s.append('turn/start', { turn, trigger: { kind: 'message', source: USER } })
    const body = `${i} ${'é✓ab'.repeat(pad / 4)}`
    s.append('user/message', { content: text(body), source: USER }, { surfaceOp: 'append' })
    if (i % 10 === 9) s.append('turn/end', { turn, reason: { kind: 'completed' } })
  }
  return s.toJsonl()
}

const SHORT = logText(20, 40)
// Past 1 MiB: read on two threads, its texts compressed as they are taken.
const LONG = logText(3000, 600)

describe('Session.fromJsonl(Buffer) reads the caller bytes where they are', () => {
  it('sizes: one log under the parallel read, one over it', () => {
    expect(Buffer.byteLength(SHORT)).toBeLessThan(1 << 20)
    expect(Buffer.byteLength(LONG)).toBeGreaterThan(2 << 20)
  })

  it.each([
    ['a short log', SHORT],
    ['a long log', LONG],
  ])('%s: changing the Buffer after fromJsonl changes nothing of the session', (_, log) => {
    const want = Session.fromJsonl(log)
    const bytes = Buffer.from(log, 'utf8')
    const s = Session.fromJsonl(bytes)
    bytes.fill(0x20)
    expect(s.toJsonl()).toBe(log)
    expect(s.deriveMessages()).toEqual(want.deriveMessages())
    expect(s.events).toEqual(want.events)
    s.append('user/message', { content: text('next'), source: USER }, { surfaceOp: 'append' })
    expect(s.toJsonl().startsWith(log)).toBe(true)
  })

  it('reads a view into a larger buffer, and only the view', () => {
    const bytes = Buffer.from(LONG, 'utf8')
    const padded = new Uint8Array(bytes.length + 64).fill(0x7b)
    padded.set(bytes, 32)
    const view = padded.subarray(32, 32 + bytes.length)
    const s = Session.fromJsonl(view)
    padded.fill(0)
    expect(s.toJsonl()).toBe(LONG)
  })

  it('reads a Buffer over a SharedArrayBuffer (another thread may write it: copied first)', () => {
    const bytes = Buffer.from(LONG, 'utf8')
    const shared = new SharedArrayBuffer(bytes.length)
    const view = Buffer.from(shared)
    bytes.copy(view)
    const s = Session.fromJsonl(view)
    view.fill(0x20)
    expect(s.toJsonl()).toBe(LONG)
    expect(s.deriveMessages()).toHaveLength(3000)
  })

  it('names the line of a defect in a long Buffer, and the Buffer stays the caller\'s', () => {
    const lines = LONG.split('\n')
    lines[2500] = lines[2500].slice(0, 40)
    const bad = Buffer.from(lines.join('\n'), 'utf8')
    const copy = Buffer.from(bad)
    const err = catchError(() => Session.fromJsonl(bad))
    expect(err.code).toBe('CORRUPT_LOG')
    expect(err.line).toBe(2501)
    expect(err.message).toBe('corrupt session log: unparsable event at line 2501')
    expect(bad.equals(copy)).toBe(true)
  })

  it('a session read from a long Buffer forks as one read from the string', () => {
    const bytes = Buffer.from(LONG, 'utf8')
    const s = Session.fromJsonl(bytes)
    bytes.fill(0x20)
    const fromString = Session.fromJsonl(LONG)
    expect(s.fork(1535, 'child').events).toEqual(fromString.fork(1535, 'child').events)
    expect(s.fork(undefined, 'child').deriveMessages()).toEqual(fromString.fork(undefined, 'child').deriveMessages())
  })

  it('property: a Buffer read in place is the session its string reads as, whatever its lines and wherever its halves meet', () => {
    // Around 1 MiB (the in-place read's two halves; under it, a copy), user
    // messages of any text, some lines ending in CRLF, a pad of any length
    // so the halves meet anywhere.
    const message = fc.record({ text: fc.string({ unit: 'grapheme', maxLength: 40 }), crlf: fc.boolean() })
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 40 }), fc.integer({ min: 1_040_000, max: 1_200_000 }), (messages, padBytes) => {
        const head = JSON.stringify({ type: 'session', version: 0, id: 'p', createdAt: 1 })
        const pad = JSON.stringify({ type: 'plugin/pad', seq: 0, time: 1, data: { pad: 'é'.repeat(padBytes >> 1) } })
        const lines = [head, pad]
        messages.forEach(({ text: t, crlf }, i) => {
          const event = { type: 'user/message', seq: i + 1, time: 2, data: { content: text(t), source: USER }, surfaceOp: 'append' }
          lines.push(JSON.stringify(event) + (crlf ? '\r' : ''))
        })
        const log = `${lines.join('\n')}\n`
        const fromString = Session.fromJsonl(log)
        const bytes = Buffer.from(log, 'utf8')
        const inPlace = Session.fromJsonl(bytes)
        bytes.fill(0x7b)
        expect(inPlace.toJsonl()).toBe(fromString.toJsonl())
        expect(inPlace.deriveMessages()).toEqual(fromString.deriveMessages())
        expect(inPlace.events).toEqual(fromString.events)
        expect(inPlace.deriveMessages()).toHaveLength(messages.length)
      }),
      { numRuns: 30 },
    )
  })
})
