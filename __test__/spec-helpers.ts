// Shared builders and assertions for the SPEC test files (not a test file itself).

import * as fs from 'node:fs'
import * as path from 'node:path'
import { expect } from 'vitest'
import { Session, type SessionEvent } from '../index.js'

/** The conformance fixtures: the repository's copy of `../shared/fixtures` (`npm run refresh-shared`). */
export const FIXTURES = path.resolve(__dirname, '../test-data/fixtures')

export const USER = { kind: 'user' } as const
export const PROV = { provider: 'deepseek', model: 'deepseek-chat' }
export const HEADER = { config: { provider: 'deepseek', model: 'deepseek-chat' } }
export const T0 = 1_760_000_000_000

export function text(t: string): { type: 'text'; text: string }[] {
  return [{ type: 'text', text: t }]
}

/** A raw event record, as a seed or a JSONL line holds it. */
export type RawEvent = {
  type: string
  seq: number
  time: number
  data: unknown
  surfaceOp?: unknown
  sourceEventSeqs?: unknown
}

export function ev(seq: number, type: string, data: unknown, extra: Record<string, unknown> = {}): RawEvent {
  return { type, seq, time: T0 + seq, data, ...extra }
}

/** The untyped append, for calls the typed overloads forbid on purpose. */
export function appendAny(s: Session, ...args: unknown[]): SessionEvent {
  return (s.append as unknown as (...a: unknown[]) => SessionEvent).apply(s, args)
}

/** The untyped constructor, for arguments the types forbid on purpose. */
export function newSession(...args: unknown[]): Session {
  return new (Session as unknown as new (...a: unknown[]) => Session)(...args)
}

/**
 * A balanced two-turn log: user, assistant with a tool call, the call, its
 * result, a final answer; then a context message turn.
 *
 *  0 turn/start        6 tool/result (append, [5])   12 turn/start
 *  1 user/message      7 step/end                    13 context/message
 *  2 step/start        8 step/start                  14 turn/end
 *  3 request/header    9 assistant/message
 *  4 assistant/message 10 step/end
 *  5 tool/call         11 turn/end
 */
export function basicLog(): RawEvent[] {
  return [
    ev(0, 'turn/start', { turn: 1, trigger: { kind: 'message', source: USER } }),
    ev(1, 'user/message', { content: text('q1'), source: USER }, { surfaceOp: 'append' }),
    ev(2, 'step/start', { turn: 1, step: 1 }),
    ev(3, 'request/header', { header: HEADER, reason: 'initial' }),
    ev(
      4,
      'assistant/message',
      {
        turn: 1,
        step: 1,
        content: [...text('a1'), { type: 'tool-call', id: 'c1', name: 'read', arguments: '{"path":"a"}' }],
        provenance: PROV,
      },
      { surfaceOp: 'append' },
    ),
    ev(5, 'tool/call', { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{"path":"a"}' }),
    ev(
      6,
      'tool/result',
      { turn: 1, step: 1, callId: 'c1', content: text('r1'), isError: false },
      { surfaceOp: 'append', sourceEventSeqs: [5] },
    ),
    ev(7, 'step/end', { turn: 1, step: 1 }),
    ev(8, 'step/start', { turn: 1, step: 2 }),
    ev(9, 'assistant/message', { turn: 1, step: 2, content: text('a2'), provenance: PROV }, { surfaceOp: 'append' }),
    ev(10, 'step/end', { turn: 1, step: 2 }),
    ev(11, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
    ev(12, 'turn/start', { turn: 2, trigger: { kind: 'injection', source: { kind: 'cron' } } }),
    ev(13, 'context/message', { content: text('tick'), source: { kind: 'cron' } }, { surfaceOp: 'append' }),
    ev(14, 'turn/end', { turn: 2, reason: { kind: 'completed' } }),
  ]
}

/** A live session with a few surface nodes: seqs 0 (turn/start), 1..4 user messages u0..u3. */
export function sessionWithUsers(n = 4, id = 's'): Session {
  const s = new Session(id)
  s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: USER } })
  for (let i = 0; i < n; i++) s.append('user/message', { content: text(`u${i}`), source: USER }, { surfaceOp: 'append' })
  return s
}

export type ThrownError = Error & { code?: unknown; line?: unknown }

/** Run `fn`, require it to throw an Error, and return the error. */
export function catchError(fn: () => unknown): ThrownError {
  let caught: unknown
  let threw = false
  try {
    fn()
  } catch (error) {
    threw = true
    caught = error
  }
  expect(threw, 'expected the call to throw').toBe(true)
  expect(caught).toBeInstanceOf(Error)
  return caught as ThrownError
}

/**
 * Require `fn` to throw an Error whose message is exactly `message` (or
 * matches the anchored RegExp), whose `code` is a non-empty string, and
 * equal to `code` when given.
 */
export function expectError(fn: () => unknown, message: string | RegExp, code?: string): ThrownError {
  const error = catchError(fn)
  if (typeof message === 'string') expect(error.message).toBe(message)
  else expect(error.message).toMatch(message)
  expect(typeof error.code).toBe('string')
  expect(error.code).not.toBe('')
  if (code !== undefined) expect(error.code).toBe(code)
  return error
}

/** Everything observable about a session, as plain JSON. */
export function stateOf(s: Session) {
  return JSON.parse(
    JSON.stringify({
      id: s.id,
      header: s.header,
      seq: s.seq,
      events: s.events,
      nodes: s.surface.nodes,
      replaceGeneration: s.surface.replaceGeneration,
      messages: s.deriveMessages(),
      requestHeader: s.requestHeader() ?? null,
      jsonl: s.toJsonl(),
    }),
  )
}

/**
 * Require `fn` to throw (exactly `message` when given) and leave the session
 * exactly as it was: same values, same `events` array (no append happened),
 * same surface object and live `nodes` array.
 */
export function expectRejectedWithoutChange(
  s: Session,
  fn: () => unknown,
  message?: string | RegExp,
  code?: string,
): ThrownError {
  const before = stateOf(s)
  const events = s.events
  const surface = s.surface
  const nodes = s.surface.nodes
  const error = message === undefined ? catchError(fn) : expectError(fn, message, code)
  expect(s.events).toBe(events)
  expect(s.surface).toBe(surface)
  expect(s.surface.nodes).toBe(nodes)
  expect(stateOf(s)).toEqual(before)
  return error
}

/** Whether `value` and everything reachable from it is frozen. */
export function isDeepFrozen(value: unknown, seen = new Set<unknown>()): boolean {
  if (value === null || typeof value !== 'object') return true
  if (seen.has(value)) return true
  seen.add(value)
  if (!Object.isFrozen(value)) return false
  return Object.values(value as object).every((v) => isDeepFrozen(v, seen))
}

// ---------------------------------------------------------------- fixtures

export interface Manifest {
  logs: string[]
  load: string[]
  invalidSeeds: { name: string; seed: unknown[]; error: string }[]
}

export function manifest(): Manifest {
  return JSON.parse(fs.readFileSync(path.join(FIXTURES, 'manifest.json'), 'utf8'))
}

export function logPath(name: string): string {
  return name.startsWith('real/') ? path.join(FIXTURES, `${name}.jsonl`) : path.join(FIXTURES, 'logs', `${name}.jsonl`)
}

export function expectedPath(name: string): string {
  return name.startsWith('real/')
    ? path.join(FIXTURES, 'expected', `real-${name.slice('real/'.length)}.json`)
    : path.join(FIXTURES, 'expected', `${name}.json`)
}

export interface ParsedLog {
  text: string
  header: Record<string, unknown> & { type: 'session'; id: string }
  events: RawEvent[]
}

export function readLog(name: string): ParsedLog {
  const text = fs.readFileSync(logPath(name), 'utf8')
  const lines = text.split('\n').filter((l) => l !== '')
  const header = JSON.parse(lines[0])
  const events = lines.slice(1).map((l) => JSON.parse(l))
  return { text, header, events }
}

export type Expected =
  | { ok: false; error: string }
  | {
      ok?: true
      eventCount: number
      surface: { nodes: number[]; replaceGeneration: number }
      replacements: unknown[]
      messages: unknown[]
      requestHeader: unknown
      closers: unknown[]
    }

export function readExpected(name: string): Expected {
  return JSON.parse(fs.readFileSync(expectedPath(name), 'utf8'))
}

/** Everything observable about a session but its id and header, compared across representations. */
export function observe(s: Session) {
  const state = stateOf(s)
  delete state.id
  delete state.header
  state.jsonl = state.jsonl.slice(state.jsonl.indexOf('\n') + 1)
  return state
}

/** The session equals a fresh seed of its events and a fromJsonl of its log. */
export function expectEqualsFreshCopies(s: Session): void {
  const expected = observe(s)
  expect(observe(new Session('seeded', s.events, { version: 0, id: 'seeded' as never, createdAt: 1 }))).toEqual(expected)
  expect(observe(Session.fromJsonl(s.toJsonl()))).toEqual(expected)
}

/**
 * Replace the surface nodes at positions picked by `a` and `b` (any
 * naturals) with one user message: a compaction, as a generator drives it.
 */
export function replaceSomeNodes(s: Session, a: number, b: number): void {
  const nodes = s.surface.nodes
  if (nodes.length === 0) return
  const i = a % nodes.length
  const j = i + (b % (nodes.length - i))
  s.append('user/message', { content: [{ type: 'text', text: 'summary' }] as never, source: USER }, {
    surfaceOp: { op: 'replace', start: nodes[i], end: nodes[j] },
    sourceEventSeqs: nodes.slice(i, j + 1),
  })
}
