// dsh-session --json: every failure is one JSON object on stderr,
// {"error":{"code","message",...}}, with a stable code; warnings are
// {"warning":{...}} lines; stdout holds only results.

import * as fs from 'node:fs'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'
import { cli, FIXTURES, logFixture, ROOT, tempDir, type Run } from './cli-helpers.js'

const EXAMPLE = path.join(ROOT, 'examples', 'session.jsonl')

interface JsonError { error: { code: string; message: string; [k: string]: unknown } }

/** The one JSON error of a failed run (stderr is exactly one JSON line, no stack trace). */
function jsonError(run: Run, status = 1): JsonError['error'] {
  expect(run.code).toBe(status)
  const lines = run.stderr.trimEnd().split('\n')
  expect(lines).toHaveLength(1)
  const parsed = JSON.parse(lines[0]!) as JsonError
  expect(Object.keys(parsed)).toEqual(['error'])
  expect(typeof parsed.error.message).toBe('string')
  return parsed.error
}

describe.concurrent('dsh-session --json errors', () => {
  const dir = tempDir('json-errors')

  it('gives the CLI own codes for usage and addresses', async () => {
    expect(jsonError(await cli(['frobnicate', '--json']), 64).code).toBe('USAGE')
    expect(jsonError(await cli(['check', EXAMPLE, '--bogus', '--json']), 64).code).toBe('USAGE')
    expect(jsonError(await cli(['check', '--json']), 64).code).toBe('USAGE')
    expect(jsonError(await cli(['check', 'http://example.com/x', '--json'])).code).toBe('BAD_ADDRESS')
    const missing = jsonError(await cli(['inspect', path.join(dir, 'missing.log'), '--json']))
    expect(missing).toMatchObject({ code: 'NO_SUCH_FILE', path: path.join(dir, 'missing.log') })
    expect(missing.message).toContain('missing.log: no such file')
    expect(jsonError(await cli(['derive', dir, '--json'])).code).toBe('NOT_A_FILE')
    const out = path.join(dir, 'exists.jsonl')
    fs.writeFileSync(out, '')
    expect(jsonError(await cli(['convert', EXAMPLE, out, '--json'])).code).toBe('ALREADY_EXISTS')
  })

  it("passes the package's codes through, with the store's message", async () => {
    const corrupt = path.join(FIXTURES, 'load', 'corrupt-committed.jsonl')
    const e = jsonError(await cli(['derive', corrupt, '--json']))
    expect(e).toMatchObject({ code: 'CORRUPT_LOG', address: corrupt, line: 4, seq: 2 })
    expect(e.message).toBe(`${corrupt}: corrupt session log: unparsable committed event at line 4 (seq 2)`)
    expect(jsonError(await cli(['check', path.join(FIXTURES, 'load', 'future-version.jsonl'), '--json'])).code).toBe('UNSUPPORTED_VERSION')
    expect(jsonError(await cli(['surface', `sqlite:${EXAMPLE}#x`, '--json'])).code).toBe('SQLITE')
    const db = path.join(dir, 'one.db')
    expect((await cli(['convert', EXAMPLE, db])).code).toBe(0)
    expect(jsonError(await cli(['derive', `sqlite:${db}#nobody`, '--json'])).code).toBe('SESSION_NOT_FOUND')
  })

  it('check --json keeps its verdict on stdout and adds the error on stderr', async () => {
    const run = await cli(['check', logFixture('trim-single').file, '--invariants', '--json'])
    expect(JSON.parse(run.stdout)).toMatchObject({ status: 'invariant', code: 'INVARIANT', seq: 87 })
    expect(jsonError(run)).toMatchObject({ code: 'INVARIANT', seq: 87 })
  })

  it('writes warnings as JSON lines', async () => {
    const run = await cli(['derive', path.join(ROOT, 'examples', 'interrupted.jsonl'), '--json'])
    expect(run.code).toBe(0)
    const warning = JSON.parse(run.stderr.trimEnd()) as { warning: { code: string; repair: string[] } }
    expect(warning.warning.code).toBe('NEEDS_REPAIR')
    expect(warning.warning.repair.join('; ')).toContain('torn tail dropped')
  })

  it('without --json an error stays one plain line', async () => {
    const run = await cli(['check', path.join(dir, 'missing.log')])
    expect(run.stderr).toBe(`dsh-session: ${path.join(dir, 'missing.log')}: no such file\n`)
  })
})
