// One error shape (issue 18): every error the package throws or rejects with
// is an Error with a stable `code` from one list (the union index.d.ts
// declares), `line` when it is about a line of a JSONL log, `errno` when an
// OS error is behind it, a stack with the caller's frame for the stores'
// asynchronous operations, and INTERNAL for a bug (a panic) instead of an
// aborted process.

import * as fs from 'node:fs'
import { createRequire } from 'node:module'
import * as os from 'node:os'
import * as path from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import { describe, expect, it } from 'vitest'
import { asEvents, header, turns } from './fixtures-crash/stores.js'

const nodeRequire = createRequire(__filename)
const index = nodeRequire('../index.js') as typeof import('../index.js')
const binding = nodeRequire('../binding.js') as { errorCodes(): string[]; panicForDiagnosis(): void }
const errors = nodeRequire('../lib/errors.js') as { CODES: string[]; NATIVE_CODES: string[] }
const { Session, JsonlSessionStore, SqliteSessionStore, SessionStore, SessionError, SessionForkError } = index

function thrown(f: () => unknown): Error & { code?: string; line?: number; errno?: number } {
  try {
    f()
  } catch (error) {
    return error as Error & { code?: string }
  }
  throw new Error('expected a throw')
}

describe('one error shape', () => {
  it('every code is in one list, the union index.d.ts declares, and the native codes are the core\'s own', () => {
    const declared = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8')
    const union = declared.slice(declared.indexOf('export type SessionErrorCode ='), declared.indexOf('export declare class SessionError'))
    const named = [...union.matchAll(/\| '([A-Z_]+)'/g)].map((m) => m[1])
    expect(named).toEqual(errors.CODES)
    expect(binding.errorCodes()).toEqual(errors.NATIVE_CODES)
    // Every code the JS sources give is in the list.
    const lib = path.join(__dirname, '..', 'lib')
    const sources = ['errors.js', 'stores.js', 'service.js', 'peers.js', 'core/json.js', 'core/header.js', 'core/session.js']
      .map((f) => fs.readFileSync(path.join(lib, f), 'utf8'))
      .join('\n')
    for (const [, code] of sources.matchAll(/fail\([^;]*?'([A-Z][A-Z_]+)'/g)) expect(errors.CODES).toContain(code)
  })

  it('a defective JSONL log throws an Error with its code and line, from a string and from a Buffer', () => {
    const good = new Session('l', asEvents(turns(1))).toJsonl()
    const lines = good.split('\n')
    lines[3] = '{"type":"x"'
    for (const text of [lines.join('\n'), Buffer.from(lines.join('\n'))]) {
      const e = thrown(() => Session.fromJsonl(text))
      expect(e).toBeInstanceOf(Error)
      expect(e.code).toBe('CORRUPT_LOG')
      expect(e.line).toBe(4)
      expect(e.message).toBe('corrupt session log: unparsable event at line 4')
    }
  })

  it('a store\'s rejection carries the caller\'s frame in its stack', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-errors-'))
    const store = new JsonlSessionStore({ root })
    try {
      async function loadTheMissingSession() {
        return store.load('missing')
      }
      const e = await loadTheMissingSession().then(() => undefined, (error: Error & { code?: string }) => error)
      expect(e?.code).toBe('SESSION_NOT_FOUND')
      expect(e?.stack).toContain('loadTheMissingSession')
      expect(e?.stack?.startsWith('Error: session "missing" not found\n')).toBe(true)
    } finally {
      await store.close()
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it('a file-system failure is IO with the OS error number and the path', async () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-errors-io-'))
    const db = path.join(root, 'not-a-dir')
    fs.writeFileSync(db, 'x')
    const store = new JsonlSessionStore({ root: db })
    try {
      const s = new Session('io', asEvents(turns(1)), header('io'))
      const e = await store.flush(s).then(() => undefined, (error: Error & { code?: string; errno?: number }) => error)
      expect(e?.code).toBe('IO')
      expect(e?.message).toContain(db)
      expect(e?.errno).toBe(os.constants.errno.ENOTDIR)
    } finally {
      await store.close()
      fs.rmSync(root, { recursive: true, force: true })
    }
  })

  it('a panic inside a native call is an INTERNAL error, and the process goes on', () => {
    const e = thrown(() => binding.panicForDiagnosis())
    expect(e.code).toBe('INTERNAL')
    expect(e.message).toBe('the native call failed inside dsh-session-native (a bug): a deliberate panic (panicForDiagnosis)')
    expect(new Session('after').seq).toBe(0)
  })

  it('the service\'s errors have codes too, with the contract\'s messages', async () => {
    const ctx = new Context()
    await ctx.plugin(SessionStore)
    const s = ctx.sessions.create('x')
    expect(thrown(() => ctx.sessions.create('x'))).toMatchObject({ code: 'SESSION_ALREADY_EXISTS', message: 'session "x" already exists' })
    expect(thrown(() => ctx.sessions.announce(new Session('y')))).toMatchObject({ code: 'SESSION_NOT_LIVE', message: 'session "y" is not live in this store' })
    expect(thrown(() => ctx.sessions.announce(s))).toMatchObject({ code: 'SESSION_ALREADY_ANNOUNCED', message: 'session "x" was already announced' })
    const other = new Context()
    await other.plugin(SessionStore)
    expect(thrown(() => other.sessions.enter(s))).toMatchObject({ code: 'SESSION_ALREADY_ATTACHED', message: 'session "x" is already attached to a store' })
    await expect(ctx.sessions.flush(new Session('z'))).rejects.toMatchObject({ code: 'SESSION_NOT_LIVE' })
  })

  it('argument errors are TypeErrors or Errors with INVALID_ARGUMENT', () => {
    expect(thrown(() => index.headerEquals(1 as never, 2 as never))).toBeInstanceOf(TypeError)
    expect(thrown(() => new SqliteSessionStore({} as never))).toMatchObject({ code: 'INVALID_ARGUMENT' })
  })

  describe('SessionError, the class of every one of them', () => {
    it('a synchronous throw made in JS, and an argument TypeError', () => {
      const e = thrown(() => index.SessionId(1 as never))
      expect(e).toBeInstanceOf(SessionError)
      expect(e).toMatchObject({ name: 'Error', code: 'INVALID_ARGUMENT', message: 'session id must be a string' })
      expect(String(e)).toBe('Error: session id must be a string')
      const t = thrown(() => index.headerEquals(1 as never, 2 as never))
      expect(t).toBeInstanceOf(TypeError)
      expect(t).toBeInstanceOf(SessionError)
      expect(new TypeError('not ours')).not.toBeInstanceOf(SessionError)
      expect(new Error('not ours')).not.toBeInstanceOf(SessionError)
    })

    it('a native parse error, with its code and line unchanged', () => {
      const lines = new Session('l', asEvents(turns(1))).toJsonl().split('\n')
      lines[1] = '{"type":"x"'
      const e = thrown(() => Session.fromJsonl(lines.join('\n')))
      expect(e).toBeInstanceOf(SessionError)
      expect(e.name).toBe('Error')
      expect(e.code).toBe('CORRUPT_LOG')
      expect(e.line).toBe(2)
      expect(e.message).toBe('corrupt session log: unparsable event at line 2')
      expect(thrown(() => binding.panicForDiagnosis())).toBeInstanceOf(SessionError)
    })

    it('an asynchronous store rejection, made natively off the JS thread', async () => {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), 'dsh-errors-class-'))
      const store = new JsonlSessionStore({ root })
      try {
        const e = await store.load('missing').then(() => undefined, (error: unknown) => error)
        expect(e).toBeInstanceOf(SessionError)
        expect(e).toMatchObject({ name: 'Error', code: 'SESSION_NOT_FOUND' })
      } finally {
        await store.close()
        fs.rmSync(root, { recursive: true, force: true })
      }
    })

    it('the service\'s errors and SessionForkError, which keeps its name', async () => {
      const ctx = new Context()
      await ctx.plugin(SessionStore)
      ctx.sessions.create('x')
      expect(thrown(() => ctx.sessions.create('x'))).toBeInstanceOf(SessionError)
      await expect(ctx.sessions.flush(new Session('z'))).rejects.toBeInstanceOf(SessionError)
      const fork = thrown(() => ctx.sessions.fork('missing'))
      expect(fork).toBeInstanceOf(SessionForkError)
      expect(fork).toBeInstanceOf(SessionError)
      expect(fork.name).toBe('SessionForkError')
    })
  })
})
