// A log of any size as JSONL (issue 21): `toJsonl()` gives a string up to
// what a JavaScript string can hold and a coded TOO_LARGE past it (the limit
// is lowered here: a real 512 MiB log is not needed to cross it);
// `writeJsonl(path)` writes the same bytes to a file, whatever the size,
// off the event loop.

import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import * as api from '../index.js'
import { Session } from '../index.js'
import { asEvents, turnBatches, turns } from './fixtures-crash/stores.js'

type Internal = { limits: { stringLimit: number } }
const limits = (api as unknown as Record<symbol, Internal>)[Symbol.for('dsh-session-native.internal')].limits
const LIMIT = limits.stringLimit

const dirs: string[] = []
afterEach(() => {
  limits.stringLimit = LIMIT
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

function tmp(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-jsonl-size-'))
  dirs.push(dir)
  return dir
}

/** A session of `n` turns resumed from text, then `live` more turns appended. */
function mixed(n: number, live: number): Session {
  const s = Session.fromJsonl(new Session('m', asEvents(turns(n))).toJsonl())
  for (let t = 1; t <= live; t++) {
    for (const e of turnBatches(n + t, s.seq).flat()) {
      const opts = e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
      ;(s.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
    }
  }
  return s
}

describe('JSONL of any size', () => {
  it('toJsonl() past the string limit throws TOO_LARGE naming the way that works, whichever part crosses it', () => {
    const s = mixed(3, 3)
    const text = s.toJsonl()
    const native = Session.fromJsonl(text)
    for (const [session, limit] of [[native, 100], [s, text.length - 1], [s, 100]] as const) {
      limits.stringLimit = limit
      let caught: { code?: string; message?: string } | undefined
      try {
        session.toJsonl()
      } catch (error) {
        caught = error as { code?: string; message?: string }
      }
      expect(caught?.code).toBe('TOO_LARGE')
      expect(caught?.message).toMatch(/^session "m": its JSONL .*is longer than a JavaScript string can hold; write it to a file with session\.writeJsonl\(path\) instead$/)
    }
    limits.stringLimit = text.length
    expect(s.toJsonl()).toBe(text)
  })

  it('writeJsonl(path) writes the bytes toJsonl() gives, for live, resumed, seeded and mixed sessions', async () => {
    const dir = tmp()
    const live = new Session('l')
    for (const e of turns(4)) {
      const opts = e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
      ;(live.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
    }
    const sessions = [live, mixed(5, 0), new Session('s', asEvents(turns(6))), mixed(4, 5000 / 9)]
    for (const [i, s] of sessions.entries()) {
      const file = path.join(dir, `${i}.jsonl`)
      const text = s.toJsonl()
      expect(await s.writeJsonl(file)).toBe(Buffer.byteLength(text))
      expect(fs.readFileSync(file, 'utf8')).toBe(text)
      expect(Session.fromJsonl(fs.readFileSync(file)).events).toEqual(s.events)
    }
  })

  it('writes the events at the call, and rejects with a code when the file cannot be made', async () => {
    const dir = tmp()
    const s = mixed(2, 1)
    const at = s.toJsonl()
    const written = s.writeJsonl(path.join(dir, 'at-call.jsonl'))
    for (const e of turnBatches(9, s.seq).flat()) {
      const opts = e.surfaceOp === undefined ? [] : [{ surfaceOp: e.surfaceOp, sourceEventSeqs: e.sourceEventSeqs }]
      ;(s.append as (...a: unknown[]) => unknown)(e.type, e.data, ...opts)
    }
    await written
    expect(fs.readFileSync(path.join(dir, 'at-call.jsonl'), 'utf8')).toBe(at)
    await expect(s.writeJsonl(path.join(dir, 'missing', 'x.jsonl'))).rejects.toMatchObject({ code: 'IO', errno: os.constants.errno.ENOENT })
    await expect(s.writeJsonl('' as string)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' })
  })
})
