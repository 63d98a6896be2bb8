// PUB 16: every published log (../shared/fixtures-published/logs, 169 of them;
// test-data/fixtures-published/logs when the repository holds a copy) loads
// with the package exactly as with the reference, @deepseek-ai/dsh-session@0.1.1-rc.2
// from test-published/, loaded live in this file: the same refusals with the same
// message, and for the 143 that load the same header, events, firstLiveSeq,
// surface nodes, derived messages (the log's own objects), request header and
// request context. Both sides load through test-published/fixture-load.mjs
// (fill {{cwd}}/{{sessionId}}, decodeStorageRecord per line,
// Session.fromRestore(header.id, events, header without type)).
// test-published/fixture-expect.json (scripts/published-fixture-expect.mjs) is
// checked against the live reference, so it stays true.
import { existsSync, readFileSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
// @ts-ignore -- plain JS
import * as load from '../test-published/fixture-load.mjs'
// @ts-ignore -- the reference tree
import * as ref from '../test-published/node_modules/@deepseek-ai/dsh-session/lib/index.js'

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..')
const pubEntry = path.join(root, 'published/lib/index.js')
const hasPub = existsSync(pubEntry)
// Imported only once it exists (published/ is being written).
const pub = hasPub ? await import(/* @vite-ignore */ pathToFileURL(pubEntry).href) : undefined

const logsDir = [
  path.resolve(root, '../shared/fixtures-published/logs'),
  path.join(root, 'test-data/fixtures-published/logs'),
].find(existsSync)

type Loaded = { header: Record<string, unknown>; decoded?: number; session?: any; error?: any }

/** Events past the decoded lines (the appended session/end-seed) carry the clock's time: compared without it. */
function withoutClock(events: readonly any[], decoded: number) {
  return events.map((e, i) => {
    if (i < decoded) return e
    const { time, ...rest } = e
    expect(Number.isSafeInteger(time)).toBe(true)
    return rest
  })
}

/** The thrown value's name, message and code (a drop-in throws the same). */
/** What callers match on: the class name and the message (ours adds a stable `code`, upstream's has none). */
function errorShape(error: any) {
  return { name: error?.name, message: String(error?.message ?? error) }
}

/** Each derived message is its surface node's own object, in node order (PUB 7 / 17; an empty assistant message derives none). */
function expectOwnObjects(session: any) {
  const projected = [...session.surface.nodes]
    .map((seq: number) => session.events[seq])
    .map((e: any) => (e.type === 'user/message' ? e.data : e.data.message))
  let next = 0
  for (const m of session.deriveMessages()) {
    while (next < projected.length && projected[next] !== m) next++
    expect(next, 'a derived message that is not a surface node\'s own object').toBeLessThan(projected.length)
    next++
  }
}

describe.skipIf(!hasPub)(`PUB 16: the published logs, package against the reference${hasPub ? '' : ' (skipped: published/lib/index.js does not exist yet)'}`, () => {
  it('finds the published logs (../shared/fixtures-published/logs)', () => {
    expect(logsDir, 'neither ../shared/fixtures-published/logs nor test-data/fixtures-published/logs exists').toBeDefined()
    expect(load.listLogs(logsDir)).toHaveLength(169)
  })
  if (logsDir === undefined) return
  const logs: string[] = load.listLogs(logsDir)

  it('the reference: 143 load, 12 lack version, 14 have v0-style messages (PUB 16)', () => {
    const kinds: Record<string, number> = {}
    for (const rel of logs) {
      const r: Loaded = load.loadLog(ref, load.readLog(logsDir, rel))
      const kind = r.error === undefined ? 'ok' : String(r.error.message).replace(/\d+/g, '<n>')
      kinds[kind] = (kinds[kind] ?? 0) + 1
    }
    expect(kinds).toEqual({
      ok: 143,
      'session header version must be <n>, got undefined': 12,
      'seed user/message at index <n> lacks an identified message': 14,
    })
  })

  it('test-published/fixture-expect.json is what the reference derives now', () => {
    const stored = JSON.parse(readFileSync(path.join(root, 'test-published/fixture-expect.json'), 'utf8'))
    const live: Record<string, unknown> = {}
    for (const rel of logs) live[rel] = load.summarize(load.loadLog(ref, load.readLog(logsDir, rel)))
    expect(stored.logs).toEqual(JSON.parse(JSON.stringify(live)))
  })

  describe.each(logs)('%s', (rel) => {
    it('loads (or is refused) as with the reference', () => {
      const text = load.readLog(logsDir, rel)
      const expected: Loaded = load.loadLog(ref, text)
      const actual: Loaded = load.loadLog(pub, text)
      if (expected.error !== undefined) {
        expect(actual.error, 'the reference refuses this log').toBeDefined()
        expect(errorShape(actual.error)).toEqual(errorShape(expected.error))
        expect(actual.error.code, 'our errors carry a stable code').toMatch(/^[A-Z_]+$/)
        return
      }
      if (actual.error !== undefined) throw actual.error
      const [a, e] = [actual.session, expected.session]
      expect(a.id).toBe(e.id)
      expect(a.header).toEqual(e.header)
      expect(a.events).toHaveLength(e.events.length)
      expect(actual.decoded).toBe(expected.decoded)
      expect(withoutClock(a.events, actual.decoded!)).toEqual(withoutClock(e.events, expected.decoded!))
      expect(a.firstLiveSeq).toBe(e.firstLiveSeq)
      expect([...a.surface.nodes]).toEqual([...e.surface.nodes])
      expect(a.deriveMessages()).toEqual(e.deriveMessages())
      expect(a.requestHeader()).toEqual(e.requestHeader())
      expect(a.requestContext()).toEqual(e.requestContext())
      expectOwnObjects(e)
      expectOwnObjects(a)
    })
  })
})
