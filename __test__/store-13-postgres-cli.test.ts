// Issue 13: the `dsh-session` command addresses a session of a PostgreSQL
// store as postgres://…/db[?schema=name]#<session id> (inspect, check,
// derive, convert, list, repair), reading read-only; convert between JSONL,
// SQLite and PostgreSQL addresses gives identical events.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli } from './cli-helpers.js'
import { asEvents, header, PG_URL, pgDump, pgSchema, pgStore, turnBatches, turns, type AnyEvent, testCleanup } from './fixtures-crash/stores.js'

const { cleanup, dirFor } = testCleanup()

/** The store address of test directory `dir` (its own schema). */
function storeUrl(dir: string): string {
  const url = new URL(PG_URL!)
  url.searchParams.set('schema', pgSchema(dir))
  return url.toString()
}

const ID = 'c 1/é#x'
const encoded = encodeURIComponent(ID)

describe.skipIf(PG_URL === undefined)('issue 13: dsh-session with postgres:// addresses', () => {
  it('converts JSONL → PostgreSQL → SQLite → JSONL with identical events, and lists the session', async () => {
    const dir = dirFor('pg-cli-convert')
    const events = turns(2)
    const meta = header(ID, { cwd: '/srv/app' })
    const jsonl = path.join(dir, 'in.jsonl')
    fs.writeFileSync(jsonl, [JSON.stringify({ type: 'session', ...meta }), ...events.map((e) => JSON.stringify(e)), ''].join('\n'))
    const url = storeUrl(dir)
    const toPg = await cli(['convert', jsonl, url])
    expect(toPg.stderr).toBe('')
    expect(toPg.code).toBe(0)
    const listed = await cli(['list', url, '--json'])
    expect(listed.code).toBe(0)
    expect(JSON.parse(listed.stdout)).toEqual([{ ...meta, address: `${url}#${encoded}` }])
    const db = path.join(dir, 'copy.db')
    expect((await cli(['convert', `${url}#${encoded}`, `sqlite:${db}`])).code).toBe(0)
    const back = path.join(dir, 'back.jsonl')
    expect((await cli(['convert', `sqlite:${db}#${ID}`, back])).code).toBe(0)
    expect(fs.readFileSync(back, 'utf8')).toBe(fs.readFileSync(jsonl, 'utf8'))
    // The store reads what convert wrote.
    const store = pgStore(dir)
    cleanup.push(() => store.close())
    expect((await store.load(ID)).events).toEqual(events)
    // convert never overwrites: the session is stored already.
    const again = await cli(['convert', jsonl, url])
    expect(again.code).not.toBe(0)
    expect(again.stderr).toContain('already has a persisted log')
  })

  it('inspects, checks and derives a stored session, read-only, naming the store without its password', async () => {
    const dir = dirFor('pg-cli-read')
    const store = pgStore(dir)
    cleanup.push(() => store.close())
    await store.create(header(ID))
    // A turn left open: the reads report the repair a load would make.
    await store.append(ID, asEvents([...turns(1), ...turnBatches(2, 9)[0]!]))
    await store.close()
    const before = pgDump(dir, ID)
    const url = new URL(storeUrl(dir))
    url.password = 'secret'
    const address = `${url.toString()}#${encoded}`
    const inspect = await cli(['inspect', address, '--json'])
    expect(inspect.code).toBe(0)
    expect(JSON.parse(inspect.stdout)).toMatchObject({ events: 11 })
    expect(inspect.stdout + inspect.stderr).not.toContain('secret')
    const check = await cli(['check', address])
    expect(check.code).toBe(2)
    expect(check.stdout + check.stderr).toContain('***')
    const derive = await cli(['derive', address, '--repaired'])
    expect(derive.code).toBe(0)
    expect(JSON.parse(derive.stdout).length).toBeGreaterThan(0)
    expect(pgDump(dir, ID)).toEqual(before)
    // repair makes it durable through the store's load (the lease is free).
    const repair = await cli(['repair', address])
    expect(repair.code).toBe(0)
    expect(pgDump(dir, ID).rows).toHaveLength(12)
    expect((await cli(['check', address])).code).toBe(0)
  })

  it('refuses an address without a session, and names a session that is not stored', async () => {
    const dir = dirFor('pg-cli-bad')
    const url = storeUrl(dir)
    const bare = await cli(['inspect', url])
    expect(bare.code).not.toBe(0)
    expect(bare.stderr).toContain('name the session (postgres://…/db#<session-id>)')
    // A schema without the store's tables holds no session (and is not created).
    const missing = await cli(['inspect', `${url}#nope`])
    expect(missing.code).not.toBe(0)
    expect(missing.stderr).toContain('holds no session store tables')
    expect((await cli(['list', url])).stdout).toContain('no stored sessions')
    expect(JSON.parse((await cli(['list', url, '--json'])).stdout)).toEqual([])
  })

  it('repair of a session another store holds writes nothing and says it is in use', async () => {
    const dir = dirFor('pg-cli-held')
    const holder = pgStore(dir)
    cleanup.push(() => holder.close())
    await holder.create(header(ID))
    await holder.append(ID, asEvents(turnBatches(1, 0)[0]! as AnyEvent[]))
    const before = pgDump(dir, ID)
    const repair = await cli(['repair', `${storeUrl(dir)}#${encoded}`])
    expect(repair.code).not.toBe(0)
    expect(repair.stderr).toContain(`session ${JSON.stringify(ID)} is in use`)
    expect(pgDump(dir, ID)).toEqual(before)
  })
})
