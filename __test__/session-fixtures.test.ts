// Conformance with the reference implementation over every fixture log
// (/work/shared/fixtures, see its README): seeding and JSONL parsing must
// derive exactly what the reference derived.

import { describe, expect, it } from 'vitest'
import { foldSurface, interruptedTurnClosers, Session } from '../index.js'
import { expectError, manifest, newSession, readExpected, readLog, type Expected } from './spec-helpers.js'

const { logs } = manifest()

type Ok = Exclude<Expected, { ok: false }>

function expectMatches(s: Session, expected: Ok) {
  expect(s.events).toHaveLength(expected.eventCount)
  expect(s.seq).toBe(expected.eventCount)
  expect({ nodes: s.surface.nodes, replaceGeneration: s.surface.replaceGeneration }).toEqual(expected.surface)
  expect(s.deriveMessages()).toEqual(expected.messages)
  expect(s.requestHeader()).toEqual(expected.requestHeader ?? undefined)
  expect(foldSurface(s.events).replacements).toEqual(expected.replacements)
  expect(interruptedTurnClosers(s.events)).toEqual(expected.closers)
}

describe('fixture logs', () => {
  it('lists every fixture log', () => {
    expect(logs.length).toBeGreaterThanOrEqual(80)
  })

  describe.each(logs)('%s', (name) => {
    const log = readLog(name)
    const expected = readExpected(name)

    if (expected.ok === false) {
      const failure = expected
      it('fails to seed with the reference message', () => {
        expectError(() => newSession(log.header.id, log.events), failure.error)
      })
    } else {
      const ok = expected
      it('seeds to the reference surface, messages, header, replacements and closers', () => {
        const s = newSession(log.header.id, log.events)
        expectMatches(s, ok)
        expect(s.events).toEqual(log.events)
      })

      it('agrees with the free functions over the raw events', () => {
        expect(foldSurface(log.events as never)).toEqual({ nodes: ok.surface.nodes, replacements: ok.replacements })
        expect(interruptedTurnClosers(log.events as never)).toEqual(ok.closers)
      })
    }

    // Logs written before the header carried a version are read as v0 (the
    // fixtures expect them to parse); the published header says version 0.
    if (expected.ok === false) {
      const failure = expected
      it('fails to parse as JSONL with the reference message', () => {
        expectError(() => Session.fromJsonl(log.text), failure.error)
        expectError(() => Session.fromJsonl(Buffer.from(log.text)), failure.error)
      })
    } else {
      const ok = expected
      it('parses from JSONL text to the same result', () => {
        const s = Session.fromJsonl(log.text)
        expectMatches(s, ok)
        expect(s.events).toEqual(log.events)
        const { type: _type, ...header } = log.header
        expect(s.header).toEqual({ version: 0, ...header })
        expect(s.id).toBe(log.header.id)
      })

      it('parses from a Buffer to the same result', () => {
        const s = Session.fromJsonl(Buffer.from(log.text, 'utf8'))
        expectMatches(s, ok)
      })
    }
  })
})
