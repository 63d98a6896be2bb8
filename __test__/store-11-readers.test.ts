// Readers never write (issue 10): a load, an open or the CLI's read commands
// on a session another writer holds return the repaired view in memory and
// leave storage as it was; `dsh-session repair` refuses while it is held and
// makes the repair durable once the holder is gone.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { cli } from './cli-helpers.js'
import { type Holder, spawnHolder } from './fixtures-crash/holder.js'
import { interruptedTurnClosers, asEvents, pgDump, pgSchema, rejection, sqliteTool, STORES, tempDir, turnBatches, type SessionStore } from './fixtures-crash/stores.js'

const cleanup: (() => Promise<void> | void)[] = []
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f()
})

async function heldSession(kind: 'jsonl' | 'sqlite' | 'postgres', label: string): Promise<{ dir: string; h: Holder }> {
  const dir = tempDir(label)
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }))
  const h = await spawnHolder(kind, dir, 'live')
  cleanup.push(() => {
    if (h.child.exitCode === null && h.child.signalCode === null) return h.kill()
  })
  // One finished turn, then a turn that is still running.
  await h.order('turn')
  await h.order('open-turn')
  return { dir, h }
}

function storeIn(make: (dir: string) => SessionStore, dir: string): SessionStore {
  const s = make(dir)
  cleanup.push(() => s.close())
  return s
}

/** What a reader must leave alone: the log's bytes and mtime, or the session's rows. */
function snapshot(kind: 'jsonl' | 'sqlite' | 'postgres', dir: string): unknown {
  // PostgreSQL: the session's rows and its lease row (a reader takes no lease).
  if (kind === 'postgres') return pgDump(dir, 'live')
  if (kind === 'jsonl') {
    const file = path.join(dir, '_no-cwd', 'live.jsonl')
    return { bytes: fs.readFileSync(file, 'latin1'), mtime: fs.statSync(file).mtimeMs }
  }
  return sqliteTool(path.join(dir, 'sessions.db'), { op: 'dump', id: 'live' })
}

/** The PostgreSQL store of `dir` as a CLI address (its schema), without a session. */
function pgAddress(dir: string): string {
  const url = new URL(process.env.DSH_TEST_PG_URL ?? 'postgres://unset')
  url.searchParams.set('schema', pgSchema(dir))
  return url.toString()
}

const ADDRESS: Record<string, (dir: string) => string> = {
  postgres: (dir: string) => `${pgAddress(dir)}#live`,
  jsonl: (dir: string) => path.join(dir, '_no-cwd', 'live.jsonl'),
  sqlite: (dir: string) => `sqlite:${path.join(dir, 'sessions.db')}#live`,
}

for (const { kind, make } of STORES) {
  describe(`${kind} store: a reader of a live session`, () => {
    it('load and open return the running turn closed in memory and write nothing', async () => {
      const { dir, h } = await heldSession(kind, `${kind}-reader`)
      const before = snapshot(kind, dir)
      const closers = interruptedTurnClosers(asEvents(h.acked))
      expect(closers.length).toBeGreaterThan(0)
      const reader = storeIn(make, dir)
      expect((await reader.load('live')).events).toEqual([...h.acked, ...closers])
      expect((await reader.open('live')).events).toEqual([...h.acked, ...closers])
      await reader.close()
      expect(snapshot(kind, dir)).toEqual(before)
      // The writer finishes its turn where it left off: nothing a reader did
      // is in its way, and every acknowledged event loads back, balanced.
      expect((await h.order('finish')).error).toBeUndefined()
      expect((await h.order('turn')).error).toBeUndefined()
      await h.order('close')
      expect((await storeIn(make, dir).load('live')).events).toEqual(h.acked)
    })

    it('the CLI inspect and check of a live session write nothing; repair refuses with the session in use', async () => {
      const { dir, h } = await heldSession(kind, `${kind}-cli-reader`)
      const before = snapshot(kind, dir)
      const address = ADDRESS[kind](dir)
      const inspect = await cli(['inspect', address])
      expect(inspect.code).toBe(0)
      const check = await cli(['check', address])
      // In use (its lease is held: the open turn is live, not torn); a PostgreSQL lease is not seen, so: needs repair.
      expect(check.code).toBe(kind === 'postgres' ? 2 : 3)
      for (const args of [['derive', address, '--repaired'], ['surface', address, '--repaired'], ['repair', address, '--dry-run'],
        ['list', kind === 'jsonl' ? dir : kind === 'postgres' ? pgAddress(dir) : `sqlite:${path.join(dir, 'sessions.db')}`],
        ['convert', address, kind === 'jsonl' ? `sqlite:${path.join(dir, 'copy.db')}#live` : path.join(dir, 'copy.jsonl')]]) {
        expect((await cli(args)).code, args.join(' ')).toBe(0)
      }
      const repair = await cli(['repair', address])
      expect(repair.code).toBe(1)
      expect(repair.stderr).toContain('session "live" is in use')
      expect(repair.stderr).toContain(`held by process ${h.pid}`)
      expect(snapshot(kind, dir)).toEqual(before)
      expect((await h.order('finish')).error).toBeUndefined()
      await h.order('close')
      expect((await storeIn(make, dir).load('live')).events).toEqual(h.acked)
    })

    it('repair makes the repair durable once the holder is killed', async () => {
      const { dir, h } = await heldSession(kind, `${kind}-cli-repair-dead`)
      await h.kill()
      const address = ADDRESS[kind](dir)
      const repair = await cli(['repair', address])
      expect(repair.code).toBe(0)
      expect(repair.stdout).toContain('repaired')
      expect((await cli(['check', address])).code).toBe(0)
      const closers = interruptedTurnClosers(asEvents(h.acked))
      expect((await storeIn(make, dir).load('live')).events).toEqual([...h.acked, ...closers])
    })

    it('a store that cannot take the lease never makes a repair durable, even on its first append', async () => {
      const { dir, h } = await heldSession(kind, `${kind}-reader-append`)
      const before = snapshot(kind, dir)
      const reader = storeIn(make, dir)
      const view = await reader.load('live')
      const refused = await rejection(reader.append('live', asEvents(turnBatches(3, view.events.length).flat())))
      expect(refused.code).toBe('SESSION_IN_USE')
      expect(snapshot(kind, dir)).toEqual(before)
    })
  })
}
