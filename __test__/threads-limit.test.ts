// Running out of threads (issue 29): a process at its thread limit
// (`ulimit -u`, a pids cgroup) must see the calls that start helper
// threads succeed or reject with `INTERNAL`, never abort. A child node
// process runs as an unprivileged user (RLIMIT_NPROC binds no root
// process) and, once it has built its data, cuts its limit to the
// threads its user holds plus `spare` (`prlimit --pid`); it then reads a long
// log from a Buffer and a string, seeds a session on the helper thread,
// and opens and loads a long JSONL store log.

import { spawn, spawnSync } from 'node:child_process'
import * as fs from 'node:fs'
import * as os from 'node:os'
import * as path from 'node:path'
import { describe, expect, it } from 'vitest'

import { NOBODY as USER, nobodyCannotRun } from './users.js'

const CHILD = path.join(__dirname, 'fixtures-threads', 'limited.cjs')
const NOBODY = USER.uid

/** Why the test cannot run here, or null. */
function whyNot(): string | null {
  if (process.platform !== 'linux') return 'RLIMIT_NPROC and /proc are Linux'
  if (process.getuid?.() !== 0) return 'running the child as another user needs root'
  if (spawnSync('prlimit', ['--version']).status !== 0) return 'no prlimit (util-linux)'
  return nobodyCannotRun() ?? null
}

const skip = whyNot()

interface Run {
  code: number | null
  signal: NodeJS.Signals | null
  lines: string[]
}

/** Run the child with `spare` more threads allowed than its user holds once its data is built. */
function runLimited(spare: number, tmp: string): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CHILD, String(spare)], {
      uid: NOBODY,
      gid: NOBODY,
      env: { ...process.env, DSH_LIMIT_TMP: tmp },
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    let out = ''
    child.stdout.setEncoding('utf8')
    child.stdout.on('data', (chunk: string) => {
      out += chunk
    })
    child.on('error', reject)
    child.on('close', (code, signal) => resolve({ code, signal, lines: out.split('\n').filter(Boolean) }))
  })
}

describe.skipIf(skip !== null)('a process at its thread limit', () => {
  it.each([0, 1, 2, 3])(
    'with %i more threads allowed, every call succeeds or rejects INTERNAL, and the process lives',
    async (spare) => {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'threads-limit-'))
      fs.chmodSync(tmp, 0o777)
      try {
        const run = await runLimited(spare, tmp)
        expect({ code: run.code, signal: run.signal }, run.lines.join('\n')).toEqual({ code: 0, signal: null })
        expect(run.lines.at(-1)).toBe('END')
        const calls = run.lines.filter((l) => l.startsWith('CALL ')).map((l) => JSON.parse(l.slice(5)))
        expect(calls).toHaveLength(6)
        for (const call of calls) {
          expect(call.outcome, JSON.stringify(call)).toMatch(/^(ok|INTERNAL)$/)
          if (call.outcome === 'INTERNAL') expect(call.message).toMatch(/^cannot start a helper thread .*thread limit/)
        }
      } finally {
        fs.rmSync(tmp, { recursive: true, force: true })
      }
    },
    120_000,
  )
})

it.runIf(skip !== null)('skips the thread-limit test only for a reason', () => {
  expect(skip).toBeTypeOf('string')
})
