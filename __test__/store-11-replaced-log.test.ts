// A JSONL log renamed over, removed or changed under an open store (issue
// 10): the store compares the path's file with the one it has open before
// each write and refuses with LOG_REPLACED instead of writing into a file
// no load would read.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { asEvents, header, JsonlSessionStore, rejection, Session, tempDir, turnBatches, turns } from './fixtures-crash/stores.js'

const cleanup: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

/** A store holding session `s` (one turn) and the path of its log. */
async function open(label: string) {
  const dir = tempDir(label)
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  const store = new JsonlSessionStore({ root: dir })
  cleanup.push(() => store.close())
  await store.create(header('s'))
  await store.append('s', asEvents(turns(1)))
  const file = store.locate(header('s')).path
  // A second name for the file the store has open, to read it afterwards.
  const original = path.join(dir, 'original.keep')
  fs.linkSync(file, original)
  return { dir, store, file, original, stored: fs.readFileSync(file, 'utf8') }
}

const NEXT = turnBatches(2, 9).flat()

describe('jsonl store: a log replaced under an open store', () => {
  it('refuses to append after the log was renamed over, and writes neither file', async () => {
    const { dir, store, file, original, stored } = await open('replaced')
    const other = `${stored.split('\n')[0]}\n`
    fs.writeFileSync(path.join(dir, 'other.tmp'), other)
    fs.renameSync(path.join(dir, 'other.tmp'), file)
    const r = await rejection(store.append('s', asEvents(NEXT)))
    expect(r.code).toBe('LOG_REPLACED')
    expect(r.message).toBe(
      `session log "${file}" of session "s" was replaced by another file while this store had it open; nothing was written (load the session again)`,
    )
    expect(fs.readFileSync(file, 'utf8')).toBe(other)
    expect(fs.readFileSync(original, 'utf8')).toBe(stored)
    // A flush is refused the same way.
    const live = new Session('s', asEvents([...turns(1), ...NEXT]))
    expect((await rejection(store.flush(live))).code).toBe('LOG_REPLACED')
    // Loading again adopts the file now at the path, and writes go there.
    expect((await store.load('s')).events).toEqual([])
    await store.append('s', asEvents(turns(1)))
    expect((await new JsonlSessionStore({ root: dir }).load('s')).events).toEqual(turns(1))
  })

  it('refuses to append after the log was removed, and creates nothing', async () => {
    const { store, file, original, stored } = await open('removed')
    fs.unlinkSync(file)
    const r = await rejection(store.append('s', asEvents(NEXT)))
    expect(r.code).toBe('LOG_REPLACED')
    expect(r.message).toContain('was removed while this store had it open; nothing was written')
    expect(fs.existsSync(file)).toBe(false)
    expect(fs.readFileSync(original, 'utf8')).toBe(stored)
  })

  it('refuses the first append of a store that loaded the log as its writer before it was replaced or removed', async () => {
    const { dir, store, file } = await open('loaded')
    await store.close()
    for (const change of ['replace', 'remove'] as const) {
      const reader = new JsonlSessionStore({ root: dir })
      cleanup.push(() => reader.close())
      await reader.load('s', { write: true })
      const stored = fs.readFileSync(file, 'utf8')
      const kept = path.join(dir, `${change}.keep`)
      fs.renameSync(file, kept)
      if (change === 'replace') fs.writeFileSync(file, stored)
      const r = await rejection(reader.append('s', asEvents(NEXT)))
      expect(r.code).toBe('LOG_REPLACED')
      expect(r.message).toContain(change === 'replace' ? 'was replaced by another file' : 'was removed')
      expect(fs.readFileSync(kept, 'utf8')).toBe(stored)
      if (change === 'replace') expect(fs.readFileSync(file, 'utf8')).toBe(stored)
      else expect(fs.existsSync(file)).toBe(false)
      await reader.close()
      fs.renameSync(kept, file)
    }
  })

  it('refuses to append after the log was truncated outside the store', async () => {
    const { store, file, stored } = await open('truncated')
    const cut = stored.slice(0, stored.length - 40)
    fs.truncateSync(file, Buffer.byteLength(cut))
    const r = await rejection(store.append('s', asEvents(NEXT)))
    expect(r.code).toBe('LOG_REPLACED')
    expect(r.message).toContain(`was changed outside this store (it holds ${Buffer.byteLength(cut)} bytes, this store left ${Buffer.byteLength(stored)})`)
    expect(fs.readFileSync(file, 'utf8')).toBe(cut)
  })
})
