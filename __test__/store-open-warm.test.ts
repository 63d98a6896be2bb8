// A store's `open` resolves a session whose surface payloads are parsed
// and derived already (`handle.warm` in lib/core/handle.js, a run of payloads per event-loop
// turn), so its first `deriveMessages()` only copies an array. The opened
// session equals the live one, compacted or not.
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { JsonlSessionStore, Session, SqliteSessionStore } from '../index.js'
import { text, USER } from './spec-helpers.js'

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

describe.each(kinds)('%s store: open derives the surface before it resolves', (kind, make) => {
  // 300 turns; 2000 turns, compacted 40 times, in many runs of payloads.
  it.each([300, 2000])('%i turns: the opened session is the live one', async (turns) => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `dsh-warm-${kind}-`))
    dirs.push(root)
    const source = live('warmed', turns)
    const store = make(root)
    await store.flush(source)
    await store.close()
    const again = make(root)
    const opened = await again.open('warmed')
    expect(opened.deriveMessages()).toEqual(source.deriveMessages())
    expect(opened.toJsonl()).toBe(source.toJsonl())
    await again.close()
  })

  it('an open of a missing session rejects', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), `dsh-warm-${kind}-`))
    dirs.push(root)
    const store = make(root)
    await expect(store.open('missing')).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
    await store.close()
  })
})
