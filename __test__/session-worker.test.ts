// The addon loads in a worker_threads worker (its own napi env), as napi-rs
// projects check, and works there while the main thread also uses it.

import * as path from 'node:path'
import { Worker } from 'node:worker_threads'
import { describe, expect, it } from 'vitest'
import { Session } from '../index.js'

const INDEX = path.resolve(__dirname, '../index.js')

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const { Session, deriveEventMessage } = require(workerData.index)
const s = new Session('in-worker')
s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
for (let i = 0; i < workerData.users; i++) {
  s.append('user/message', { content: [{ type: 'text', text: 'u' + i }], source: { kind: 'user' } }, { surfaceOp: 'append' })
}
s.append('context/message', { content: [{ type: 'text', text: 'summary' }], source: { kind: 'compaction' } }, {
  surfaceOp: { op: 'replace', start: 1, end: 2 },
  sourceEventSeqs: [1, 2],
})
const copy = Session.fromJsonl(s.toJsonl())
parentPort.postMessage({
  count: s.deriveMessages().length,
  nodes: [...s.surface.nodes],
  copyCount: copy.deriveMessages().length,
  first: deriveEventMessage(s.events[1]),
})
`

function runWorker(users: number): Promise<{ count: number; nodes: number[]; copyCount: number; first: unknown }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { eval: true, workerData: { index: INDEX, users } })
    worker.once('message', (message) => {
      resolve(message)
      void worker.terminate()
    })
    worker.once('error', reject)
    worker.once('exit', (code) => {
      if (code !== 0 && code !== 1) reject(new Error(`worker exited with ${code}`))
    })
  })
}

describe('worker_threads', () => {
  it('loads the addon in a worker, appends and derives there', async () => {
    const result = await runWorker(4)
    expect(result).toEqual({
      count: 3,
      nodes: [5, 3, 4],
      copyCount: 3,
      first: { role: 'user', content: [{ type: 'text', text: 'u0' }] },
    })
  })

  it('keeps working on the main thread beside workers', async () => {
    const s = new Session('main')
    s.append('turn/start', { turn: 1, trigger: { kind: 'message', source: { kind: 'user' } } })
    const [a, b] = await Promise.all([runWorker(2), runWorker(5)])
    s.append('user/message', { content: [{ type: 'text', text: 'main' }], source: { kind: 'user' } }, { surfaceOp: 'append' })
    expect(a.count).toBe(1)
    expect(b.count).toBe(4)
    expect(s.deriveMessages()).toEqual([{ role: 'user', content: [{ type: 'text', text: 'main' }] }])
  })
})
