// dsh-session list reports the logs it cannot read (a warning each on
// stderr, the rest listed), and lists SQLite databases found by content.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli, FIXTURES, ROOT, stores, tempDir } from './cli-helpers.js'

const EXAMPLE = path.join(ROOT, 'examples', 'session.jsonl')

describe('dsh-session list warnings', () => {
  it('warns about each unreadable log and lists the others', async () => {
    const root = tempDir('list-warn')
    const store = new stores.JsonlSessionStore({ root })
    await store.create({ version: 0, id: 'good', createdAt: 1000 } as never)
    await store.append('good', [{ type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } }] as never)
    await store.close()
    const bucket = path.join(root, '_no-cwd')
    fs.copyFileSync(path.join(FIXTURES, 'load', 'no-header.jsonl'), path.join(bucket, 'broken.jsonl'))
    fs.copyFileSync(path.join(FIXTURES, 'load', 'future-version.jsonl'), path.join(root, 'future.jsonl'))
    fs.writeFileSync(path.join(root, 'empty.jsonl'), '')
    fs.copyFileSync(EXAMPLE, path.join(root, 'example.jsonl'))
    fs.writeFileSync(path.join(root, 'notes.txt'), 'not a log, not listed, not warned about')
    const run = await cli(['list', root])
    expect(run.code).toBe(0)
    expect(run.stdout).toContain(`${root}: 2 sessions`)
    const warnings = run.stderr.trimEnd().split('\n')
    expect(warnings).toHaveLength(3)
    expect(warnings.every((w) => w.startsWith('dsh-session: warning: ') && w.endsWith('(not listed)'))).toBe(true)
    expect(warnings.find((w) => w.includes('broken.jsonl'))).toContain('first line is not a session header')
    expect(warnings.find((w) => w.includes('future.jsonl'))).toContain('unsupported session format version 1')
    expect(warnings.find((w) => w.includes('empty.jsonl'))).toContain('empty file')
    expect(run.stderr).not.toContain('notes.txt')

    const json = await cli(['list', root, '--json'])
    expect((JSON.parse(json.stdout) as { id: string }[]).map((h) => h.id)).toContain('good')
    const records = json.stderr.trimEnd().split('\n').map((l) => JSON.parse(l) as { warning: { code: string; path: string } })
    expect(records.map((r) => r.warning.code)).toEqual(['UNREADABLE_LOG', 'UNREADABLE_LOG', 'UNREADABLE_LOG'])
    expect(records.map((r) => path.basename(r.warning.path)).sort()).toEqual(['broken.jsonl', 'empty.jsonl', 'future.jsonl'])
  })

  it('lists the SQLite databases in the folder and a database named directly', async () => {
    const root = tempDir('list-db')
    const db = path.join(root, 'archive.data')
    expect((await cli(['convert', EXAMPLE, `sqlite:${db}`])).code).toBe(0)
    const run = await cli(['list', root, '--json'])
    const listed = JSON.parse(run.stdout) as { address: string }[]
    expect(listed).toHaveLength(1)
    expect(listed[0]!.address).toMatch(/archive\.data#/)
    // The address it prints reads back.
    expect((await cli(['check', path.resolve(ROOT, listed[0]!.address)])).code).toBe(0)
    expect(JSON.parse((await cli(['list', db, '--json'])).stdout)).toHaveLength(1)
    fs.writeFileSync(path.join(root, 'bad.sqlite'), Buffer.concat([Buffer.from('SQLite format 3\0'), Buffer.alloc(100, 7)]))
    expect((await cli(['list', root])).stderr).toMatch(/warning: .*bad\.sqlite/)
  })
})
