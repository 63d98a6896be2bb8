// Shared helpers for the dsh-session CLI tests (not a test file itself): the
// CLI runs as a subprocess, exactly as a user runs it.

import { execFile } from 'node:child_process'
import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import { expect, afterAll } from 'vitest'

export const ROOT = path.resolve(__dirname, '..')
export const BIN = path.join(ROOT, 'bin', 'dsh-session.js')
export const FIXTURES = path.resolve(ROOT, 'test-data/fixtures')

// The package as Node loads it (one module instance, shared with the stores).
const nodeRequire = createRequire(__filename)
export const pkg = nodeRequire('../index.js') as typeof import('../index.js')
export const stores = nodeRequire('../lib/stores.js') as typeof import('../lib/stores.js')

export interface Run {
  code: number
  stdout: string
  stderr: string
}

/** Run `dsh-session ...args` (with `input` on its stdin); never rejects (the exit code is in the result). */
export function cli(args: string[], options: { cwd?: string; env?: Record<string, string>; input?: string | Buffer } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [BIN, ...args],
      { cwd: options.cwd ?? ROOT, env: { ...process.env, ...options.env }, maxBuffer: 256 << 20 },
      (error, stdout, stderr) => {
        const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1
        resolve({ code, stdout, stderr })
      },
    )
    child.stdin?.end(options.input ?? '')
  })
}

/** A failure as the CLI must report it: one line `dsh-session: ...`, no stack trace (exit status 1). */
export function expectOneLineError(run: Run, ...fragments: string[]): void {
  expectOneLine(run, 1, fragments)
}

/** A usage error: one line, and its own exit status (64, sysexits' EX_USAGE). */
export function expectUsageError(run: Run, ...fragments: string[]): void {
  expectOneLine(run, 64, fragments)
}

function expectOneLine(run: Run, code: number, fragments: string[]): void {
  expect(run.code).toBe(code)
  const lines = run.stderr.trimEnd().split('\n')
  expect(lines).toHaveLength(1)
  expect(lines[0]).toMatch(/^dsh-session: /)
  expect(run.stderr).not.toMatch(/\n\s+at /)
  for (const f of fragments) expect(lines[0]).toContain(f)
}

const { plainDefect } = nodeRequire('../lib/cli/defect.js') as {
  plainDefect: (error: { code: string; message: string }, kind: string, numbering?: string) => { code: string; message: string; line?: number; seq?: number }
}

/**
 * A load error of the package (a fixture's expected message) as the CLI
 * words it: file lines with the event's seq, plain words for old logs
 * (lib/cli/defect.js; cli-reports.test.ts checks its words literally).
 */
export function cliReason(message: string, kind = 'jsonl'): string {
  return plainDefect({ code: 'CORRUPT_LOG', message }, kind).message
}

const created: string[] = []
// Every test file that imports these helpers removes its directories when it ends.
afterAll(() => {
  for (const dir of created.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})

/** A fresh directory under the OS temp dir, removed after the test file. */
export function tempDir(label: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `dsh-cli-${label}-`))
  created.push(dir)
  return dir
}

export type { RawEvent as AnyEvent } from './spec-helpers.js'
import type { RawEvent as AnyEvent } from './spec-helpers.js'

/** Header and events of a JSONL log. */
export function readJsonl(file: string): { header: Record<string, unknown>; events: AnyEvent[] } {
  const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0)
  const { type: _type, ...header } = JSON.parse(lines[0]!) as Record<string, unknown>
  return { header, events: lines.slice(1).map((l) => JSON.parse(l) as AnyEvent) }
}

export const manifest = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'manifest.json'), 'utf8')) as {
  logs: string[]
  load: string[]
}

/** `logs/<name>.jsonl` or `real/<name>.jsonl` of a manifest log name, and its expected file. */
export function logFixture(name: string): { file: string; expected: string } {
  const real = name.startsWith('real/')
  const base = real ? name.slice(5) : name
  return {
    file: path.join(FIXTURES, real ? 'real' : 'logs', `${base}.jsonl`),
    expected: path.join(FIXTURES, 'expected', `${real ? 'real-' : ''}${base}.json`),
  }
}
