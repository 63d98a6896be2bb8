// Stale temporary files (issue 10): a first append writes `<name>.jsonl.tmp`
// and publishes it with a hard link. One left by a killed first append is
// removed by the next writer of that session (it holds the session's lease,
// so no live writer can be writing it), never by a reader.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { asEvents, header, JsonlSessionStore, tempDir, turns } from './fixtures-crash/stores.js'

const cleanup: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

function setup(label: string) {
  const dir = tempDir(label)
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  const make = () => {
    const s = new JsonlSessionStore({ root: dir })
    cleanup.push(() => s.close())
    return s
  }
  const bucket = path.join(dir, '_no-cwd')
  fs.mkdirSync(bucket, { recursive: true })
  return { dir, bucket, make }
}

const HALF_WRITTEN = '{"type":"session","version":0,"id":"t","createdAt":1}\n{"type":"turn/st'

describe('jsonl store: stale temporary files', () => {
  it('the first append of a session removes the temporary file a killed first append left', async () => {
    const { bucket, make } = setup('tmp-first')
    fs.writeFileSync(path.join(bucket, 't.jsonl.tmp'), HALF_WRITTEN)
    const store = make()
    await store.create(header('t'))
    await store.append('t', asEvents(turns(1)))
    expect(fs.readdirSync(bucket)).toEqual(['t.jsonl'])
    expect((await make().load('t')).events).toEqual(turns(1))
  })

  it('the writer\'s load removes one left beside a published log', async () => {
    const { bucket, make } = setup('tmp-published')
    const writer = make()
    await writer.create(header('t'))
    await writer.append('t', asEvents(turns(1)))
    await writer.close()
    // Killed between the hard link and the unlink.
    fs.copyFileSync(path.join(bucket, 't.jsonl'), path.join(bucket, 't.jsonl.tmp'))
    const before = fs.readFileSync(path.join(bucket, 't.jsonl'))
    const store = make()
    expect((await store.load('t', { write: true })).events).toEqual(turns(1))
    expect(fs.readdirSync(bucket)).toEqual(['t.jsonl'])
    expect(fs.readFileSync(path.join(bucket, 't.jsonl'))).toEqual(before)
  })

  it('a reader of a session another store holds leaves its temporary file alone', async () => {
    const { bucket, make } = setup('tmp-reader')
    const writer = make()
    await writer.create(header('t'))
    await writer.append('t', asEvents(turns(1)))
    fs.writeFileSync(path.join(bucket, 't.jsonl.tmp'), HALF_WRITTEN)
    expect((await make().load('t')).events).toEqual(turns(1))
    expect(fs.readdirSync(bucket).sort()).toEqual(['t.jsonl', 't.jsonl.tmp'])
    // Nor does it list or load as a session.
    expect((await make().list()).map((h) => h.id)).toEqual(['t'])
  })
})
