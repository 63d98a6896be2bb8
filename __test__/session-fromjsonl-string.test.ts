// Session.fromJsonl of a string: a long one reaches the native log a part at
// a time (1 MiB of UTF-16 per part, encoded with encodeInto, regrouped
// natively into pieces of whole lines), and the log is read on native
// threads while JS parses the surface payloads. Whatever falls on a cut,
// the result is the one the same log's UTF-8 bytes give.
import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'
import { catchError, isDeepFrozen, newSession, PROV, stateOf, USER } from './spec-helpers.js'

/** UTF-16 units per part the string path encodes (JSONL_PIECE in lib/core/session.js). */
const PART = 1 << 20
const HEADER = JSON.stringify({ type: 'session', version: 0, id: 's', createdAt: 1 })

const userLine = (seq: number, text: string, eol = '\n') =>
  `{"type":"user/message","seq":${seq},"time":1,"data":{"content":[{"type":"text","text":"${text}"}],"source":{"kind":"user"}},"surfaceOp":"append"}${eol}`
const assistantLine = (seq: number, text: string, eol = '\n') =>
  `${JSON.stringify({ type: 'assistant/message', seq, time: 1, data: { content: [{ type: 'text', text }], provenance: PROV }, surfaceOp: 'append' })}${eol}`

/**
 * A log of about `length` UTF-16 units whose user message `at` (in units)
 * holds `special` so that it starts exactly at the unit `at`; lines end in
 * CRLF every third line.
 */
function logWith(length: number, at: number, special: string): string {
  let out = `${HEADER}\n`
  let seq = 0
  let placed = special === ''
  const filler = 'lorem ipsum dolor sit amet, '.repeat(40)
  while (out.length < length) {
    const eol = seq % 3 === 0 ? '\r\n' : '\n'
    const line = seq % 2 === 0 ? userLine(seq, filler, eol) : assistantLine(seq, filler, eol)
    const start = out.length + userLine(seq, '').indexOf('"}],')
    if (!placed && start + line.length > at) {
      // This message holds `special` from unit `at` on.
      out += userLine(seq, `${'x'.repeat(at - start)}${special}`, eol)
      placed = true
    } else {
      out += line
    }
    seq += 1
  }
  return out
}

/** What a session read from `input` shows, or the error reading it threw. */
function outcome(input: string | Buffer) {
  try {
    return stateOf(Session.fromJsonl(input))
  } catch (error) {
    const e = error as Error & { code?: string; line?: number }
    return { message: e.message, code: e.code, line: e.line }
  }
}

const expectSameAsBytes = (text: string) => {
  const fromString = outcome(text)
  expect(fromString).toEqual(outcome(Buffer.from(text, 'utf8')))
  return fromString
}

describe('Session.fromJsonl of a long string (read in parts)', () => {
  const cases: [string, number, string][] = [
    ['a surrogate pair across the first cut', PART - 1, '😀😀'],
    ['a surrogate pair right after the first cut', PART, '😀'],
    ['two- and three-byte characters around the first cut', PART - 2, 'é中é中'],
    ['a surrogate pair across the second cut', 2 * PART - 1, '😀'],
    ['an escaped quote and backslash across the first cut', PART - 2, '\\"\\\\'],
  ]

  it.each(cases)('reads as the same UTF-8 bytes do with %s', (_name, at, special) => {
    const text = logWith(2 * PART + 50_000, at, special)
    expect(text.slice(at, at + special.length)).toBe(special)
    const state = expectSameAsBytes(text)
    expect(state.events.length).toBeGreaterThan(1000)
    expect(state.messages.length).toBe(state.events.length)
  })

  it('reads CRLF line ends and blank lines at the end as the bytes do', () => {
    const text = logWith(PART + 10_000, 0, '')
    expect(text).toContain('\r\n')
    const state = expectSameAsBytes(`${text}\n\r\n  \n`)
    expect(state.jsonl).toBe(text.replaceAll('\r\n', '\n'))
  })

  it('turns a lone surrogate into U+FFFD, as Buffer.from does, wherever it falls', () => {
    for (const [at, lone] of [[PART - 1, '\uD83D'], [PART, '\uDE00'], [PART + 3, 'a\uDE00\uD83D']] as const) {
      const text = logWith(PART + 20_000, at, lone)
      const state = expectSameAsBytes(text)
      expect(JSON.stringify(state.events)).toContain('\uFFFD')
    }
  })

  it('names the line of a torn, blank or invalid line after a cut', () => {
    const text = logWith(2 * PART + 50_000, 0, '')
    const lines = text.split(/(?<=\n)/)
    // The first line past each cut, and the one just before it.
    let units = 0
    const past: number[] = []
    lines.forEach((line, i) => {
      if (units < PART && units + line.length >= PART) past.push(i - 1, i)
      if (units < 2 * PART && units + line.length >= 2 * PART) past.push(i - 1, i)
      units += line.length
    })
    for (const i of past) {
      // Torn, blank, and a seq out of order.
      for (const [bad, code] of [
        [lines[i].slice(0, 40), 'CORRUPT_LOG'],
        ['\n', 'CORRUPT_LOG'],
        [lines[i].replace('"seq":', '"seq":9'), undefined],
      ] as const) {
        const broken = [...lines.slice(0, i), bad.endsWith('\n') ? bad : `${bad}\n`, ...lines.slice(i + 1)].join('')
        const error = catchError(() => Session.fromJsonl(broken)) as Error & { code?: string; line?: number }
        expect(error.line).toBe(i + 1)
        expect(typeof error.code).toBe('string')
        if (code !== undefined) expect(error.code).toBe(code)
        expect(outcome(broken)).toEqual(outcome(Buffer.from(broken, 'utf8')))
      }
    }
  })

  it('reads a log smaller than one part, and an empty one, as the bytes do', () => {
    const short = logWith(20_000, 5_000, 'é😀')
    expect(short.length).toBeLessThan(PART)
    expect(expectSameAsBytes(short).events.length).toBeGreaterThan(5)
    expectSameAsBytes('')
    expectSameAsBytes(`${HEADER}\n`)
    expectSameAsBytes(`${HEADER}\n${userLine(0, 'x')}{"type":`)
  })
})

describe('the first deriveMessages() after Session.fromJsonl', () => {
  /** `cycles` of three user messages, each cycle ending with a replace of the whole surface. */
  function compacted(cycles: number, pad: string): Session {
    const s = new Session('c')
    let nodes: number[] = []
    for (let c = 0; c < cycles; c++) {
      for (let k = 0; k < 3; k++) {
        nodes.push(s.seq)
        s.append('user/message', { content: [{ type: 'text', text: `${c}.${k} ${pad}` }], source: USER }, { surfaceOp: 'append' })
      }
      const seq = s.seq
      s.append(
        'user/message',
        { content: [{ type: 'text', text: `summary ${c}` }], source: USER },
        { surfaceOp: { op: 'replace', start: nodes[0], end: nodes[nodes.length - 1] }, sourceEventSeqs: nodes },
      )
      nodes = [seq]
    }
    return s
  }

  it.each([
    ['a long log', () => Session.fromJsonl(logWith(PART + 10_000, 0, ''))],
    ['a log whose surface was replaced hundreds of times', () => compacted(700, 'p'.repeat(400))],
  ])('equals a fresh seed of %s, sharing the events\u2019 frozen content', (_name, make) => {
    const source = make()
    const text = source.toJsonl()
    for (const input of [text, Buffer.from(text)]) {
      const resumed = Session.fromJsonl(input)
      const messages = resumed.deriveMessages()
      const seeded = newSession(resumed.id, JSON.parse(JSON.stringify(resumed.events)))
      expect(messages).toEqual(seeded.deriveMessages())
      expect(messages.every((m) => isDeepFrozen(m))).toBe(true)
      const nodes = resumed.surface.nodes
      const events = resumed.events
      messages.forEach((m, i) => {
        expect(m.content).toBe((events[nodes[i]].data as { content: unknown }).content)
      })
      expect(isDeepFrozen(events)).toBe(true)
    }
  })
})
