// A store's `open` hands the payloads of the events that enter the surface
// to JS while the log loads (binding `PayloadChannel`, fed by the load's
// fold as `Session.fromJsonl`'s read feeds its batches), so the warm after
// the load has little left to parse. What the session holds is the same
// as before: every open test (store-11-*, service-12-*) checks it; here,
// the hand-over itself and that the opened session equals a resumed one.
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { JsonlSessionStore, Session, SqliteSessionStore } from '../index.js'
import { text, USER } from './spec-helpers.js'

// eslint-disable-next-line @typescript-eslint/no-require-imports
const { NativeStore, PayloadChannel } = require('../binding.js')

const dirs: string[] = []
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })))

/** A session of `turns` turns, each a user message and a reply, with a compaction every 50 turns. */
function live(id: string, turns: number): Session {
  const s = new Session(id, [], { version: 0, id: id as never, createdAt: 1, cwd: '/w' })
  for (let t = 1; t <= turns; t++) {
    s.append('turn/start', { turn: t, trigger: { kind: 'message', source: USER } })
    s.append('user/message', { content: text(`question ${t} ${'q'.repeat(200)}`), source: USER }, { surfaceOp: 'append' })
    s.append('step/start', { turn: t, step: 1 })
    s.append('assistant/message', { turn: t, step: 1, content: text(`answer ${t}`), provenance: { provider: 'p', model: 'm' } }, { surfaceOp: 'append' })
    s.append('step/end', { turn: t, step: 1 })
    if (t % 50 === 0) {
      const nodes = s.surface.nodes
      s.append('context/message', { content: text(`summary to ${t}`), source: { kind: 'compaction' } }, {
        surfaceOp: { op: 'replace', start: nodes[0], end: nodes[nodes.length - 2] },
        sourceEventSeqs: nodes.slice(0, -1),
      })
    }
    s.append('turn/end', { turn: t, reason: { kind: 'completed' } })
  }
  return s
}

const kinds = [
  ['jsonl', (root: string) => new JsonlSessionStore({ root })],
  ['sqlite', (root: string) => new SqliteSessionStore({ path: path.join(root, 'sessions.db') })],
] as const

describe.each(kinds)('%s store: open hands surface payloads over while it loads', (kind, make) => {
  // 300 turns: every node the surface ever had is handed over. 2000 turns,
  // compacted 40 times: the hand-over stops once it sent more than twice
  // the surface's nodes plus 1024 (src/log/resume.rs), and the warm after
  // the load reads what it did not send.
  it.each([300, 2000])('%i turns: the channel gives batches of surface payloads, then null; the opened session is the live one', async (turns) => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `dsh-handing-${kind}-`))
    dirs.push(root)
    const source = live('handed', turns)
    const store = make(root)
    await store.flush(source)
    await store.close()
    // Through the binding: what the load hands over.
    const native = kind === 'jsonl' ? NativeStore.jsonl(root) : NativeStore.sqlite(path.join(root, 'sessions.db'), 'wal')
    const channel = new PayloadChannel()
    const opening = native.open('handed', channel)
    const seqs: number[] = []
    for (let batch = await channel.next(); batch !== null; batch = await channel.next()) {
      seqs.push(...batch.seqs)
      // `[type, data, type, data, ...]`, no string long enough to be lifted.
      const flat = JSON.parse(batch.json)
      expect(flat).toHaveLength(2 * batch.seqs.length)
      expect(batch.holes).toEqual([])
      batch.seqs.forEach((seq: number, k: number) => {
        expect(flat[2 * k]).toBe(source.events[seq].type)
        expect(flat[2 * k + 1]).toEqual(source.events[seq].data)
      })
    }
    await opening
    expect(await channel.next()).toBeNull()
    // In log order, speculatively (with nodes a compaction later dropped).
    expect(seqs.length).toBeGreaterThan(0)
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs)
    const nodes = source.surface.nodes
    if (turns === 300) {
      for (const node of nodes) expect(seqs).toContain(node)
    } else {
      expect(seqs.length).toBeGreaterThan(1024)
      expect(seqs.length).toBeLessThan(2 * 1024 + 4 * nodes.length)
      expect(nodes.some((node) => !seqs.includes(node))).toBe(true)
    }
    // Through the store: the session equals the live one.
    const again = make(root)
    const opened = await again.open('handed')
    expect(opened.deriveMessages()).toEqual(source.deriveMessages())
    expect(opened.toJsonl()).toBe(source.toJsonl())
    await again.close()
  })

  it('a channel no open took gives null at once; a failed open ends its channel', async () => {
    expect(await new PayloadChannel().next()).toBeNull()
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `dsh-handing-${kind}-`))
    dirs.push(root)
    const native = kind === 'jsonl' ? NativeStore.jsonl(root) : NativeStore.sqlite(path.join(root, 'sessions.db'), 'wal')
    const channel = new PayloadChannel()
    const refused = expect(native.open('missing', channel)).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
    expect(await channel.next()).toBeNull()
    await refused
  })
})
