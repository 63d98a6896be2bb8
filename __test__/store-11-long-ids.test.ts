// Long ids (issue 10): an encoded id longer than 200 bytes names its JSONL
// file by its SHA-256 (`~~<64 hex>.jsonl`), the header keeping the full id,
// so every operation works end to end; shorter ids keep their literal names.

import { createHash } from 'node:crypto'
import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { asEvents, header, JsonlSessionStore, Session, STORES, turnBatches, turns, type SessionStore, testCleanup } from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()

function storeIn(make: (dir: string) => SessionStore, dir: string): SessionStore {
  const s = make(dir)
  cleanup.push(() => s.close())
  return s
}

// 300 ASCII bytes; 120 units that encode to 600 bytes; 60 astral characters
// (120 units); and the longest literal name, 200 bytes.
const LONG = ['a'.repeat(300), 'é'.repeat(120), '😀'.repeat(60), 'b'.repeat(200)]

for (const { kind, make } of STORES) {
  describe(`${kind} store: long ids`, () => {
    it('creates, appends, loads, opens, flushes and lists long ids', async () => {
      const dir = dirFor(`${kind}-long`)
      const store = storeIn(make, dir)
      for (const [i, id] of LONG.entries()) {
        await store.create(header(id, { createdAt: 1 + i }))
        await store.append(id, asEvents(turns(1)))
        expect((await store.load(id)).events).toEqual(turns(1))
      }
      const flushed = new Session('f'.repeat(400), asEvents(turns(2)), header('f'.repeat(400), { createdAt: 9 }))
      expect(await store.flush(flushed)).toBe(18)
      await store.close()
      const again = storeIn(make, dir)
      expect((await again.list()).map((h) => h.id)).toEqual([...LONG, 'f'.repeat(400)])
      for (const id of LONG) {
        const session = await again.open(id)
        expect(session.id).toBe(id)
        expect(session.events).toEqual(turns(1))
        await again.append(id, asEvents(turnBatches(2, 9).flat()))
      }
      expect((await again.load('f'.repeat(400))).events).toEqual(turns(2))
    })
  })
}

describe('jsonl store: long id file names', () => {
  it('names a long id by its hash, with the full id in the header, and every name under 255 bytes', async () => {
    const dir = dirFor('long-names')
    const store = new JsonlSessionStore({ root: dir })
    cleanup.push(() => store.close())
    for (const id of LONG) {
      await store.create(header(id))
      await store.append(id, asEvents(turns(1)))
    }
    const located = LONG.map((id) => store.locate(header(id)).path)
    const encoded = (id: string) => [...Array(id.length).keys()].map((i) => {
      const u = id.charCodeAt(i)
      return /[A-Za-z0-9._-]/.test(id[i]!) ? id[i] : `~${u.toString(16).toUpperCase().padStart(4, '0')}`
    }).join('')
    for (const [i, id] of LONG.entries()) {
      const name = path.basename(located[i]!)
      const e = encoded(id)
      if (e.length <= 200) expect(name).toBe(`${e}.jsonl`)
      else expect(name).toBe(`~~${createHash('sha256').update(e).digest('hex')}.jsonl`)
      const first = fs.readFileSync(located[i]!, 'utf8').split('\n')[0]!
      expect(JSON.parse(first).id).toBe(id)
    }
    await store.close()
    for (const name of [...fs.readdirSync(path.join(dir, '_no-cwd')), ...fs.readdirSync(path.join(dir, '.locks'))]) {
      expect(Buffer.byteLength(name)).toBeLessThanOrEqual(255)
    }
    expect(fs.readdirSync(path.join(dir, '_no-cwd')).every((n) => n.endsWith('.jsonl'))).toBe(true)
  })

  it('still finds a long id\'s log that an earlier build named literally', async () => {
    const dir = dirFor('long-literal')
    const id = 'c'.repeat(230)
    const bucket = path.join(dir, '_no-cwd')
    fs.mkdirSync(bucket, { recursive: true })
    const lines = [JSON.stringify({ type: 'session', ...header(id) }), ...turns(1).map((e) => JSON.stringify(e))]
    fs.writeFileSync(path.join(bucket, `${id}.jsonl`), `${lines.join('\n')}\n`)
    const store = new JsonlSessionStore({ root: dir })
    cleanup.push(() => store.close())
    expect((await store.list()).map((h) => h.id)).toEqual([id])
    expect((await store.load(id)).events).toEqual(turns(1))
    await store.append(id, asEvents(turnBatches(2, 9).flat()))
    expect(fs.readFileSync(path.join(bucket, `${id}.jsonl`), 'utf8').trimEnd().split('\n')).toHaveLength(19)
  })

  it('does not list a hashed file whose header names another id', async () => {
    const dir = dirFor('long-mismatch')
    const store = new JsonlSessionStore({ root: dir })
    cleanup.push(() => store.close())
    const id = 'd'.repeat(300)
    await store.create(header(id))
    await store.append(id, asEvents(turns(1)))
    const file = store.locate(header(id)).path
    const [, ...rest] = fs.readFileSync(file, 'utf8').split('\n')
    fs.writeFileSync(path.join(path.dirname(file), `~~${'0'.repeat(64)}.jsonl`), [JSON.stringify({ type: 'session', ...header('other') }), ...rest].join('\n'))
    expect((await store.list()).map((h) => h.id)).toEqual([id])
  })
})
