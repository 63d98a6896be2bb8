// dsh-session inspect of a log that cannot be loaded: the report of what was
// read up to the defect, then the reason (the store's, told with the file's
// line and the event's seq: lib/cli/defect.js), and exit status 1.

import * as path from 'node:path'
import * as fs from 'node:fs'
import { describe, expect, it } from 'vitest'
import { cli, cliReason, FIXTURES, manifest, tempDir } from './cli-helpers.js'

interface Expect { ok: boolean; error?: string }
const failing = manifest.load.filter((name) => {
  const e = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'load', `${name}.expect.json`), 'utf8')) as Expect
  return !e.ok
})

/** How many events precede the defect the CLI names: `line N (seq S)`, the file's line N (header line 1) holding seq S, or `(expected seq S, ...)`. */
function eventsBefore(message: string): number | null {
  const at = / at line (\d+) \((?:expected )?seq (\d+)/.exec(message)
  if (at === null) return null
  expect(Number(at[1])).toBe(Number(at[2]) + 2)
  return Number(at[2])
}

describe.concurrent('dsh-session inspect of a log that cannot be loaded', () => {
  it('covers the failing load cases of the manifest', () => {
    expect(failing.length).toBeGreaterThanOrEqual(5)
  })

  for (const name of failing) {
    it(`${name}: reports the events before the defect, then the reason`, async () => {
      const file = path.join(FIXTURES, 'load', `${name}.jsonl`)
      const expected = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'load', `${name}.expect.json`), 'utf8')) as Expect
      const error = cliReason(expected.error!)
      const run = await cli(['inspect', file])
      expect(run.code).toBe(1)
      expect(run.stderr).toBe(`dsh-session: ${file}: ${error}\n`)
      expect(run.stdout).toContain(`load       fails: ${error}\n`)
      const json = await cli(['inspect', file, '--json'])
      expect(json.code).toBe(1)
      const report = JSON.parse(json.stdout) as { complete: boolean; events: number; header: { id: string } | null; error: { message: string } }
      expect(report.complete).toBe(false)
      expect(report.error.message).toBe(error)
      // The same positions as the API: the report holds exactly the events before the one the message names.
      const before = eventsBefore(error)
      if (before !== null) {
        expect(report.events).toBe(before)
        expect(report.header).not.toBeNull()
        expect(run.stdout).toContain(`the report covers the ${before} event${before === 1 ? '' : 's'} before the defect`)
      } else {
        expect(report.events).toBe(0)
      }
      expect(JSON.parse(json.stderr.trim())).toMatchObject({ error: { code: expect.any(String) } })
    })
  }

  it('shows the turns, tools and messages read before a late defect', async () => {
    const run = await cli(['inspect', path.join(FIXTURES, 'load', 'garbage-before-last-turn-end.jsonl')])
    expect(run.stdout).toMatch(/^session {4}load-basic$/m)
    expect(run.stdout).toMatch(/^events {5}97 read before the defect \(seq 0\.\.96\)/m)
    expect(run.stdout).toMatch(/^turns {6}\d+/m)
    expect(run.stdout).toMatch(/^messages {3}\d+ derived/m)
  })

  it('says the header is unreadable when nothing can be read', async () => {
    const run = await cli(['inspect', path.join(FIXTURES, 'load', 'no-header.jsonl')])
    expect(run.stdout).toMatch(/^header {5}unreadable$/m)
    expect(run.stderr).toContain('first line is not a session header')
  })

  it('a SQLite session that cannot be loaded shows its header, then the reason', async () => {
    // A database whose one session holds a corrupt committed row (the crash tests' tool edits it).
    const dir = tempDir('defect-sqlite')
    const db = path.join(dir, 's.db')
    expect((await cli(['convert', path.join(FIXTURES, 'load', 'clean.jsonl'), db])).code).toBe(0)
    const { execFileSync } = await import('node:child_process')
    execFileSync('python3', ['-c', `import sqlite3; c = sqlite3.connect(${JSON.stringify(db)}); c.execute("update events set data = 'not json' where seq = 1"); c.commit()`])
    const run = await cli(['inspect', db])
    expect(run.code).toBe(1)
    expect(run.stdout).toMatch(/^session {4}load-basic$/m)
    expect(run.stdout).toContain('the report shows its header only')
    expect(run.stderr).toMatch(/corrupt session log/)
  })
})
